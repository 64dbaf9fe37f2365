//! The interpreter as an oracle: stock kernels (the inputs under
//! `tests/in` and kernels of `kernels/src`) run on random inputs and are
//! compared with straightforward host references, exactly for integers and
//! for float results whose operations the reference repeats in order, within
//! a tolerance otherwise.

mod common;

use warpforge_codegen::interp::{interpret, Arg, Buffer, Launch};
use warpforge_codegen::specialize::specialize;
use warpforge_codegen::{Kernel, KernelDef};

use half::{bf16, f16};

/// A deterministic pseudo-random sequence (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    fn float(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A small integer in `-k..=k`.
    fn small(&mut self, k: u64) -> i64 {
        (self.next() % (2 * k + 1)) as i64 - k as i64
    }
}

fn input(name: &str) -> String {
    std::fs::read_to_string(common::tests_dir().join("in").join(format!("{name}.rs")))
        .unwrap_or_else(|e| panic!("tests/in/{name}.rs: {e}"))
}

/// The kernel `name` of a stock kernel file `kernels/src/<file>`: its
/// `#[kernel(..)]` attribute and function, cut out of the module.
fn stock(file: &str, name: &str) -> KernelDef {
    let path = common::tests_dir().join("../../kernels/src").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let at = text
        .find(&format!("pub fn {name}"))
        .unwrap_or_else(|| panic!("{file} has no `pub fn {name}`"));
    let start = text[..at].rfind("#[kernel").expect("a #[kernel] attribute");
    let open = at + text[at..].find('{').expect("a body");
    let mut depth = 0;
    let mut end = open;
    for (i, ch) in text[open..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            end = open + i;
            break;
        }
    }
    parse(&text[start..=end])
}

fn parse(source: &str) -> KernelDef {
    common::parse_source(source).unwrap_or_else(|e| panic!("the front rejects it:\n{e}"))
}

fn variant(def: &KernelDef, consts: &[i64]) -> Kernel {
    specialize(&def.ir, consts).unwrap_or_else(|e| panic!("{}", e.message))
}

fn run(kernel: &Kernel, grid: [u32; 3], block: [u32; 3], args: &mut [Arg]) {
    if let Err(e) = interpret(kernel, &Launch::new(grid, block), args) {
        panic!("{e}");
    }
}

/// `got` within `tol` (relative to `scale`, at least 1) of `want`, both NaN allowed.
fn close(got: f32, want: f64, scale: f64, tol: f64) -> bool {
    (got.is_nan() && want.is_nan()) || (got as f64 - want).abs() <= tol * scale.max(1.0)
}

#[test]
fn saxpy_is_exact() {
    let k = variant(&parse(&input("saxpy")), &[]);
    let mut rng = Rng(1);
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|_| rng.float()).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.float()).collect();
    let mut args = vec![Arg::from(1.5f32), x.clone().into(), y.clone().into()];
    run(&k, [4, 1, 1], [256, 1, 1], &mut args);
    let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 1.5 * x + y).collect();
    assert_eq!(args[2].as_f32().unwrap(), &want[..]);
}

#[test]
fn block_reduce_sums_by_its_tree_and_atomics() {
    let k = variant(&parse(&input("block_reduce")), &[]);
    let mut rng = Rng(2);
    let x: Vec<f32> = (0..1000).map(|_| rng.float()).collect();
    let mut args = vec![x.clone().into(), Arg::from(vec![0f32; 1])];
    run(&k, [4, 1, 1], [256, 1, 1], &mut args);
    // The same tree per block, the blocks' atomics in block order.
    let mut total = 0f32;
    for b in 0..4 {
        let mut p: Vec<f32> = (0..256)
            .map(|t| x.get(b * 256 + t).copied().unwrap_or(0.0))
            .collect();
        let mut stride = 128;
        while stride > 0 {
            for t in 0..stride {
                p[t] += p[t + stride];
            }
            stride /= 2;
        }
        total += p[0];
    }
    assert_eq!(args[1].as_f32().unwrap(), &[total]);
}

#[test]
fn stock_block_sum_and_histogram() {
    let def = stock("reduce.rs", "block_sum");
    let mut rng = Rng(3);
    let x: Vec<f32> = (0..3000).map(|_| rng.float()).collect();
    for threads in [128i64, 256] {
        let k = variant(&def, &[threads]);
        let t = threads as usize;
        let blocks = 3;
        let mut args = vec![x.clone().into(), Arg::from(vec![0f32; blocks])];
        run(&k, [blocks as u32, 1, 1], [t as u32, 1, 1], &mut args);
        for b in 0..blocks {
            let mut sums: Vec<f32> = (0..t)
                .map(|tid| {
                    let mut acc = 0f32;
                    for i in (b * t + tid..x.len()).step_by(blocks * t) {
                        acc += x[i];
                    }
                    acc
                })
                .collect();
            let mut half = t / 2;
            while half > 0 {
                for tid in 0..half {
                    sums[tid] += sums[tid + half];
                }
                half /= 2;
            }
            assert_eq!(
                args[1].as_f32().unwrap()[b],
                sums[0],
                "THREADS={threads} block {b}"
            );
        }
    }
    let def = stock("simple.rs", "histogram");
    let values: Vec<u32> = (0..5000).map(|_| rng.next() as u32).collect();
    for bins in [64u32, 256] {
        let k = variant(&def, &[bins as i64]);
        let mut args = vec![values.clone().into(), Arg::from(vec![0u32; bins as usize])];
        run(&k, [3, 1, 1], [256, 1, 1], &mut args);
        let mut want = vec![0u32; bins as usize];
        for v in &values {
            want[(v % bins) as usize] += 1;
        }
        assert_eq!(args[1].as_u32().unwrap(), &want[..], "BINS={bins}");
    }
}

