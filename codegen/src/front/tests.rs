//! Lowering of each construct, and each error.

use super::parse_kernel_str;
use crate::def::{KernelDef, Target, TuneAxis};
use crate::eval::HostValue;
use crate::ir::*;

fn parse(attr: &str, item: &str) -> KernelDef {
    parse_kernel_str(attr, item).unwrap_or_else(|e| panic!("kernel rejected:\n{e}"))
}

/// The body of a kernel for the PTX targets (which take every type).
fn body(item: &str) -> (Kernel, Block) {
    let def = parse("arch(sm_70, sm_80, sm_90)", item);
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
    assert_eq!(def.targets, Target::DEFAULT.to_vec());
    assert!(def.tune.is_empty());
    let k = &def.ir;
    assert_eq!(k.name, "saxpy");
    assert_eq!(
        k.params,
        vec![
            Param {
                name: "a".into(),
                ty: ParamType::Scalar(Scalar::F32),
                tensor_map: None,
            },
            Param {
                name: "x".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: false
                },
                tensor_map: None,
            },
            Param {
                name: "y".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: true
                },
                tensor_map: None,
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

fn float(ty: Scalar, v: f64) -> Expr {
    Expr::literal(ty, Literal::Float(v))
}

fn param(id: ParamId, ty: Scalar) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Param(id),
    }
}

fn global(param: ParamId, ty: Scalar, index: Expr) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Load(Box::new(Place::Global { param, index })),
    }
}

fn tid() -> Expr {
    special(Special::ThreadIdx(Axis::X))
}

// ---- attribute --------------------------------------------------------

#[test]
fn attribute_arch_tune_block_requires() {
    let def = parse(
        "arch(sm_90, sm_70), block(BM * 2, 4), tune(BM = [64, 128], FAST = [true, false]), requires(x.len() >= n * BM)",
        "fn k<const BM: u32, const FAST: bool>(x: &[f32], n: u32) {}",
    );
    assert_eq!(
        def.targets,
        vec![Target::Ptx(Arch::Sm90), Target::Ptx(Arch::Sm70)]
    );
    assert_eq!(
        def.tune,
        vec![
            TuneAxis {
                name: "BM".into(),
                values: vec![64, 128]
            },
            TuneAxis {
                name: "FAST".into(),
                values: vec![1, 0]
            },
        ]
    );
    assert_eq!(
        def.ir.const_params,
        vec![
            ConstParam {
                name: "BM".into(),
                ty: Scalar::U32
            },
            ConstParam {
                name: "FAST".into(),
                ty: Scalar::Bool
            }
        ]
    );
    let bm = Expr {
        ty: Scalar::U32,
        kind: ExprKind::Const(0),
    };
    assert_eq!(
        def.ir.block,
        Some([
            bin(BinaryOp::Mul, Scalar::U32, bm.clone(), lit(Scalar::U32, 2)),
            lit(Scalar::U32, 4),
            lit(Scalar::U32, 1)
        ])
    );
    let req = &def.ir.requires[0];
    assert_eq!(req.text, "x.len() >= n * BM");
    assert_eq!(
        req.cond,
        bin(
            BinaryOp::Ge,
            Scalar::Bool,
            Expr {
                ty: Scalar::U32,
                kind: ExprKind::Len(0)
            },
            bin(BinaryOp::Mul, Scalar::U32, param(1, Scalar::U32), bm)
        )
    );
    assert_eq!(def.variants().len(), 4);
}

#[test]
fn attribute_errors() {
    assert_error(
        "arch(sm_75)",
        "fn k() {}",
        &[
            "unknown architecture `sm_75`",
            "sm_70, sm_80, sm_90, sm_90a, wgsl",
        ],
    );
    assert_error(
        "arch(sm_80, sm_80)",
        "fn k() {}",
        &["`sm_80` is listed twice"],
    );
    assert_error(
        "grid(4)",
        "fn k() {}",
        &["unknown `#[kernel]` option", "`arch(sm_70, sm_80)`"],
    );
    assert_error(
        "tune(BM = [64]), tune(BN = [1])",
        "fn k<const BM: u32>() {}",
        &["`tune(..)` is given twice"],
    );
    assert_error(
        "",
        "fn k<const BM: u32>() {}",
        &["const parameter `BM` has no values", "tune(BM = [64, 128])"],
    );
    assert_error(
        "tune(BN = [64])",
        "fn k<const BM: u32>() {}",
        &["`tune(BN = ..)` names no const parameter", "BM"],
    );
    assert_error(
        "tune(BM = 64)",
        "fn k<const BM: u32>() {}",
        &["must be a non-empty list"],
    );
    assert_error(
        "tune(BM = [-1])",
        "fn k<const BM: u32>() {}",
        &["-1 does not fit in `u32`"],
    );
    assert_error(
        "tune(BM = [n])",
        "fn k<const BM: u32>() {}",
        &["tune values must be literals"],
    );
    assert_error(
        "block(n)",
        "fn k(n: u32) {}",
        &[
            "a `block(..)` size must be a compile-time constant",
            "run-time parameter `n`",
        ],
    );
    assert_error("block(1, 2, 3, 4)", "fn k() {}", &["one to three sizes"]);
    assert_error(
        "requires(x[0] > 0.0)",
        "fn k(x: &[f32]) {}",
        &[
            "`requires(..)` is checked on the host",
            "read of device memory",
        ],
    );
    assert_error(
        "requires(thread_idx().x < n)",
        "fn k(n: u32) {}",
        &["a thread or block index"],
    );
    assert_error(
        "requires(n)",
        "fn k(n: u32) {}",
        &["a `requires(..)` condition must be `bool`"],
    );
}

// ---- signature ----------------------------------------------------------

#[test]
fn signature_errors() {
    assert_error(
        "",
        "fn k(x: Vec<f32>) {}",
        &["`Vec` is not supported in kernels: use a slice parameter `&[T]`"],
    );
    assert_error("", "fn k(s: String) {}", &["strings are not supported"]);
    assert_error(
        "",
        "fn k(n: usize) {}",
        &["`usize` is not supported", "use `u32`"],
    );
    assert_error(
        "",
        "fn k(n: i16) {}",
        &["`i16` is not supported", "bool, i8, u8"],
    );
    assert_error("", "fn k(a: &f32) {}", &["pass scalars by value"]);
    assert_error(
        "",
        "fn k(a: [f32; 4]) {}",
        &["array parameters are not supported"],
    );
    assert_error(
        "",
        "fn k(mut a: f32) {}",
        &["parameters cannot be `mut`", "let mut a = a;"],
    );
    assert_error("", "fn k(a: f32, a: u32) {}", &["`a` is declared twice"]);
    assert_error(
        "",
        "fn k(x: &[f32]) -> f32 { x[0] }",
        &["kernels return nothing"],
    );
    assert_error(
        "",
        "fn k<T>(x: &[T]) {}",
        &["a kernel with type parameters is built for the types `instances(..)` lists"],
    );
    assert_error(
        "tune(F = [1])",
        "fn k<const F: f32>() {}",
        &["const parameters are `u32`, `i32` or `bool`"],
    );
    assert_error("", "async fn k() {}", &["cannot be `async`"]);
    assert_error(
        "",
        "#[inline] fn k() {}",
        &["attributes other than doc comments"],
    );
    // A broken parameter is reported once, not again at each use.
    let e = error("", "fn k(n: usize, y: &mut [u32]) { y[0] = n; }");
    assert_eq!(e.lines().count(), 1, "{e}");
}

// ---- literals and inference ------------------------------------------------

#[test]
fn literals_take_the_type_of_their_context() {
    let (k, body) = body(
        "fn k(x: &[f64], y: &mut [u64], b: u8) {
            let a = 1;
            let f = 2.5;
            let h: f16 = 1.0;
            let c = b + 3;
            y[0] = 18446744073709551615;
            let d = x[0] * 2.0;
            let e = -1;
            let g = 1.0f64;
            let s = 1u8 << 3;
        }",
    );
    let types: Vec<Scalar> = k.locals.iter().map(|l| l.ty).collect();
    use Scalar::*;
    assert_eq!(types, vec![I32, F32, F16, U8, F64, I32, F64, U8]);
    assert_eq!(
        body[0],
        Stmt::Let {
            local: 0,
            init: Some(lit(I32, 1))
        }
    );
    assert_eq!(
        body[1],
        Stmt::Let {
            local: 1,
            init: Some(float(F32, 2.5))
        }
    );
    assert_eq!(
        body[3],
        Stmt::Let {
            local: 3,
            init: Some(bin(BinaryOp::Add, U8, param(2, U8), lit(U8, 3)))
        }
    );
    assert_eq!(
        body[4],
        Stmt::Assign {
            place: Place::Global {
                param: 1,
                index: lit(U32, 0)
            },
            value: lit(U64, -1)
        }
    );
    assert_eq!(
        body[6],
        Stmt::Let {
            local: 5,
            init: Some(lit(I32, -1))
        }
    );
    let Stmt::Let {
        init: Some(shift), ..
    } = &body[8]
    else {
        panic!("{:?}", body[8])
    };
    assert_eq!(*shift, bin(BinaryOp::Shl, U8, lit(U8, 1), lit(U32, 3)));
}

#[test]
fn untyped_variables_take_the_type_of_their_uses() {
    let (k, _) = body(
        "fn k(x: &[f64], y: &mut [f64], n: u32) {
            let mut sum = 0.0;
            for i in 0..8 {
                sum += x[n + i];
            }
            let mut count = 0;
            count += n;
            y[0] = sum;
        }",
    );
    let types: Vec<(&str, Scalar)> = k.locals.iter().map(|l| (l.name.as_str(), l.ty)).collect();
    assert_eq!(
        types,
        vec![
            ("sum", Scalar::F64),
            ("i", Scalar::U32),
            ("count", Scalar::U32)
        ]
    );
}

#[test]
fn literal_errors() {
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = y[1] * 2; }",
        &["an integer literal where `f32` is expected: write `2.0`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = 1.5; }",
        &["a float literal where `u32` is expected"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u8]) { y[0] = 300; }",
        &["the literal 300 does not fit in `u8`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = -1; }",
        &["the literal -1 does not fit in `u32`"],
    );
    assert_error(
        "",
        "fn k() { let x = 1usize; }",
        &["unknown literal suffix `usize`"],
    );
    assert_error(
        "",
        "fn k() { let c = 'a'; }",
        &["only number and `bool` literals"],
    );
}

// ---- names and scopes --------------------------------------------------------

#[test]
fn shadowing_and_scopes() {
    let (k, body) = body(
        "fn k(a: f32, y: &mut [f32]) {
            let a = a * 2.0;
            {
                let a = 1.0;
                y[1] = a;
            }
            y[0] = a;
        }",
    );
    assert_eq!(k.locals.len(), 2);
    assert_eq!(
        body[0],
        Stmt::Let {
            local: 0,
            init: Some(bin(
                BinaryOp::Mul,
                Scalar::F32,
                param(0, Scalar::F32),
                float(Scalar::F32, 2.0)
            ))
        }
    );
    assert_eq!(
        body[2],
        Stmt::Assign {
            place: Place::Global {
                param: 1,
                index: lit(Scalar::U32, 1)
            },
            value: load(1, Scalar::F32)
        }
    );
    assert_eq!(
        body[3],
        Stmt::Assign {
            place: Place::Global {
                param: 1,
                index: lit(Scalar::U32, 0)
            },
            value: load(0, Scalar::F32)
        }
    );
}

