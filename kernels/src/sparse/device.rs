//! 2:4 pruning, compression and decompression on the GPU, as DSL kernels:
//! the same rule and layout as the host functions of [`super`], bit for bit.
//!
//! Every kernel reads a group of four through f32 magnitudes (`|x|`, NaN as
//! `+inf`) and keeps the two largest, the lower position among equals.
//! Compression on the device does not check: it prunes as it compresses, so
//! on a 2:4 matrix it is [`Compressed::new`] and on any other
//! [`Compressed::prune`]. The f16 kernels build for sm_70 too (the sparse
//! GEMM's fallback decompresses there); the bf16 ones need sm_80, which has
//! bf16 conversions.

use warpforge::prelude::*;
use warpforge::DeviceScalar;

use super::{metadata_words, value_cols, Compressed, SparseElement};

/// Threads per block of these kernels.
const THREADS: u32 = 256;

/// Which of the four elements `v` of a group 2:4 pruning keeps (`keep`):
/// ranked by f32 magnitude, a NaN as +inf, `v[p]` is kept when fewer than two
/// others are larger, or equal and at a lower position. The rule prune and
/// compress share.
#[device]
pub fn rank_2_4<T: Half>(v: &[T; 4], keep: &mut [bool; 4]) {
    let mut key = [0.0f32; 4];
    #[unroll]
    for p in 0..4u32 {
        let f = v[p] as f32;
        key[p] = if f != f { f32::INFINITY } else { f.abs() };
    }
    #[unroll]
    for p in 0..4u32 {
        let mut above = 0u32;
        #[unroll]
        for q in 0..4u32 {
            if q != p && (key[q] > key[p] || key[q] == key[p] && q < p) {
                above += 1;
            }
        }
        keep[p] = above < 2;
    }
}

/// `y` = `x` (`rows x cols`, row-major) pruned to 2:4: one thread per group
/// of 4. The f16 kernel builds for sm_70 too (the sparse GEMM's fallback
/// decompresses there); bf16 needs sm_80's conversions.
#[kernel(
    arch(sm_70, sm_80, sm_90),
    block(256),
    requires(x.len() == rows * cols, y.len() == rows * cols),
    instances(prune_2_4_f16 = <f16>, prune_2_4_bf16 = <bf16> arch(sm_80, sm_90))
)]
pub fn prune<T: Half>(x: &[T], y: &mut [T], rows: u32, cols: u32) {
    let groups = (cols + 3) / 4;
    let id = block_idx().x * 256 + thread_idx().x;
    if id < rows * groups {
        let r = id / groups;
        let c0 = id % groups * 4;
        let mut v = [0.0 as T; 4];
        #[unroll]
        for i in 0..4u32 {
            if c0 + i < cols {
                v[i] = x[r * cols + c0 + i];
            }
        }
        let mut keep = [false; 4];
        rank_2_4(&v, &mut keep);
        #[unroll]
        for i in 0..4u32 {
            if c0 + i < cols {
                y[r * cols + c0 + i] = if keep[i] { v[i] } else { 0.0 };
            }
        }
    }
}

/// `x` (`rows x cols`) pruned to 2:4 and compressed into `values` and `meta`
/// (the layout of [`super::Compressed`]): one thread per metadata word (2
/// rows x 16 columns).
#[kernel(
    arch(sm_70, sm_80, sm_90),
    block(256),
    requires(
        x.len() == rows * cols,
        values.len() == rows * ((cols + 63) / 64 * 32),
        meta.len() == (rows + 15) / 16 * ((cols + 63) / 64) * 32
    ),
    instances(compress_2_4_f16 = <f16>, compress_2_4_bf16 = <bf16> arch(sm_80, sm_90))
)]
pub fn compress_2_4<T: Half>(x: &[T], values: &mut [T], meta: &mut [u32], rows: u32, cols: u32) {
    let w = block_idx().x * 256 + thread_idx().x;
    if w < meta.len() {
        let blocks = (cols + 63) / 64;
        let lane = w % 32;
        let tile = w / 32 / blocks;
        let c_base = w / 32 % blocks * 64 + lane % 4 * 16;
        let vcols = blocks * 32;
        let mut word = 0u32;
        #[unroll]
        for u in 0..2u32 {
            let r = tile * 16 + lane / 4 + u * 8;
            #[unroll]
            for j in 0..4u32 {
                let c0 = c_base + j * 4;
                let mut v = [0.0 as T; 4];
                #[unroll]
                for i in 0..4u32 {
                    if r < rows && c0 + i < cols {
                        v[i] = x[r * cols + c0 + i];
                    }
                }
                let mut keep = [false; 4];
                rank_2_4(&v, &mut keep);
                // The kept positions in order: `kept` counts those found so far.
                let mut kept = 0u32;
                let mut pair = [0.0 as T; 2];
                let mut nibble = 0u32;
                #[unroll]
                for i in 0..4u32 {
                    if keep[i] {
                        if kept == 0 {
                            pair[0] = v[i];
                            nibble = i;
                        } else {
                            pair[1] = v[i];
                            nibble |= i << 2;
                        }
                        kept += 1;
                    }
                }
                word |= nibble << (u * 16 + j * 4);
                if r < rows {
                    values[r * vcols + c0 / 2] = pair[0];
                    values[r * vcols + c0 / 2 + 1] = pair[1];
                }
            }
        }
        meta[w] = word;
    }
}