#[test]
fn gemm_simt_is_exact_on_ragged_shapes() {
    let def = parse(&input("gemm_simt"));
    let consts = &def.variants()[0];
    let k = variant(&def, consts);
    let (m, n, kk) = (70usize, 50usize, 37usize);
    let mut rng = Rng(4);
    let a: Vec<f32> = (0..m * kk).map(|_| rng.float()).collect();
    let b: Vec<f32> = (0..kk * n).map(|_| rng.float()).collect();
    let mut args = vec![
        a.clone().into(),
        b.clone().into(),
        Arg::from(vec![f32::NAN; m * n]),
        Arg::from(m as u32),
        Arg::from(n as u32),
        Arg::from(kk as u32),
    ];
    // BM = BN = 64, TM = TN = 4: 256 threads, a 64 x 64 tile per block.
    run(&k, [1, 2, 1], [256, 1, 1], &mut args);
    let c = args[2].as_f32().unwrap();
    for r in 0..m {
        for col in 0..n {
            // One fused multiply-add per k, in order; the zero padding adds nothing.
            let mut acc = 0f32;
            for i in 0..kk {
                acc = a[r * kk + i].mul_add(b[i * n + col], acc);
            }
            assert_eq!(c[r * n + col], acc, "C[{r}][{col}]");
        }
    }
}

fn softmax_reference(x: &[f32], cols: usize, row: usize) -> Vec<f64> {
    let xs = &x[row * cols..(row + 1) * cols];
    let m = xs.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let s: f64 = xs.iter().map(|&v| (v as f64 - m).exp()).sum();
    xs.iter().map(|&v| (v as f64 - m).exp() / s).collect()
}

#[test]
fn softmax_with_warp_shuffles_and_shared_memory() {
    let mut rng = Rng(5);
    let (rows, cols) = (3usize, 300usize);
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.float() * 8.0).collect();
    let check = |y: &[f32], what: &str| {
        for r in 0..rows {
            let want = softmax_reference(&x, cols, r);
            for c in 0..cols {
                assert!(
                    close(y[r * cols + c], want[c], 0.0, 1e-6),
                    "{what}: y[{r}][{c}] = {} vs {}",
                    y[r * cols + c],
                    want[c]
                );
            }
        }
    };
    // The stock kernel: shuffles within warps, shared memory and barriers
    // across them, or a shared-memory tree alone.
    let def = stock("softmax.rs", "softmax_rows");
    for shuffle in [1, 0] {
        let k = variant(&def, &[128, shuffle]);
        let mut args = vec![
            x.clone().into(),
            Arg::from(vec![0f32; rows * cols]),
            Arg::from(rows as u32),
            Arg::from(cols as u32),
        ];
        // One block more than rows: it returns at once, block-uniformly.
        run(&k, [rows as u32 + 1, 1, 1], [128, 1, 1], &mut args);
        check(
            args[1].as_f32().unwrap(),
            &format!("softmax_rows WARP_SHUFFLE={shuffle}"),
        );
    }
}

/// The `softmax_row` input reduces the row's max and sum by butterflies of
/// `shfl_xor` (offsets 16, 8, 4, 2, 1), so every lane holds both: every
/// column is the row's softmax, on rows wider than the warp and narrower.
#[test]
fn softmax_row_by_butterfly_shuffles() {
    let k = variant(&parse(&input("softmax_row")), &[]);
    let mut rng = Rng(5);
    for (rows, cols) in [(3usize, 300usize), (2, 20)] {
        let x: Vec<f32> = (0..rows * cols).map(|_| rng.float() * 8.0).collect();
        let mut args = vec![
            x.clone().into(),
            Arg::from(vec![0f32; rows * cols]),
            Arg::from(cols as u32),
        ];
        run(&k, [rows as u32, 1, 1], [32, 1, 1], &mut args);
        let y = args[1].as_f32().unwrap();
        for r in 0..rows {
            let want = softmax_reference(&x, cols, r);
            for c in 0..cols {
                assert!(
                    close(y[r * cols + c], want[c], 0.0, 1e-6),
                    "{rows}x{cols}: y[{r}][{c}] = {} vs {}",
                    y[r * cols + c],
                    want[c]
                );
            }
        }
    }
}

#[test]
fn control_flow_matches_its_rust_reading() {
    let k = variant(&parse(&input("control_flow")), &[]);
    let mut rng = Rng(6);
    let x: Vec<i32> = (0..24).map(|_| rng.small(9) as i32).collect();
    let (n, limit) = (20u32, 30i32);
    let mut args = vec![
        x.clone().into(),
        Arg::from(vec![i32::MIN; 32]),
        Arg::from(n),
        Arg::from(limit),
    ];
    run(&k, [1, 1, 1], [32, 1, 1], &mut args);
    let y = args[1].as_i32().unwrap();
    for i in 0..32u32 {
        if i >= n {
            assert_eq!(y[i as usize], i32::MIN, "thread {i} returned");
            continue;
        }
        let mut total = 0i32;
        for r in 0..n {
            if r == i {
                continue;
            }
            for c in (r..n).step_by(3) {
                if c > 2 * r + 7 {
                    break;
                }
                if (c as usize) < x.len() && x[c as usize] > 0 || c == 0 && total < limit {
                    total += x[c as usize];
                }
            }
            if total > limit {
                break;
            }
        }
        let mut k = 0i32;
        loop {
            k += 1;
            if k >= limit {
                break;
            }
        }
        let mut j = 10i32;
        while j > 0 && j != 5 {
            j -= 1;
        }
        for d in (-8i32..8).step_by(4) {
            total += d;
        }
        let want = if total > 0 {
            total
        } else if k > 3 {
            k
        } else {
            j
        };
        assert_eq!(y[i as usize], want, "thread {i}");
    }
}