#[test]
fn name_errors() {
    assert_error(
        "",
        "fn k(y: &mut [f32]) { { let b = 1.0; } y[0] = b; }",
        &["cannot find `b` in this kernel"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = thread_idx; }",
        &["`thread_idx` is a function: call it"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { let f = 1u32; y[0] = f(2); }",
        &["`f` is a variable, not a function"],
    );
    assert_error(
        "",
        "fn k(x: &[f32], y: &mut [f32]) { y[0] = x; }",
        &["the slice `x` is not a value"],
    );
    // A failed `let` is reported once, not again at each use of its name.
    let e = error(
        "",
        "fn k(y: &mut [f32]) { let v: usize = 0; y[0] = v; y[1] = v; }",
    );
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn body_consts_read_their_expression_in_place() {
    let def = parse(
        "tune(TM = [2])",
        "fn k<const TM: u32>(y: &mut [f32]) {
            const ROWS: u32 = TM * 2;
            let mut acc = [0.0f32; ROWS];
            #[unroll]
            for i in 0..ROWS {
                const NEXT: u32 = i + 1;
                acc[i] = y[NEXT] + y[ROWS];
            }
        }",
    );
    let rows = bin(
        BinaryOp::Mul,
        Scalar::U32,
        Expr {
            ty: Scalar::U32,
            kind: ExprKind::Const(0),
        },
        lit(Scalar::U32, 2),
    );
    // The name emits nothing: the array's size is the expression itself.
    assert_eq!(def.ir.locals[0].dims, vec![rows.clone()]);
    assert!(matches!(def.ir.body[0], Stmt::Let { local: 0, .. }));
    let Stmt::For { end, body, .. } = &def.ir.body[1] else {
        panic!("expected the loop: {:?}", def.ir.body[1]);
    };
    assert_eq!(*end, rows);
    let Stmt::Assign { value, .. } = &body[0] else {
        panic!("expected the assignment: {:?}", body[0]);
    };
    let ExprKind::Binary(BinaryOp::Add, next, last) = &value.kind else {
        panic!("expected a sum: {value:?}");
    };
    assert_eq!(
        **next,
        global(
            0,
            Scalar::F32,
            bin(
                BinaryOp::Add,
                Scalar::U32,
                load(1, Scalar::U32),
                lit(Scalar::U32, 1)
            )
        )
    );
    assert_eq!(**last, global(0, Scalar::F32, rows));
}

#[test]
fn body_const_errors() {
    assert_error(
        "",
        "fn k(n: u32, y: &mut [u32]) { const N: u32 = n + 1; y[0] = N; }",
        &[
            "the value of `const N` must be a compile-time constant",
            "`n`",
            "use `let` for a run-time value",
        ],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { const N: u32 = 4; N = 5; y[0] = N; }",
        &["`N` is a `const`: it can be read but not assigned"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { const N: f32 = 4u32; y[0] = 1; }",
        &["the value of the `const`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { pub const N: u32 = 4; y[0] = N; }",
        &["remove the visibility"],
    );
    // A failed `const` is reported once, not again at each use.
    let e = error(
        "",
        "fn k(n: u32, y: &mut [u32]) { const N: u32 = n; y[0] = N; y[1] = N; }",
    );
    assert_eq!(e.lines().count(), 1, "{e}");
}

// ---- places and mutability -----------------------------------------------------

#[test]
fn assignment_errors() {
    assert_error(
        "",
        "fn k(x: &[f32]) { x[0] = 1.0; }",
        &["`x` is a read-only slice `&[f32]`", "`&mut [f32]`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { let s = 0.0; s = 1.0; y[0] = s; }",
        &["cannot assign to `s` because it is not `mut`", "let mut s"],
    );
    assert_error(
        "",
        "fn k() { for i in 0..4 { i += 1; } }",
        &["`i` is a loop variable and cannot be assigned"],
    );
    assert_error(
        "",
        "fn k(a: f32) { a = 1.0; }",
        &["parameters cannot be assigned", "let mut a = a;"],
    );
    assert_error(
        "tune(N = [1])",
        "fn k<const N: u32>() { N = 2; }",
        &["`N` is a const parameter"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0][1] = 1.0; }",
        &["`y` is a slice: index it with one index"],
    );
    assert_error(
        "",
        "fn k(n: u32) { let mut v = n; v[0] = 1; }",
        &["`v` is a scalar and cannot be indexed"],
    );
    assert_error(
        "",
        "fn k() { let mut a = [[0u32; 2]; 2]; a[0] = 1; }",
        &["`a` has 2 dimension(s)", "`a[i][i]`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[1.0] = 1.0; }",
        &["a float literal where `u32` is expected"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], f: f32) { y[f] = 1.0; }",
        &["indices are integers, but this is `f32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], f: f32) { y[0] = f as u32; }",
        &["the assigned value must be `f32`, but this is `u32`"],
    );
}

// ---- operators -------------------------------------------------------------------

#[test]
fn operator_errors() {
    assert_error(
        "",
        "fn k(y: &mut [f32], a: f32, n: u32) { y[0] = a * n; }",
        &["mismatched types: `f32` * `u32`", "convert one with `as`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], a: u32, s: i32) { y[0] = a << s; }",
        &["a shift amount must be `u32`, but this is `i32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], a: f32) { y[0] = a << 1; }",
        &["`<<` shifts integers, not `f32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], a: f32) { y[0] = a & a; }",
        &["`&` applies to integers and `bool`, not `f32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], a: u32) { if a && a { y[0] = 1; } }",
        &["`&&` needs `bool` operands"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], a: bool) { if a + a { y[0] = 1; } }",
        &["`+` does not apply to `bool`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], a: u32) { y[0] = -a; }",
        &["`-` needs a signed integer or a float"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], a: f32) { y[0] = !a; }",
        &["`!` applies to `bool` and integers"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], a: u32) { if a { y[0] = 1; } }",
        &["`if` conditions must be `bool`, but this is `u32`"],
    );
    assert_error(
        "",
        "fn k(a: u32) { while a { } }",
        &["`while` conditions must be `bool`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], a: f32) { if a as bool { y[0] = 1; } }",
        &["casting to `bool` is not supported"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], a: bool) { y[0] = a as f32; }",
        &["`bool` casts to integers only"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = *y; }",
        &["dereferencing `*` is not supported"],
    );
}

#[test]
fn casts_and_logic() {
    let (_, body) = body(
        "fn k(y: &mut [f32], n: u32, b: bool) {
            let i = thread_idx().x;
            if (i < n && !b) || i == 0 {
                y[i] = i as f32 + n as f32;
            }
            let same = n as u32;
        }",
    );
    let i = load(0, Scalar::U32);
    let Stmt::If {
        cond, then_body, ..
    } = &body[1]
    else {
        panic!("{:?}", body[1])
    };
    let not_b = Expr {
        ty: Scalar::Bool,
        kind: ExprKind::Unary(UnaryOp::Not, Box::new(param(2, Scalar::Bool))),
    };
    assert_eq!(
        *cond,
        bin(
            BinaryOp::LogicalOr,
            Scalar::Bool,
            bin(
                BinaryOp::LogicalAnd,
                Scalar::Bool,
                bin(BinaryOp::Lt, Scalar::Bool, i.clone(), param(1, Scalar::U32)),
                not_b
            ),
            bin(BinaryOp::Eq, Scalar::Bool, i.clone(), lit(Scalar::U32, 0)),
        )
    );
    let cast = |e: Expr| Expr {
        ty: Scalar::F32,
        kind: ExprKind::Cast(Box::new(e)),
    };
    assert_eq!(
        then_body[0],
        Stmt::Assign {
            place: Place::Global {
                param: 0,
                index: i.clone()
            },
            value: bin(
                BinaryOp::Add,
                Scalar::F32,
                cast(i),
                cast(param(1, Scalar::U32))
            ),
        }
    );
    // A cast to the type a value already has is no operation.
    assert_eq!(
        body[2],
        Stmt::Let {
            local: 1,
            init: Some(param(1, Scalar::U32))
        }
    );
}

// ---- statements ------------------------------------------------------------------

#[test]
fn compound_assignment_is_assign_of_binary() {
    let (_, body) = body("fn k(y: &mut [f32], s: u32) { let mut v = 1u32; v <<= s; y[v] += 1.0; }");
    let v_place = Place::Local {
        local: 0,
        indices: vec![],
    };
    assert_eq!(
        body[1],
        Stmt::Assign {
            place: v_place,
            value: bin(
                BinaryOp::Shl,
                Scalar::U32,
                load(0, Scalar::U32),
                param(1, Scalar::U32)
            )
        }
    );
    let place = Place::Global {
        param: 0,
        index: load(0, Scalar::U32),
    };
    assert_eq!(
        body[2],
        Stmt::Assign {
            place: place.clone(),
            value: bin(
                BinaryOp::Add,
                Scalar::F32,
                Expr {
                    ty: Scalar::F32,
                    kind: ExprKind::Load(Box::new(place))
                },
                float(Scalar::F32, 1.0)
            ),
        }
    );
}

#[test]
fn if_expression_is_a_temporary_and_an_if() {
    let (k, body) = body(
        "fn k(y: &mut [f32], n: u32) {
            let v = if n > 4 { 1.0 } else if n > 2 { let h = 0.5; h * 2.0 } else { y[0] };
            y[1] = v;
        }",
    );
    let names: Vec<&str> = k.locals.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, vec!["h", "if_value", "if_value", "v"]);
    assert!(k.locals[1].mutable && k.locals[2].mutable);
    let set = |local, value| Stmt::Assign {
        place: Place::Local {
            local,
            indices: vec![],
        },
        value,
    };
    let gt = |v| {
        bin(
            BinaryOp::Gt,
            Scalar::Bool,
            param(1, Scalar::U32),
            lit(Scalar::U32, v),
        )
    };
    let inner_if = vec![
        Stmt::Let {
            local: 1,
            init: Some(float(Scalar::F32, 0.0)),
        },
        Stmt::If {
            cond: gt(2),
            then_body: vec![
                Stmt::Let {
                    local: 0,
                    init: Some(float(Scalar::F32, 0.5)),
                },
                set(
                    1,
                    bin(
                        BinaryOp::Mul,
                        Scalar::F32,
                        load(0, Scalar::F32),
                        float(Scalar::F32, 2.0),
                    ),
                ),
            ],
            else_body: vec![set(1, global(0, Scalar::F32, lit(Scalar::U32, 0)))],
        },
    ];
    let mut else_body = inner_if;
    else_body.push(set(2, load(1, Scalar::F32)));
    assert_eq!(
        body[..3],
        [
            Stmt::Let {
                local: 2,
                init: Some(float(Scalar::F32, 0.0))
            },
            Stmt::If {
                cond: gt(4),
                then_body: vec![set(2, float(Scalar::F32, 1.0))],
                else_body
            },
            Stmt::Let {
                local: 3,
                init: Some(load(2, Scalar::F32))
            },
        ]
    );
}

#[test]
fn if_expression_errors() {
    assert_error(
        "",
        "fn k(y: &mut [f32], c: bool) { let v = if c { 1.0 }; }",
        &["needs an `else` branch"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], c: bool) { y[0] = if c { 1.0f32 } else { 1u32 }; }",
        &["different types, `f32` and `u32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], c: bool) { y[0] = 1.0 + if c { 1.0 } else { 2.0 }; }",
        &["must be the whole value of a `let` or an assignment"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32], c: bool) { y[0] = if c { 1.0; } else { 2.0 }; }",
        &["this branch must end with its value"],
    );
}

#[test]
fn loops() {
    let (k, body) = body(
        "fn k(y: &mut [u32], n: u32) {
            for i in (2..n).step_by(4) { if i > 8 { break; } continue; }
            #[unroll]
            for _ in 0..4 { }
            while n > 0 { return; }
            loop { sync_threads(); }
        }",
    );
    assert_eq!(k.locals[0].name, "i");
    assert!(!k.locals[0].mutable);
    assert_eq!(
        body[0],
        Stmt::For {
            var: 0,
            start: lit(Scalar::U32, 2),
            end: param(1, Scalar::U32),
            step: lit(Scalar::U32, 4),
            unroll: false,
            body: vec![
                Stmt::If {
                    cond: bin(
                        BinaryOp::Gt,
                        Scalar::Bool,
                        load(0, Scalar::U32),
                        lit(Scalar::U32, 8)
                    ),
                    then_body: vec![Stmt::Break],
                    else_body: vec![],
                },
                Stmt::Continue,
            ],
        }
    );
    assert_eq!(
        body[1],
        Stmt::For {
            var: 1,
            start: lit(Scalar::I32, 0),
            end: lit(Scalar::I32, 4),
            step: lit(Scalar::I32, 1),
            unroll: true,
            body: vec![]
        }
    );
    assert_eq!(
        body[2],
        Stmt::While {
            cond: bin(
                BinaryOp::Gt,
                Scalar::Bool,
                param(1, Scalar::U32),
                lit(Scalar::U32, 0)
            ),
            body: vec![Stmt::Return]
        }
    );
    assert_eq!(
        body[3],
        Stmt::While {
            cond: Expr::literal(Scalar::Bool, Literal::Bool(true)),
            body: vec![Stmt::Barrier]
        }
    );
}

#[test]
fn loop_errors() {
    assert_error(
        "",
        "fn k(n: u32) { #[unroll] for i in 0..n { } }",
        &[
            "the end of an `#[unroll]` loop must be a compile-time constant",
            "run-time parameter `n`",
        ],
    );
    assert_error(
        "",
        "fn k(n: u32) { #[unroll] for i in (0..8).step_by(n) { } }",
        &["the step of an `#[unroll]`"],
    );
    assert_error(
        "",
        "fn k() { for i in 0..=4 { } }",
        &["inclusive ranges `a..=b` are not supported"],
    );
    assert_error(
        "",
        "fn k(x: &[f32]) { for v in x { } }",
        &["`for` loops run over integer ranges"],
    );
    assert_error(
        "",
        "fn k() { for i in (0..8).step_by(0) { } }",
        &["the step of a loop must be positive"],
    );
    assert_error(
        "",
        "fn k(n: u64) { for i in 0u32..n { } }",
        &[
            "the bounds of a range must have the same type",
            "`u32` and `u64`",
        ],
    );
    assert_error(
        "",
        "fn k() { for i in 0.0..1.0 { } }",
        &["loop ranges are over integers, not `f32`"],
    );
    assert_error("", "fn k() { break; }", &["`break` outside of a loop"]);
    assert_error(
        "",
        "fn k() { 'outer: loop { } }",
        &["loop labels are not supported"],
    );
    assert_error(
        "",
        "fn k() { #[inline] for i in 0..2 { } }",
        &["the only attribute on a loop is `#[unroll]`"],
    );
    assert_error(
        "",
        "fn k() { loop { break 1; } }",
        &["`break` with a value"],
    );
}

// ---- arrays ------------------------------------------------------------------

#[test]
fn register_and_shared_arrays() {
    let def = parse(
        "tune(TM = [2])",
        "fn k<const TM: u32>(y: &mut [f32]) {
            let mut acc = [[0.0; 4]; TM];
            let mut tile: [[f32; 8]; TM * 2] = shared();
            let mut regs: [u32; 2];
            #[unroll]
            for i in 0..TM {
                acc[i][3] = tile[thread_idx().x][i];
            }
        }",
    );
    let (k, body) = (&def.ir, &def.ir.body);
    let tm = Expr {
        ty: Scalar::U32,
        kind: ExprKind::Const(0),
    };
    assert_eq!(
        k.locals[0],
        Local {
            name: "acc".into(),
            ty: Scalar::F32,
            space: Space::Register,
            dims: vec![tm.clone(), lit(Scalar::U32, 4)],
            mutable: true
        }
    );
    assert_eq!(
        k.locals[1],
        Local {
            name: "tile".into(),
            ty: Scalar::F32,
            space: Space::Shared,
            dims: vec![
                bin(BinaryOp::Mul, Scalar::U32, tm, lit(Scalar::U32, 2)),
                lit(Scalar::U32, 8)
            ],
            mutable: true,
        }
    );
    assert_eq!(k.locals[2].dims.len(), 1);
    assert_eq!(
        body[0],
        Stmt::Let {
            local: 0,
            init: Some(float(Scalar::F32, 0.0))
        }
    );
    assert_eq!(
        body[1],
        Stmt::Let {
            local: 1,
            init: None
        }
    );
    assert_eq!(
        body[2],
        Stmt::Let {
            local: 2,
            init: None
        }
    );
    let Stmt::For {
        unroll: true,
        body: inner,
        ..
    } = &body[3]
    else {
        panic!("{:?}", body[3])
    };
    let i = load(3, Scalar::U32);
    assert_eq!(
        inner[0],
        Stmt::Assign {
            place: Place::Local {
                local: 0,
                indices: vec![i.clone(), lit(Scalar::U32, 3)]
            },
            value: Expr {
                ty: Scalar::F32,
                kind: ExprKind::Load(Box::new(Place::Local {
                    local: 1,
                    indices: vec![tid(), i]
                }))
            },
        }
    );
}

