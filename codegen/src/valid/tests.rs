//! One test per rule, each checking the message text.

use super::validate;
use crate::ir::*;

/// Kernel `k(x: &[f32], y: &mut [f32], n: u32)` with locals
/// 0 `acc: [f32; 4]` (mut), 1 `tile: shared [f32; 8]` (mut), 2 `i: u32`, 3 `s: f32` (mut).
fn kernel(body: Vec<Stmt>) -> Kernel {
    let reg = |name: &str, ty, dims: Vec<Expr>, mutable| Local {
        name: name.into(),
        ty,
        space: Space::Register,
        dims,
        mutable,
    };
    Kernel {
        name: "k".into(),
        const_params: vec![ConstParam {
            name: "N".into(),
            ty: Scalar::U32,
        }],
        params: vec![
            Param {
                name: "x".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: false,
                },
                tensor_map: None,
            },
            Param {
                name: "y".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: true,
                },
                tensor_map: None,
            },
            Param {
                name: "n".into(),
                ty: ParamType::Scalar(Scalar::U32),
                tensor_map: None,
            },
        ],
        locals: vec![
            reg("acc", Scalar::F32, vec![Expr::u32(4)], true),
            Local {
                name: "tile".into(),
                ty: Scalar::F32,
                space: Space::Shared,
                dims: vec![Expr::u32(8)],
                mutable: true,
            },
            reg("i", Scalar::U32, vec![], false),
            reg("s", Scalar::F32, vec![], true),
        ],
        block: None,
        cluster: None,
        min_blocks_per_sm: None,
        requires: vec![],
        body,
    }
}

fn f32_lit(v: f64) -> Expr {
    Expr::literal(Scalar::F32, Literal::Float(v))
}

fn i32_lit(v: i64) -> Expr {
    Expr::literal(Scalar::I32, Literal::Int(v))
}

fn true_lit() -> Expr {
    Expr::literal(Scalar::Bool, Literal::Bool(true))
}

fn load(place: Place, ty: Scalar) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Load(Box::new(place)),
    }
}

fn var(local: LocalId) -> Place {
    Place::Local {
        local,
        indices: vec![],
    }
}

fn elem(local: LocalId, index: Expr) -> Place {
    Place::Local {
        local,
        indices: vec![index],
    }
}

fn global(param: ParamId, index: Expr) -> Place {
    Place::Global { param, index }
}

fn bin(op: BinaryOp, a: Expr, b: Expr, ty: Scalar) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
    }
}

fn let_i() -> Stmt {
    Stmt::Let {
        local: 2,
        init: Some(Expr::u32(0)),
    }
}

fn let_s() -> Stmt {
    Stmt::Let {
        local: 3,
        init: Some(f32_lit(0.0)),
    }
}

fn assert_error(k: &Kernel, expected: &str) {
    match validate(k) {
        Ok(()) => panic!("expected the error {expected:?}, the kernel validated"),
        Err(e) => assert_eq!(e.message, expected),
    }
}

fn stmt_error(body: Vec<Stmt>, expected: &str) {
    assert_error(&kernel(body), expected);
}

#[test]
fn a_well_formed_kernel_validates() {
    let body = vec![
        Stmt::Let {
            local: 0,
            init: Some(f32_lit(0.0)),
        },
        Stmt::Let {
            local: 1,
            init: None,
        },
        let_i(),
        Stmt::For {
            var: 2,
            start: Expr::u32(0),
            end: Expr {
                ty: Scalar::U32,
                kind: ExprKind::Param(2),
            },
            step: Expr::u32(1),
            unroll: false,
            body: vec![Stmt::Assign {
                place: elem(1, load(var(2), Scalar::U32)),
                value: load(elem(0, Expr::u32(3)), Scalar::F32),
            }],
        },
        Stmt::Barrier,
        Stmt::Assign {
            place: global(1, Expr::u32(0)),
            value: load(elem(1, Expr::u32(7)), Scalar::F32),
        },
    ];
    validate(&kernel(body)).unwrap();
}

#[test]
fn local_ids_must_exist() {
    stmt_error(
        vec![Stmt::Let { local: 9, init: None }],
        "kernel `k`, statement 1 of the kernel body: local #9 does not exist (the kernel has 4 locals)",
    );
}

#[test]
fn param_ids_must_exist() {
    stmt_error(
        vec![Stmt::Expr(Expr { ty: Scalar::U32, kind: ExprKind::Len(7) })],
        "kernel `k`, statement 1 of the kernel body: parameter #7 does not exist (the kernel has 3 parameters)",
    );
}