#[test]
fn atomics_reach_their_order_independent_results() {
    let k = variant(&parse(&input("atomics")), &[]);
    let n = 80;
    let mut args = vec![
        Arg::from(vec![9i32; n]),
        Arg::from(vec![10u32; n]),
        Arg::from(vec![0i64; n]),
        Arg::from(vec![3u64; n]),
        Arg::from(vec![0f32; n]),
        Arg::from(vec![1f64; n]),
    ];
    run(&k, [1, 1, 1], [64, 1, 1], &mut args);
    let xi = args[0].as_i32().unwrap();
    assert_eq!(&xi[..5], &[9 + 64, -3, 9, 9 & 6, 9 | 7]);
    for t in 0..64 {
        assert_eq!(xi[t + 8], if t < 8 { 8 } else { 0 }, "si[{t}]");
        let xu = args[1].as_u32().unwrap();
        if t > 0 {
            assert_eq!(
                xu[t + 8],
                if t < 32 { 2 * t as u32 + 1 } else { 0 },
                "su[{t}]"
            );
        }
        let xd = args[5].as_f64().unwrap();
        assert_eq!(xd[t + 8], if t < 4 { 16.0 } else { 0.0 }, "sd[{t}]");
        if t < 8 {
            assert_eq!(xd[t], 1.25);
        }
    }
}

#[test]
fn fence_gpu_hands_block_0s_writes_to_the_blocks_after_it() {
    let k = variant(&parse(&input("fence_gpu")), &[]);
    let blocks = 4;
    let mut args = vec![
        Arg::from(vec![0u32; 32]),
        Arg::from(vec![0u32; 1]),
        Arg::from(vec![0u32; 32 * blocks]),
    ];
    run(&k, [blocks as u32, 1, 1], [32, 1, 1], &mut args);
    let data: Vec<u32> = (0..32).map(|t| t * 3 + 1).collect();
    assert_eq!(args[0].as_u32().unwrap(), &data[..]);
    assert_eq!(args[1].as_u32().unwrap(), &[32]);
    let out = args[2].as_u32().unwrap();
    assert_eq!(&out[..32], &[0; 32], "block 0 writes no output");
    for b in 1..blocks {
        for t in 0..32 {
            assert_eq!(out[b * 32 + t], data[(t + 1) % 32], "block {b}, thread {t}");
        }
    }
}

#[test]
fn pipelines_of_async_copies_over_every_stage_count() {
    let mut rng = Rng(7);
    // pipelined_sum: thread `tid` sums elements tid + 128 e of every tile,
    // copied by other threads; past the end the copies zero-fill.
    let def = parse(&input("pipelined_sum"));
    let x: Vec<f16> = (0..3064)
        .map(|_| f16::from_f32(rng.small(50) as f32 / 8.0))
        .collect();
    for stages in [2i64, 4] {
        let k = variant(&def, &[stages]);
        let mut args = vec![x.clone().into(), Arg::from(vec![0f32; 128])];
        run(&k, [1, 1, 1], [128, 1, 1], &mut args);
        for tid in 0..128 {
            let mut sum = 0f32;
            for tile in 0..3 {
                for e in 0..8 {
                    sum += x
                        .get(tile * 1024 + tid + e * 128)
                        .map_or(0.0, |v| v.to_f32());
                }
            }
            assert_eq!(
                args[1].as_f32().unwrap()[tid],
                sum,
                "STAGES={stages} thread {tid}"
            );
        }
    }
    // async_pipeline: a copy through the ring, zero-filled past x.
    let def = parse(&input("async_pipeline"));
    let x: Vec<f32> = (0..1500).map(|_| rng.float()).collect();
    for stages in [1i64, 3] {
        let k = variant(&def, &[stages]);
        let mut args = vec![
            x.clone().into(),
            Arg::from(vec![f32::NAN; 1536]),
            Arg::from(3u32),
        ];
        run(&k, [1, 1, 1], [128, 1, 1], &mut args);
        let y = args[1].as_f32().unwrap();
        for (i, &v) in y.iter().enumerate() {
            assert_eq!(
                v,
                x.get(i).copied().unwrap_or(0.0),
                "STAGES={stages} y[{i}]"
            );
        }
    }
    // The stock stream_scale, over every stage count and a partial last chunk.
    let def = stock("stream.rs", "stream_scale");
    let x: Vec<f32> = (0..2563).map(|_| rng.float()).collect();
    for stages in 1..=5i64 {
        let k = variant(&def, &[128, stages]);
        let mut args = vec![
            x.clone().into(),
            Arg::from(vec![f32::NAN; x.len()]),
            Arg::from(-2.5f32),
        ];
        run(&k, [2, 1, 1], [128, 1, 1], &mut args);
        let want: Vec<f32> = x.iter().map(|v| -2.5 * v).collect();
        assert_eq!(args[1].as_f32().unwrap(), &want[..], "STAGES={stages}");
    }
}

