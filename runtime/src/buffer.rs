//! [`DeviceBuffer`] and the launch arguments that borrow buffers and carry
//! scalars: [`KernelArg`], and its plain description [`ArgInfo`].

use cudarc::driver::CudaSlice;
use warpforge_codegen::eval::HostValue;
use warpforge_codegen::ir::Scalar;

use crate::cuda::CudaMemory;
use crate::scalar::DeviceScalar;
use crate::wgpu::WgpuBuffer;
use crate::Error;

/// A typed buffer in device memory, created by a [`crate::Runtime`] and
/// usable only with the runtime (device) that created it.
///
/// The element type `T` is any [`DeviceScalar`] on CUDA (every scalar but
/// `bool`); on wgpu it is `f32`, `i32`, `u32` or `f16`, the types WGSL
/// storage holds, and creating a buffer of another type is an
/// [`Error::Buffer`](crate::Error::Buffer) (a kernel that computes in f16
/// also needs an adapter with `SHADER_F16`).
pub struct DeviceBuffer<T: DeviceScalar> {
    pub(crate) memory: Memory<T>,
}

/// Where a buffer's elements live, per backend.
pub(crate) enum Memory<T> {
    Cuda(CudaSlice<T>),
    Wgpu(WgpuBuffer),
}

impl<T: DeviceScalar> DeviceBuffer<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.memory {
            Memory::Cuda(slice) => slice.len(),
            Memory::Wgpu(buffer) => buffer.len,
        }
    }

    /// Whether the buffer has no elements (no runtime creates one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CUDA allocation, for calling CUDA libraries (cuBLAS) on the
    /// runtime's stream ([`crate::Runtime::cuda_stream`]); `None` on wgpu.
    #[doc(hidden)]
    pub fn cuda_slice(&self) -> Option<&CudaSlice<T>> {
        match &self.memory {
            Memory::Cuda(slice) => Some(slice),
            Memory::Wgpu(_) => None,
        }
    }

    #[doc(hidden)]
    pub fn cuda_slice_mut(&mut self) -> Option<&mut CudaSlice<T>> {
        match &mut self.memory {
            Memory::Cuda(slice) => Some(slice),
            Memory::Wgpu(_) => None,
        }
    }
}

impl<T: DeviceScalar> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}>[{}]", T::SCALAR.name(), self.len())
    }
}

/// Refuses buffers that cannot exist: `bool` elements, no elements, or more
/// bytes than the address space holds.
pub(crate) fn check_new_buffer<T: DeviceScalar>(len: usize) -> Result<(), Error> {
    if T::SCALAR == Scalar::Bool {
        return Err(Error::Buffer(
            "buffers of bool are not supported: kernels take no bool slices, and a byte other than \
             0 or 1 read back as bool would be undefined behaviour. Store u8 values 0 and 1 instead."
                .into(),
        ));
    }
    if len == 0 {
        return Err(Error::Buffer(format!(
            "cannot create an empty buffer of {}: the driver does not allocate zero bytes; skip the \
             work when there is no data",
            T::SCALAR.name()
        )));
    }
    if len.checked_mul(std::mem::size_of::<T>()).is_none() {
        return Err(Error::Buffer(format!(
            "a buffer of {len} {} values does not fit in the address space: use a smaller buffer",
            T::SCALAR.name()
        )));
    }
    Ok(())
}

/// Launch dimensions: blocks per grid, and threads per block unless the kernel
/// declares its block shape (`#[kernel(block(..))]`), in which case `threads`
/// is `None` or equal to the declared shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Blocks per grid, x y z.
    pub blocks: [u32; 3],
    /// Threads per block, x y z; `None` for a kernel that declares its block shape.
    pub threads: Option<[u32; 3]>,
}

impl Grid {
    /// `blocks` blocks of `threads` threads each.
    pub fn new(blocks: [u32; 3], threads: [u32; 3]) -> Grid {
        Grid {
            blocks,
            threads: Some(threads),
        }
    }

    /// Blocks only, for kernels that declare their block shape.
    pub fn blocks(blocks: [u32; 3]) -> Grid {
        Grid {
            blocks,
            threads: None,
        }
    }

    /// One thread per element for `n` elements in blocks of `threads` threads
    /// along x: `ceil(n / threads)` blocks. `n == 0` gives an empty grid,
    /// which [`crate::Runtime::launch`] refuses, as it refuses a block count
    /// past the device's grid limit (saturated here at `u32::MAX`).
    pub fn linear(n: usize, threads: u32) -> Grid {
        // No threads gives no blocks; the launch check then names the empty block.
        let blocks = match threads {
            0 => 0,
            t => u32::try_from(n.div_ceil(t as usize)).unwrap_or(u32::MAX),
        };
        Grid::new([blocks, 1, 1], [threads, 1, 1])
    }
}

/// One launch argument as the checks see it: a scalar and its value, or a
/// buffer's element type, length and access.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgInfo {
    /// A scalar argument.
    Scalar {
        /// Its type.
        ty: Scalar,
        /// Its value.
        value: HostValue,
    },
    /// A buffer argument.
    Buffer {
        /// The element type.
        elem: Scalar,
        /// The number of elements.
        len: u64,
        /// Passed with [`KernelArg::buffer_mut`], for a `&mut [T]` parameter.
        mutable: bool,
    },
}