#[test]
fn no_const_is_left() {
    stmt_error(
        vec![Stmt::Expr(Expr { ty: Scalar::U32, kind: ExprKind::Const(0) })],
        "kernel `k`, statement 1 of the kernel body: const param `N` is still symbolic: specialize the kernel before validating it",
    );
}

#[test]
fn binary_operands_share_a_type() {
    stmt_error(
        vec![let_s(), Stmt::Expr(bin(BinaryOp::Add, load(var(3), Scalar::F32), i32_lit(1), Scalar::F32))],
        "kernel `k`, statement 2 of the kernel body: `+` is not defined on operands of types f32 and i32: cast one with `as`",
    );
}

#[test]
fn comparisons_yield_bool() {
    stmt_error(
        vec![Stmt::Expr(bin(
            BinaryOp::Lt,
            i32_lit(1),
            i32_lit(2),
            Scalar::I32,
        ))],
        "kernel `k`, statement 1 of the kernel body: `<` on i32 yields bool, but is typed i32",
    );
}

#[test]
fn shift_amounts_are_u32() {
    stmt_error(
        vec![Stmt::Expr(bin(BinaryOp::Shl, i32_lit(1), i32_lit(2), Scalar::I32))],
        "kernel `k`, statement 1 of the kernel body: the amount of `<<` is a i32: shift amounts are u32",
    );
}

#[test]
fn len_is_u32() {
    stmt_error(
        vec![Stmt::Expr(Expr {
            ty: Scalar::I32,
            kind: ExprKind::Len(0),
        })],
        "kernel `k`, statement 1 of the kernel body: `x.len()` is a u32, not a i32",
    );
}

#[test]
fn special_registers_are_u32() {
    stmt_error(
        vec![Stmt::Expr(Expr {
            ty: Scalar::I32,
            kind: ExprKind::Special(Special::LaneId),
        })],
        "kernel `k`, statement 1 of the kernel body: thread and block indices are u32, not i32",
    );
}

#[test]
fn loads_have_the_element_type() {
    stmt_error(
        vec![Stmt::Expr(load(global(0, Expr::u32(0)), Scalar::F64))],
        "kernel `k`, statement 1 of the kernel body: a read of an element of `x` is typed f64 but the element type is f32",
    );
}

#[test]
fn atomic_types_must_be_legal() {
    let atomic = Expr {
        ty: Scalar::F32,
        kind: ExprKind::Atomic {
            op: AtomicOp::Max,
            place: Box::new(global(1, Expr::u32(0))),
            value: Box::new(f32_lit(1.0)),
            compare: None,
        },
    };
    stmt_error(
        vec![Stmt::Expr(atomic)],
        "kernel `k`, statement 1 of the kernel body: `atomic_max` on f32 is not supported: it takes i32, u32, i64, u64",
    );
}

#[test]
fn atomics_need_a_writable_place() {
    let atomic = Expr {
        ty: Scalar::F32,
        kind: ExprKind::Atomic {
            op: AtomicOp::Add,
            place: Box::new(global(0, Expr::u32(0))),
            value: Box::new(f32_lit(1.0)),
            compare: None,
        },
    };
    stmt_error(
        vec![Stmt::Expr(atomic)],
        "kernel `k`, statement 1 of the kernel body: `x` is a `&[f32]` and cannot be written: declare it `&mut [f32]`",
    );
}

#[test]
fn compare_exchange_needs_its_compare_value() {
    let atomic = Expr {
        ty: Scalar::F32,
        kind: ExprKind::Atomic {
            op: AtomicOp::CompareExchange,
            place: Box::new(global(1, Expr::u32(0))),
            value: Box::new(f32_lit(1.0)),
            compare: None,
        },
    };
    stmt_error(
        vec![Stmt::Expr(atomic)],
        "kernel `k`, statement 1 of the kernel body: `atomic_compare_exchange` needs the value to compare with",
    );
}