#[test]
fn variants_unroll_and_fold_their_constants() {
    let def = parse(&input("variants"));
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    for consts in def.variants() {
        let k = variant(&def, &consts);
        let (n, scale) = (consts[0] as usize, consts[1] == 1);
        let mut args = vec![x.clone().into(), Arg::from(3.0f32)];
        run(&k, [2, 1, 1], [(64 / n / 2) as u32, 1, 1], &mut args);
        let want: Vec<f32> = x
            .iter()
            .map(|v| if scale { v * 3.0 } else { v + 3.0 })
            .collect();
        assert_eq!(args[0].as_f32().unwrap(), &want[..], "{consts:?}");
    }
}

/// The `m x n` product of `a(row, k)` and `b(k, col)` in f64, row-major: each
/// element's sum and the sum of its terms' magnitudes.
fn product(
    m: usize,
    n: usize,
    k: usize,
    a: impl Fn(usize, usize) -> f64,
    b: impl Fn(usize, usize) -> f64,
) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(m * n);
    for r in 0..m {
        for c in 0..n {
            let terms: Vec<f64> = (0..k).map(|i| a(r, i) * b(i, c)).collect();
            out.push((terms.iter().sum(), terms.iter().map(|t| t.abs()).sum()));
        }
    }
    out
}

/// A is one 16-byte chunk short of its 16x16 tile: the last copy reads
/// nothing (from element 0) and zero-fills its 16 bytes.
fn tensor_core_args(rng: &mut Rng) -> Vec<Arg> {
    let a: Vec<f16> = (0..248)
        .map(|_| f16::from_f32(rng.small(4) as f32))
        .collect();
    let b: Vec<f16> = (0..128)
        .map(|_| f16::from_f32(rng.small(4) as f32))
        .collect();
    // -1, 0 or 1: the operand word built by XOR-ing f16 and bf16 bits then has
    // a small exponent (wider values can make it infinite).
    let x: Vec<f32> = (0..128).map(|_| rng.small(1) as f32).collect();
    let q: Vec<i8> = (0..512).map(|_| rng.next() as i8).collect();
    vec![
        a.into(),
        b.into(),
        x.into(),
        q.into(),
        Arg::from(vec![0f32; 128]),
        Arg::from(vec![0i32; 128]),
    ]
}

#[test]
fn mma_sync_of_every_type_through_ldmatrix_and_cp_async() {
    let k = variant(&parse(&input("tensor_core")), &[]);
    let mut args = tensor_core_args(&mut Rng(8));
    let a = args[0].as_f16().unwrap().to_vec();
    let b = args[1].as_f16().unwrap().to_vec();
    let x = args[2].as_f32().unwrap().to_vec();
    let q = args[3].as_i8().unwrap().to_vec();
    run(&k, [1, 1, 1], [32, 1, 1], &mut args);
    // The tile: a, then the chunk the last copy zero-filled.
    let a: Vec<f16> = (0..256)
        .map(|i| a.get(i).copied().unwrap_or(f16::ZERO))
        .collect();
    let as_bf16 = |h: f16| bf16::from_bits(h.to_bits()).to_f64();
    let tf32 = |bits: u32| f32::from_bits(bits & !0x1fff) as f64;
    let round_tf32 = |v: f32| f32::from_bits((v.to_bits() + 0x1000) & !0x1fff).to_bits();
    // f16: A = a (16 x 16), B[k][n] = b_tile[n][k] (ldmatrix of b's rows).
    let d0 = product(
        16,
        8,
        16,
        |r, i| a[r * 16 + i].to_f64(),
        |i, c| b[c * 16 + i].to_f64(),
    );
    // bf16 on the same bits: B[k][n] = a_tile[k][n] (ldmatrix.trans of a's rows).
    let d1 = product(
        16,
        8,
        16,
        |r, i| as_bf16(a[r * 16 + i]),
        |i, c| as_bf16(a[i * 16 + c]),
    );
    // tf32: A[r][c] = x[8 r + c]; B rows 0..4 from x, rows 4..8 packed bits.
    let word = |t: usize, g: usize| {
        let pf =
            f16::from_f32(x[g]).to_bits() as u32 | (f16::from_f32(x[t]).to_bits() as u32) << 16;
        let pb =
            bf16::from_f32(x[t]).to_bits() as u32 | (bf16::from_f32(x[g]).to_bits() as u32) << 16;
        pf ^ pb
    };
    let d2 = product(
        16,
        8,
        8,
        |r, i| tf32(round_tf32(x[r * 8 + i])),
        |i, c| {
            if i < 4 {
                tf32(round_tf32(x[i * 8 + c]))
            } else {
                tf32(word(i - 4, c))
            }
        },
    );
    let c = args[4].as_f32().unwrap();
    let d = args[5].as_i32().unwrap();
    for l in 0..32 {
        let (g, t) = (l / 4, l % 4);
        for i in 0..4 {
            let (r, col) = (g + 8 * (i / 2), 2 * t + i % 2);
            let e = r * 8 + col;
            let want = d0[e].0 + d1[e].0 + d2[e].0;
            let scale = d0[e].1 + d1[e].1 + d2[e].1;
            assert!(
                close(c[l * 4 + i], want, scale, 1e-6),
                "C[{r}][{col}] = {} vs {want}",
                c[l * 4 + i]
            );
            // s8 then u8 on the same bytes: A = q (16 x 32), B[k][n] = q_tile[n][k].
            let mut acc = 0i32;
            for kk in 0..32 {
                let (qa, qb) = (q[r * 32 + kk], q[col * 32 + kk]);
                acc = acc.wrapping_add(qa as i32 * qb as i32);
                acc = acc.wrapping_add(qa as u8 as i32 * qb as u8 as i32);
            }
            assert_eq!(d[l * 4 + i], acc, "D[{r}][{col}]");
        }
    }
}

