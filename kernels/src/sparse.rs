//! 2:4 structured sparsity on the host: pruning, compression into the layout
//! the sparse GEMM ([`crate::gemm_sparse`]) reads, decompression and the 2:4
//! check, for f16 and bf16. The same operations run on the GPU as DSL kernels
//! in [`device`], bit for bit the same.
//!
//! A matrix is 2:4 when every group of 4 consecutive elements along a row
//! (k, the reduction dimension of `A` in `A B`) holds at most 2 nonzero
//! values. The last group of a row whose length is not a multiple of 4 is
//! shorter; the positions it lacks count as zeros.
//!
//! # Which two values pruning keeps
//! In each group the two elements of largest magnitude `|x|` (compared as
//! f32, exact for f16 and bf16; a NaN counts as `+inf`, so NaNs are kept and
//! show in the product); between equal magnitudes the lower column wins.
//! Exactly two positions are kept in every group, so in a group with fewer
//! than two nonzeros zeros are kept too (the lowest-index ones), which keeps
//! the metadata inside the legal index pairs.
//!
//! # The compressed layout
//! A `rows x cols` matrix becomes [`Compressed`]: `cols` is padded with zeros
//! to `padded = cols.div_ceil(64) * 64` (a whole metadata block), then
//! - `values`: `rows x padded / 2`, row-major: group `q` of row `r` stores its
//!   two kept elements, lower column first, at `values[r][2q]` and `[2q + 1]`.
//!   Each row is a multiple of 32 elements, so it starts 16-byte aligned;
//! - `metadata`: one `u32` per lane of a warp per 16-row tile and 64-column
//!   block, in the register layout `mma.sp` m16n8k32 reads (docs/ptx.md, "Sparse mma.sp"):
//!   word `(tile * (padded / 64) + block) * 32 + lane`, for the lane
//!   `lane = 4 g + 2 s + h`, describes rows `16 tile + g` (bits 0..16) and
//!   `16 tile + g + 8` (bits 16..32), columns `64 block + 32 s + 16 h` to
//!   `+ 16`: the nibble at bits `4 j` (`+ 16`) is group `j` of those 16
//!   columns, `i0 | i1 << 2` with `i0 < i1` the kept positions. A warp loads
//!   word `lane` of its tile and block into one register, and `mma.sp` with
//!   selector `s` (lanes `t = 2s, 2s + 1` of each quad) uses it for the
//!   32-column step `s` of the block. Rows past `rows` in the last tile are
//!   all-zero groups (nibble `0x4`: positions 0 and 1).

use std::fmt;

use warpforge::{bf16, f16, DeviceScalar};

pub mod device;

/// Elements per group: at most 2 of every 4 are nonzero.
pub const GROUP: usize = 4;
/// Rows of A one `mma.sp` m16n8k32 covers: one metadata word holds 2 of them.
pub const TILE_ROWS: usize = 16;
/// Columns of A one metadata word block covers: two 32-column `mma.sp` steps.
pub const BLOCK_COLS: usize = 64;
/// Metadata words per 16-row tile and 64-column block: one per lane.
pub const WORDS_PER_BLOCK: usize = 32;

/// The element types of 2:4 sparse matrices: f16 and bf16.
pub trait SparseElement: DeviceScalar + PartialEq + fmt::Debug {
    /// Zero, which pruning writes and compression leaves out.
    const ZERO: Self;
    /// `|x|` as f32, with NaN as `+inf`: the key pruning ranks by.
    fn magnitude(self) -> f32;
    /// The value as f32 (exact for f16 and bf16).
    fn to_f32(self) -> f32;
}