#[test]
fn array_errors() {
    assert_error(
        "",
        "fn k(y: &mut [f32]) { let mut a = [0.0f32; 4]; for i in 0..4u32 { a[i] = 1.0; } }",
        &[
            "the register array `a` must be indexed by compile-time constants",
            "the run-time variable `i`",
            "#[unroll]",
        ],
    );
    assert_error(
        "",
        "fn k(n: u32) { let a = [0.0f32; n]; }",
        &[
            "an array size must be a compile-time constant",
            "run-time parameter `n`",
        ],
    );
    assert_error(
        "",
        "fn k() { let mut t = shared(); }",
        &[
            "a shared array needs its element type and shape",
            "let mut t: [[f32; 32]; 32] = shared();",
        ],
    );
    assert_error(
        "",
        "fn k() { let t: f32 = shared(); }",
        &["a shared array needs its element type and shape"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = shared(); }",
        &["`shared()` allocates a shared array"],
    );
    assert_error(
        "",
        "fn k() { let a = [1.0, 2.0]; }",
        &["array literals are not supported"],
    );
    assert_error(
        "",
        "fn k() { let a: [f32; 4] = [0.0; 8]; }",
        &["the annotated array shape differs"],
    );
    assert_error(
        "",
        "fn k() { let a: [f32; 2] = 1.0; }",
        &["an array is created with `[v; N]`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { let a = [0.0f32; 2]; y[0] = a; }",
        &["the array `a` is not a value"],
    );
    assert_error("", "fn k() { let x: f32; }", &["give `x` an initial value"]);
    assert_error(
        "",
        "fn k(x: &[f32]) { let [a, b] = x; }",
        &["destructuring is not supported"],
    );
}

// ---- calls ----------------------------------------------------------------------

#[test]
fn intrinsics() {
    let (_, body) = body(
        "fn k(x: &[f32], y: &mut [f32], c: &mut [u32]) {
            let v = x[0].sqrt().max(1.0).mul_add(2.0, x[1]);
            let w = shfl_xor(v, 16);
            let l = lane_id() + block_dim().y + grid_dim().z + block_idx().z;
            atomic_add(&mut c[l], 1);
            let old = atomic_compare_exchange(&mut c[0], 0, 1);
            y[0] = w + (old as f32) + (x.len() as f32);
        }",
    );
    let call = |i, args: Vec<Expr>| Expr {
        ty: Scalar::F32,
        kind: ExprKind::Call(i, args),
    };
    let x0 = global(0, Scalar::F32, lit(Scalar::U32, 0));
    let x1 = global(0, Scalar::F32, lit(Scalar::U32, 1));
    let v = call(
        Intrinsic::MulAdd,
        vec![
            call(
                Intrinsic::Max,
                vec![call(Intrinsic::Sqrt, vec![x0]), float(Scalar::F32, 1.0)],
            ),
            float(Scalar::F32, 2.0),
            x1,
        ],
    );
    assert_eq!(
        body[0],
        Stmt::Let {
            local: 0,
            init: Some(v)
        }
    );
    assert_eq!(
        body[1],
        Stmt::Let {
            local: 1,
            init: Some(call(
                Intrinsic::ShflXor,
                vec![load(0, Scalar::F32), lit(Scalar::U32, 16)]
            ))
        }
    );
    let Stmt::Let { init: Some(l), .. } = &body[2] else {
        panic!()
    };
    let sp = special;
    assert_eq!(
        *l,
        bin(
            BinaryOp::Add,
            Scalar::U32,
            bin(
                BinaryOp::Add,
                Scalar::U32,
                bin(
                    BinaryOp::Add,
                    Scalar::U32,
                    sp(Special::LaneId),
                    sp(Special::BlockDim(Axis::Y))
                ),
                sp(Special::GridDim(Axis::Z))
            ),
            sp(Special::BlockIdx(Axis::Z))
        )
    );
    assert_eq!(
        body[3],
        Stmt::Expr(Expr {
            ty: Scalar::U32,
            kind: ExprKind::Atomic {
                op: AtomicOp::Add,
                place: Box::new(Place::Global {
                    param: 2,
                    index: load(2, Scalar::U32)
                }),
                value: Box::new(lit(Scalar::U32, 1)),
                compare: None,
            },
        })
    );
    assert_eq!(
        body[4],
        Stmt::Let {
            local: 3,
            init: Some(Expr {
                ty: Scalar::U32,
                kind: ExprKind::Atomic {
                    op: AtomicOp::CompareExchange,
                    place: Box::new(Place::Global {
                        param: 2,
                        index: lit(Scalar::U32, 0)
                    }),
                    value: Box::new(lit(Scalar::U32, 1)),
                    compare: Some(Box::new(lit(Scalar::U32, 0))),
                },
            }),
        }
    );
}

