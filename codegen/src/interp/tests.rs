//! Tests of the interpreter, construct family by construct family, on small
//! kernels written here in the DSL; the stock inputs against host
//! references are `codegen/tests/interp.rs`.

use super::value;
use super::*;
use crate::front::parse_kernel_str;
use crate::ir::{BinaryOp, Kernel, Literal, Scalar};

/// The first variant of a kernel, specialized with `consts`.
fn variant(attr: &str, item: &str, consts: &[i64]) -> Kernel {
    let def = parse_kernel_str(attr, item).unwrap_or_else(|e| panic!("kernel rejected:\n{e}"));
    crate::specialize::specialize(&def.ir, consts).unwrap()
}

/// A kernel for the PTX targets (so that every type is allowed).
fn kernel(item: &str) -> Kernel {
    variant("arch(sm_80, sm_90)", item, &[])
}

fn run1(k: &Kernel, grid: u32, block: u32, args: &mut [Arg]) -> Result<Stats, Error> {
    interpret(k, &Launch::new([grid, 1, 1], [block, 1, 1]), args)
}

fn err1(k: &Kernel, grid: u32, block: u32, args: &mut [Arg]) -> Error {
    match run1(k, grid, block, args) {
        Ok(_) => panic!("the run succeeded"),
        Err(e) => e,
    }
}

/// A deterministic pseudo-random sequence (xorshift), for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

// ---- scalar semantics ----

#[test]
fn integers_wrap_and_shifts_are_masked_as_on_the_gpu() {
    let add = value::binary(
        BinaryOp::Add,
        Scalar::U32,
        Literal::Int(u32::MAX as i64),
        Literal::Int(2),
    );
    assert_eq!(add, Ok(Literal::Int(1)));
    let mul = value::binary(
        BinaryOp::Mul,
        Scalar::I8,
        Literal::Int(100),
        Literal::Int(3),
    );
    assert_eq!(mul, Ok(Literal::Int(300i32 as i8 as i64)));
    let sub = value::binary(BinaryOp::Sub, Scalar::U64, Literal::Int(0), Literal::Int(1));
    assert_eq!(sub, Ok(Literal::Int(-1)), "u64::MAX is held as the bits -1");
    let shl = value::binary(
        BinaryOp::Shl,
        Scalar::U32,
        Literal::Int(1),
        Literal::Int(33),
    );
    assert_eq!(shl, Ok(Literal::Int(2)), "the amount is taken modulo 32");
    let shr = value::binary(
        BinaryOp::Shr,
        Scalar::I32,
        Literal::Int(-16),
        Literal::Int(2),
    );
    assert_eq!(shr, Ok(Literal::Int(-4)), "signed shifts are arithmetic");
    let min = value::binary(
        BinaryOp::Div,
        Scalar::I32,
        Literal::Int(i32::MIN as i64),
        Literal::Int(-1),
    );
    assert_eq!(min, Ok(Literal::Int(i32::MIN as i64)));
    let rem = value::binary(
        BinaryOp::Rem,
        Scalar::I32,
        Literal::Int(i32::MIN as i64),
        Literal::Int(-1),
    );
    assert_eq!(rem, Ok(Literal::Int(0)));
    let neg = value::unary(crate::ir::UnaryOp::Neg, Scalar::I8, Literal::Int(-128));
    assert_eq!(neg, Ok(Literal::Int(-128)));
    let zero = value::binary(BinaryOp::Div, Scalar::U32, Literal::Int(7), Literal::Int(0));
    assert_eq!(zero.unwrap_err().kind, ErrorKind::DivisionByZero);
}