#[test]
fn intrinsic_argument_types_are_checked() {
    stmt_error(
        vec![Stmt::Expr(Expr { ty: Scalar::I32, kind: ExprKind::Call(Intrinsic::Sqrt, vec![i32_lit(4)]) })],
        "kernel `k`, statement 1 of the kernel body: `sqrt` takes floats of one type, returning that type; found (i32) -> i32",
    );
    stmt_error(
        vec![Stmt::Expr(Expr {
            ty: Scalar::F32,
            kind: ExprKind::Call(Intrinsic::MulAdd, vec![f32_lit(1.0)]),
        })],
        "kernel `k`, statement 1 of the kernel body: `mul_add` takes 3 arguments, found 1",
    );
    let shfl = Expr {
        ty: Scalar::F64,
        kind: ExprKind::Call(
            Intrinsic::ShflXor,
            vec![
                Expr::literal(Scalar::F64, Literal::Float(1.0)),
                Expr::u32(1),
            ],
        ),
    };
    stmt_error(
        vec![Stmt::Expr(shfl)],
        "kernel `k`, statement 1 of the kernel body: `shfl_xor` takes a 32-bit value (i32, u32, f32) and a u32 lane operand; found (f64, u32) -> f64",
    );
}

#[test]
fn conditions_are_bool() {
    stmt_error(
        vec![Stmt::While {
            cond: i32_lit(1),
            body: vec![],
        }],
        "kernel `k`, statement 1 of the kernel body: the condition of `while` is a i32, not a bool",
    );
}

#[test]
fn assignments_need_mutable_locals() {
    stmt_error(
        vec![
            let_i(),
            Stmt::Assign {
                place: var(2),
                value: Expr::u32(1),
            },
        ],
        "kernel `k`, statement 2 of the kernel body: `i` is not mutable: declare it with `let mut`",
    );
}

#[test]
fn read_only_slices_cannot_be_assigned() {
    stmt_error(
        vec![Stmt::Assign { place: global(0, Expr::u32(0)), value: f32_lit(1.0) }],
        "kernel `k`, statement 1 of the kernel body: `x` is a `&[f32]` and cannot be written: declare it `&mut [f32]`",
    );
}

#[test]
fn assigned_values_have_the_place_type() {
    stmt_error(
        vec![Stmt::Assign { place: global(1, Expr::u32(0)), value: i32_lit(1) }],
        "kernel `k`, statement 1 of the kernel body: assigns a i32 to an element of `y`, which holds f32",
    );
}

#[test]
fn register_array_indices_are_literal() {
    stmt_error(
        vec![
            Stmt::Let { local: 0, init: None },
            let_i(),
            Stmt::Assign { place: elem(0, load(var(2), Scalar::U32)), value: f32_lit(1.0) },
        ],
        "kernel `k`, statement 3 of the kernel body: index 0 of register array `acc` is not a compile-time constant: \
         index register arrays only with literals, const params and `#[unroll]` loop variables",
    );
}

#[test]
fn literal_indices_are_in_bounds() {
    stmt_error(
        vec![Stmt::Let { local: 0, init: None }, Stmt::Assign { place: elem(0, Expr::u32(4)), value: f32_lit(1.0) }],
        "kernel `k`, statement 2 of the kernel body: index 0 of `acc` is 4, out of bounds for dimension 0 of length 4",
    );
}

#[test]
fn index_count_matches_dims() {
    stmt_error(
        vec![
            Stmt::Let {
                local: 0,
                init: None,
            },
            Stmt::Assign {
                place: var(0),
                value: f32_lit(1.0),
            },
        ],
        "kernel `k`, statement 2 of the kernel body: `acc` has 1 dimensions but is indexed with 0",
    );
}

#[test]
fn dims_are_literal_and_positive() {
    let mut k = kernel(vec![]);
    k.locals[0].dims = vec![Expr::u32(0)];
    assert_error(
        &k,
        "kernel `k`, local `acc`: dimension 0 is 0: array dimensions must be positive",
    );
    k.locals[0].dims = vec![Expr {
        ty: Scalar::U32,
        kind: ExprKind::Param(2),
    }];
    assert_error(&k, "kernel `k`, local `acc`: dimension 0 is not a literal: specialize the kernel before validating it");
}

#[test]
fn block_dims_are_positive_and_bounded() {
    let mut k = kernel(vec![]);
    k.block = Some([Expr::u32(0), Expr::u32(1), Expr::u32(1)]);
    assert_error(
        &k,
        "kernel `k`, `block(..)` dimension 0: is 0: it must be positive",
    );
    k.block = Some([Expr::u32(64), Expr::u32(32), Expr::u32(1)]);
    assert_error(
        &k,
        "kernel `k`, `block(..)`: 2048 threads per block is more than the 1024 CUDA allows",
    );
}