#[test]
fn call_errors() {
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = foo(1.0); }",
        &["unknown function `foo`", "thread_idx()"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = y[0].powi(2); }",
        &["unknown method `powi`", "sqrt"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = sqrt(y[0]); }",
        &["math is written as methods", "`x.sqrt(..)`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = y[0].sqrt(); }",
        &["`.sqrt()` needs a float", "(x as f32).sqrt()"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = y[0].abs(); }",
        &["`.abs()` needs a signed integer or a float"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y[0] = y[0].max(1u32); }",
        &["the argument of `.max()` (like its receiver) must be `f32`, but this is `u32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = thread_idx(); }",
        &["`thread_idx()` has three components"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = thread_idx().w; }",
        &["has the fields `.x`, `.y` and `.z`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { let s = sync_threads(); }",
        &["`sync_threads()` is a statement"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { sync_threads(1); }",
        &["`sync_threads` takes 0 argument(s), but 1 were given"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f64]) { let v = shfl_down(y[0], 1); }",
        &["`shfl_down` moves 32-bit values"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { y.len(); }",
        &["a value that is never used"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { let a = [0.0f32; 2]; let n = a.len(); }",
        &["`.len()` is the length of a slice parameter"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { let r = (0..4).step_by(2); }",
        &["only supported on the range of a `for` loop"],
    );
}

#[test]
fn atomic_errors() {
    assert_error(
        "",
        "fn k(x: &[u32]) { atomic_add(&mut x[0], 1); }",
        &["`x` is a read-only slice"],
    );
    assert_error(
        "",
        "fn k() { let mut c = 0u32; atomic_add(&mut c, 1); }",
        &[
            "atomics update slice elements and shared array elements",
            "c += v",
        ],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { atomic_min(&mut y[0], 1.0); }",
        &["`atomic_min` works on `i32`, `u32`, `i64` and `u64`, but this element is `f32`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u8]) { atomic_add(&mut y[0], 1); }",
        &["`atomic_add` works on"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { atomic_add(y[0], 1); }",
        &["the first argument of `atomic_add` is the element to update, written `&mut y[i]`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { atomic_add(&mut y[0], 1.0); }",
        &["a float literal where `u32` is expected"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { atomic_inc(&mut y[0]); }",
        &["unknown atomic `atomic_inc`"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[atomic_add(&mut y[0], 1)] += 1; }",
        &["would run the atomic twice"],
    );
}

#[test]
fn unsupported_constructs() {
    assert_error(
        "",
        "fn k(y: &mut [f32]) { let f = |v: f32| v; }",
        &["a closure is only an argument of a device function whose parameter takes one"],
    );
    assert_error(
        "",
        "fn k(y: &mut [f32]) { println!(\"hi\"); }",
        &["macros are not supported in kernels"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32], n: u32) { y[0] = match n { _ => 1 }; }",
        &["`match` is not supported"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { return 1; }",
        &["kernels return nothing"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { fn helper() {} }",
        &[
            "items (`fn`, `struct`, `use`, ..) cannot be declared inside a kernel",
            "`const` for compile-time constants",
        ],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = (1, 2); }",
        &["a tuple is not one value"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { if let Some(v) = y { } }",
        &["`let` in a condition"],
    );
    assert_error(
        "",
        "fn k(y: &mut [u32]) { y[0] = std::u32::MAX; }",
        &["paths are not supported in kernels"],
    );
}

#[test]
fn errors_are_collected() {
    let e = error(
        "arch(sm_1)",
        "fn k(n: usize, y: &mut [f32]) {
            let a = 1.0 * 2u32;
            y[0] = foo();
        }",
    );
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 4, "{e}");
    assert!(lines[0].contains("`usize` is not supported"));
    assert!(lines[1].contains("unknown architecture `sm_1`"));
    assert!(
        lines[2].contains("an integer literal where") || lines[2].contains("a float literal where"),
        "{e}"
    );
    assert!(lines[3].contains("unknown function `foo`"));
}

#[test]
fn let_underscore_keeps_only_effects() {
    let (k, body) =
        body("fn k(c: &mut [u32], n: u32) { let _ = n + 1; let _ = atomic_or(&mut c[0], n); }");
    assert!(k.locals.is_empty());
    assert_eq!(body.len(), 1);
    assert!(matches!(
        &body[0],
        Stmt::Expr(Expr {
            kind: ExprKind::Atomic {
                op: AtomicOp::Or,
                ..
            },
            ..
        })
    ));
}

// ---- targets -----------------------------------------------------------------

#[test]
fn targets_are_every_one_by_default_or_those_listed() {
    let item = "fn k(x: &mut [f32]) { x[0] = 1.0; }";
    assert_eq!(parse("", item).targets, Target::DEFAULT.to_vec());
    assert!(
        !Target::DEFAULT.contains(&Target::Ptx(Arch::Sm90a)),
        "sm_90a is built only when `arch(..)` names it"
    );
    assert_eq!(
        parse("arch(sm_90a)", item).targets,
        vec![Target::Ptx(Arch::Sm90a)]
    );
    assert_eq!(
        parse("arch(wgsl, sm_80)", item).targets,
        vec![Target::Wgsl, Target::Ptx(Arch::Sm80)]
    );
    assert_error("arch(wgsl, wgsl)", item, &["`wgsl` is listed twice"]);
}

#[test]
fn a_wgsl_target_needs_a_kernel_wgsl_can_express() {
    let item = "fn k(x: &mut [f64]) { x[0] = 1.0; }";
    let expected = "kernel `k`: WGSL cannot express parameter `x: &mut [f64]`: \
                    build the kernel for PTX only, `#[kernel(arch(sm_70, sm_80, sm_90))]`";
    assert_eq!(error("", item), expected);
    assert_eq!(error("arch(sm_80, wgsl)", item), expected);
    assert_eq!(
        parse("arch(sm_70, sm_80, sm_90)", item).targets,
        [Arch::Sm70, Arch::Sm80, Arch::Sm90]
            .map(Target::Ptx)
            .to_vec()
    );
    // The check sees the whole family: a construct in a branch that some
    // variants drop still counts.
    assert!(error(
        "tune(WIDE = [false, true])",
        "fn k<const WIDE: bool>(x: &mut [f32]) { if WIDE { x[0] = (x[0] as f64 * 2.0) as f32; } }"
    )
    .contains("WGSL cannot express a cast to f64"));
}

#[test]
fn constrain_prunes_the_tune_product() {
    let def = parse(
        "arch(sm_80), tune(A = [1, 2, 4], B = [1, 2, 4]), constrain(A * B <= 4, A <= B)",
        "fn k<const A: u32, const B: u32>(x: &mut [f32]) { x[0] = (A + B) as f32; }",
    );
    assert_eq!(
        def.variants(),
        vec![vec![1, 1], vec![1, 2], vec![1, 4], vec![2, 2]]
    );
    let refused = def.check_constraints(&[4, 2]).unwrap_err().message;
    assert!(
        refused.contains("k[A=4,B=2]") && refused.contains("A * B <= 4"),
        "{refused}"
    );
    // The compile path refuses a combination the constraints exclude.
    let err = crate::compile_ptx(&def, &[2, 1], Arch::Sm80)
        .unwrap_err()
        .message;
    assert!(err.contains("A <= B"), "{err}");
}

#[test]
fn unrolled_code_and_register_arrays_are_bounded() {
    // Three nested loops, each under the per-loop limit, multiply to 10^9.
    assert_error(
        "arch(sm_80)",
        "fn k(x: &mut [f32]) { #[unroll] for i in 0..1000u32 { #[unroll] for j in 0..1000u32 { \
         #[unroll] for l in 0..1000u32 { x[0] += (i + j + l) as f32; } } } }",
        &["would unroll more than 1048576 iterations in all"],
    );
    // A register array sized by a tune value: refused in the variant that is too large.
    let item =
        "fn k<const N: u32>(x: &mut [f32]) { let mut a = [0.0f32; N]; a[3] = 1.0; x[0] = a[3]; }";
    let def = parse("arch(sm_80), tune(N = [64])", item);
    assert!(crate::compile_ptx(&def, &[64], Arch::Sm80).is_ok());
    assert_error(
        "arch(sm_80), tune(N = [64, 65536])",
        item,
        &[
            "in the variant k[N=65536]",
            "register array `a` (65536) has more elements than the limit of 4096",
        ],
    );
}

#[test]
fn constrain_takes_constants_only_and_must_leave_a_variant() {
    assert_error(
        "arch(sm_80), tune(A = [1, 2]), constrain(A < n)",
        "fn k<const A: u32>(x: &mut [f32], n: u32) { x[0] = A as f32; }",
        &["a `constrain(..)` condition must be a compile-time constant"],
    );
    assert_error(
        "arch(sm_80), tune(A = [1, 2]), constrain(A > 2)",
        "fn k<const A: u32>(x: &mut [f32]) { x[0] = A as f32; }",
        &["`constrain(..)` leaves no variant"],
    );
}

#[test]
fn warp_matrix_statements_lower_to_matrix_ops() {
    let body = parse(
        "arch(sm_80)",
        "fn k(c: &mut [f32], x: &[f16]) {
            let mut t: [[f16; 16]; 16] = shared();
            let mut a = [[0u32; 4]; 2];
            let b = [0u32; 2];
            let mut acc = [[0.0f32; 4]; 2];
            cp_async(&mut t[0][0], &x[0], 16, 16);
            cp_async_commit();
            cp_async_wait(0);
            ldmatrix_x4_trans(&mut a[1], &t[lane_id() % 16][0]);
            mma_m16n8k16_f16(&mut acc[1], &a[1], &b);
            c[0] = acc[1][0];
        }",
    )
    .ir
    .body;
    let ops: Vec<String> = body
        .iter()
        .filter_map(|s| match s {
            Stmt::Matrix(op) => Some(op.function()),
            Stmt::AsyncCopy { bytes, .. } => Some(format!("cp_async {bytes}")),
            Stmt::AsyncCommit => Some("commit".into()),
            Stmt::AsyncWait { pending } => Some(format!("wait {:?}", pending.as_int())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ops,
        [
            "cp_async 16",
            "commit",
            "wait Some(0)",
            "ldmatrix_x4_trans",
            "mma_m16n8k16_f16"
        ]
    );
}

#[test]
fn warp_matrix_misuse_is_reported() {
    assert_error(
        "arch(sm_80)",
        "fn k(x: &[f16]) { let mut t: [f16; 64] = shared(); cp_async(&mut t[0], &x[0], 16, n); }",
        &["cannot find `n` in this kernel"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(x: &[f32]) { let mut t: [f16; 64] = shared(); cp_async(&mut t[0], &x[0], 16, 16); }",
        &["the destination holds `f16` and the source `f32`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(x: &mut [f32]) { let mut acc = [0.0f32; 4]; let a = [0u32; 4]; let b = [0u32; 2]; mma_m16n8k16_f16(&acc, &a, &b); x[0] = acc[0]; }",
        &["the accumulator of `mma_m16n8k16_f16` is a register array row, written `&mut frag[i]`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(x: &mut [f32], w: u32) { cp_async_wait(w); x[0] = 0.0; }",
        &["must be a compile-time constant"],
    );
    assert_error(
        "arch(sm_80), tune(N = [2])",
        "fn k<const N: u32>(x: &mut [f32]) { let mut f = [[0u32; 4]; N]; let i = x.len(); ldmatrix_x4(&mut f[i], &x[0]); }",
        &["must be indexed by compile-time constants"],
    );
}

/// Found by the front fuzzer (seed 1796529482070, input 1574): `% i` with `i`
/// an unrolled loop's variable is `% 0` in its first copy, which WGSL
/// refuses; PTX takes it (the result is undefined there).
#[test]
fn a_division_by_zero_that_unrolling_makes_is_refused_for_wgsl() {
    let item = "fn k(c: &mut [u32]) {
        #[unroll]
        for i in 0..4u32 {
            c[i] = c[i] % i;
        }
    }";
    assert!(crate::compile_ptx(&parse("arch(sm_80), block(32)", item), &[], Arch::Sm80).is_ok());
    assert_error(
        "arch(sm_80, wgsl), block(32)",
        item,
        &["`%` by the constant 0, which WGSL rejects: guard the division"],
    );
}

#[test]
fn fragment_shapes_are_checked_per_variant() {
    let item = "fn k<const N: u32>(x: &[f16], c: &mut [f32]) {
        let mut t: [f16; 64] = shared();
        let mut f = [0u32; N];
        ldmatrix_x4(&mut f, &t[lane_id() % 8 * 8]);
        c[0] = f[0] as f32;
    }";
    let def = parse("arch(sm_80), tune(N = [4])", item);
    assert!(crate::compile_ptx(&def, &[4], Arch::Sm80).is_ok());
    assert_error(
        "arch(sm_80), tune(N = [2, 4])",
        item,
        &[
            "in the variant k[N=2]",
            "the destination of `ldmatrix_x4` is 4 `u32` per lane, but a row of `f` is 2 `u32`",
        ],
    );
}

#[test]
fn bit_casts_and_32_bit_ldmatrix_lower() {
    let def = parse(
        "arch(sm_80)",
        "fn k(c: &mut [u32]) {
            let mut t: [[f32; 4]; 32] = shared();
            let mut a = [0u32; 4];
            ldmatrix_x4(&mut a, &t[lane_id()][0]);
            let x = f32::from_bits(a[0]) * 2.0;
            c[0] = to_tf32(x);
            c[1] = x.to_bits();
        }",
    );
    let ptx = crate::compile_ptx(&def, &[], Arch::Sm80).unwrap().text;
    assert!(
        ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
        "{ptx}"
    );
    assert!(ptx.contains("cvt.rna.tf32.f32"), "{ptx}");
    assert_error(
        "arch(sm_80)",
        "fn k(c: &mut [u32]) { let mut t: [f32; 64] = shared(); let mut a = [0u32; 4]; ldmatrix_x4_trans(&mut a, &t[0]); c[0] = a[0]; }",
        &["`ldmatrix_x4_trans` transposes 16-bit elements (8-bit pairs for s8/u8): load 32-bit data without `_trans`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(c: &mut [f32], u: i32) { c[0] = f32::from_bits(u); }",
        &["the bits of `f32::from_bits`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(c: &mut [u32], x: u32) { c[0] = x.to_bits(); }",
        &["the receiver of `.to_bits()`"],
    );
}

/// A ring of `STAGES` tiles through a pipeline, in the usual order: wait,
/// barrier, copy the tile `STAGES - 1` ahead, math; `wait` is the wait of
/// the loop for `STAGES > 1`.
fn pipeline_kernel(wait: &str) -> String {
    format!(
        "fn k<const STAGES: u32>(x: &[f32], y: &mut [f32], tiles: u32) {{
            let mut ring: [[f32; 128]; STAGES] = shared();
            let pipe = pipeline(STAGES);
            let tid = thread_idx().x;
            for t in 0..tiles + STAGES - 1 {{
                if STAGES > 1 && t >= STAGES - 1 {{
                    {wait}
                    sync_threads();
                }}
                if t < tiles {{
                    pipe.copy(&mut ring[t % STAGES][tid * 4], &x[t * 128 + tid * 4], 16, 16);
                }}
                pipe.commit();
                if STAGES == 1 {{
                    pipe.wait(0);
                    sync_threads();
                }}
                if t >= STAGES - 1 {{
                    let u = t - (STAGES - 1);
                    y[u * 128 + tid] = ring[u % STAGES][tid];
                }}
                if STAGES == 1 {{
                    sync_threads();
                }}
            }}
        }}"
    )
}

#[test]
fn pipeline_statements_lower_to_async_copies() {
    let def = parse(
        "arch(sm_70, sm_80), block(32), tune(STAGES = [1, 2, 3, 4, 5])",
        &pipeline_kernel("pipe.wait(STAGES - 2);"),
    );
    let mut statements = Vec::new();
    fn walk(block: &[Stmt], out: &mut Vec<String>) {
        for stmt in block {
            match stmt {
                Stmt::AsyncCopy { bytes, .. } => out.push(format!("copy {bytes}")),
                Stmt::AsyncCommit => out.push("commit".into()),
                Stmt::AsyncWait { pending } => out.push(format!("wait {:?}", pending.kind)),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                Stmt::For { body, .. } => walk(body, out),
                _ => {}
            }
        }
    }
    walk(&def.ir.body, &mut statements);
    assert_eq!(statements.len(), 4, "{statements:?}");
    assert!(
        statements[0].starts_with("wait Binary(Sub"),
        "{statements:?}"
    );
    assert_eq!(
        statements[1..],
        ["copy 16", "commit", "wait Literal(Int(0))"]
    );
    for consts in def.variants() {
        for arch in [Arch::Sm70, Arch::Sm80] {
            crate::compile_ptx(&def, &consts, arch)
                .unwrap_or_else(|e| panic!("STAGES = {consts:?}, {arch:?}: {e}"));
        }
    }
}

#[test]
fn waiting_on_more_stages_than_exist_is_an_error_at_the_wait() {
    // `STAGES - 1` after the copies were issued is one too many in the loop
    // above, but the front cannot see the order; `STAGES` it can.
    assert_error(
        "arch(sm_80), block(32), tune(STAGES = [2, 3])",
        &pipeline_kernel("pipe.wait(STAGES);"),
        &[
            "`pipe.wait(2)` waits on more stages than `pipe` has",
            "`pipe` has 2 stage(s) in the variant k[STAGES=2]",
            "Leave at most 1 in flight",
        ],
    );
    let e = error(
        "arch(sm_80), block(32), tune(STAGES = [2, 3])",
        &pipeline_kernel("pipe.wait(STAGES);"),
    );
    assert_eq!(
        e.lines().count(),
        1,
        "one error per wait, for its first variant:\n{e}"
    );
    // A literal count is checked against each variant's stage count.
    assert_error(
        "arch(sm_80), block(32), tune(STAGES = [2, 4])",
        &pipeline_kernel("pipe.wait(3);"),
        &["`pipe.wait(3)`", "in the variant k[STAGES=2]"],
    );
    // Guards: the wait only runs where `STAGES > 1`, so `STAGES - 2` is
    // fine with STAGES = 1 in the tune space (it is not even evaluated).
    parse(
        "arch(sm_80), block(32), tune(STAGES = [1, 2])",
        &pipeline_kernel("pipe.wait(STAGES - 2);"),
    );
    // ...and `pipe.wait(1)` under `if STAGES > 2` never meets STAGES = 2.
    parse(
        "arch(sm_80), block(32), tune(STAGES = [2, 3])",
        &pipeline_kernel("if STAGES > 2 { pipe.wait(1); } else { pipe.wait(0); }"),
    );
    // A `constrain(..)`ed-away variant is not checked.
    parse(
        "arch(sm_80), block(32), tune(STAGES = [2, 3]), constrain(STAGES > 2)",
        &pipeline_kernel("pipe.wait(2);"),
    );
    // Nor is a wait in a loop that runs no iteration in the variant.
    parse(
        "arch(sm_80), tune(S = [1, 2])",
        "fn k<const S: u32>(y: &mut [f32]) {
            let pipe = pipeline(S);
            for i in 1..S { pipe.wait(1); }
            y[0] = 1.0;
        }",
    );
}

#[test]
fn pipeline_misuse_is_reported() {
    assert_error(
        "arch(sm_80), tune(S = [0, 2])",
        "fn k(y: &mut [f32]) { let pipe = pipeline(S); y[0] = 1.0; }",
        &["cannot find `S`"],
    );
    assert_error(
        "arch(sm_80), tune(S = [0, 2])",
        "fn k<const S: u32>(y: &mut [f32]) { let pipe = pipeline(S); pipe.commit(); y[0] = 1.0; }",
        &["`pipe` has 0 stages in the variant k[S=0]"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(y: &mut [f32], n: u32) { let pipe = pipeline(n); pipe.commit(); y[0] = 1.0; }",
        &["the stage count of a pipeline must be a compile-time constant"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) { let mut pipe = pipeline(2); pipe.commit(); y[0] = 1.0; }",
        &["a pipeline is declared without `mut` or a type: `let pipe = pipeline(STAGES);`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) { let pipe = pipeline(2); pipe.flush(); y[0] = 1.0; }",
        &["unknown method `flush` of the pipeline `pipe`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) { let pipe = pipeline(2); y[0] = pipe; }",
        &["`pipe` is a pipeline, not a value"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) { pipeline(2); y[0] = 1.0; }",
        &["`pipeline(STAGES)` declares a pipeline and is only allowed as the value of a `let`"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(x: &[f32], y: &mut [f32]) { let mut t: [f32; 4] = shared(); let pipe = pipeline(2); pipe.copy(&mut t[0], &x[0], 12, 12); y[0] = t[0]; }",
        &["`pipe.copy` copies 4, 8 or 16 bytes, not 12"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k(x: &[f32], y: &mut [f32], w: u32) { let pipe = pipeline(2); pipe.wait(w); y[0] = x[0]; }",
        &["the number of groups `pipe.wait` leaves pending must be a compile-time constant"],
    );
}

#[test]
fn a_misaligned_constant_copy_offset_is_an_error_at_the_destination() {
    // Row R of [[f16; 12]; 4] starts at byte 24 R: 16-byte copies fit rows 0 and 2 only.
    let kernel = "fn k<const R: u32>(x: &[f16], y: &mut [f16]) {
        let mut t: [[f16; 12]; 4] = shared();
        cp_async(&mut t[R][0], &x[0], 16, 16);
        cp_async_commit();
        cp_async_wait(0);
        y[0] = t[0][0];
    }";
    assert_error(
        "arch(sm_80), tune(R = [0, 1, 2])",
        kernel,
        &["`cp_async` of 16 bytes writes byte 24 of `t` in the variant k[R=1], which is not a multiple of 16: align the destination index to 8 elements"],
    );
    parse("arch(sm_80), tune(R = [0, 2])", kernel);
    // Under a constant guard, only the variants that run the copy count.
    parse(
        "arch(sm_80), tune(R = [0, 1, 2])",
        &kernel
            .replace("cp_async(&mut t[R][0]", "if R != 1 { cp_async(&mut t[R][0]")
            .replace("16, 16);", "16, 16); }"),
    );
}

#[test]
fn sparse_mma_lowers_with_its_form_metadata_and_selector() {
    let body = parse(
        "arch(sm_80)",
        "fn k(c: &mut [f32], meta: &[u32]) {
            let a = [0u32; 4];
            let b = [0u32; 4];
            let mut acc = [[0.0f32; 4]; 2];
            #[unroll]
            for s in 0..2u32 {
                mma_sp_ordered_m16n8k32_f16(&mut acc[s], &a, &b, meta[lane_id()], s);
            }
            mma_sp_m16n8k32_bf16(&mut acc[0], &a, &b, 0x4444_4444, 1);
            c[0] = acc[1][0];
        }",
    )
    .ir
    .body;
    let mut ops = Vec::new();
    for stmt in &body {
        let inner = match stmt {
            Stmt::For { body, .. } => body.as_slice(),
            other => std::slice::from_ref(other),
        };
        for s in inner {
            if let Stmt::Matrix(
                op @ MatrixOp::MmaSparse {
                    metadata, selector, ..
                },
            ) = s
            {
                ops.push((op.function(), metadata.ty, selector.as_int()));
            }
        }
    }
    assert_eq!(
        ops,
        [
            ("mma_sp_ordered_m16n8k32_f16".to_string(), Scalar::U32, None),
            ("mma_sp_m16n8k32_bf16".to_string(), Scalar::U32, Some(1)),
        ]
    );
}

#[test]
fn sparse_mma_misuse_is_reported() {
    let call = |args: &str| {
        format!(
            "fn k(c: &mut [f32], w: u32) {{ let a = [0u32; 4]; let b = [0u32; 4]; let mut acc = [0.0f32; 4]; \
             mma_sp_ordered_m16n8k32_f16({args}); c[0] = acc[0]; }}"
        )
    };
    assert_error(
        "arch(sm_80)",
        &call("&mut acc, &a, &b, w, w"),
        &["the sparsity selector (0 or 1) must be a compile-time constant"],
    );
    assert_error(
        "arch(sm_80)",
        &call("&mut acc, &a, &b, 1.5, 0"),
        &["a float literal where `u32` is expected"],
    );
    assert_error(
        "arch(sm_80)",
        &call("&mut acc, &a, &b, w"),
        &["`mma_sp_ordered_m16n8k32_f16` takes 5 argument"],
    );
    assert_error(
        "arch(sm_70, sm_80)",
        &call("&mut acc, &a, &b, w, 0"),
        &["kernel `k` (sm_70): `mma_sp_ordered_m16n8k32_f16` (`mma.sp::ordered_metadata` m16n8k32 f16): needs sm_80 or newer"],
    );
}

#[test]
fn sparse_mma_shapes_and_selectors_are_checked_per_variant() {
    let item = "fn k<const N: u32, const S: u32>(c: &mut [f32], meta: &[u32]) {
        let a = [0u32; 4];
        let b = [0u32; N];
        let mut acc = [0.0f32; 4];
        mma_sp_m16n8k32_f16(&mut acc, &a, &b, meta[0], S);
        c[0] = acc[0];
    }";
    let def = parse("arch(sm_80), tune(N = [4], S = [0])", item);
    assert!(crate::compile_ptx(&def, &[4, 0], Arch::Sm80).is_ok());
    assert_error(
        "arch(sm_80), tune(N = [2, 4], S = [0])",
        item,
        &[
            "in the variant k[N=2,S=0]",
            "the B fragment of `mma_sp_m16n8k32_f16` is 4 `u32` per lane, but a row of `b` is 2 `u32`",
        ],
    );
    assert_error(
        "arch(sm_80), tune(N = [4], S = [0, 2])",
        item,
        &[
            "in the variant k[N=4,S=2]",
            "the selector of `mma_sp_m16n8k32_f16` is 2: m16n8k32 takes 0",
        ],
    );
}

#[test]
fn fence_gpu_lowers_for_every_ptx_target_and_wgsl_refuses_it() {
    let item = "fn k() { fence_gpu(); }";
    assert_eq!(
        parse("arch(sm_70, sm_80, sm_90, sm_90a)", item).ir.body,
        vec![Stmt::GpuFence]
    );
    assert_error(
        "arch(sm_70, wgsl)",
        item,
        &["WGSL cannot express `fence_gpu` (a fence at GPU scope)"],
    );
    assert_error(
        "arch(sm_70)",
        "fn k() { fence_gpu(0); }",
        &["`fence_gpu` takes 0 argument(s), but 1 were given"],
    );
    assert_error(
        "arch(sm_70)",
        "fn k() { fence_gpu::<u32>(); }",
        &["`fence_gpu` takes no generic arguments"],
    );
}

// ---- Hopper: mbarriers, the async-proxy fence, wgmma -------------------------

/// A kernel of one warpgroup that runs one f16 wgmma on 128-byte swizzled
/// tiles, with `extra` statements before it.
fn wgmma_kernel(extra: &str) -> String {
    format!(
        "fn k(c: &mut [f32]) {{
            let mut a: [[f16; 64]; 64] = shared();
            let mut b: [[f16; 64]; 64] = shared();
            let mut acc = [0.0f32; 32];
            {extra}
            wgmma_fence();
            wgmma_m64k16_f16::<64>(&mut acc, matrix_desc(&a[0][0], 128), matrix_desc(&b[0][16], 128), false);
            wgmma_commit();
            wgmma_wait(0);
            c[thread_idx().x] = acc[0];
        }}"
    )
}

#[test]
fn hopper_statements_need_their_arch() {
    let wgmma = wgmma_kernel("");
    assert!(parse("arch(sm_90a)", &wgmma).targets == vec![Target::Ptx(Arch::Sm90a)]);
    assert_error(
        "arch(sm_90, sm_90a)",
        &wgmma,
        &["kernel `k` (sm_90): `wgmma_fence`, `wgmma_commit` and `wgmma_wait` (`wgmma`): needs sm_90a, \
           and this variant targets sm_90; drop sm_90 from `arch(..)`"],
    );
    let waits = "fn k() {
        let mut bar: [u64; 1] = shared();
        mbarrier_init(&mut bar[0], 32);
        mbarrier_wait(&bar[0], 0);
    }";
    parse("arch(sm_90, sm_90a)", waits);
    assert_error(
        "arch(sm_80)",
        waits,
        &["`mbarrier_wait` (`mbarrier.try_wait.parity`): needs sm_90 or newer, and this variant targets sm_80"],
    );
    assert_error(
        "arch(sm_70)",
        waits,
        &["`mbarrier_init` (`mbarrier.init`): needs sm_80 or newer, and this variant targets sm_70"],
    );
    assert_error(
        "arch(sm_80)",
        "fn k() { fence_proxy_async(); }",
        &["`fence_proxy_async` (`fence.proxy.async.shared::cta`): needs sm_90 or newer"],
    );
    assert_error(
        "arch(sm_90a, wgsl)",
        &wgmma,
        &["WGSL cannot express `wgmma_fence` (warpgroup matrix operations)"],
    );
    assert_error(
        "arch(wgsl)",
        "fn k() { fence_proxy_async(); }",
        &["WGSL cannot express `fence_proxy_async` (the async proxy)"],
    );
}

/// A kernel body for `cluster(..)` attributes: each block arrives on another
/// block's second mbarrier, multicasts a tile and meets the cluster.
fn cluster_kernel(rank: &str, mask: &str) -> String {
    format!(
        "fn k(#[tensor_map(shape = [m, 64], strides = [64], tile = [8, 64])] a: &[f16], m: u32, out: &mut [u32]) {{
            let mut tile: [[f16; 64]; 8] = shared();
            let mut bars: [u64; 2] = shared();
            mbarrier_arrive_cluster(&mut bars[1], {rank});
            tma_load_multicast(&mut tile[0][0], a, (0, 0), &mut bars[0], {mask});
            cluster_sync();
            out[thread_idx().x] = cluster_rank();
        }}"
    )
}

#[test]
fn clusters_are_checked_at_the_kernel() {
    let pair = "arch(sm_90a), block(128), cluster(2)";
    let good = cluster_kernel("1 - cluster_rank()", "3");
    let def = parse(pair, &good);
    assert_eq!(
        def.ir.cluster.as_ref().map(|c| c[0].as_int()),
        Some(Some(2))
    );
    let ptx = |def: &KernelDef| crate::compile_ptx(def, &[], Arch::Sm90a).unwrap().text;
    assert!(ptx(&def).contains(".reqnctapercluster 2, 1, 1"));
    // A cluster of one block (a tune value of 1) is every launch's already.
    let single = parse(
        "arch(sm_90a), block(128), cluster(1)",
        &cluster_kernel("0", "1"),
    );
    assert!(!ptx(&single).contains(".reqnctapercluster"));
    assert_error(
        "arch(sm_80), block(128), cluster(2)",
        &good,
        &["`cluster(..)` and `cluster_rank` (thread block clusters): needs sm_90 or newer, and this variant targets sm_80"],
    );
    assert_error(
        "arch(sm_90), block(128), cluster(2)",
        &good,
        &["`tma_load_multicast` (`cp.async.bulk.tensor` `.multicast::cluster`): needs sm_90a"],
    );
    assert_error(
        "arch(wgsl), block(128), cluster(2)",
        &good,
        &["WGSL cannot express `cluster(..)` (thread block clusters)"],
    );
    assert_error(
        pair,
        &cluster_kernel("2", "3"),
        &["`mbarrier_arrive_cluster` arrives at rank 2, but a cluster has 2 block(s): ranks are 0 to 1"],
    );
    assert_error(
        pair,
        &cluster_kernel("0", "4"),
        &["the multicast mask of `tma_load_multicast` is 0b100: set bit i for the block of cluster rank i, ranks 0 to 1"],
    );
    assert_error(
        pair,
        &cluster_kernel("0", "0"),
        &["the multicast mask of `tma_load_multicast` is 0b0"],
    );
    assert_error(
        "arch(sm_90a), block(128), cluster(4, 4)",
        &cluster_kernel("0", "1"),
        &["`cluster(..)`: 16 blocks per cluster is more than the 8 of a portable cluster"],
    );
    assert_error(
        "arch(sm_90a), block(128), cluster(2, 1, 1, 1)",
        &good,
        &["`cluster(..)` takes one to three sizes in blocks"],
    );
    assert_error(
        pair,
        &good.replace("cluster_sync();", "let x = cluster_sync();"),
        &["`cluster_sync()` is a statement: write `cluster_sync();` on its own line"],
    );
    assert_error(
        pair,
        &good.replace("&mut bars[0], 3)", "&mut bars[0], 3i32)"),
        &["the mask of `tma_load_multicast` (bit i: the block of cluster rank i) must be `u32`"],
    );
}

#[test]
fn hopper_statement_errors_say_what_to_write() {
    let sm90a = "arch(sm_90a)";
    assert_error(
        sm90a,
        "fn k() { let mut bar: [u32; 1] = shared(); mbarrier_arrive(&mut bar[0]); }",
        &["`mbarrier_arrive` works on an mbarrier: an element of a `u64` shared array"],
    );
    assert_error(
        sm90a,
        "fn k() { let mut bar: [u64; 1] = shared(); mbarrier_wait(&mut bar[0], 0); }",
        &["the first argument of `mbarrier_wait` is the mbarrier, written `&bar[i]`"],
    );
    assert_error(
        sm90a,
        "fn k(n: i32) { let mut bar: [u64; 1] = shared(); mbarrier_init(&mut bar[0], n); }",
        &["the expected arrival count of `mbarrier_init` must be `u32`, but this is `i32`"],
    );
    assert_error(
        sm90a,
        &wgmma_kernel("").replace("wgmma_m64k16_f16::<64>", "wgmma_m64k16_f16"),
        &["`wgmma_m64k16_f16::<N>` names its N"],
    );
    assert_error(
        sm90a,
        &wgmma_kernel("").replace("matrix_desc(&a[0][0], 128)", "a[0][0]"),
        &["A of `wgmma_m64k16_f16` is a shared tile given as `matrix_desc(&tile[r][c], SWIZZLE)`"],
    );
    assert_error(
        sm90a,
        &wgmma_kernel("").replace("&a[0][0], 128", "&a[0][0], 16"),
        &["the swizzle of a matrix descriptor is written as a literal: 0 (none), 32, 64 or 128"],
    );
    assert_error(
        sm90a,
        &wgmma_kernel("").replace("wgmma_m64k16_f16", "wgmma_m64k16_bf16"),
        &["A of `wgmma_m64k16_bf16` holds `bf16`, but this tile holds `f16`"],
    );
    assert_error(
        sm90a,
        &wgmma_kernel("let d = matrix_desc(&a[0][0], 128);"),
        &["is written only as the A or B argument of a `wgmma_m64k*` call"],
    );
    assert_error(
        sm90a,
        &wgmma_kernel("").replace(", false);", ", 1);"),
        &["whether to add to the accumulators) must be `bool`"],
    );
}

/// A kernel whose only warpgroup statement is `call`, a wgmma of N = 64
/// into `acc` (an `f32` or `i32` register row) from the 128-byte swizzled
/// tiles `a` and `b` of `elem`.
fn wgmma_form_kernel(call: &str, elem: &str, acc: &str) -> String {
    // Rows of 128 bytes, the swizzle's span: 32 f32s or 128 8-bit elements.
    let row = if elem == "f32" { 32 } else { 128 };
    format!(
        "fn k(c: &mut [f32]) {{
            let mut a: [[{elem}; {row}]; 64] = shared();
            let mut b: [[{elem}; {row}]; 64] = shared();
            let mut acc = {acc};
            {call}(&mut acc, matrix_desc(&a[0][0], 128), matrix_desc(&b[0][0], 128), false);
            c[thread_idx().x] = acc[0] as f32;
        }}"
    )
}

#[test]
fn every_wgmma_form_needs_sm_90a_and_has_no_wgsl() {
    let forms = [
        ("wgmma_m64k8_tf32::<64>", "f32", "[0.0f32; 32]", "tf32"),
        ("wgmma_m64k32_s8::<64>", "i8", "[0i32; 32]", "s8"),
        ("wgmma_m64k32_u8::<64>", "u8", "[0i32; 32]", "u8"),
        ("wgmma_m64k32_e4m3::<64>", "e4m3", "[0.0f32; 32]", "e4m3"),
        ("wgmma_m64k32_e5m2::<64>", "e5m2", "[0.0f32; 32]", "e5m2"),
        ("wgmma_m64k8::<f32, 64>", "f32", "[0.0f32; 32]", "tf32"),
        ("wgmma_m64k32::<i8, 64>", "i8", "[0i32; 32]", "s8"),
        ("wgmma_m64k32::<u8, 64>", "u8", "[0i32; 32]", "u8"),
        ("wgmma_m64k32::<e4m3, 64>", "e4m3", "[0.0f32; 32]", "e4m3"),
        ("wgmma_m64::<e5m2, 64>", "e5m2", "[0.0f32; 32]", "e5m2"),
    ];
    for (call, elem, acc, ty) in forms {
        let source = wgmma_form_kernel(call, elem, acc);
        let function = call.split("::").next().unwrap();
        parse("arch(sm_90a)", &source);
        for arch in ["sm_90", "sm_80"] {
            assert_error(
                &format!("arch({arch})"),
                &source,
                &[&format!(
                    "(`wgmma.mma_async` {ty}): needs sm_90a, and this variant targets {arch}"
                )],
            );
        }
        let wgsl_refusal = if elem.starts_with('e') {
            // The fp8 tiles are refused first, by their type.
            vec![format!("WGSL cannot express shared array `a` of type {ty}")]
        } else {
            vec![
                format!("WGSL cannot express `{function}"),
                format!("_{ty}` (warpgroup matrix operations)"),
            ]
        };
        let wgsl_refusal: Vec<&str> = wgsl_refusal.iter().map(String::as_str).collect();
        assert_error("arch(wgsl)", &source, &wgsl_refusal);
    }
}

#[test]
fn wgmma_forms_check_their_types() {
    let sm90a = "arch(sm_90a)";
    assert_error(
        sm90a,
        &wgmma_form_kernel("wgmma_m64k32::<f16, 64>", "f16", "[0i32; 32]"),
        &["`wgmma_m64k32` has no form for `f16`: its element types are i8 or u8 or e4m3 or e5m2"],
    );
    assert_error(
        sm90a,
        &wgmma_form_kernel("wgmma_m64k8::<u8, 64>", "u8", "[0.0f32; 32]"),
        &["`wgmma_m64k8` has no form for `u8`: its element types are f32"],
    );
    assert_error(
        sm90a,
        &wgmma_form_kernel("wgmma_m64k32_s8::<64>", "i8", "[0.0f32; 32]"),
        &["accumulator of `wgmma_m64k32_s8`"],
    );
    assert_error(
        sm90a,
        &wgmma_form_kernel("wgmma_m64k32_e4m3::<64>", "u8", "[0.0f32; 32]"),
        &["A of `wgmma_m64k32_e4m3` holds `e4m3`, but this tile holds `u8`"],
    );
    assert_error(
        sm90a,
        &wgmma_form_kernel("wgmma_m64k8_tf32", "f32", "[0.0f32; 32]"),
        &["`wgmma_m64k8_tf32::<N>` names its N"],
    );
    assert_error(
        sm90a,
        &wgmma_form_kernel("wgmma_m64k32_u8", "u8", "[0i32; 32]"),
        &["(8, 16, 24, then 32 to 256 in steps of 16)"],
    );
}

/// A kernel that loads one 64 x 64 tile of `a` through its tensor map and
/// stores it to `c` through its own, with `extra` statements at the end.
fn tma_kernel(a_map: &str, c_map: &str, extra: &str) -> String {
    format!(
        "fn k({a_map} a: &[f16], {c_map} c: &mut [f16], m: u32, k: u32) {{
            let mut tile: [[f16; 64]; 64] = shared();
            let mut bar: [u64; 1] = shared();
            if thread_idx().x == 0 {{
                mbarrier_init(&mut bar[0], 1);
                fence_mbarrier_init();
                mbarrier_arrive_expect_tx(&mut bar[0], 8192);
                tma_load(&mut tile[0][0], a, (block_idx().y * 64, block_idx().x * 64), &mut bar[0]);
            }}
            mbarrier_wait(&bar[0], 0);
            if thread_idx().x == 0 {{
                tma_store(&tile[0][0], c, (block_idx().y * 64, block_idx().x * 64));
                tma_store_commit();
                tma_store_wait(0);
            }}
            {extra}
        }}"
    )
}