#[test]
fn casts_agree_with_rust_as() {
    let ints: [i64; 7] = [i64::MIN, -300, -1, 0, 200, 70_000, i64::MAX];
    for v in ints {
        let lit = Literal::Int(v);
        let cast = |to| value::cast(Scalar::I64, to, lit).unwrap();
        assert_eq!(cast(Scalar::I8), Literal::Int(v as i8 as i64));
        assert_eq!(cast(Scalar::U8), Literal::Int(v as u8 as i64));
        assert_eq!(cast(Scalar::U32), Literal::Int(v as u32 as i64));
        assert_eq!(cast(Scalar::F32), Literal::Float(v as f32 as f64));
        assert_eq!(
            cast(Scalar::F16),
            Literal::Float(half::f16::from_f32(v as f32).to_f64())
        );
    }
    let floats = [f64::NAN, -1e300, -2.9, -0.5, 0.5, 255.9, 3e9, f64::INFINITY];
    for v in floats {
        let lit = Literal::Float(v);
        let cast = |to| value::cast(Scalar::F64, to, lit).unwrap();
        assert_eq!(cast(Scalar::I8), Literal::Int(v as i8 as i64), "{v} as i8");
        assert_eq!(
            cast(Scalar::U32),
            Literal::Int(v as u32 as i64),
            "{v} as u32"
        );
        assert_eq!(cast(Scalar::I64), Literal::Int(v as i64), "{v} as i64");
        assert_eq!(
            cast(Scalar::U64),
            Literal::Int(v as u64 as i64),
            "{v} as u64"
        );
    }
    // f64 -> bf16 rounds once: just above a tie goes up (a detour through
    // f32, or a conversion that drops the low bits, sees the tie and rounds
    // to even).
    let above_tie = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    assert_eq!(
        value::cast(Scalar::F64, Scalar::Bf16, Literal::Float(above_tie)),
        Ok(Literal::Float(1.0 + 2f64.powi(-7)))
    );
    assert_eq!(
        value::cast(
            Scalar::F64,
            Scalar::F16,
            Literal::Float(1.0 + 2f64.powi(-11) + 2f64.powi(-40))
        ),
        Ok(Literal::Float(1.0 + 2f64.powi(-10)))
    );
    // f32 -> f16 in one step too (`cvt.rn.f16.f32`), normal and subnormal.
    for (v, want) in [
        (1.0 + 2f64.powi(-11) + 2f64.powi(-23), 1.0 + 2f64.powi(-10)),
        (1.0 + 2f64.powi(-11), 1.0),
        (2f64.powi(-25) + 2f64.powi(-48), 2f64.powi(-24)),
        (2f64.powi(-25), 0.0),
        (65520.0, f64::INFINITY),
    ] {
        assert_eq!(v as f32 as f64, v, "{v:e} is an f32");
        assert_eq!(
            value::cast(Scalar::F32, Scalar::F16, Literal::Float(v)),
            Ok(Literal::Float(want)),
            "{v:e} as f16"
        );
    }
    // u64 -> bf16 likewise: 2^63 + 2^55 + 1 is above the tie 2^63 + 2^55.
    let big = (1u64 << 63) + (1 << 55) + 1;
    assert_eq!(
        value::cast(Scalar::U64, Scalar::Bf16, Literal::Int(big as i64)),
        Ok(Literal::Float(2f64.powi(63) + 2f64.powi(56)))
    );
}

#[test]
fn half_arithmetic_rounds_once_from_f32_and_mul_add_once_in_all() {
    let h = |x: f64| half::f16::from_f64(x).to_f64();
    let (a, b) = (h(1.0 + 2f64.powi(-10)), h(3.0));
    let sum = value::binary(
        BinaryOp::Add,
        Scalar::F16,
        Literal::Float(a),
        Literal::Float(b),
    );
    let want = half::f16::from_f32(a as f32 + b as f32).to_f64();
    assert_eq!(sum, Ok(Literal::Float(want)));
    // a * b + c just below a tie of f16 that f32 would round onto: one rounding
    // gives 1 + 2^-10, an f32 fma rounded again gives 1 + 2^-9.
    let a = 1.0 + 2f64.powi(-10);
    let b = 2f64.powi(-11) - 2f64.powi(-21);
    let c = 1.0 + 2f64.powi(-10);
    assert_eq!(h(b), b, "b is an f16");
    let fma = value::intrinsic(
        crate::ir::Intrinsic::MulAdd,
        Scalar::F16,
        &[Scalar::F16; 3],
        &[Literal::Float(a), Literal::Float(b), Literal::Float(c)],
    );
    assert_eq!(fma, Ok(Literal::Float(1.0 + 2f64.powi(-10))));
    let twice = h((a as f32).mul_add(b as f32, c as f32) as f64);
    assert_eq!(
        twice,
        1.0 + 2f64.powi(-9),
        "the double rounding this avoids"
    );
}

#[test]
fn min_max_tf32_and_packing_follow_ptx() {
    let min = |x: f64, y: f64| {
        value::intrinsic(
            crate::ir::Intrinsic::Min,
            Scalar::F32,
            &[Scalar::F32; 2],
            &[Literal::Float(x), Literal::Float(y)],
        )
        .unwrap()
    };
    assert_eq!(min(f64::NAN, 2.0), Literal::Float(2.0));
    let Literal::Float(z) = min(0.0, -0.0) else {
        panic!()
    };
    assert!(z == 0.0 && z.is_sign_negative(), "-0 is below +0");
    assert_eq!(
        value::round_to_tf32(1.0 + 2f32.powi(-11)),
        1.0 + 2f32.powi(-10),
        "ties away from zero"
    );
    assert_eq!(value::round_to_tf32(-(1.0 + 2f32.powi(-12))), -1.0);
    let packed = value::intrinsic(
        crate::ir::Intrinsic::PackF16x2,
        Scalar::U32,
        &[Scalar::F32; 2],
        &[Literal::Float(1.0), Literal::Float(-2.0)],
    );
    assert_eq!(packed, Ok(Literal::Int(0xc000_3c00)), "lo in the low half");
}

// ---- SIMT kernels ----

#[test]
fn saxpy_over_several_blocks_with_a_ragged_end() {
    let k = kernel(
        "fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
            let i = block_idx().x * block_dim().x + thread_idx().x;
            if i < x.len() { y[i] = a * x[i] + y[i]; }
        }",
    );
    let x: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..100).map(|i| 1.0 - i as f32).collect();
    let mut args = vec![Arg::from(3.0f32), x.clone().into(), y.clone().into()];
    let stats = run1(&k, 4, 32, &mut args).unwrap();
    assert!(stats.steps > 0);
    let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 3.0 * x + y).collect();
    assert_eq!(args[2].as_f32().unwrap(), &want[..]);
}