#[test]
fn shared_arrays_have_no_init() {
    stmt_error(
        vec![Stmt::Let {
            local: 1,
            init: Some(f32_lit(0.0)),
        }],
        "kernel `k`, statement 1 of the kernel body: shared array `tile` has an initializer: \
         shared memory starts uninitialized, write it with assignments",
    );
}

#[test]
fn let_comes_before_use() {
    stmt_error(
        vec![Stmt::Expr(load(var(3), Scalar::F32)), let_s()],
        "kernel `k`, statement 1 of the kernel body: `s` is used before its `let` (or outside its scope)",
    );
    // A `let` inside a branch does not reach past it.
    stmt_error(
        vec![
            Stmt::If { cond: true_lit(), then_body: vec![let_s()], else_body: vec![] },
            Stmt::Expr(load(var(3), Scalar::F32)),
        ],
        "kernel `k`, statement 2 of the kernel body: `s` is used before its `let` (or outside its scope)",
    );
}

#[test]
fn paths_name_nested_statements() {
    let inner = Stmt::For {
        var: 2,
        start: Expr::u32(0),
        end: Expr::u32(4),
        step: Expr::u32(1),
        unroll: false,
        body: vec![
            Stmt::Barrier,
            Stmt::Barrier,
            Stmt::Expr(Expr {
                ty: Scalar::U32,
                kind: ExprKind::Const(0),
            }),
        ],
    };
    stmt_error(
        vec![Stmt::Barrier, Stmt::If { cond: true_lit(), then_body: vec![], else_body: vec![inner] }],
        "kernel `k`, statement 3 of the body of `for i`, in statement 1 of the else-branch of `if`, \
         in statement 2 of the kernel body: const param `N` is still symbolic: specialize the kernel before validating it",
    );
}

#[test]
fn loops_are_specialized_and_well_typed() {
    let for_i = |unroll, step: Expr| Stmt::For {
        var: 2,
        start: Expr::u32(0),
        end: Expr::u32(4),
        step,
        unroll,
        body: vec![],
    };
    stmt_error(
        vec![for_i(true, Expr::u32(1))],
        "kernel `k`, statement 1 of the kernel body: `#[unroll] for i` is still a loop: specialize the kernel before validating it",
    );
    stmt_error(
        vec![for_i(false, Expr::u32(0))],
        "kernel `k`, statement 1 of the kernel body: `for i` has step 0: the step must be positive",
    );
    stmt_error(
        vec![for_i(false, i32_lit(1))],
        "kernel `k`, statement 1 of the kernel body: the step of `for i` is a i32, but `i` is a u32",
    );
}

#[test]
fn break_needs_a_loop() {
    stmt_error(
        vec![Stmt::Break],
        "kernel `k`, statement 1 of the kernel body: `break` outside of a loop",
    );
}

#[test]
fn casts_to_bool_are_rejected() {
    stmt_error(
        vec![Stmt::Expr(Expr { ty: Scalar::Bool, kind: ExprKind::Cast(Box::new(i32_lit(1))) })],
        "kernel `k`, statement 1 of the kernel body: a i32 cannot be cast to bool: compare it with zero instead",
    );
}

#[test]
fn literals_fit_their_type() {
    stmt_error(
        vec![Stmt::Expr(Expr::literal(Scalar::U8, Literal::Int(256)))],
        "kernel `k`, statement 1 of the kernel body: the literal Int(256) is not a valid u8",
    );
}

#[test]
fn requirements_read_only_host_values() {
    let mut k = kernel(vec![]);
    k.requires = vec![Requirement {
        cond: bin(
            BinaryOp::Lt,
            Expr {
                ty: Scalar::U32,
                kind: ExprKind::Special(Special::LaneId),
            },
            Expr::u32(1),
            Scalar::Bool,
        ),
        text: "lane_id() < 1".into(),
    }];
    assert_error(
        &k,
        "kernel `k`, requirement `lane_id() < 1`: a thread/block index cannot be checked on the host: \
         use scalar params, `.len()` of slices and const params",
    );
}

#[test]
fn unary_operators_fit_their_operand() {
    stmt_error(
        vec![Stmt::Expr(Expr {
            ty: Scalar::U32,
            kind: ExprKind::Unary(UnaryOp::Neg, Box::new(Expr::u32(1))),
        })],
        "kernel `k`, statement 1 of the kernel body: unary `-` is not defined on u32",
    );
}