fn sparse_args(rng: &mut Rng) -> (Vec<Arg>, Vec<u32>) {
    const LEGAL: [u32; 6] = [0x4, 0x8, 0x9, 0xc, 0xd, 0xe];
    // Exactly the 16x32 compressed tile.
    let a: Vec<f16> = (0..512)
        .map(|_| f16::from_f32(rng.small(4) as f32))
        .collect();
    let b: Vec<f16> = (0..512)
        .map(|_| f16::from_f32(rng.small(4) as f32))
        .collect();
    let meta: Vec<u32> = (0..32)
        .map(|_| (0..8).fold(0u32, |w, j| w | LEGAL[(rng.next() % 6) as usize] << (4 * j)))
        .collect();
    let args = vec![
        a.into(),
        b.into(),
        meta.clone().into(),
        Arg::from(vec![0f32; 128]),
    ];
    (args, meta)
}

#[test]
fn sparse_mma_in_both_forms_decompresses_by_the_metadata() {
    let def = parse(&input("sparse_mma"));
    for consts in def.variants() {
        let k = variant(&def, &consts);
        let (mut args, meta) = sparse_args(&mut Rng(9));
        let a = args[0].as_f16().unwrap().to_vec();
        let b = args[1].as_f16().unwrap().to_vec();
        run(&k, [1, 1, 1], [32, 1, 1], &mut args);
        let as_bf16 = |h: f16| bf16::from_bits(h.to_bits()).to_f64();
        // Step s: compressed A[r][c] = a_tile[r][16 s + c]; the dense row r,
        // group j keeps its two values at the positions of its nibble, from
        // lane 4 (r % 8) + 2 s + j / 4, half r / 8.
        let dense = |s: usize, r: usize, kk: usize, value: &dyn Fn(f16) -> f64| {
            let (group, pos) = (kk / 4, kk % 4);
            let e = meta[4 * (r % 8) + 2 * s + group / 4];
            let nibble = (if r >= 8 { e >> 16 } else { e }) >> (4 * (group % 4)) & 0xf;
            let (i0, i1) = ((nibble & 3) as usize, (nibble >> 2) as usize);
            let kept = if pos == i0 {
                0
            } else if pos == i1 {
                1
            } else {
                return 0.0;
            };
            value(a[r * 32 + 16 * s + 2 * group + kept])
        };
        let c = args[3].as_f32().unwrap();
        for l in 0..32 {
            let (g, t) = (l / 4, l % 4);
            for i in 0..4 {
                let (r, col) = (g + 8 * (i / 2), 2 * t + i % 2);
                let (mut want, mut scale) = (0.0, 0.0);
                for s in 0..2 {
                    for kk in 0..32 {
                        let bv = b[col * 64 + 32 * s + kk];
                        for (av, bv) in [
                            (dense(s, r, kk, &|h: f16| h.to_f64()), bv.to_f64()),
                            (dense(s, r, kk, &as_bf16), as_bf16(bv)),
                        ] {
                            want += av * bv;
                            scale += (av * bv).abs();
                        }
                    }
                }
                assert!(
                    close(c[l * 4 + i], want, scale, 1e-6),
                    "{consts:?} C[{r}][{col}] = {} vs {want}",
                    c[l * 4 + i]
                );
            }
        }
    }
}

#[test]
fn wmma_multiplies_tiles_from_shared_and_global_memory() {
    let k = variant(&parse(&input("wmma")), &[]);
    let mut rng = Rng(10);
    let kk = 48usize;
    let a: Vec<f16> = (0..16 * kk)
        .map(|_| f16::from_f32(rng.small(3) as f32))
        .collect();
    // B column-major: element (k, n) at n * kk + k.
    let b: Vec<f16> = (0..16 * kk)
        .map(|_| f16::from_f32(rng.small(3) as f32))
        .collect();
    let c0: Vec<f32> = (0..256).map(|_| rng.small(20) as f32).collect();
    let mut args = vec![
        a.clone().into(),
        b.clone().into(),
        c0.clone().into(),
        Arg::from(kk as u32),
    ];
    run(&k, [1, 1, 1], [32, 1, 1], &mut args);
    let c = args[2].as_f32().unwrap();
    for r in 0..16 {
        for n in 0..16 {
            let sum: f32 = (0..kk)
                .map(|i| a[r * kk + i].to_f32() * b[n * kk + i].to_f32())
                .sum();
            assert_eq!(
                c[r * 16 + n],
                (c0[r * 16 + n] + sum).max(0.0),
                "C[{r}][{n}]"
            );
        }
    }
}

/// Every `#[device]` function of a stock kernel file, as source text.
fn device_functions(file: &str) -> Vec<String> {
    let path = common::tests_dir().join("../../kernels/src").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    for (at, _) in text.match_indices("#[device]") {
        let open = at + text[at..].find('{').expect("a body");
        let mut depth = 0;
        for (i, ch) in text[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                // Linked sources are device functions already: without the attribute.
                out.push(text[at + "#[device]".len()..=open + i].to_string());
                break;
            }
        }
    }
    out
}