#[test]
fn thread_and_block_indices_in_three_dimensions() {
    let k = kernel(
        "fn ids(y: &mut [u32]) {
            let b = (block_idx().z * grid_dim().y + block_idx().y) * grid_dim().x + block_idx().x;
            let t = (thread_idx().z * block_dim().y + thread_idx().y) * block_dim().x + thread_idx().x;
            let n = block_dim().x * block_dim().y * block_dim().z;
            y[b * n + t] = thread_idx().x + 10 * thread_idx().y + 100 * thread_idx().z
                + 1000 * block_idx().x + 10000 * block_idx().y + 100000 * block_idx().z
                + 1000000 * (lane_id() + 32 * (t / 32) - t);
        }",
    );
    let (grid, block) = ([2, 3, 1], [4, 3, 5]);
    let mut args = vec![Arg::from(vec![u32::MAX; 6 * 60])];
    interpret(&k, &Launch::new(grid, block), &mut args).unwrap();
    let y = args[0].as_u32().unwrap();
    for (i, &v) in y.iter().enumerate() {
        let (b, t) = (i / 60, i % 60);
        let (bx, by) = (b % 2, b / 2);
        let (tx, ty, tz) = (t % 4, t / 4 % 3, t / 12);
        assert_eq!(
            v as usize,
            tx + 10 * ty + 100 * tz + 1000 * bx + 10000 * by,
            "element {i}"
        );
    }
}

#[test]
fn divergent_loops_with_break_continue_and_return() {
    let k = kernel(
        "fn loops(y: &mut [i32]) {
            let t = thread_idx().x;
            if t == 7 { return; }
            let mut s = 0i32;
            for j in 0..t {
                if j % 3 == 0 { continue; }
                if j > 20 { break; }
                s += j as i32;
            }
            let mut k = t;
            while k > 0 {
                k /= 2;
                s += 100;
                if k == 3 { break; }
            }
            for d in (-8i32..8).step_by(4) { s += d * 1000; }
            y[t] = s;
        }",
    );
    let mut args = vec![Arg::from(vec![-1i32; 40])];
    run1(&k, 1, 40, &mut args).unwrap();
    let y = args[0].as_i32().unwrap();
    for t in 0..40i32 {
        if t == 7 {
            assert_eq!(y[7], -1, "thread 7 returned");
            continue;
        }
        let mut s = 0;
        for j in 0..t {
            if j % 3 == 0 {
                continue;
            }
            if j > 20 {
                break;
            }
            s += j;
        }
        let mut k = t;
        while k > 0 {
            k /= 2;
            s += 100;
            if k == 3 {
                break;
            }
        }
        s += -8000;
        assert_eq!(y[t as usize], s, "thread {t}");
    }
}

#[test]
fn shared_memory_and_barriers_reverse_a_block() {
    let k = kernel(
        "fn rev(x: &[f32], y: &mut [f32]) {
            let mut tile: [f32; 96] = shared();
            let t = thread_idx().x;
            let base = block_idx().x * 96;
            tile[t] = x[base + t];
            sync_threads();
            y[base + t] = tile[95 - t];
        }",
    );
    let x: Vec<f32> = (0..192).map(|i| i as f32).collect();
    let mut args = vec![Arg::from(x), Arg::from(vec![0f32; 192])];
    run1(&k, 2, 96, &mut args).unwrap();
    let y = args[1].as_f32().unwrap();
    for b in 0..2 {
        for t in 0..96 {
            assert_eq!(y[b * 96 + t], (b * 96 + 95 - t) as f32);
        }
    }
}

#[test]
fn atomics_on_global_and_shared_memory() {
    let k = kernel(
        "fn histogram(x: &[u32], h: &mut [u32], total: &mut [u32], lo: &mut [i32]) {
            let mut local: [u32; 8] = shared();
            let t = thread_idx().x;
            if t < 8 { local[t] = 0; }
            sync_threads();
            let i = block_idx().x * block_dim().x + t;
            let v = x[i];
            atomic_add(&mut local[v % 8], 1u32);
            atomic_min(&mut lo[0], v as i32 - 1000);
            atomic_max(&mut lo[1], v as i32);
            // An increment by compare-exchange, retried until it lands.
            let mut old = atomic_add(&mut total[0], 0u32);
            loop {
                let seen = atomic_compare_exchange(&mut total[0], old, old + 1);
                if seen == old { break; }
                old = seen;
            }
            sync_threads();
            if t < 8 { atomic_add(&mut h[t], local[t]); }
        }",
    );
    let mut rng = Rng(0x1234_5678);
    let x: Vec<u32> = (0..256).map(|_| (rng.next() % 997) as u32).collect();
    let mut args = vec![
        Arg::from(x.clone()),
        Arg::from(vec![0u32; 8]),
        Arg::from(vec![0u32; 1]),
        Arg::from(vec![i32::MAX, i32::MIN]),
    ];
    run1(&k, 2, 128, &mut args).unwrap();
    let mut want = [0u32; 8];
    for &v in &x {
        want[(v % 8) as usize] += 1;
    }
    assert_eq!(args[1].as_u32().unwrap(), &want[..]);
    assert_eq!(args[2].as_u32().unwrap(), &[256]);
    let lo = args[3].as_i32().unwrap();
    assert_eq!(lo[0], *x.iter().min().unwrap() as i32 - 1000);
    assert_eq!(lo[1], *x.iter().max().unwrap() as i32);
}

