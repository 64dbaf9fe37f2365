//! The Tensor Core instruction-rate kernels of the bench's `mma` section:
//! the compute ceilings its roofline draws and its GEMMs are read against.
//! Each issues independent MMAs back to back from registers or shared
//! memory, with no global memory traffic in the timed loop, and sums its
//! accumulators into `out` so that the loop is not dead code.
//!
//! - [`mma_rate`]: `mma.sync` m16n8k(32 bytes of k) per element type, the
//!   instruction of the sm_80 GEMMs, [`RATE_CHAINS`] accumulators per warp;
//! - [`wgmma_rate`]: `wgmma` m64n256k(32 bytes of k) per element type, the
//!   instruction of the sm_90a GEMMs, A and B read through descriptors from
//!   128-byte swizzled shared tiles, four per commit group with one group
//!   left in flight (the sm_90a main loop's order); two warpgroups a block;
//! - [`mma_sp_rate`]: the 2:4 sparse `mma.sp` m16n8k32 f16, both metadata forms.
//!
//! A launch of [`wgmma_rate`] with `iters / WGMMA_RATE_ITERS_PER_MMA_ITER`
//! trips on one block per SM does the work of [`mma_rate`] with `iters` on
//! four blocks per SM (see [`rate_work`]), so one case compares them.

use warpforge::prelude::*;
use warpforge::DeviceScalar;

use crate::Inputs;

/// MMAs issued per loop iteration of [`mma_rate`] and [`mma_sp_rate`]:
/// independent accumulators, so the Tensor Cores never wait on a previous
/// result. The kernels' unrolled loops count to 8.
pub const RATE_CHAINS: u32 = 8;
/// Threads per block of every rate kernel.
pub const RATE_THREADS: u32 = 256;
/// [`mma_rate`]'s trips per [`wgmma_rate`] trip for equal work.
pub const WGMMA_RATE_ITERS_PER_MMA_ITER: u32 = 4;

/// Operations (2 m n k) of one launch of [`mma_rate`] with `iters` trips
/// on `blocks` blocks, for an element type of `bytes` bytes (k = 32 bytes
/// of k per instruction: k16 for 16-bit types, k8 for tf32, k32 for s8).
/// A launch of [`wgmma_rate`] on `blocks / 4` blocks with `iters / 4` trips
/// does the same: per trip and warpgroup 4 m64n256 against 4 warps' 8
/// m16n8 each.
pub fn rate_work(blocks: u32, iters: u32, bytes: u32) -> f64 {
    let warps = f64::from(blocks * RATE_THREADS / 32);
    let mmas = warps * f64::from(iters * RATE_CHAINS);
    mmas * 2.0 * 16.0 * 8.0 * f64::from(32 / bytes)
}

/// Writes the sum of a rate kernel's [`RATE_CHAINS`] accumulators to this
/// thread's element of `out`: the MMAs' results are used, so their loop is
/// not dead code.
#[device]
pub fn keep_accumulators<D: Number>(acc: &[[D; 4]; 8], out: &mut [D]) {
    let mut sum = D::ZERO;
    #[unroll]
    for j in 0..8u32 {
        #[unroll]
        for i in 0..4u32 {
            sum += acc[j][i];
        }
    }
    out[block_idx().x * 256 + thread_idx().x] = sum;
}

/// `iters * RATE_CHAINS` m16n8 MMAs of `T` per warp; `words` gives each
/// lane 8 operand words (A from the first 4, B from the next 2).
#[kernel(
    arch(sm_80, sm_90),
    block(256),
    instances(
        mma_rate_f16 = <f16, f32>,
        mma_rate_bf16 = <bf16, f32>,
        mma_rate_tf32 = <f32, f32>,
        mma_rate_s8 = <i8, i32>
    )
)]
pub fn mma_rate<T, D: Number>(words: &[u32], iters: u32, out: &mut [D]) {
    let lane = lane_id();
    let mut fa = [0u32; 4];
    let mut fb = [0u32; 2];
    #[unroll]
    for i in 0..4u32 {
        fa[i] = words[lane * 8 + i];
    }
    fb[0] = words[lane * 8 + 4];
    fb[1] = words[lane * 8 + 5];
    let mut acc = [[D::ZERO; 4]; 8];
    for _it in 0..iters {
        #[unroll]
        for j in 0..8u32 {
            mma_m16n8::<T>(&mut acc[j], &fa, &fb);
        }
    }
    keep_accumulators(&acc, out);
}