impl ArgInfo {
    /// The argument as `requires(..)` sees it: a scalar's value or a slice's length.
    pub fn host_value(&self) -> HostValue {
        match *self {
            ArgInfo::Scalar { value, .. } => value,
            ArgInfo::Buffer { len, .. } => HostValue::Slice { len },
        }
    }

    /// `f32`, `&[f32]` or `&mut [f32]`: how the argument reads in messages.
    pub fn describe(&self) -> String {
        match *self {
            ArgInfo::Scalar { ty, .. } => ty.name().to_string(),
            ArgInfo::Buffer {
                elem,
                mutable: false,
                ..
            } => format!("&[{}] (KernelArg::buffer)", elem.name()),
            ArgInfo::Buffer {
                elem,
                mutable: true,
                ..
            } => {
                format!("&mut [{}] (KernelArg::buffer_mut)", elem.name())
            }
        }
    }
}

/// One launch argument, borrowed for the duration of the launch.
pub struct KernelArg<'a> {
    pub(crate) kind: ArgKind<'a>,
}

pub(crate) enum ArgKind<'a> {
    Scalar {
        ty: Scalar,
        value: HostValue,
        bits: u64,
    },
    Buffer {
        elem: Scalar,
        len: usize,
        memory: MemoryRef<'a>,
    },
}

/// A borrowed buffer, shared or exclusive as the kernel parameter asks.
pub(crate) enum MemoryRef<'a> {
    Cuda(&'a dyn CudaMemory),
    CudaMut(&'a mut dyn CudaMemory),
    Wgpu(&'a WgpuBuffer),
    WgpuMut(&'a mut WgpuBuffer),
}

impl<'a> KernelArg<'a> {
    /// A scalar argument, passed by value.
    pub fn scalar<T: DeviceScalar>(v: T) -> KernelArg<'a> {
        KernelArg {
            kind: ArgKind::Scalar {
                ty: T::SCALAR,
                value: v.host_value(),
                bits: v.param_bits(),
            },
        }
    }

    /// A buffer for a `&[T]` parameter: the kernel only reads it.
    pub fn buffer<T: DeviceScalar>(b: &'a DeviceBuffer<T>) -> KernelArg<'a> {
        let len = b.len();
        let memory = match &b.memory {
            Memory::Cuda(slice) => MemoryRef::Cuda(slice),
            Memory::Wgpu(buffer) => MemoryRef::Wgpu(buffer),
        };
        KernelArg {
            kind: ArgKind::Buffer {
                elem: T::SCALAR,
                len,
                memory,
            },
        }
    }

    /// A buffer for a `&mut [T]` parameter: the kernel may write it, so the
    /// borrow is exclusive.
    pub fn buffer_mut<T: DeviceScalar>(b: &'a mut DeviceBuffer<T>) -> KernelArg<'a> {
        let len = b.len();
        let memory = match &mut b.memory {
            Memory::Cuda(slice) => MemoryRef::CudaMut(slice),
            Memory::Wgpu(buffer) => MemoryRef::WgpuMut(buffer),
        };
        KernelArg {
            kind: ArgKind::Buffer {
                elem: T::SCALAR,
                len,
                memory,
            },
        }
    }

    /// The argument's type, value or length and access, as the checks see them.
    pub fn info(&self) -> ArgInfo {
        match &self.kind {
            ArgKind::Scalar { ty, value, .. } => ArgInfo::Scalar {
                ty: *ty,
                value: *value,
            },
            ArgKind::Buffer { elem, len, memory } => ArgInfo::Buffer {
                elem: *elem,
                len: *len as u64,
                mutable: matches!(memory, MemoryRef::CudaMut(_) | MemoryRef::WgpuMut(_)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpforge_codegen::ir::Literal;

    #[test]
    fn linear_grid_rounds_up() {
        assert_eq!(Grid::linear(1000, 256), Grid::new([4, 1, 1], [256, 1, 1]));
        assert_eq!(Grid::linear(1024, 256).blocks, [4, 1, 1]);
        assert_eq!(Grid::linear(0, 256).blocks, [0, 1, 1]);
        assert_eq!(
            Grid::linear(u32::MAX as usize, 1024).blocks,
            [4_194_304, 1, 1]
        );
        assert_eq!(Grid::linear(usize::MAX, 1).blocks, [u32::MAX, 1, 1]);
        assert_eq!(Grid::linear(10, 0), Grid::new([0, 1, 1], [0, 1, 1]));
    }

    #[test]
    fn scalar_args_describe_themselves() {
        let arg = KernelArg::scalar(2.5f32);
        assert_eq!(
            arg.info(),
            ArgInfo::Scalar {
                ty: Scalar::F32,
                value: HostValue::Scalar(Literal::Float(2.5))
            }
        );
        let ArgKind::Scalar { bits, .. } = arg.kind else {
            panic!("a scalar arg")
        };
        assert_eq!(bits, u64::from(2.5f32.to_bits()));
        assert_eq!(KernelArg::scalar(true).info().describe(), "bool");
    }

    #[test]
    fn impossible_buffers_are_refused() {
        let err = check_new_buffer::<bool>(4).unwrap_err().to_string();
        assert!(err.contains("bool") && err.contains("u8"), "{err}");
        let err = check_new_buffer::<f32>(0).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
        let err = check_new_buffer::<f64>(usize::MAX / 4)
            .unwrap_err()
            .to_string();
        assert!(err.contains("address space"), "{err}");
        assert!(check_new_buffer::<f32>(1).is_ok());
    }
}