const TILE_MAP: &str =
    "#[tensor_map(shape = [m, k], strides = [k], tile = [64, 64], swizzle = 128)]";

#[test]
fn tma_copies_name_their_tensor_maps() {
    let def = parse("arch(sm_90, sm_90a)", &tma_kernel(TILE_MAP, TILE_MAP, ""));
    let map = def.ir.params[0]
        .tensor_map
        .as_ref()
        .expect("a's tensor map");
    assert_eq!(map.shape.len(), 2);
    assert_eq!(map.strides.len(), 1);
    assert_eq!(map.swizzle, Swizzle::B128);
    assert!(def.ir.params[2].tensor_map.is_none());
    for arch in [Arch::Sm90, Arch::Sm90a] {
        let ptx = crate::compile_ptx(&def, &[], arch).unwrap().text;
        assert!(ptx.contains(".param .align 64 .b8 p0_a_map[128]"), "{ptx}");
        assert!(
            ptx.contains(
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            ),
            "{ptx}"
        );
        assert!(
            ptx.contains("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"),
            "{ptx}"
        );
        // The 128-byte swizzle repeats every 1024 bytes of shared addresses.
        assert!(ptx.contains(".shared .align 1024"), "{ptx}");
    }
    assert_error(
        "arch(sm_80)",
        &tma_kernel(TILE_MAP, TILE_MAP, ""),
        &["`#[tensor_map(..)]` (a TMA tensor map): needs sm_90 or newer, and this variant targets sm_80"],
    );
    assert_error(
        "arch(sm_90, wgsl)",
        &tma_kernel(TILE_MAP, TILE_MAP, ""),
        &["WGSL cannot express the tensor map of parameter `a` (TMA)"],
    );
}