/// `y` (`rows x cols`) = the dense matrix of `values` and `meta`: one thread
/// per group of 4. Moves elements without converting them (bf16 too on
/// sm_70).
#[kernel(
    arch(sm_70, sm_80, sm_90),
    block(256),
    requires(
        y.len() == rows * cols,
        values.len() == rows * ((cols + 63) / 64 * 32),
        meta.len() == (rows + 15) / 16 * ((cols + 63) / 64) * 32
    ),
    instances(decompress_2_4_f16 = <f16>, decompress_2_4_bf16 = <bf16>)
)]
pub fn decompress_2_4<T: Half>(values: &[T], meta: &[u32], y: &mut [T], rows: u32, cols: u32) {
    let groups = (cols + 3) / 4;
    let id = block_idx().x * 256 + thread_idx().x;
    if id < rows * groups {
        let r = id / groups;
        let c0 = id % groups * 4;
        let blocks = (cols + 63) / 64;
        let w = (r / 16 * blocks + c0 / 64) * 32 + r % 8 * 4 + c0 % 64 / 16;
        let nibble = meta[w] >> (r % 16 / 8 * 16 + c0 % 16 / 4 * 4) & 15;
        let at = r * (blocks * 32) + c0 / 2;
        #[unroll]
        for i in 0..4u32 {
            if c0 + i < cols {
                y[r * cols + c0 + i] = if nibble & 3 == i {
                    values[at]
                } else if nibble >> 2 == i {
                    values[at + 1]
                } else {
                    0.0
                };
            }
        }
    }
}

impl DeviceSparse for f16 {
    const PRUNE: Prune<Self> =
        |rt, grid, x, y, rows, cols| prune_2_4_f16::launch(rt, grid, x, y, rows, cols);
    const COMPRESS: Compress<Self> = |rt, grid, x, values, meta, rows, cols| {
        compress_2_4_f16::launch(rt, grid, x, values, meta, rows, cols)
    };
    const DECOMPRESS: Decompress<Self> = |rt, grid, values, meta, y, rows, cols| {
        decompress_2_4_f16::launch(rt, grid, values, meta, y, rows, cols)
    };
}

impl DeviceSparse for bf16 {
    const PRUNE: Prune<Self> =
        |rt, grid, x, y, rows, cols| prune_2_4_bf16::launch(rt, grid, x, y, rows, cols);
    const COMPRESS: Compress<Self> = |rt, grid, x, values, meta, rows, cols| {
        compress_2_4_bf16::launch(rt, grid, x, values, meta, rows, cols)
    };
    const DECOMPRESS: Decompress<Self> = |rt, grid, values, meta, y, rows, cols| {
        decompress_2_4_bf16::launch(rt, grid, values, meta, y, rows, cols)
    };
}

/// A 2:4 matrix on the GPU in the layout of [`Compressed`] (module docs of
/// [`super`]): what the sparse GEMM takes as A.
pub struct DeviceCompressed<T: DeviceScalar> {
    rows: usize,
    cols: usize,
    values: DeviceBuffer<T>,
    metadata: DeviceBuffer<u32>,
}

impl<T: DeviceScalar> DeviceCompressed<T> {
    /// Uploads a matrix compressed on the host.
    pub fn upload(rt: &Runtime, host: &Compressed<T>) -> Result<DeviceCompressed<T>, Error>
    where
        T: SparseElement,
    {
        Ok(DeviceCompressed {
            rows: host.rows(),
            cols: host.cols(),
            values: rt.upload(host.values())?,
            metadata: rt.upload(host.metadata())?,
        })
    }

    /// Rows of the dense matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the dense matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// `rows x value_cols(cols)`, row-major.
    pub fn values(&self) -> &DeviceBuffer<T> {
        &self.values
    }