macro_rules! sparse_element {
    ($($t:ty),*) => {$(
        impl SparseElement for $t {
            const ZERO: Self = <$t>::ZERO;
            fn magnitude(self) -> f32 {
                let v = self.to_f32();
                if v.is_nan() {
                    f32::INFINITY
                } else {
                    v.abs()
                }
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
        }
    )*};
}

sparse_element!(f16, bf16);

/// Why a matrix cannot be pruned, compressed or checked as asked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SparseError {
    #[error(
        "a {rows} x {cols} matrix has {expected} elements, but {got} were given: \
         pass the matrix row-major (k contiguous), rows * cols elements"
    )]
    /// The element count does not match the shape.
    Length {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
        /// `rows * cols`.
        expected: usize,
        /// The elements given.
        got: usize,
    },
    #[error(
        "the matrix is not 2:4: row {row}, group {group} (columns {start}..{end}) holds \
         {nonzeros} nonzero values {values}, and a 2:4 matrix has at most 2 in every group \
         of 4 along a row; prune it first (`sparse::prune_2_4`)"
    )]
    /// A group of four holds more than two nonzero values.
    NotTwoFour {
        /// The row.
        row: usize,
        /// The group's index in the row.
        group: usize,
        /// Its first column.
        start: usize,
        /// The column after its last.
        end: usize,
        /// How many of its values are nonzero.
        nonzeros: usize,
        /// The group's values, as f32, for the message.
        values: String,
    },
}

/// The two positions (ascending) of a group of four that pruning keeps: the
/// largest magnitudes, the lower position first among equals.
pub fn kept_pair(magnitudes: [f32; GROUP]) -> (usize, usize) {
    let mut order = [0, 1, 2, 3];
    // Magnitudes are never NaN and never -0 (module docs), so `total_cmp` is `>` and `==`.
    order.sort_by(|&i, &j| magnitudes[j].total_cmp(&magnitudes[i]).then(i.cmp(&j)));
    (order[0].min(order[1]), order[0].max(order[1]))
}

/// The metadata nibble of a kept pair: `i0 | i1 << 2`.
pub fn nibble((i0, i1): (usize, usize)) -> u32 {
    (i0 | i1 << 2) as u32
}

/// Element `(r, c)` of a `rows x cols` row-major matrix, zero past `cols`.
fn element<T: SparseElement>(dense: &[T], cols: usize, r: usize, c: usize) -> T {
    if c < cols {
        dense[r * cols + c]
    } else {
        T::ZERO
    }
}

fn check_length<T>(dense: &[T], rows: usize, cols: usize) -> Result<(), SparseError> {
    let expected = rows * cols;
    if dense.len() == expected {
        Ok(())
    } else {
        Err(SparseError::Length {
            rows,
            cols,
            expected,
            got: dense.len(),
        })
    }
}

/// The kept pair of group `q` of row `r`.
fn group_pair<T: SparseElement>(dense: &[T], cols: usize, r: usize, q: usize) -> (usize, usize) {
    kept_pair(std::array::from_fn(|i| {
        element(dense, cols, r, q * GROUP + i).magnitude()
    }))
}

/// `dense` (`rows x cols`, row-major) with all but the two largest
/// magnitudes of every group of 4 along a row set to zero (module docs).
pub fn prune_2_4<T: SparseElement>(
    dense: &[T],
    rows: usize,
    cols: usize,
) -> Result<Vec<T>, SparseError> {
    check_length(dense, rows, cols)?;
    let mut pruned = vec![T::ZERO; dense.len()];
    for r in 0..rows {
        for q in 0..cols.div_ceil(GROUP) {
            let (i0, i1) = group_pair(dense, cols, r, q);
            for i in [i0, i1] {
                let c = q * GROUP + i;
                if c < cols {
                    pruned[r * cols + c] = dense[r * cols + c];
                }
            }
        }
    }
    Ok(pruned)
}

/// `Ok` when `dense` is 2:4, else an error naming the first row (then group)
/// with more than two nonzero values.
pub fn check_2_4<T: SparseElement>(
    dense: &[T],
    rows: usize,
    cols: usize,
) -> Result<(), SparseError> {
    check_length(dense, rows, cols)?;
    for r in 0..rows {
        for (group, values) in dense[r * cols..(r + 1) * cols].chunks(GROUP).enumerate() {
            let nonzeros = values.iter().filter(|v| v.to_f32() != 0.0).count();
            if nonzeros > 2 {
                let shown: Vec<String> = values.iter().map(|v| format!("{}", v.to_f32())).collect();
                return Err(SparseError::NotTwoFour {
                    row: r,
                    group,
                    start: group * GROUP,
                    end: group * GROUP + values.len(),
                    nonzeros,
                    values: format!("[{}]", shown.join(", ")),
                });
            }
        }
    }
    Ok(())
}