#[test]
fn warp_shuffles_reduce_and_shift_by_lane() {
    let k = kernel(
        "fn shuffles(x: &[f32], sums: &mut [f32], down: &mut [u32]) {
            let t = thread_idx().x;
            let mut v = x[t];
            #[unroll]
            for k in 0..5u32 { v += shfl_xor(v, 16 >> k); }
            sums[t] = v;
            down[t] = shfl_down(lane_id() * 10, 4);
        }",
    );
    let x: Vec<f32> = (0..64).map(|i| (i * i % 17) as f32).collect();
    let mut args = vec![
        Arg::from(x.clone()),
        Arg::from(vec![0f32; 64]),
        Arg::from(vec![0u32; 64]),
    ];
    run1(&k, 1, 64, &mut args).unwrap();
    for t in 0..64 {
        let warp = t / 32 * 32;
        let total: f32 = x[warp..warp + 32].iter().sum();
        assert_eq!(args[1].as_f32().unwrap()[t], total, "thread {t}");
        let lane = (t % 32) as u32;
        let want = if lane + 4 < 32 {
            (lane + 4) * 10
        } else {
            lane * 10
        };
        assert_eq!(
            args[2].as_u32().unwrap()[t],
            want,
            "shfl_down past lane 31 keeps the caller's value"
        );
    }
}

// ---- warp matrix operations ----

/// A 16 x k f16 matrix of small integers (exact in every sum), row-major.
fn small_ints(rng: &mut Rng, n: usize) -> Vec<half::f16> {
    (0..n)
        .map(|_| half::f16::from_f32((rng.next() % 9) as f32 - 4.0))
        .collect()
}

#[test]
fn mma_f16_fragments_follow_the_documented_layout() {
    // Each lane builds its A, B and C registers from row-major A (16 x 16),
    // B (16 x 8) and C (16 x 8) by the table of docs/ptx.md, and writes D
    // back by the C layout: D must be A B + C.
    let k = kernel(
        "fn mma(a: &[f16], b: &[f16], c: &[f32], d: &mut [f32]) {
            let l = lane_id();
            let g = l / 4;
            let t = l % 4;
            let mut fa = [0u32; 4];
            let mut fb = [0u32; 2];
            let mut acc = [0.0f32; 4];
            #[unroll]
            for i in 0..4u32 {
                let r = g + 8 * (i % 2);
                let k0 = 2 * t + 8 * (i / 2);
                fa[i] = pack_f16x2(a[r * 16 + k0] as f32, a[r * 16 + k0 + 1] as f32);
                acc[i] = c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
            }
            #[unroll]
            for i in 0..2u32 {
                let k0 = 2 * t + 8 * i;
                fb[i] = pack_f16x2(b[k0 * 8 + g] as f32, b[(k0 + 1) * 8 + g] as f32);
            }
            mma_m16n8k16_f16(&mut acc, &fa, &fb);
            #[unroll]
            for i in 0..4u32 {
                d[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
            }
        }",
    );
    let mut rng = Rng(99);
    let a = small_ints(&mut rng, 256);
    let b = small_ints(&mut rng, 128);
    let c: Vec<f32> = (0..128).map(|i| i as f32).collect();
    let mut args = vec![
        a.clone().into(),
        b.clone().into(),
        c.clone().into(),
        Arg::from(vec![0f32; 128]),
    ];
    run1(&k, 1, 32, &mut args).unwrap();
    let d = args[3].as_f32().unwrap();
    for r in 0..16 {
        for n in 0..8 {
            let want: f32 = c[r * 8 + n]
                + (0..16)
                    .map(|k| a[r * 16 + k].to_f32() * b[k * 8 + n].to_f32())
                    .sum::<f32>();
            assert_eq!(d[r * 8 + n], want, "D[{r}][{n}]");
        }
    }
}