#[test]
fn tma_mistakes_are_reported_at_their_span() {
    let sm90 = "arch(sm_90)";
    let err = |a: &str, c: &str, extra: &str, expected: &str| {
        assert_error(sm90, &tma_kernel(a, c, extra), &[expected]);
    };
    err(
        TILE_MAP,
        "",
        "",
        "`c` has no tensor map: declare the parameter `#[tensor_map(",
    );
    err(
        "#[tensor_map(shape = [m, k], strides = [k])]",
        TILE_MAP,
        "",
        "a tensor map needs its `shape` and its `tile`",
    );
    err(
        "#[tensor_map(shape = [m, k], tile = [64, 64])]",
        TILE_MAP,
        "",
        "a tensor map of 2 dimension(s) has 1 stride(s)",
    );
    err(
        "#[tensor_map(shape = [m, k], strides = [k], tile = [64, 64], order = 1)]",
        TILE_MAP,
        "",
        "unknown tensor map option",
    );
    err(
        "#[tensor_map(shape = [m, thread_idx().x], strides = [k], tile = [64, 64])]",
        TILE_MAP,
        "",
        "a tensor map's shape is computed on the host at each launch",
    );
    err(
        "#[tensor_map(shape = [m, k], strides = [k], tile = [m, 64])]",
        TILE_MAP,
        "",
        "a tensor map's tile size",
    );
    err(
        "#[tensor_map(shape = [m, k], strides = [k], tile = [64, 64], swizzle = 16)]",
        TILE_MAP,
        "",
        "the swizzle of a tensor map is written as a literal: 0 (none), 32, 64 or 128",
    );
    err(
        "#[shared]",
        TILE_MAP,
        "",
        "the only attribute on a kernel parameter is `#[tensor_map(..)]`",
    );
    err(
        &TILE_MAP.replace("shape = [m, k]", "shape = [m, k, k]"),
        TILE_MAP,
        "",
        "a tensor map of 3 dimension(s) has 2 stride(s)",
    );
    err(
        &TILE_MAP.replace("shape = [m, k], strides = [k], tile = [64, 64]", "shape = [m, k, k], strides = [k, k], tile = [1, 64, 64]"),
        TILE_MAP,
        "",
        "the tensor map of this slice has 3 dimension(s), so `tma_load` takes 3 coordinates (outermost first), but 2 were given",
    );
    assert_error(
        sm90,
        &tma_kernel(TILE_MAP, TILE_MAP, "").replace("a: &[f16]", "a: &[bf16]"),
        &["`tma_load` copies between elements of one type, but the tile holds `f16` and `a` holds `bf16`"],
    );
    assert_error(
        sm90,
        &tma_kernel(TILE_MAP, TILE_MAP, "").replace("c: &mut [f16]", "c: &[f16]"),
        &["`tma_store` writes `c`: make it `&mut [f16]`"],
    );
    assert_error(
        sm90,
        &tma_kernel(TILE_MAP, TILE_MAP, "").replace("tma_load(&mut tile[0][0]", "tma_load(&tile[0][0]"),
        &["the first argument of `tma_load` is the shared tile's first element, written `&mut tile[s][0][0]`"],
    );
    assert_error(
        sm90,
        &tma_kernel(TILE_MAP, TILE_MAP, "").replace(
            "(block_idx().y * 64, block_idx().x * 64), &mut bar[0]",
            "(1.0, 2.0), &mut bar[0]",
        ),
        &["the coordinates of `tma_load` are `u32` or `i32` element indices, but one is `f32`"],
    );
    assert_error(
        "arch(sm_90)",
        "fn k() { setmaxnreg_dec(40); }",
        &["`setmaxnreg_inc`/`setmaxnreg_dec` (`setmaxnreg`): needs sm_90a, and this variant targets sm_90"],
    );
    assert_error(
        "arch(sm_90a)",
        "fn k(n: u32) { setmaxnreg_inc(n); }",
        &["the register count of `setmaxnreg`"],
    );
}