/// The kernels (instances) of the stock kernel `name` of `kernels/src/<file>`,
/// linked to the device functions of `device_files`.
fn stock_instances(file: &str, name: &str, device_files: &[&str]) -> Vec<(String, KernelDef)> {
    let path = common::tests_dir().join("../../kernels/src").join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let at = text.find(&format!("pub fn {name}<")).unwrap();
    let start = text[..at].rfind("#[kernel").unwrap();
    let open = at + text[at..].find(") {").unwrap() + 2;
    let mut depth = 0;
    let mut end = open;
    for (i, ch) in text[open..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            end = open + i;
            break;
        }
    }
    let (attr, item) = common::split_kernel_source(&text[start..=end]);
    let functions: Vec<String> = device_files
        .iter()
        .flat_map(|f| device_functions(f))
        .collect();
    let functions: Vec<&str> = functions.iter().map(String::as_str).collect();
    warpforge_codegen::front::parse_instances_with_str(&attr, &item, &functions)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The first variant of `def` whose const params have the given values.
fn pick(def: &KernelDef, want: &[(&str, i64)]) -> Option<Vec<i64>> {
    let names: Vec<&str> = def
        .ir
        .const_params
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    def.variants().into_iter().find(|consts| {
        want.iter().all(|(name, v)| {
            names
                .iter()
                .position(|n| n == name)
                .is_none_or(|i| consts[i] == *v)
        })
    })
}

fn const_value(def: &KernelDef, consts: &[i64], name: &str) -> i64 {
    let i = def
        .ir
        .const_params
        .iter()
        .position(|c| c.name == name)
        .unwrap();
    consts[i]
}

/// One problem for the stock GEMMs: small integers, so that every type
/// computes it exactly.
struct Gemm {
    m: usize,
    n: usize,
    k: usize,
    batches: usize,
    /// A (batches x m x k) and B (batches x k x n), logically row-major.
    a: Vec<i64>,
    b: Vec<i64>,
    c0: Vec<i64>,
    bias: Vec<i64>,
    alpha: i64,
    beta: i64,
    /// 0: none, 1: per column.
    bias_mode: u32,
}

impl Gemm {
    fn new(
        rng: &mut Rng,
        (m, n, k): (usize, usize, usize),
        batches: usize,
        epilogue: bool,
    ) -> Gemm {
        Gemm {
            m,
            n,
            k,
            batches,
            a: (0..batches * m * k).map(|_| rng.small(3)).collect(),
            b: (0..batches * k * n).map(|_| rng.small(3)).collect(),
            c0: (0..batches * m * n).map(|_| rng.small(20)).collect(),
            bias: (0..n).map(|_| rng.small(20)).collect(),
            alpha: if epilogue { 2 } else { 1 },
            beta: if epilogue { -1 } else { 0 },
            bias_mode: epilogue as u32,
        }
    }

    fn want(&self, z: usize, r: usize, c: usize) -> i64 {
        let (m, n, k) = (self.m, self.n, self.k);
        let ab: i64 = (0..k)
            .map(|i| self.a[z * m * k + r * k + i] * self.b[z * k * n + i * n + c])
            .sum();
        let bias = if self.bias_mode == 1 { self.bias[c] } else { 0 };
        self.alpha * ab + self.beta * self.c0[z * m * n + r * n + c] + bias
    }

    /// Runs one variant (layouts from its consts, or `layouts` when they are
    /// run-time parameters) and compares every element of C.
    fn check(&self, name: &str, def: &KernelDef, consts: &[i64], layouts: (bool, bool)) {
        let kernel = variant(def, consts);
        let (m, n, k, z) = (self.m, self.n, self.k, self.batches);
        let (a_col, b_row) = layouts;
        let mut a_mem = vec![0i64; z * m * k];
        let mut b_mem = vec![0i64; z * k * n];
        for batch in 0..z {
            for r in 0..m {
                for i in 0..k {
                    let at = if a_col { i * m + r } else { r * k + i };
                    a_mem[batch * m * k + at] = self.a[batch * m * k + r * k + i];
                }
            }
            for i in 0..k {
                for c in 0..n {
                    let at = if b_row { i * n + c } else { c * k + i };
                    b_mem[batch * k * n + at] = self.b[batch * k * n + i * n + c];
                }
            }
        }
        let elem = match &kernel.params[0].ty {
            warpforge_codegen::ir::ParamType::Slice { elem, .. } => *elem,
            _ => panic!("a is a slice"),
        };
        let out = match &kernel.params[2].ty {
            warpforge_codegen::ir::ParamType::Slice { elem, .. } => *elem,
            _ => panic!("c is a slice"),
        };
        use warpforge_codegen::ir::Scalar;
        let buffer = |ty: Scalar, v: &[i64]| -> Arg {
            match ty {
                Scalar::F16 => v
                    .iter()
                    .map(|&x| f16::from_f32(x as f32))
                    .collect::<Vec<_>>()
                    .into(),
                Scalar::Bf16 => v
                    .iter()
                    .map(|&x| bf16::from_f32(x as f32))
                    .collect::<Vec<_>>()
                    .into(),
                Scalar::F32 => v.iter().map(|&x| x as f32).collect::<Vec<_>>().into(),
                Scalar::I8 => v.iter().map(|&x| x as i8).collect::<Vec<_>>().into(),
                Scalar::I32 => v.iter().map(|&x| x as i32).collect::<Vec<_>>().into(),
                other => panic!("a GEMM of {}", other.name()),
            }
        };
        let scalar = |ty: Scalar, v: i64| -> Arg {
            match ty {
                Scalar::I32 => Arg::from(v as i32),
                _ => Arg::from(v as f32),
            }
        };
        let scale_ty = match kernel.params[11].ty {
            warpforge_codegen::ir::ParamType::Scalar(s) => s,
            _ => panic!("alpha is a scalar"),
        };
        let mut args = vec![
            buffer(elem, &a_mem),
            buffer(elem, &b_mem),
            buffer(out, &self.c0),
            buffer(out, &self.bias),
            Arg::from(m as u32),
            Arg::from(n as u32),
            Arg::from(k as u32),
            Arg::from(z as u32),
            Arg::from((m * k) as u32),
            Arg::from((k * n) as u32),
            Arg::from((m * n) as u32),
            scalar(scale_ty, self.alpha),
            scalar(scale_ty, self.beta),
            Arg::from(self.bias_mode),
            Arg::from(0u32),
            Arg::from(a_col),
            Arg::from(b_row),
        ];
        let block = kernel.block.as_ref().expect("a GEMM declares its block");
        let threads = block[0].as_int().unwrap() as u32;
        let (bm, bn) = (
            const_value(def, consts, "BM") as usize,
            const_value(def, consts, "BN") as usize,
        );
        let grid = [n.div_ceil(bn) as u32, m.div_ceil(bm) as u32, z as u32];
        run(&kernel, grid, [threads, 1, 1], &mut args);
        let got: Vec<f64> = match &args[2] {
            Arg::Slice(Buffer::F16(v)) => v.iter().map(|x| x.to_f64()).collect(),
            Arg::Slice(Buffer::Bf16(v)) => v.iter().map(|x| x.to_f64()).collect(),
            Arg::Slice(Buffer::I32(v)) => v.iter().map(|&x| x as f64).collect(),
            Arg::Slice(Buffer::F32(v)) => v.iter().map(|&x| x as f64).collect(),
            _ => panic!("C's type"),
        };
        for batch in 0..z {
            for r in 0..m {
                for c in 0..n {
                    let want = self.want(batch, r, c) as f64;
                    let at = batch * m * n + r * n + c;
                    assert_eq!(
                        got[at], want,
                        "{name} {consts:?} layouts {layouts:?}: C[{batch}][{r}][{c}]"
                    );
                }
            }
        }
    }
}