#[test]
fn ldmatrix_gives_each_lane_its_pairs_plain_and_transposed() {
    let k = kernel(
        "fn ld(x: &[u32], plain: &mut [u32], trans: &mut [u32]) {
            let mut tile: [[f16; 16]; 16] = shared();
            let l = lane_id();
            #[unroll]
            for e in 0..8u32 {
                let i = l * 8 + e;
                tile[i / 16][i % 16] = (x[i] as f32) as f16;
            }
            sync_threads();
            let mut p = [0u32; 4];
            let mut q = [0u32; 4];
            ldmatrix_x4(&mut p, &tile[l % 16][l / 16 * 8]);
            ldmatrix_x4_trans(&mut q, &tile[l % 16][l / 16 * 8]);
            #[unroll]
            for j in 0..4u32 {
                plain[l * 4 + j] = p[j];
                trans[l * 4 + j] = q[j];
            }
        }",
    );
    let x: Vec<u32> = (0..256).collect();
    let mut args = vec![
        x.into(),
        Arg::from(vec![0u32; 128]),
        Arg::from(vec![0u32; 128]),
    ];
    run1(&k, 1, 32, &mut args).unwrap();
    let f16_bits = |v: usize| half::f16::from_f32(v as f32).to_bits() as u32;
    // Matrix j of the x4 load is rows 8 (j % 2).. and columns 8 (j / 2)..
    // (lane L addresses row L % 16, chunk L / 16).
    let m = |j: usize, r: usize, c: usize| (8 * (j % 2) + r) * 16 + 8 * (j / 2) + c;
    for l in 0..32 {
        let (g, t) = (l / 4, l % 4);
        for j in 0..4 {
            let plain = f16_bits(m(j, g, 2 * t)) | f16_bits(m(j, g, 2 * t + 1)) << 16;
            assert_eq!(
                args[1].as_u32().unwrap()[l * 4 + j],
                plain,
                "lane {l} matrix {j}"
            );
            let trans = f16_bits(m(j, 2 * t, g)) | f16_bits(m(j, 2 * t + 1, g)) << 16;
            assert_eq!(
                args[2].as_u32().unwrap()[l * 4 + j],
                trans,
                "lane {l} matrix {j} transposed"
            );
        }
    }
}

#[test]
fn cp_async_copies_and_zero_fills_when_issued() {
    let k = kernel(
        "fn copy(x: &[u32], y: &mut [u32]) {
            let mut tile: [u32; 128] = shared();
            let t = thread_idx().x;
            cp_async(&mut tile[t * 4], &x[t * 4], 16, t % 5 * 4);
            cp_async_commit();
            cp_async_wait(0);
            sync_threads();
            #[unroll]
            for e in 0..4u32 { y[t * 4 + e] = tile[(t * 4 + e + 4) % 128]; }
        }",
    );
    let x: Vec<u32> = (1..=128).collect();
    let mut args = vec![x.into(), Arg::from(vec![0u32; 128])];
    run1(&k, 1, 32, &mut args).unwrap();
    let y = args[1].as_u32().unwrap();
    for (i, &got) in y.iter().enumerate() {
        let src = (i + 4) % 128;
        let (owner, e) = (src / 4, src % 4);
        let want = if e < owner % 5 { src as u32 + 1 } else { 0 };
        assert_eq!(got, want, "element {i}");
    }
}

// ---- detection ----

#[test]
fn an_out_of_bounds_write_names_the_thread_and_the_statement() {
    let k = kernel(
        "fn shift(y: &mut [u32]) {
            let t = thread_idx().x;
            y[t + 1] = t;
        }",
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 64])]);
    assert_eq!(e.kind, ErrorKind::OutOfBounds);
    assert_eq!(e.block, Some([0, 0, 0]));
    assert_eq!(e.thread, Some([63, 0, 0]));
    assert_eq!(
        e.message,
        "kernel `shift`, block (0, 0, 0), thread (63, 0, 0), at statement 2 of the kernel body (`y[t + 1] = t`): \
         out-of-bounds write of `y[t + 1]`: index 64, but `y` has 64 elements"
    );
}

#[test]
fn out_of_bounds_shared_and_register_indices_are_errors() {
    let k = kernel(
        "fn k(y: &mut [f32], n: u32) {
            let mut tile: [[f32; 8]; 4] = shared();
            let t = thread_idx().x;
            tile[t / 8][t % 8 + n] = 1.0;
            y[t] = 0.0;
        }",
    );
    let e = err1(&k, 1, 32, &mut [Arg::from(vec![0f32; 32]), Arg::from(1u32)]);
    assert_eq!(e.kind, ErrorKind::OutOfBounds);
    assert_eq!(e.thread, Some([7, 0, 0]));
    assert!(
        e.message.contains("index 8 of dimension 2 of the shared array `tile: [[f32; 8]; 4]`, which has 8 elements"),
        "{}",
        e.message
    );
}

#[test]
fn a_barrier_inside_a_divergent_if_is_divergence() {
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let t = thread_idx().x;
            if t < 16 { sync_threads(); }
            y[t] = t;
        }",
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 64])]);
    assert_eq!(e.kind, ErrorKind::BarrierDivergence);
    assert_eq!(e.thread, Some([0, 0, 0]));
    assert!(
        e.message.contains(
            "at statement 1 of the then-branch of `if`, in statement 2 of the kernel body (`sync_threads()`)"
        ) && e.message.contains("thread (16, 0, 0) of this warp is in another branch"),
        "{}",
        e.message
    );
}