/// `iters` trips of 4 wgmma m64n256 of `T` per warpgroup, A (64 rows) and B
/// (256 rows) of 128 bytes of k each, loaded once from `tiles` (A's rows
/// first) into 128-byte swizzled shared tiles; instruction `s` of a trip
/// reads their 32-byte k step `s`.
#[kernel(
    arch(sm_90a),
    block(256),
    instances(
        wgmma_rate_f16 = <f16, f32>,
        wgmma_rate_bf16 = <bf16, f32>,
        wgmma_rate_tf32 = <f32, f32>,
        wgmma_rate_s8 = <i8, i32>,
        wgmma_rate_e4m3 = <e4m3, f32>
    )
)]
pub fn wgmma_rate<T, D: Number>(tiles: &[T], iters: u32, out: &mut [D]) {
    // Elements per 16-byte chunk, per 128-byte row, per instruction's k.
    const E: u32 = 16 / T::BYTES;
    const ROW: u32 = 8 * E;
    const KS: u32 = 2 * E;
    let mut a_tile: [[T; ROW]; 64] = shared();
    let mut b_tile: [[T; ROW]; 256] = shared();
    let t = thread_idx().x;
    // The values' placement does not matter to the rate, only that they
    // are not zeros (the Tensor Cores' power, hence the clock, depends on
    // the data).
    for i in (t..64 * ROW).step_by(256) {
        a_tile[i / ROW][i % ROW] = tiles[i];
    }
    for i in (t..256 * ROW).step_by(256) {
        b_tile[i / ROW][i % ROW] = tiles[64 * ROW + i];
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [D::ZERO; 128];
    for _it in 0..iters {
        wgmma_fence();
        #[unroll]
        for s in 0..4u32 {
            wgmma_m64::<T, 256>(
                &mut acc,
                matrix_desc(&a_tile[0][s * KS], 128),
                matrix_desc(&b_tile[0][s * KS], 128),
                true,
            );
        }
        wgmma_commit();
        wgmma_wait(1);
    }
    wgmma_wait(0);
    let mut sum = D::ZERO;
    #[unroll]
    for e in 0..128u32 {
        sum += acc[e];
    }
    out[block_idx().x * 256 + t] = sum;
}

/// `iters * RATE_CHAINS` sparse m16n8k32 f16 MMAs per warp; `words` gives
/// each lane 8 operand words, `meta` is a legal metadata word.
#[kernel(arch(sm_80, sm_90), block(256), tune(ORDERED = [false, true]))]
pub fn mma_sp_rate<const ORDERED: bool>(words: &[u32], meta: u32, iters: u32, out: &mut [f32]) {
    let lane = lane_id();
    let mut fa = [0u32; 4];
    let mut fb = [0u32; 4];
    #[unroll]
    for i in 0..4u32 {
        fa[i] = words[lane * 8 + i];
        fb[i] = words[lane * 8 + 4 + i];
    }
    let mut acc = [[0.0f32; 4]; 8];
    for _it in 0..iters {
        #[unroll]
        for j in 0..8u32 {
            if ORDERED {
                mma_sp_ordered_m16n8k32_f16(&mut acc[j], &fa, &fb, meta, j % 2);
            } else {
                mma_sp_m16n8k32_f16(&mut acc[j], &fa, &fb, meta, j % 2);
            }
        }
    }
    keep_accumulators(&acc, out);
}

/// A legal metadata word for [`mma_sp_rate`]: every group keeps positions
/// 1 and 3 (`0xd`).
pub const RATE_META: u32 = 0xdddd_dddd;

/// The operand words of [`mma_rate`] and [`mma_sp_rate`]: `values` (8 words
/// per lane of one warp: [`rate_values`] of them) packed little-endian, as
/// many per word as `T` fits (2 f16, 4 s8, 1 f32).
pub fn rate_words<T: DeviceScalar>(values: &[T]) -> Vec<u32> {
    let bits = T::SCALAR.size_bytes() * 8;
    let per_word = 32 / bits;
    values
        .chunks(per_word as usize)
        .map(|chunk| {
            chunk.iter().enumerate().fold(0u32, |word, (i, v)| {
                word | (v.param_bits() as u32 & (u32::MAX >> (32 - bits))) << (bits * i as u32)
            })
        })
        .collect()
}

/// How many values of a `bytes`-byte type fill [`rate_words`]' 8 words per
/// lane of a warp.
pub fn rate_values(bytes: u32) -> usize {
    (32 * 8 * 4 / bytes) as usize
}

/// How many values of a `bytes`-byte type fill [`wgmma_rate`]'s tiles: 64
/// plus 256 rows of 128 bytes.
pub fn wgmma_rate_values(bytes: u32) -> usize {
    ((64 + 256) * 128 / bytes) as usize
}

/// Random f16 values away from zero for [`mma_sp_rate`] (the accumulators
/// may overflow, which costs the Tensor Cores nothing).
pub fn sparse_rate_words(inputs: &mut Inputs) -> Vec<u32> {
    let values: Vec<f16> = inputs
        .f32s(rate_values(2))
        .into_iter()
        .map(|v| f16::from_f32(v * 0.01 + 0.001f32.copysign(v)))
        .collect();
    rate_words(&values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_pack_values_little_endian() {
        let halves = [f16::from_f32(1.0), f16::from_f32(-2.0)];
        assert_eq!(rate_words(&halves), vec![0x3c00 | 0xc000 << 16]);
        assert_eq!(rate_words(&[1i8, -1, 2, -2]), vec![0xfe02_ff01]);
        assert_eq!(rate_words(&[1.5f32]), vec![1.5f32.to_bits()]);
        assert_eq!(rate_values(2), 512);
        assert_eq!(rate_words(&vec![1i8; rate_values(1)]).len(), 32 * 8);
    }

    #[test]
    fn the_wgmma_launch_does_the_mma_launch_s_work() {
        // 4 blocks of 8 warps, each trip 8 m16n8k16, against 1 block of 2
        // warpgroups, each trip 4 m64n256k16.
        let mma = rate_work(4 * 132, 4096, 2);
        let wgmma_trips = 4096 / WGMMA_RATE_ITERS_PER_MMA_ITER;
        let wgmma = 132.0 * 2.0 * f64::from(wgmma_trips) * 4.0 * 2.0 * 64.0 * 256.0 * 16.0;
        assert_eq!(mma, wgmma);
    }
}