/// The stock Tensor Core GEMM `gemm_tc` (`mma.sync` through `ldmatrix`, a
/// multistage `cp.async` pipeline, swizzled tiles, its epilogue) in every
/// type, for f16 in every layout and stage count, aligned and element-wise,
/// on ragged problems: exact, on small integers.
#[test]
fn the_stock_tensor_core_gemm_in_every_type() {
    let instances = stock_instances("gemm_tc.rs", "gemm_tc", &["tile.rs", "epilogue.rs"]);
    assert_eq!(instances.len(), 4);
    let mut rng = Rng(11);
    let plain = Gemm::new(&mut rng, (72, 40, 80), 1, false);
    let epilogue = Gemm::new(&mut rng, (40, 24, 48), 2, true);
    let mut runs = 0;
    for (name, def) in &instances {
        let f16 = name == "gemm_f16";
        for (a_col, b_row) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            for aligned in [1, 0] {
                let stages: &[i64] = if f16 && aligned == 1 && (a_col, b_row) == (0, 0) {
                    &[2, 3, 4, 5]
                } else {
                    &[-1]
                };
                for &s in stages {
                    let mut want = vec![
                        ("BM", 64),
                        ("BN", 64),
                        ("WARP", 32),
                        ("ALIGNED", aligned),
                        ("A_COL_MAJOR", a_col),
                        ("B_ROW_MAJOR", b_row),
                    ];
                    if s > 0 {
                        want.push(("STAGES", s));
                    }
                    let Some(consts) = pick(def, &want) else {
                        continue;
                    };
                    let layouts = (a_col == 1, b_row == 1);
                    plain.check(name, def, &consts, layouts);
                    runs += 1;
                    if (a_col, b_row, s) == (0, 0, -1) || s == 3 {
                        epilogue.check(name, def, &consts, layouts);
                    }
                }
            }
        }
    }
    assert!(runs >= 14, "{runs} variants ran");
}

/// The stock SIMT and Volta `wmma` GEMMs on the same problems.
#[test]
fn the_stock_simt_and_wmma_gemms() {
    let mut rng = Rng(12);
    let plain = Gemm::new(&mut rng, (80, 72, 40), 1, false);
    let epilogue = Gemm::new(&mut rng, (40, 24, 32), 2, true);
    let (_, simt) = &stock_instances(
        "gemm.rs",
        "gemm_f32",
        &["gemm.rs", "tile.rs", "epilogue.rs"],
    )[0];
    let consts = pick(simt, &[("BM", 64), ("BN", 64)]).expect("a 64 x 64 SIMT variant");
    for layouts in [(false, false), (true, true)] {
        plain.check("gemm_f32", simt, &consts, layouts);
    }
    epilogue.check("gemm_f32", simt, &consts, (false, true));
    let (_, wmma) = &stock_instances(
        "gemm_wmma.rs",
        "gemm_f16_wmma",
        &["gemm_wmma.rs", "tile.rs", "epilogue.rs"],
    )[0];
    let consts = pick(wmma, &[("BM", 64), ("BN", 64)]).expect("a 64 x 64 wmma variant");
    for layouts in [(false, false), (true, false), (false, true)] {
        plain.check("gemm_f16_wmma", wmma, &consts, layouts);
    }
    epilogue.check("gemm_f16_wmma", wmma, &consts, (false, false));
}

