//! What a GEMM's operands are, shared by every crate that multiplies
//! matrices: how a matrix lies in its buffer ([`MatrixLayout`]) and the
//! element types and arithmetic of a product ([`GemmPrecision`]). The cuBLAS
//! reference ([`crate::Runtime::cublas_gemm`]), the stock GEMM kernels and the
//! tests' float64 references speak these terms.

use std::fmt;

use warpforge_codegen::ir::Scalar;

/// How a dense `rows x cols` matrix lies in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixLayout {
    /// Row after row: element `(r, c)` at `r * cols + c`.
    RowMajor,
    /// Column after column (BLAS's and Fortran's order): element `(r, c)` at `c * rows + r`.
    ColMajor,
}

impl MatrixLayout {
    /// Both layouts, for tests that try every combination.
    pub const ALL: [MatrixLayout; 2] = [MatrixLayout::RowMajor, MatrixLayout::ColMajor];

    /// Elements from the start of one row (row-major) or column
    /// (column-major) to the next: BLAS's leading dimension of a dense
    /// `rows x cols` matrix.
    pub fn leading_dimension(self, rows: usize, cols: usize) -> usize {
        match self {
            MatrixLayout::RowMajor => cols,
            MatrixLayout::ColMajor => rows,
        }
    }

    /// Where element `(row, col)` of a dense `rows x cols` matrix lies in its buffer.
    pub fn index(self, (row, col): (usize, usize), (rows, cols): (usize, usize)) -> usize {
        match self {
            MatrixLayout::RowMajor => row * cols + col,
            MatrixLayout::ColMajor => col * rows + row,
        }
    }

    /// `row-major` or `column-major`, for messages.
    pub fn name(self) -> &'static str {
        match self {
            MatrixLayout::RowMajor => "row-major",
            MatrixLayout::ColMajor => "column-major",
        }
    }
}

impl fmt::Display for MatrixLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element types and arithmetic of a GEMM `C = A B`: what A and B hold,
/// what the products are summed in, and what C holds. These are the
/// precisions of the Tensor Core GEMMs and their cuBLAS references.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmPrecision {
    /// f16 A and B, products summed in f32, C rounded to f16.
    F16,
    /// bf16 A and B, products summed in f32, C rounded to bf16.
    Bf16,
    /// f32 A and B rounded to tf32 (8-bit exponent, 10-bit mantissa) on the
    /// Tensor Cores, products summed in f32, f32 C.
    Tf32,
    /// i8 A and B, products summed in i32, i32 C: exact unless the sum
    /// overflows i32 (|sum| < 2^31 holds for any inputs while k < 2^17).
    I8,
    /// f32 A and B, products summed in f32 (fused multiply-adds, no Tensor
    /// Cores), f32 C.
    F32,
    /// e4m3 A and B (8-bit floats), products summed in f32 by the Tensor
    /// Cores (Hopper's fp8 MMA keeps fewer bits in its sums than f32 does),
    /// C rounded to bf16.
    E4m3,
    /// e5m2 A and B, as [`GemmPrecision::E4m3`].
    E5m2,
}

impl GemmPrecision {
    /// Every precision, in declaration order.
    pub const ALL: [GemmPrecision; 7] = [
        GemmPrecision::F16,
        GemmPrecision::Bf16,
        GemmPrecision::Tf32,
        GemmPrecision::I8,
        GemmPrecision::F32,
        GemmPrecision::E4m3,
        GemmPrecision::E5m2,
    ];

    /// The element type of A and B.
    pub fn input(self) -> Scalar {
        match self {
            GemmPrecision::F16 => Scalar::F16,
            GemmPrecision::Bf16 => Scalar::Bf16,
            GemmPrecision::Tf32 | GemmPrecision::F32 => Scalar::F32,
            GemmPrecision::I8 => Scalar::I8,
            GemmPrecision::E4m3 => Scalar::E4m3,
            GemmPrecision::E5m2 => Scalar::E5m2,
        }
    }

    /// The type the products are summed in.
    pub fn accumulator(self) -> Scalar {
        match self {
            GemmPrecision::I8 => Scalar::I32,
            _ => Scalar::F32,
        }
    }

    /// The element type of C.
    pub fn output(self) -> Scalar {
        match self {
            GemmPrecision::F16 => Scalar::F16,
            GemmPrecision::Bf16 | GemmPrecision::E4m3 | GemmPrecision::E5m2 => Scalar::Bf16,
            GemmPrecision::Tf32 | GemmPrecision::F32 => Scalar::F32,
            GemmPrecision::I8 => Scalar::I32,
        }
    }

    /// `f16`, `bf16`, `tf32`, `i8`, `f32`, `e4m3` or `e5m2`.
    pub fn name(self) -> &'static str {
        match self {
            GemmPrecision::F16 => "f16",
            GemmPrecision::Bf16 => "bf16",
            GemmPrecision::Tf32 => "tf32",
            GemmPrecision::I8 => "i8",
            GemmPrecision::F32 => "f32",
            GemmPrecision::E4m3 => "e4m3",
            GemmPrecision::E5m2 => "e5m2",
        }
    }
}

/// `tf32 (f32 x f32 -> f32, inputs rounded to tf32, f32 accumulation)`.
impl fmt::Display for GemmPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (input, output, accumulator) = (
            self.input().name(),
            self.output().name(),
            self.accumulator().name(),
        );
        write!(f, "{} ({input} x {input} -> {output}, ", self.name())?;
        if *self == GemmPrecision::Tf32 {
            f.write_str("inputs rounded to tf32, ")?;
        }
        write!(f, "{accumulator} accumulation)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_place_elements_and_name_their_leading_dimension() {
        // A 2 x 3 matrix [[0, 1, 2], [3, 4, 5]].
        let row_major = [0, 1, 2, 3, 4, 5];
        let col_major = [0, 3, 1, 4, 2, 5];
        for row in 0..2 {
            for col in 0..3 {
                let want = row * 3 + col;
                let at = MatrixLayout::RowMajor.index((row, col), (2, 3));
                assert_eq!(row_major[at], want);
                let at = MatrixLayout::ColMajor.index((row, col), (2, 3));
                assert_eq!(col_major[at], want);
            }
        }
        assert_eq!(MatrixLayout::RowMajor.leading_dimension(2, 3), 3);
        assert_eq!(MatrixLayout::ColMajor.leading_dimension(2, 3), 2);
        assert_eq!(MatrixLayout::ColMajor.to_string(), "column-major");
    }

    #[test]
    fn precisions_name_their_types() {
        assert_eq!(
            GemmPrecision::Tf32.to_string(),
            "tf32 (f32 x f32 -> f32, inputs rounded to tf32, f32 accumulation)"
        );
        assert_eq!(
            GemmPrecision::I8.to_string(),
            "i8 (i8 x i8 -> i32, i32 accumulation)"
        );
        assert_eq!(
            GemmPrecision::Bf16.to_string(),
            "bf16 (bf16 x bf16 -> bf16, f32 accumulation)"
        );
        let names: Vec<_> = GemmPrecision::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["f16", "bf16", "tf32", "i8", "f32", "e4m3", "e5m2"]);
        assert_eq!(
            GemmPrecision::E4m3.to_string(),
            "e4m3 (e4m3 x e4m3 -> bf16, f32 accumulation)"
        );
    }
}