#[test]
fn tma_tiles_and_register_counts_are_checked_per_variant() {
    // The front refuses what validation would refuse in any variant, so an
    // error comes from the front, before any one variant is compiled.
    let compile = |attr: &str, item: &str, consts: &[i64]| {
        let def = parse_kernel_str(attr, item)?;
        crate::compile_ptx(&def, consts, Arch::Sm90a).map_err(|e| e.message)
    };
    // A tile whose rows are not the tensor map's: 64 x 64 loaded into rows of 32.
    let err = compile(
        "arch(sm_90a)",
        &tma_kernel(TILE_MAP, TILE_MAP, "").replace("[[f16; 64]; 64]", "[[f16; 32]; 128]"),
        &[],
    )
    .unwrap_err();
    assert!(err.contains("whose trailing dimensions (indexed by zeros) hold exactly the tile with rows of 64 elements"), "{err}");
    // A swizzled row longer than the pattern's span.
    let wide = TILE_MAP.replace(
        "tile = [64, 64], swizzle = 128",
        "tile = [32, 128], swizzle = 128",
    );
    let err = compile("arch(sm_90a)", &tma_kernel(&wide, TILE_MAP, ""), &[]).unwrap_err();
    assert!(
        err.contains("is 256 bytes: TMA needs a multiple of 16 and at most the swizzle's 128"),
        "{err}"
    );
    // Stages of a ring whose size is not a multiple of the swizzle's 1024 bytes.
    let ring = tma_kernel(TILE_MAP, TILE_MAP, "")
        .replace(
            "let mut tile: [[f16; 64]; 64] = shared();",
            "let mut tile: [[[f16; 64]; R]; 2] = shared();",
        )
        .replace("&mut tile[0][0]", "&mut tile[m % 2][0][0]")
        .replace("&tile[0][0]", "&tile[0][0][0]")
        .replace("fn k(", "fn k<const R: u32>(");
    let ring_map = TILE_MAP.replace("tile = [64, 64]", "tile = [R, 64]");
    let ring = ring.replacen(TILE_MAP, &ring_map, 2);
    assert!(compile("arch(sm_90a), tune(R = [8])", &ring, &[8]).is_ok());
    let err = compile("arch(sm_90a), tune(R = [8, 4])", &ring, &[8]).unwrap_err();
    assert!(err.contains("in the variant k[R=4]"), "{err}");
    assert!(
        err.contains("does not start on a 1024-byte boundary (TMA with swizzle 128 needs it)"),
        "{err}"
    );
    let err = compile(
        "arch(sm_90a), block(128), tune(N = [40, 100])",
        "fn k<const N: u32>() { setmaxnreg_dec(N); }",
        &[100],
    )
    .unwrap_err();
    assert!(
        err.contains("`setmaxnreg` to 100 registers: the count is 24 to 256, a multiple of 8"),
        "{err}"
    );
    let err = compile("arch(sm_90a)", "fn k() { setmaxnreg_dec(40); }", &[]).unwrap_err();
    assert!(
        err.contains(
            "statement 1 of the kernel body: `setmaxnreg` needs the block shape fixed: declare `block(..)`"
        ),
        "{err}"
    );
    let ptx = compile(
        "arch(sm_90a), block(384)",
        "fn k() { setmaxnreg_dec(40); }",
        &[],
    )
    .unwrap();
    assert!(
        ptx.text.contains(".reqntid 384, 1, 1\n.minnctapersm 1\n"),
        "{}",
        ptx.text
    );
    assert!(
        ptx.text.contains("setmaxnreg.dec.sync.aligned.u32 40;"),
        "{}",
        ptx.text
    );
    // ptxas's bound on a decrease (codegen/tests/ptxas.rs checks it against ptxas).
    let err = compile(
        "arch(sm_90a), block(128)",
        "fn k() { setmaxnreg_dec(40); setmaxnreg_inc(32); }",
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains(
            "statement 1 of the kernel body: `setmaxnreg_dec` to 40 registers is more than the largest \
             `setmaxnreg_inc` of the kernel (32), and ptxas refuses a decrease past it: decrease to at most 32"
        ),
        "{err}"
    );
    let err = compile(
        "arch(sm_90a), block(128), min_blocks_per_sm(3)",
        "fn k() { setmaxnreg_dec(176); }",
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains(
            "is more than the registers a thread starts with, when 3 block(s) of 128 threads share \
             an SM's 65536 (168)"
        ),
        "{err}"
    );
}

#[test]
fn fp8_values_are_moved_not_computed_with() {
    let def = parse(
        "arch(sm_90a)",
        "fn k(a: &[e4m3], b: &mut [e4m3], c: &[e5m2], d: &mut [e5m2]) {
            let i = thread_idx().x;
            let mut tile: [e4m3; 32] = shared();
            tile[i % 32] = a[i];
            sync_threads();
            let x = if i % 2 == 0 { tile[i % 32] } else { a[i] };
            b[i] = x;
            d[i] = c[i];
        }",
    );
    // The `if` as a value takes a temporary no literal can start.
    let ptx = crate::compile_ptx(&def, &[], Arch::Sm90a).unwrap().text;
    assert!(ptx.contains("st.global.u8"), "{ptx}");
    let refused = [
        ("let y = a[i] + a[i];", "`+` does not apply to `e4m3`"),
        ("let y = -a[i];", "`-` does not apply to `e4m3`"),
        ("let y = a[i] == a[i];", "`==` does not apply to `e4m3`"),
        ("let y = a[i] as f32;", "`as` does not apply to `e4m3`"),
        ("let y = 1.0f32 as e4m3;", "`as` does not apply to `e4m3`"),
        (
            "let y = a[i].max(a[i]);",
            "`.max()` does not apply to `e4m3`",
        ),
        ("let y = e4m3::ONE;", "`ONE` does not apply to `e4m3`"),
    ];
    for (statement, message) in refused {
        assert_error(
            "arch(sm_90a)",
            &format!(
                "fn k(a: &[e4m3], b: &mut [e4m3]) {{
                    let i = thread_idx().x;
                    {statement}
                }}"
            ),
            &[message, "a storage type"],
        );
    }
    assert_error(
        "arch(wgsl)",
        "fn k(a: &[e4m3], b: &mut [e4m3]) { b[0] = a[0]; }",
        &["e4m3"],
    );
}

/// A kernel whose body nests `depth` levels deep in one of the shapes a
/// syntax tree deepens by: nested blocks, `if`s and parentheses, a
/// right-nested sum, and the chains without brackets (a left-nested sum,
/// prefix operators, casts, `else if`).
fn deep_kernel(shape: &str, depth: usize) -> String {
    let body = match shape {
        "blocks" => format!("{}y[0] = 1.0;{}", "{ ".repeat(depth), " }".repeat(depth)),
        // A bare condition: the most nested `if`s the limit accepts.
        "ifs" => format!(
            "let c = y[0] > 0.0; {}y[0] = 1.0;{}",
            "if c { ".repeat(depth),
            " }".repeat(depth)
        ),
        "parentheses" => format!("y[0] = {}1.0{};", "(".repeat(depth), ")".repeat(depth)),
        "right sum" => format!(
            "y[0] = {}1.0{};",
            "1.0 + (".repeat(depth),
            ")".repeat(depth)
        ),
        "left sum" => format!("y[0] = 1.0{};", " + 1.0".repeat(depth)),
        "negations" => format!("y[0] = {}1.0;", "- ".repeat(depth)),
        // Joined by the lexer as `!=` is: one operator per character.
        "joined negations" => format!("y[0] = {}1.0;", "-".repeat(depth)),
        "joined nots" => format!("if {}(y[0] > 0.0) {{ y[0] = 1.0; }}", "!".repeat(depth)),
        "casts" => format!("y[0] = 1.0{};", " as f32".repeat(depth)),
        "else ifs" => format!(
            "if y[0] > 0.0 {{ y[0] = 1.0; }}{} else {{ y[0] = 2.0; }}",
            " else if y[0] > 1.0 { y[0] = 1.0; }".repeat(depth)
        ),
        _ => unreachable!("no shape `{shape}`"),
    };
    format!("fn deep(y: &mut [f32]) {{ {body} }}")
}

