//! Lowering of each construct, and each error.

use super::parse_kernel_str;
use crate::def::{KernelDef, Target, TuneAxis};
use crate::ir::*;

fn parse(attr: &str, item: &str) -> KernelDef {
    parse_kernel_str(attr, item).unwrap_or_else(|e| panic!("kernel rejected:\n{e}"))
}

/// The body of a kernel with no attribute.
fn body(item: &str) -> (Kernel, Block) {
    let def = parse("", item);
    let body = def.ir.body.clone();
    (def.ir, body)
}

/// The error messages of a rejected kernel.
fn error(attr: &str, item: &str) -> String {
    match parse_kernel_str(attr, item) {
        Ok(def) => panic!("kernel accepted: {def:?}"),
        Err(e) => e,
    }
}

fn assert_error(attr: &str, item: &str, expected: &[&str]) {
    let e = error(attr, item);
    for part in expected {
        assert!(e.contains(part), "expected `{part}` in:\n{e}");
    }
}

fn lit(ty: Scalar, v: i64) -> Expr {
    Expr::literal(ty, Literal::Int(v))
}

fn load(local: LocalId, ty: Scalar) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Load(Box::new(Place::Local {
            local,
            indices: vec![],
        })),
    }
}

fn bin(op: BinaryOp, ty: Scalar, a: Expr, b: Expr) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
    }
}

fn special(s: Special) -> Expr {
    Expr {
        ty: Scalar::U32,
        kind: ExprKind::Special(s),
    }
}

#[test]
fn saxpy() {
    let def = parse(
        "",
        "pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
            let i = block_idx().x * block_dim().x + thread_idx().x;
            if i < x.len() {
                y[i] = a * x[i] + y[i];
            }
        }",
    );
    assert_eq!(def.targets, Arch::ALL.map(Target::Ptx).to_vec());
    assert!(def.tune.is_empty());
    let k = &def.ir;
    assert_eq!(k.name, "saxpy");
    assert_eq!(
        k.params,
        vec![
            Param {
                name: "a".into(),
                ty: ParamType::Scalar(Scalar::F32)
            },
            Param {
                name: "x".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: false
                }
            },
            Param {
                name: "y".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: true
                }
            },
        ]
    );
    assert_eq!(
        k.locals,
        vec![Local {
            name: "i".into(),
            ty: Scalar::U32,
            space: Space::Register,
            dims: vec![],
            mutable: false
        }]
    );
    let i = load(0, Scalar::U32);
    let gid = bin(
        BinaryOp::Add,
        Scalar::U32,
        bin(
            BinaryOp::Mul,
            Scalar::U32,
            special(Special::BlockIdx(Axis::X)),
            special(Special::BlockDim(Axis::X)),
        ),
        special(Special::ThreadIdx(Axis::X)),
    );
    let global = |param, index: Expr| Expr {
        ty: Scalar::F32,
        kind: ExprKind::Load(Box::new(Place::Global { param, index })),
    };
    let value = bin(
        BinaryOp::Add,
        Scalar::F32,
        bin(
            BinaryOp::Mul,
            Scalar::F32,
            Expr {
                ty: Scalar::F32,
                kind: ExprKind::Param(0),
            },
            global(1, i.clone()),
        ),
        global(2, i.clone()),
    );
    assert_eq!(
        k.body,
        vec![
            Stmt::Let {
                local: 0,
                init: Some(gid)
            },
            Stmt::If {
                cond: bin(
                    BinaryOp::Lt,
                    Scalar::Bool,
                    i.clone(),
                    Expr {
                        ty: Scalar::U32,
                        kind: ExprKind::Len(1)
                    }
                ),
                then_body: vec![Stmt::Assign {
                    place: Place::Global { param: 2, index: i },
                    value
                }],
                else_body: vec![],
            },
        ]
    );
    // The definition survives the trip through JSON that the macro makes.
    assert_eq!(KernelDef::from_json(&def.to_json()).unwrap(), def);
}