#[test]
fn a_barrier_some_warps_skip_or_return_before_is_divergence() {
    // Warp-uniform, but not block-uniform: warp 1 ends without the barrier.
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let t = thread_idx().x;
            if t < 32 { sync_threads(); }
            y[t] = t;
        }",
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 64])]);
    assert_eq!(e.kind, ErrorKind::BarrierDivergence);
    assert!(
        e.message
            .contains("thread (32, 0, 0) (warp 1) ended without reaching it"),
        "{}",
        e.message
    );
    // Two barriers, one per warp.
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let t = thread_idx().x;
            if t < 32 { sync_threads(); } else { y[t] = 1; sync_threads(); }
        }",
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 64])]);
    assert_eq!(e.kind, ErrorKind::BarrierDivergence);
    assert!(
        e.message
            .contains("waits at another, statement 2 of the else-branch"),
        "{}",
        e.message
    );
    // A thread that returned before the barrier.
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let t = thread_idx().x;
            if t >= 40 { return; }
            sync_threads();
            y[t] = t;
        }",
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 64])]);
    assert_eq!(e.kind, ErrorKind::BarrierDivergence);
    assert!(
        e.message
            .contains("thread (40, 0, 0) of this warp has returned"),
        "{}",
        e.message
    );
    // Block-uniform early returns are fine.
    let k = kernel(
        "fn k(y: &mut [u32], n: u32) {
            let t = thread_idx().x;
            if block_idx().x >= n { return; }
            sync_threads();
            y[block_idx().x * 64 + t] = t;
        }",
    );
    let mut args = [Arg::from(vec![7u32; 192]), Arg::from(2u32)];
    run1(&k, 3, 64, &mut args).unwrap();
    assert_eq!(args[0].as_u32().unwrap()[64 + 5], 5);
    assert_eq!(args[0].as_u32().unwrap()[128 + 5], 7);
}

#[test]
fn a_shuffle_in_divergent_code_or_past_a_partial_warp_is_an_error() {
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let t = thread_idx().x;
            let mut v = t;
            if t < 16 { v = shfl_xor(v, 1); }
            y[t] = v;
        }",
    );
    let e = err1(&k, 1, 32, &mut [Arg::from(vec![0u32; 32])]);
    assert_eq!(e.kind, ErrorKind::WarpDivergence);
    assert!(
        e.message.contains("`shfl_xor` is warp-collective"),
        "{}",
        e.message
    );
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let t = thread_idx().x;
            y[t] = shfl_xor(t, 16);
        }",
    );
    let e = err1(&k, 1, 48, &mut [Arg::from(vec![0u32; 48])]);
    assert_eq!(e.kind, ErrorKind::WarpDivergence);
    assert_eq!(e.thread, Some([32, 0, 0]));
    assert!(
        e.message
            .contains("reads lane 16, which this warp does not have"),
        "{}",
        e.message
    );
}

#[test]
fn an_infinite_loop_ends_with_a_step_budget_error() {
    let k = kernel(
        "fn spin(y: &mut [u32]) {
            let mut i = 0u32;
            while i < 10 { y[0] = i; }
        }",
    );
    let launch = Launch::new([1, 1, 1], [32, 1, 1]).max_steps(100_000);
    let e = interpret(&k, &launch, &mut [Arg::from(vec![0u32; 1])]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::StepBudget);
    assert!(
        e.message
            .starts_with("kernel `spin`, block (0, 0, 0), warp 0"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("more than 100000 thread-steps"),
        "{}",
        e.message
    );
}