const DEEP_SHAPES: [&str; 10] = [
    "blocks",
    "ifs",
    "parentheses",
    "right sum",
    "left sum",
    "negations",
    "joined negations",
    "joined nots",
    "casts",
    "else ifs",
];

/// The stack the nesting limit is proven on: a quarter of the 8 MiB the
/// compiler runs proc-macros on, and the default of a spawned thread.
const PROVEN_STACK: usize = 2 << 20;

/// Runs `f` on a thread with [`PROVEN_STACK`] (an overflow aborts the test).
fn on_proven_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(PROVEN_STACK)
        .spawn(f)
        .expect("a test thread")
        .join()
        .expect("the thread ran to its end")
}

fn accepted_nesting(source: &str) -> bool {
    let tokens: proc_macro2::TokenStream = source.parse().expect("the source lexes");
    super::check_nesting(tokens).is_ok()
}

#[test]
fn nesting_past_the_limit_of_the_attribute_is_an_error() {
    let attr = format!(
        "tune(N = [{}1{}])",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    let e = on_proven_stack(move || error(&attr, "fn k<const N: u32>() {}"));
    assert!(e.contains("nests too deeply"), "{e}");
}

#[test]
fn nesting_past_the_limit_is_an_error_not_a_stack_overflow() {
    for shape in DEEP_SHAPES {
        let source = deep_kernel(shape, 100_000);
        let e = on_proven_stack(move || error("", &source));
        assert!(
            e.contains("nests too deeply")
                && e.contains(&format!("the limit is {}", super::MAX_NESTING)),
            "{shape}: {e}"
        );
    }
}

/// The deepest nesting of `source` (tokens `depth` levels deep) the limit
/// accepts; one level more is refused.
fn deepest_accepted(source: impl Fn(usize) -> String) -> usize {
    let deepest = (1..super::MAX_NESTING)
        .take_while(|&depth| accepted_nesting(&source(depth)))
        .last()
        .unwrap_or_else(|| panic!("one level is refused: {}", source(1)));
    assert!(!accepted_nesting(&source(deepest + 1)), "{}", source(1));
    deepest
}

/// For each shape, the deepest nesting the limit accepts goes through the
/// parse, the lowering, the target checks (the default targets include
/// WGSL) and the serialization the macro does, on [`PROVEN_STACK`]; one
/// level more is refused.
#[test]
fn nesting_at_the_limit_fits_the_stack() {
    for shape in DEEP_SHAPES {
        let deepest = deepest_accepted(|depth| deep_kernel(shape, depth));
        let source = deep_kernel(shape, deepest);
        let outcome =
            on_proven_stack(move || parse_kernel_str("", &source).map(|def| def.to_json().len()));
        if let Err(e) = outcome {
            assert!(!e.contains("nests too deeply"), "{shape} at {deepest}: {e}");
        }
    }
}

/// For each shape at the deepest nesting the limit accepts, what a program
/// does with the definition the macro embedded runs on [`PROVEN_STACK`]
/// (a thread the user spawned): its digest, the trip through JSON that
/// `def()` makes (deeper than serde_json's default recursion limit for
/// most shapes), and specialization, validation and emission for each
/// target, the PTX ones alone and with WGSL where WGSL accepts the kernel.
#[test]
fn the_runtime_path_at_the_nesting_limit_fits_the_stack() {
    let mut failures = Vec::new();
    for shape in DEEP_SHAPES {
        let deepest = deepest_accepted(|depth| deep_kernel(shape, depth));
        for attr in ["arch(sm_80, sm_90a)", "arch(sm_80, sm_90a, wgsl)"] {
            let source = deep_kernel(shape, deepest);
            let outcome = on_proven_stack(move || {
                let def = match parse_kernel_str(attr, &source) {
                    Ok(def) => def,
                    // WGSL's own limits refuse some of these shapes at the front.
                    Err(e) if attr.contains("wgsl") && e.contains("WGSL") => return Ok(()),
                    Err(e) => return Err(e),
                };
                def.ir_digest();
                let def = KernelDef::from_json(&def.to_json()).map_err(|e| e.to_string())?;
                for target in &def.targets {
                    match *target {
                        Target::Ptx(arch) => crate::compile_ptx(&def, &[], arch).map(drop),
                        Target::Wgsl => crate::compile_wgsl(&def, &[], Some([64, 1, 1])).map(drop),
                    }
                    .map_err(|e| format!("{}: {e}", target.name()))?;
                }
                Ok::<_, String>(())
            });
            if let Err(e) = outcome {
                failures.push(format!("{shape} at {deepest}, {attr}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A `requires(..)` clause at the deepest nesting the limit accepts in the
/// attribute (a sum of a parameter's terms) goes through what a launch does
/// with it on [`PROVEN_STACK`]: the trip through JSON, its specialization
/// and its evaluation for the call's values.
#[test]
fn a_requires_clause_at_the_nesting_limit_evaluates_on_the_stack() {
    let attr = |terms: usize| format!("requires(n{} > 0)", " + n".repeat(terms));
    let deepest = deepest_accepted(attr);
    let outcome = on_proven_stack(move || {
        let def = parse_kernel_str(
            &attr(deepest),
            "fn k(n: u32, y: &mut [f32]) { y[0] = 1.0; }",
        )?;
        let def = KernelDef::from_json(&def.to_json()).map_err(|e| e.to_string())?;
        let kernel = crate::specialize::specialize(&def.ir, &[]).map_err(|e| e.message)?;
        let call = [
            HostValue::Scalar(Literal::Int(1)),
            HostValue::Slice { len: 1 },
        ];
        crate::eval::eval(&kernel.requires[0].cond, &[], &call).map_err(|e| e.message)
    });
    assert_eq!(outcome, Ok(Literal::Bool(true)), "{deepest} terms");
}

/// A kernel for `len` f32s in a register array.
fn register_array_kernel(len: u64) -> String {
    format!("fn k(y: &mut [f32]) {{ let mut a = [0.0f32; {len}]; a[1] = y[0]; y[0] = a[1]; }}")
}

#[test]
fn wgsl_refuses_an_array_past_naga_largest_type() {
    // 2^29 f32s take 2^31 bytes, one more than naga's largest type.
    assert_error(
        "arch(wgsl)",
        &register_array_kernel(1 << 29),
        &[
            "the register array `a` ([f32; 536870912]) takes 2147483648 bytes",
            "arrays of at most 2147483647 bytes",
        ],
    );
    // One element fewer is a type naga takes: what refuses it is the limit
    // on register arrays, not WGSL's.
    let e = error("arch(wgsl)", &register_array_kernel((1 << 29) - 1));
    assert!(!e.contains("arrays of at most"), "{e}");
    assert!(e.contains("more elements than the limit of 4096"), "{e}");
}

#[test]
fn wgsl_refuses_an_array_past_naga_largest_type_in_a_variant() {
    let item = "fn k<const N: u32>(y: &mut [f32]) {
        let mut t: [[f32; 1024]; N] = shared();
        t[0][0] = y[0];
        y[0] = t[0][0];
    }";
    assert_error(
        "arch(wgsl), tune(N = [1, 524288])",
        item,
        &[
            "in the variant",
            "the shared array `t` ([[f32; 1024]; 524288]) takes 2147483648 bytes",
        ],
    );
    parse("arch(wgsl), tune(N = [1, 524287])", item);
}

#[test]
fn wgsl_refuses_an_expression_nested_past_naga_parser() {
    let sum = |terms: usize| {
        format!(
            "fn k(y: &mut [f32]) {{ y[0] = y[1]{}; }}",
            " + y[1]".repeat(terms)
        )
    };
    assert_error(
        "arch(wgsl)",
        &sum(100),
        &[
            "an expression 102 operations deep",
            "bind parts of the expression to `let`s",
        ],
    );
    parse("arch(sm_80)", &sum(100));
}

#[test]
fn what_validation_refuses_in_one_variant_fails_the_build() {
    // The `block(..)` dimension is 0 only in the variant BX=0: neither the
    // front's checks nor the target checks see it, the validator of the
    // specialized kernel does, and the build reports it naming the variant.
    assert_error(
        "arch(sm_80), tune(BX = [64, 0]), block(BX)",
        "fn k<const BX: u32>(y: &mut [f32]) { y[thread_idx().x] = 1.0; }",
        &[
            "in the variant k[BX=0]",
            "`block(..)` dimension 0: is 0: it must be positive",
        ],
    );
    // Every variant valid: accepted.
    parse(
        "arch(sm_80), tune(BX = [64, 32]), block(BX)",
        "fn k<const BX: u32>(y: &mut [f32]) { y[thread_idx().x] = 1.0; }",
    );
}

#[test]
fn a_constant_mbarrier_parity_is_0_or_1() {
    let item = |parity: &str| {
        format!(
            "fn k(out: &mut [u32]) {{
                let mut bars: [u64; 1] = shared();
                if thread_idx().x == 0 {{ mbarrier_init(&mut bars[0], 1); fence_mbarrier_init(); }}
                sync_threads();
                mbarrier_arrive(&mut bars[0]);
                mbarrier_wait(&bars[0], {parity});
                out[thread_idx().x] = 1;
            }}"
        )
    };
    // Found by the front fuzzer: ptxas rejected the PTX of an immediate 192.
    assert_error(
        "arch(sm_90), block(32)",
        &item("192"),
        &["the phase parity of `mbarrier_wait` is 192: it is 0 or 1"],
    );
    for parity in ["0", "1", "thread_idx().x % 2"] {
        let def = parse("arch(sm_90), block(32)", &item(parity));
        assert!(crate::compile_ptx(&def, &[], Arch::Sm90).is_ok());
    }
}

#[test]
fn shared_memory_over_an_arch_limit_fails_the_build() {
    // 2 x 64 KiB of f32 fit one block on sm_90 and sm_80 but not sm_70's 96 KiB,
    // in the variant N=2 only. Found by the front fuzzer (a wmma GEMM's
    // tune space without its `constrain(..)`).
    let item = "fn k<const N: u32>(y: &mut [f32]) {
        let mut t: [[f32; 16384]; N] = shared();
        t[0][thread_idx().x] = y[0];
        sync_threads();
        y[thread_idx().x] = t[0][0];
    }";
    assert_error(
        "arch(sm_70, sm_80), block(32), tune(N = [1, 2])",
        item,
        &[
            "in the variant k[N=2]",
            "(sm_70): its shared arrays take 131072 bytes, more than the 98304 one block may use on sm_70",
        ],
    );
    parse("arch(sm_80), block(32), tune(N = [1, 2])", item);
}

#[test]
fn min_blocks_per_sm_is_checked_per_variant() {
    let item = "fn k<const B: u32>(x: &mut [f32], n: u32) { x[thread_idx().x] = 1.0; }";
    let def = parse(
        "arch(sm_80), block(256), tune(B = [1, 2]), min_blocks_per_sm(B * 4)",
        item,
    );
    let directive = |consts: &[i64]| {
        let text = crate::compile_ptx(&def, consts, Arch::Sm80).unwrap().text;
        text.lines()
            .find(|l| l.starts_with(".minnctapersm"))
            .map(str::to_string)
    };
    assert_eq!(directive(&[1]).as_deref(), Some(".minnctapersm 4"));
    assert_eq!(directive(&[2]).as_deref(), Some(".minnctapersm 8"));
    assert_error(
        "arch(sm_80), block(256), tune(B = [0, 1]), min_blocks_per_sm(B)",
        item,
        &[
            "in the variant k[B=0]",
            "`min_blocks_per_sm(..)`: is 0: an SM holds 1 to 32 blocks at once",
        ],
    );
    let plain = "fn k(x: &mut [f32], n: u32) { x[thread_idx().x] = 1.0; }";
    assert_error(
        "arch(sm_80), block(1024), min_blocks_per_sm(4)",
        plain,
        &["4 blocks of 1024 threads are more than the 2048 threads an SM holds: ask for at most 2"],
    );
    assert_error(
        "arch(sm_80), min_blocks_per_sm(2)",
        plain,
        &["ptxas bounds the registers only of a kernel whose block shape it knows: declare `block(..)` too"],
    );
    assert_error(
        "arch(sm_80), block(256), min_blocks_per_sm(n)",
        plain,
        &["`min_blocks_per_sm(..)` must be a compile-time constant (literals and const parameters), but this uses the run-time parameter `n`"],
    );
}