    /// `metadata_words(rows, cols)` words.
    pub fn metadata(&self) -> &DeviceBuffer<u32> {
        &self.metadata
    }
}

/// The launcher of a prune kernel: `(rt, grid, x, y, rows, cols)`.
pub type Prune<T> =
    fn(&Runtime, Grid, &DeviceBuffer<T>, &mut DeviceBuffer<T>, u32, u32) -> Result<(), Error>;
/// The launcher of a compress kernel: `(rt, grid, x, values, meta, rows, cols)`.
pub type Compress<T> = fn(
    &Runtime,
    Grid,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<u32>,
    u32,
    u32,
) -> Result<(), Error>;
/// The launcher of a decompress kernel: `(rt, grid, values, meta, y, rows, cols)`.
pub type Decompress<T> = fn(
    &Runtime,
    Grid,
    &DeviceBuffer<T>,
    &DeviceBuffer<u32>,
    &mut DeviceBuffer<T>,
    u32,
    u32,
) -> Result<(), Error>;

/// The element types with device kernels, f16 and bf16: each names its
/// kernels' launchers (closures: a launcher is generic over what it takes
/// as a buffer, and a fn pointer needs one type) (the instances of `prune`, `compress_2_4` and
/// `decompress_2_4`).
pub trait DeviceSparse: SparseElement {
    /// The prune kernel's launcher.
    const PRUNE: Prune<Self>;
    /// The compress kernel's launcher.
    const COMPRESS: Compress<Self>;
    /// The decompress kernel's launcher.
    const DECOMPRESS: Decompress<Self>;
}

/// `(rows, cols)` as the kernels' `u32`s, or an error saying why not.
fn dims(rows: usize, cols: usize) -> Result<(u32, u32), Error> {
    match (u32::try_from(rows), u32::try_from(cols)) {
        (Ok(r), Ok(c)) if (rows as u64) * (cols as u64) <= u32::MAX as u64 => Ok((r, c)),
        _ => Err(Error::Buffer(format!(
            "a {rows} x {cols} matrix is too large for the 2:4 kernels: they index with u32, \
             so rows * cols must stay below 2^32; split the matrix into row blocks"
        ))),
    }
}

/// One thread per item, in blocks of [`THREADS`].
fn blocks_for(items: usize) -> Grid {
    Grid::blocks([items.div_ceil(THREADS as usize) as u32, 1, 1])
}

/// `dense` (`rows x cols`, row-major) pruned to 2:4 on the GPU (the rule of
/// [`super::prune_2_4`]).
pub fn prune_2_4<T: DeviceSparse>(
    rt: &Runtime,
    dense: &DeviceBuffer<T>,
    rows: usize,
    cols: usize,
) -> Result<DeviceBuffer<T>, Error> {
    let (r, c) = dims(rows, cols)?;
    let mut pruned = rt.alloc_zeroed(rows * cols)?;
    T::PRUNE(
        rt,
        blocks_for(rows * cols.div_ceil(4)),
        dense,
        &mut pruned,
        r,
        c,
    )?;
    Ok(pruned)
}

/// `dense` (`rows x cols`, row-major) pruned to 2:4 and compressed on the
/// GPU: on a 2:4 matrix the same as [`Compressed::new`], on any other the
/// same as [`Compressed::prune`].
pub fn compress<T: DeviceSparse>(
    rt: &Runtime,
    dense: &DeviceBuffer<T>,
    rows: usize,
    cols: usize,
) -> Result<DeviceCompressed<T>, Error> {
    let (r, c) = dims(rows, cols)?;
    let mut values = rt.alloc_zeroed(rows * value_cols(cols))?;
    let words = metadata_words(rows, cols);
    let mut metadata = rt.alloc_zeroed(words)?;
    T::COMPRESS(
        rt,
        blocks_for(words),
        dense,
        &mut values,
        &mut metadata,
        r,
        c,
    )?;
    Ok(DeviceCompressed {
        rows,
        cols,
        values,
        metadata,
    })
}

/// The dense `rows x cols` matrix of a compressed one, on the GPU.
pub fn decompress<T: DeviceSparse>(
    rt: &Runtime,
    sparse: &DeviceCompressed<T>,
) -> Result<DeviceBuffer<T>, Error> {
    let (rows, cols) = (sparse.rows, sparse.cols);
    let (r, c) = dims(rows, cols)?;
    let mut dense = rt.alloc_zeroed(rows * cols)?;
    T::DECOMPRESS(
        rt,
        blocks_for(rows * cols.div_ceil(4)),
        &sparse.values,
        &sparse.metadata,
        &mut dense,
        r,
        c,
    )?;
    Ok(dense)
}