/// Elements per row of the compressed values of a matrix of `cols` columns.
pub fn value_cols(cols: usize) -> usize {
    cols.div_ceil(BLOCK_COLS) * BLOCK_COLS / 2
}

/// Metadata words of a `rows x cols` matrix.
pub fn metadata_words(rows: usize, cols: usize) -> usize {
    rows.div_ceil(TILE_ROWS) * cols.div_ceil(BLOCK_COLS) * WORDS_PER_BLOCK
}

/// Where the nibble of group `q` of row `r` lives: (word index, bit shift).
pub fn metadata_position(cols: usize, r: usize, q: usize) -> (usize, u32) {
    let blocks = cols.div_ceil(BLOCK_COLS);
    let (tile, row_in_tile) = (r / TILE_ROWS, r % TILE_ROWS);
    let (g, upper) = (row_in_tile % 8, row_in_tile / 8);
    let c = q * GROUP;
    let (block, col_in_block) = (c / BLOCK_COLS, c % BLOCK_COLS);
    // 16-column slice `sh` of the block = (step s, half h), `lane % 4 == sh`.
    let (sh, j) = (col_in_block / 16, col_in_block % 16 / GROUP);
    let lane = 4 * g + sh;
    let word = (tile * blocks + block) * WORDS_PER_BLOCK + lane;
    (word, (16 * upper + 4 * j) as u32)
}

/// A 2:4 matrix in the layout the sparse GEMM reads (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Compressed<T> {
    rows: usize,
    cols: usize,
    values: Vec<T>,
    metadata: Vec<u32>,
}

impl<T: SparseElement> Compressed<T> {
    /// Compresses a 2:4 matrix (`rows x cols`, row-major); an error names the
    /// first group that is not 2:4 (see [`check_2_4`]).
    pub fn new(dense: &[T], rows: usize, cols: usize) -> Result<Compressed<T>, SparseError> {
        check_2_4(dense, rows, cols)?;
        let vcols = value_cols(cols);
        let mut values = vec![T::ZERO; rows * vcols];
        // Every nibble starts as the padding pair (0, 1); groups overwrite theirs.
        let pad = (0..8).fold(0u32, |w, j| w | nibble((0, 1)) << (4 * j));
        let mut metadata = vec![pad; metadata_words(rows, cols)];
        for r in 0..rows {
            for q in 0..cols.div_ceil(GROUP) {
                // In a 2:4 group the two largest magnitudes cover every nonzero.
                let pair = group_pair(dense, cols, r, q);
                values[r * vcols + 2 * q] = element(dense, cols, r, q * GROUP + pair.0);
                values[r * vcols + 2 * q + 1] = element(dense, cols, r, q * GROUP + pair.1);
                let (word, shift) = metadata_position(cols, r, q);
                metadata[word] = metadata[word] & !(0xf << shift) | nibble(pair) << shift;
            }
        }
        Ok(Compressed {
            rows,
            cols,
            values,
            metadata,
        })
    }

    /// Prunes (see [`prune_2_4`]) and compresses.
    pub fn prune(dense: &[T], rows: usize, cols: usize) -> Result<Compressed<T>, SparseError> {
        Compressed::new(&prune_2_4(dense, rows, cols)?, rows, cols)
    }

    /// The dense `rows x cols` matrix: kept values in place, zeros elsewhere.
    pub fn decompress(&self) -> Vec<T> {
        let (rows, cols) = (self.rows, self.cols);
        let vcols = value_cols(cols);
        let mut dense = vec![T::ZERO; rows * cols];
        for r in 0..rows {
            for q in 0..cols.div_ceil(GROUP) {
                let (word, shift) = metadata_position(cols, r, q);
                let bits = self.metadata[word] >> shift;
                for (slot, position) in [bits & 3, bits >> 2 & 3].into_iter().enumerate() {
                    let c = q * GROUP + position as usize;
                    if c < cols {
                        dense[r * cols + c] = self.values[r * vcols + 2 * q + slot];
                    }
                }
            }
        }
        dense
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
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// `metadata_words(rows, cols)` words.
    pub fn metadata(&self) -> &[u32] {
        &self.metadata
    }
}

#[cfg(test)]
mod tests;