#[test]
fn uninitialized_reads_and_division_by_zero_are_errors() {
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let mut s: [u32; 64] = shared();
            let t = thread_idx().x;
            if t > 0 { s[t] = t; }
            sync_threads();
            y[t] = s[63 - t] + 1;
        }",
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 64])]);
    assert_eq!(
        (e.kind, e.thread),
        (ErrorKind::Uninitialized, Some([63, 0, 0]))
    );
    assert!(
        e.message.contains("reads shared `s[63 - t]` (bytes 0..4"),
        "{}",
        e.message
    );
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let mut r: [u32; 2];
            r[0] = 1;
            y[thread_idx().x] = r[0] + r[1];
        }",
    );
    let e = err1(&k, 1, 1, &mut [Arg::from(vec![0u32; 1])]);
    assert_eq!(e.kind, ErrorKind::Uninitialized);
    assert!(
        e.message.contains("reads `r[1]`, which holds no value"),
        "{}",
        e.message
    );
    // A plain copy carries "no value" along: into a register it is fine (a
    // prefetch the kernel discards), into global memory an error.
    let k = kernel(
        "fn k(y: &mut [u32], n: u32) {
            let mut s: [u32; 64] = shared();
            let t = thread_idx().x;
            if t < 48 { s[t] = t; }
            sync_threads();
            let next = s[(t + 1) % 48];
            let unused = s[(t + 64 - n) % 64];
            y[t] = next;
            if n > 1 { y[t] = unused; }
        }",
    );
    let mut args = [Arg::from(vec![0u32; 64]), Arg::from(1u32)];
    run1(&k, 1, 64, &mut args).unwrap();
    assert_eq!(args[0].as_u32().unwrap()[50], 51 % 48);
    let mut args = [Arg::from(vec![0u32; 64]), Arg::from(40u32)];
    let e = err1(&k, 1, 64, &mut args);
    assert_eq!(
        (e.kind, e.thread),
        (ErrorKind::Uninitialized, Some([24, 0, 0]))
    );
    assert!(
        e.message.contains("stores to `y[t]` a value nothing wrote"),
        "{}",
        e.message
    );
    // ldmatrix of shared memory nothing wrote loads "no value"; an mma on it
    // is the error, naming the fragment.
    let k = kernel(
        "fn k(y: &mut [f32], go: u32) {
            let mut tile: [[f16; 16]; 16] = shared();
            let l = lane_id();
            if l < 8 { tile[l][0] = 1.0 as f16; }
            sync_threads();
            let mut fa = [0u32; 4];
            let mut fb = [0u32; 2];
            let mut acc = [0.0f32; 4];
            ldmatrix_x4(&mut fa, &tile[l % 16][l / 16 * 8]);
            if go == 1 { mma_m16n8k16_f16(&mut acc, &fa, &fb); }
            y[l] = acc[0];
        }",
    );
    run1(&k, 1, 32, &mut [Arg::from(vec![0f32; 32]), Arg::from(0u32)]).unwrap();
    let e = err1(&k, 1, 32, &mut [Arg::from(vec![0f32; 32]), Arg::from(1u32)]);
    assert_eq!(
        (e.kind, e.thread),
        (ErrorKind::Uninitialized, Some([0, 0, 0]))
    );
    assert!(
        e.message.contains(
            "`mma_m16n8k16_f16` reads its A fragment `fa`, whose register 0 holds no value"
        ),
        "{}",
        e.message
    );
    // A value no lane takes is not read; with the check off, reads give zero.
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let mut r: [u32; 2];
            r[0] = 1;
            let t = thread_idx().x;
            y[t] = if t > 100 { r[1] } else { r[0] + 4 };
        }",
    );
    let mut args = [Arg::from(vec![0u32; 8])];
    run1(&k, 1, 8, &mut args).unwrap();
    assert_eq!(args[0].as_u32().unwrap(), &[5; 8]);
    let k = kernel(
        "fn k(y: &mut [u32]) {
            let mut s: [u32; 8] = shared();
            let mut r: [u32; 2];
            y[thread_idx().x] = s[thread_idx().x] + r[1] + 3;
        }",
    );
    let mut args = [Arg::from(vec![7u32; 8])];
    let launch = Launch::new([1, 1, 1], [8, 1, 1]).check_uninitialized(false);
    interpret(&k, &launch, &mut args).unwrap();
    assert_eq!(args[0].as_u32().unwrap(), &[3; 8]);
    let k = kernel(
        "fn k(y: &mut [u32], d: u32) {
            y[thread_idx().x] = 10 / (d - thread_idx().x);
        }",
    );
    let e = err1(&k, 1, 8, &mut [Arg::from(vec![0u32; 8]), Arg::from(5u32)]);
    assert_eq!(
        (e.kind, e.thread),
        (ErrorKind::DivisionByZero, Some([5, 0, 0]))
    );
}

#[test]
fn hopper_constructs_are_unsupported_errors_naming_them() {
    let k = variant(
        "arch(sm_90), block(32)",
        "fn k(y: &mut [u32]) {
            let mut bar: [u64; 1] = shared();
            if thread_idx().x == 0 {
                mbarrier_init(&mut bar[0], 32);
                fence_mbarrier_init();
            }
            sync_threads();
            y[thread_idx().x] = 1;
        }",
        &[],
    );
    let e = err1(&k, 1, 32, &mut [Arg::from(vec![0u32; 32])]);
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert_eq!(e.thread, None, "the warp, not one thread");
    assert!(
        e.message
            .contains("`mbarrier_init` (an sm_90 mbarrier operation) is not interpreted"),
        "{}",
        e.message
    );
}

#[test]
fn launches_and_arguments_are_checked_before_the_run() {
    let k = variant(
        "arch(sm_80), block(64), requires(y.len() >= 64)",
        "fn k(y: &mut [u32], n: u32) { y[thread_idx().x] = n; }",
        &[],
    );
    let mut good = vec![Arg::from(vec![0u32; 64]), Arg::from(3u32)];
    let e = err1(&k, 1, 32, &mut good);
    assert_eq!(e.kind, ErrorKind::InvalidLaunch);
    assert!(
        e.message
            .contains("written for blocks of (64, 1, 1) threads"),
        "{}",
        e.message
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0u32; 8]), Arg::from(3u32)]);
    assert!(
        e.message.contains("fails `requires(y.len() >= 64)`"),
        "{}",
        e.message
    );
    let e = err1(&k, 1, 64, &mut [Arg::from(vec![0f32; 64]), Arg::from(3u32)]);
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(
        e.message
            .contains("parameter `y` is a `&mut [u32]`, but its argument is a slice of `f32`"),
        "{}",
        e.message
    );
    let e = err1(
        &k,
        1,
        64,
        &mut [Arg::from(vec![0u32; 64]), Arg::Scalar(Literal::Int(-1))],
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let e = err1(&k, 0, 64, &mut good);
    assert_eq!(e.kind, ErrorKind::InvalidLaunch);
    run1(&k, 1, 64, &mut good).unwrap();
    assert_eq!(good[0].as_u32().unwrap(), &[3u32; 64][..]);
}