/// A 2:4 sparse `m x k` matrix of small integers and its compressed form in
/// the layout of `kernels/src/sparse.rs` ("The compressed layout"): values
/// `m x padded / 2` (two kept per group of 4, `padded = k` rounded up to 64)
/// and one metadata word per lane per 16-row tile and 64-column block.
fn sparse_a(rng: &mut Rng, m: usize, k: usize) -> (Vec<i64>, Vec<i64>, Vec<u32>) {
    const PAIRS: [(usize, usize); 6] = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];
    let padded = k.div_ceil(64) * 64;
    let groups = padded / 4;
    let mut dense = vec![0i64; m * k];
    let mut values = vec![0i64; m * padded / 2];
    let mut kept = vec![(0usize, 1usize); m * groups];
    for r in 0..m {
        for q in 0..groups {
            if 4 * q >= k {
                continue; // padding: zeros at positions 0 and 1
            }
            let (i0, i1) = PAIRS[(rng.next() % 6) as usize];
            kept[r * groups + q] = (i0, i1);
            for (slot, pos) in [(0, i0), (1, i1)] {
                let v = rng.small(1);
                values[r * padded / 2 + 2 * q + slot] = v;
                dense[r * k + 4 * q + pos] = v;
            }
        }
    }
    let tiles = m.div_ceil(16);
    let blocks = padded / 64;
    let mut meta = vec![0u32; tiles * blocks * 32];
    for tile in 0..tiles {
        for block in 0..blocks {
            for lane in 0..32 {
                let (g, s, h) = (lane / 4, lane / 2 % 2, lane % 2);
                let mut word = 0u32;
                for (half, r) in [(0, 16 * tile + g), (1, 16 * tile + g + 8)] {
                    for j in 0..4 {
                        let q = (64 * block + 32 * s + 16 * h) / 4 + j;
                        let (i0, i1) = if r < m { kept[r * groups + q] } else { (0, 1) };
                        word |= ((i0 | i1 << 2) as u32) << (16 * half + 4 * j);
                    }
                }
                meta[(tile * blocks + block) * 32 + lane] = word;
            }
        }
    }
    (dense, values, meta)
}

/// The stock 2:4 sparse GEMM (`mma.sp::ordered_metadata` through `ldmatrix`,
/// metadata in shared memory, the dense family's pipeline) in both types and
/// B layouts, aligned and element-wise: exact, on small integers.
#[test]
fn the_stock_sparse_gemm() {
    let instances = stock_instances("gemm_sparse.rs", "gemm_sparse", &["tile.rs", "epilogue.rs"]);
    let (m, n, k) = (72usize, 40usize, 96usize);
    let mut rng = Rng(13);
    let (dense, values, meta) = sparse_a(&mut rng, m, k);
    let bv: Vec<i64> = (0..k * n).map(|_| rng.small(1)).collect();
    let mut runs = 0;
    for (name, def) in &instances {
        for b_row in [0, 1] {
            for aligned in [1, 0] {
                let want = [
                    ("BM", 64),
                    ("BN", 64),
                    ("WARP", 32),
                    ("ALIGNED", aligned),
                    ("B_ROW_MAJOR", b_row),
                ];
                let Some(consts) = pick(def, &want) else {
                    continue;
                };
                let kernel = variant(def, &consts);
                let b_at = |i: usize, c: usize| if b_row == 1 { i * n + c } else { c * k + i };
                let mut b_mem = vec![0i64; k * n];
                for i in 0..k {
                    for c in 0..n {
                        b_mem[b_at(i, c)] = bv[i * n + c];
                    }
                }
                let bf = name == "gemm_sparse_bf16";
                let buffer = |v: &[i64]| -> Arg {
                    if bf {
                        v.iter()
                            .map(|&x| bf16::from_f32(x as f32))
                            .collect::<Vec<_>>()
                            .into()
                    } else {
                        v.iter()
                            .map(|&x| f16::from_f32(x as f32))
                            .collect::<Vec<_>>()
                            .into()
                    }
                };
                let mut args = vec![
                    buffer(&values),
                    meta.clone().into(),
                    buffer(&b_mem),
                    buffer(&vec![99; m * n]),
                    buffer(&[0]),
                    Arg::from(m as u32),
                    Arg::from(n as u32),
                    Arg::from(k as u32),
                    Arg::from(1u32),
                    Arg::from(0u32),
                    Arg::from(0u32),
                    Arg::from(0u32),
                    Arg::from(1.0f32),
                    Arg::from(0.0f32),
                    Arg::from(0u32),
                    Arg::from(0u32),
                    Arg::from(false),
                    Arg::from(b_row == 1),
                    Arg::from(0u32),
                ];
                let threads = kernel.block.as_ref().unwrap()[0].as_int().unwrap() as u32;
                run(
                    &kernel,
                    [n.div_ceil(64) as u32, m.div_ceil(64) as u32, 1],
                    [threads, 1, 1],
                    &mut args,
                );
                let got: Vec<f64> = match &args[3] {
                    Arg::Slice(Buffer::F16(v)) => v.iter().map(|x| x.to_f64()).collect(),
                    Arg::Slice(Buffer::Bf16(v)) => v.iter().map(|x| x.to_f64()).collect(),
                    _ => panic!("C's type"),
                };
                for r in 0..m {
                    for c in 0..n {
                        let want: i64 = (0..k).map(|i| dense[r * k + i] * bv[i * n + c]).sum();
                        assert_eq!(got[r * n + c], want as f64, "{name} {consts:?} C[{r}][{c}]");
                    }
                }
                runs += 1;
            }
        }
    }
    assert!(runs >= 6, "{runs} variants ran");
}
