//! [`DeviceScalar`]: the Rust types of the language's scalars, as buffer
//! elements and as kernel parameters.

use half::{bf16, f16};
use warpforge_codegen::eval::HostValue;
use warpforge_codegen::ir::{Literal, Scalar};

mod sealed {
    pub trait Sealed {}

    /// What the CUDA backend needs of an element type, in a build that has it.
    #[cfg(feature = "cuda")]
    pub trait CudaElement: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {}
    #[cfg(feature = "cuda")]
    impl<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits> CudaElement for T {}
    #[cfg(not(feature = "cuda"))]
    pub trait CudaElement {}
    #[cfg(not(feature = "cuda"))]
    impl<T> CudaElement for T {}
}

/// A scalar type of the kernel language. Sealed: the set is fixed by the IR's
/// [`Scalar`], and each type's parameter encoding must match the backends.
///
/// Every scalar can be a kernel parameter; every scalar except `bool` can be
/// a buffer element (the language has no `bool` slices, and a byte other than
/// 0 or 1 read back as `bool` would be undefined behaviour: use `u8`).
pub trait DeviceScalar:
    sealed::Sealed + sealed::CudaElement + Copy + Send + Sync + 'static
{
    /// The IR's name for the type, which launches check arguments against.
    const SCALAR: Scalar;
    /// The value as launch-time checks (`requires`) see it.
    fn host_value(self) -> HostValue;
    /// The bits of the kernel parameter, zero-extended to 64; the parameter
    /// is `SCALAR.size_bytes()` wide, except `bool`, which is passed as a
    /// `u32` 0 or 1.
    fn param_bits(self) -> u64;
}

macro_rules! device_scalar {
    ($($t:ty => $scalar:ident, |$v:ident| $literal:expr, $bits:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceScalar for $t {
            const SCALAR: Scalar = Scalar::$scalar;
            fn host_value(self) -> HostValue {
                let $v = self;
                HostValue::Scalar($literal)
            }
            fn param_bits(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    )*};
}

device_scalar! {
    bool => Bool, |v| Literal::Bool(v), u64::from(v);
    i8 => I8, |v| Literal::Int(i64::from(v)), u64::from(v as u8);
    u8 => U8, |v| Literal::Int(i64::from(v)), u64::from(v);
    i32 => I32, |v| Literal::Int(i64::from(v)), u64::from(v as u32);
    u32 => U32, |v| Literal::Int(i64::from(v)), u64::from(v);
    i64 => I64, |v| Literal::Int(v), v as u64;
    // Literals hold u64 values by their bits (see `ir::Literal`).
    u64 => U64, |v| Literal::Int(v as i64), v;
    f16 => F16, |v| Literal::Float(v.to_f64()), u64::from(v.to_bits());
    bf16 => Bf16, |v| Literal::Float(v.to_f64()), u64::from(v.to_bits());
    f32 => F32, |v| Literal::Float(f64::from(v)), u64::from(v.to_bits());
    f64 => F64, |v| Literal::Float(v), v.to_bits();
    // The 8-bit floats are storage types: `requires` sees their bits.
    crate::e4m3 => E4m3, |v| Literal::Int(i64::from(v.to_bits())), u64::from(v.to_bits());
    crate::e5m2 => E5m2, |v| Literal::Int(i64::from(v.to_bits())), u64::from(v.to_bits());
}

/// The bytes of `data` as memory holds them: what a backend that keeps
/// buffers as bytes (wgpu's uploads, the interpreter) stores.
pub(crate) fn bytes_of<T: DeviceScalar>(data: &[T]) -> &[u8] {
    // SAFETY: every element type is a plain number (or `bool`) without
    // padding, so each of its bytes is initialized; `u8` has no alignment.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The whole elements of `bytes` (a trailing part of one is ignored): a
/// buffer's contents read back.
pub(crate) fn values_from_bytes<T: DeviceScalar>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(std::mem::size_of::<T>())
        // SAFETY: every bit pattern of a buffer element type is a value:
        // buffers hold numbers, never `bool` (`check_new_buffer` refuses it).
        .map(|chunk| unsafe { std::ptr::read_unaligned(chunk.as_ptr().cast::<T>()) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_bits_are_the_values_bits() {
        assert_eq!(true.param_bits(), 1);
        assert_eq!(false.param_bits(), 0);
        assert_eq!((-1i8).param_bits(), 0xff);
        assert_eq!((-1i32).param_bits(), 0xffff_ffff);
        assert_eq!((-1i64).param_bits(), u64::MAX);
        assert_eq!(1.0f32.param_bits(), 0x3f80_0000);
        assert_eq!(f16::from_f32(1.0).param_bits(), 0x3c00);
        assert_eq!(bf16::from_f32(1.0).param_bits(), 0x3f80);
        assert_eq!(2.0f64.param_bits(), 0x4000_0000_0000_0000);
        assert_eq!(crate::e4m3::from_f32(1.0).param_bits(), 0x38);
        assert_eq!(crate::e5m2::from_f32(1.0).param_bits(), 0x3c);
    }

    #[test]
    fn host_values_follow_the_literal_convention() {
        assert_eq!(u64::MAX.host_value(), HostValue::Scalar(Literal::Int(-1)));
        assert_eq!((-3i8).host_value(), HostValue::Scalar(Literal::Int(-3)));
        assert_eq!(0.5f32.host_value(), HostValue::Scalar(Literal::Float(0.5)));
        assert_eq!(true.host_value(), HostValue::Scalar(Literal::Bool(true)));
        assert_eq!(<bf16 as DeviceScalar>::SCALAR, Scalar::Bf16);
    }
}