#[test]
fn a_variant_of_a_definition_is_specialized_and_checked_first() {
    let def = parse_kernel_str(
        "arch(sm_80), tune(N = [1, 2, 3]), constrain(N != 2)",
        "fn k<const N: u32>(y: &mut [u32]) {
            #[unroll]
            for j in 0..N { y[thread_idx().x * N + j] = j + 10; }
        }",
    )
    .unwrap();
    let launch = Launch::new([1, 1, 1], [4, 1, 1]);
    let mut args = [Arg::from(vec![0u32; 12])];
    interpret_variant(&def, &[3], &launch, &mut args).unwrap();
    assert_eq!(args[0].as_u32().unwrap(), &[10, 11, 12].repeat(4)[..]);
    let e = interpret_variant(&def, &[2], &launch, &mut args).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidKernel);
    assert!(
        e.message.contains("fails `constrain(N != 2)`"),
        "{}",
        e.message
    );
}

#[test]
fn non_finite_floats_are_errors_only_when_asked() {
    let k = kernel(
        "fn scale(a: f32, x: &[f32], y: &mut [f32]) {
            let i = thread_idx().x;
            y[i] = a * x[i] + 1.0;
        }",
    );
    let launch = Launch::new([1, 1, 1], [2, 1, 1]);
    let args = |x: [f32; 2]| vec![Arg::from(2.0f32), x.to_vec().into(), vec![0.0f32; 2].into()];

    // Off (the default), IEEE: the infinity goes through and is stored.
    let mut off = args([1.0, f32::INFINITY]);
    interpret(&k, &launch, &mut off).unwrap();
    assert_eq!(off[2].as_f32().unwrap(), &[3.0, f32::INFINITY]);

    // On: the operand is the error, named with its thread and statement.
    let checked = launch.clone().check_non_finite(true);
    let e = interpret(&k, &checked, &mut args([1.0, f32::INFINITY])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NonFinite);
    assert_eq!(e.thread, Some([1, 0, 0]));
    // A result that overflows to infinity is one too.
    let e = interpret(&k, &checked, &mut args([1.0, f32::MAX])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NonFinite, "{e}");
    // Finite everywhere: the same values as with the check off.
    let mut finite = args([1.0, -2.5]);
    interpret(&k, &checked, &mut finite).unwrap();
    assert_eq!(finite[2].as_f32().unwrap(), &[3.0, -4.0]);
}

// ---- the byte-level API a host holding memory as bytes uses ----

#[test]
fn buffers_round_trip_through_their_bytes() {
    let values = vec![1.5f32, -0.0, f32::INFINITY, 3.0e-40];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let buffer = Buffer::from_bytes(Scalar::F32, &bytes).unwrap();
    assert_eq!(buffer, Buffer::F32(values));
    assert_eq!(buffer.to_bytes(), bytes);
    let halves = Buffer::from_bytes(Scalar::F16, &[0x00, 0x3c, 0x00, 0xc0]).unwrap();
    assert_eq!(
        halves,
        Buffer::F16(vec![half::f16::from_f32(1.0), half::f16::from_f32(-2.0)])
    );
    let ints = Buffer::from_bytes(Scalar::I64, &(-7i64).to_le_bytes()).unwrap();
    assert_eq!(ints, Buffer::I64(vec![-7]));
}

#[test]
fn bytes_the_interpreter_cannot_hold_are_refused() {
    let err = Buffer::from_bytes(Scalar::E4m3, &[0x38]).unwrap_err();
    assert!(
        err.message.contains("e4m3") && err.message.contains("f16"),
        "{err}"
    );
    let err = Buffer::check_elem(Scalar::E5m2).unwrap_err();
    assert!(err.message.contains("e5m2"), "{err}");
    assert_eq!(Buffer::check_elem(Scalar::Bf16), Ok(()));
    let err = Buffer::from_bytes(Scalar::U32, &[1, 2, 3]).unwrap_err();
    assert!(
        err.message.contains("3 bytes") && err.message.contains("u32"),
        "{err}"
    );
}

#[test]
fn a_variant_specialized_once_runs_and_reports_its_shared_memory() {
    let def = parse_kernel_str(
        "arch(sm_80), tune(N = [32, 64]), constrain(N > 32)",
        "fn stage<const N: u32>(x: &[f32], y: &mut [f32]) {
            let mut a: [f32; N] = shared();
            let mut b: [u8; 3] = shared();
            let t = thread_idx().x;
            a[t] = x[t];
            b[0] = 1;
            sync_threads();
            y[t] = a[N - 1 - t];
        }",
    )
    .unwrap();
    let kernel = specialize_variant(&def, &[64]).unwrap();
    // 256 bytes of `a`, then `b` at the next 128-byte boundary.
    assert_eq!(shared_bytes(&kernel), Ok(256 + 3));
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let mut args = vec![Arg::from(x), Arg::from(vec![0f32; 64])];
    run1(&kernel, 1, 64, &mut args).unwrap();
    assert_eq!(args[1].as_f32().unwrap()[0], 63.0);
    let err = specialize_variant(&def, &[32]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidKernel, "{err}");
    assert!(err.message.contains("constrain(N > 32)"), "{err}");
    let err = shared_bytes(&def.ir).unwrap_err();
    assert!(err.message.contains("specialize"), "{err}");
}
