//! [`DeviceBuffer`] and the launch arguments that borrow buffers and carry
//! scalars: [`KernelArg`], and its plain description [`ArgInfo`].

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use warpforge_codegen::eval::HostValue;
use warpforge_codegen::ir::Scalar;

#[cfg(feature = "cuda")]
use crate::cuda::{CudaBuffer, CudaMemory};
use crate::interpreter::InterpreterBuffer;
use crate::scalar::DeviceScalar;
#[cfg(feature = "wgpu")]
use crate::wgpu_backend::WgpuBuffer;
use crate::Error;

/// A typed buffer in device memory, created by a [`crate::Runtime`] and
/// usable only with the runtime (device) that created it.
///
/// The element type `T` is any [`DeviceScalar`] on CUDA (every scalar but
/// `bool`); on wgpu it is `f32`, `i32`, `u32` or `f16`, the types WGSL
/// storage holds, and creating a buffer of another type is an
/// [`Error::Buffer`](crate::Error::Buffer) (a kernel that computes in f16
/// also needs an adapter with `SHADER_F16`); on the interpreter it is any
/// but `e4m3` and `e5m2`.
pub struct DeviceBuffer<T: DeviceScalar> {
    pub(crate) memory: Memory<T>,
}

/// Where a buffer's elements live, per backend.
pub(crate) enum Memory<T> {
    #[cfg(feature = "cuda")]
    Cuda(CudaBuffer<T>),
    /// wgpu buffers are untyped: the marker holds the element type.
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuBuffer, PhantomData<T>),
    /// Host bytes, untyped like wgpu's.
    Interpreter(InterpreterBuffer, PhantomData<T>),
}

impl<T: DeviceScalar> DeviceBuffer<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.memory {
            #[cfg(feature = "cuda")]
            Memory::Cuda(slice) => slice.len(),
            #[cfg(feature = "wgpu")]
            Memory::Wgpu(buffer, _) => buffer.len,
            Memory::Interpreter(buffer, _) => buffer.len,
        }
    }

    /// Whether the buffer has no elements (no runtime creates one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: DeviceScalar> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}>[{}]", T::SCALAR.name(), self.len())
    }
}

/// The alignment of a view's start, in bytes: what a CUDA allocation has
/// (kernels with 16-byte async copies, vector accesses and TMA rely on it)
/// and what every wgpu adapter accepts as a storage binding's offset (its
/// `min_storage_buffer_offset_alignment` is at most 256).
pub const VIEW_ALIGN_BYTES: usize = 256;

/// Part of a buffer, borrowed: `len` elements from byte `offset_bytes`
/// (a multiple of [`VIEW_ALIGN_BYTES`]). `B` is the borrow: shared in
/// [`BufferRef`], exclusive in [`BufferMut`].
pub struct BufferView<B> {
    buffer: B,
    offset_bytes: u64,
    len: usize,
}

/// A shared view: what a `&[T]` kernel parameter takes, as a whole buffer
/// (`&buffer`) or a part of one ([`DeviceBuffer::slice`]). The kernel sees
/// a slice of the view's elements.
pub type BufferRef<'a, T> = BufferView<&'a DeviceBuffer<T>>;

/// An exclusive view: what a `&mut [T]` kernel parameter takes
/// (`&mut buffer`, or [`DeviceBuffer::slice_mut`]).
pub type BufferMut<'a, T> = BufferView<&'a mut DeviceBuffer<T>>;

impl<B> BufferView<B> {
    /// The number of elements the view holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view holds no elements (never: empty views are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<'a, T: DeviceScalar> BufferRef<'a, T> {
    /// The buffer, the view's start in bytes and its length.
    pub(crate) fn parts(&self) -> (&'a DeviceBuffer<T>, u64, usize) {
        (self.buffer, self.offset_bytes, self.len)
    }
}

impl<T: DeviceScalar> BufferMut<'_, T> {
    /// The buffer, the view's start in bytes and its length.
    pub(crate) fn parts_mut(&mut self) -> (&mut DeviceBuffer<T>, u64, usize) {
        (self.buffer, self.offset_bytes, self.len)
    }
}

impl<T: DeviceScalar> Clone for BufferRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: DeviceScalar> Copy for BufferRef<'_, T> {}

impl<'a, T: DeviceScalar> From<&'a DeviceBuffer<T>> for BufferRef<'a, T> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        let len = buffer.len();
        BufferView {
            buffer,
            offset_bytes: 0,
            len,
        }
    }
}

impl<'a, T: DeviceScalar> From<&'a mut DeviceBuffer<T>> for BufferRef<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer<T>) -> Self {
        BufferRef::from(&*buffer)
    }
}

impl<'a, T: DeviceScalar> From<&'a mut DeviceBuffer<T>> for BufferMut<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer<T>) -> Self {
        let len = buffer.len();
        BufferView {
            buffer,
            offset_bytes: 0,
            len,
        }
    }
}

impl<'a, T: DeviceScalar> From<&'a BufferRef<'_, T>> for BufferRef<'a, T> {
    fn from(view: &'a BufferRef<'_, T>) -> Self {
        *view
    }
}

impl<'a, T: DeviceScalar> From<&'a mut BufferMut<'_, T>> for BufferMut<'a, T> {
    fn from(view: &'a mut BufferMut<'_, T>) -> Self {
        BufferView {
            buffer: &mut *view.buffer,
            offset_bytes: view.offset_bytes,
            len: view.len,
        }
    }
}

impl<T: DeviceScalar> DeviceBuffer<T> {
    /// Elements `range` of the buffer, for a `&[T]` kernel parameter, with
    /// no copy. Refused with what to change: a range past the end, an empty
    /// one, or one whose start is not a multiple of [`VIEW_ALIGN_BYTES`]
    /// bytes (64 f32s, 128 f16s).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferRef<'_, T>, Error> {
        let (offset_bytes, len) = self.view_bounds(range)?;
        Ok(BufferView {
            buffer: self,
            offset_bytes,
            len,
        })
    }

    /// Elements `range` of the buffer, for a `&mut [T]` kernel parameter:
    /// as [`DeviceBuffer::slice`], exclusive.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<BufferMut<'_, T>, Error> {
        let (offset_bytes, len) = self.view_bounds(range)?;
        Ok(BufferView {
            buffer: self,
            offset_bytes,
            len,
        })
    }

    /// The start (in bytes) and length of `range`, checked.
    fn view_bounds(&self, range: impl RangeBounds<usize>) -> Result<(u64, usize), Error> {
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(self.len()),
        };
        let name = T::SCALAR.name();
        let (Some(start), Some(end)) = (start, end) else {
            return Err(Error::Buffer(format!(
                "a view's range must lie within the buffer of {} {name} values: this one \
                 overflows usize",
                self.len()
            )));
        };
        if start >= end || end > self.len() {
            return Err(Error::Buffer(format!(
                "cannot view elements {start}..{end} of a buffer of {} {name} values: the range \
                 must be non-empty and end at or before {}",
                self.len(),
                self.len()
            )));
        }
        let per_step = VIEW_ALIGN_BYTES / std::mem::size_of::<T>();
        if start % per_step != 0 {
            return Err(Error::Buffer(format!(
                "a view of {name} values must start at a multiple of {per_step} elements \
                 ({VIEW_ALIGN_BYTES} bytes, the alignment of an allocation, which kernels with \
                 vector or async copies and wgpu's storage bindings need), and this one starts \
                 at {start}: start at {} or {}, or copy the data into its own buffer",
                start / per_step * per_step,
                (start / per_step + 1) * per_step
            )));
        }
        Ok(((start * std::mem::size_of::<T>()) as u64, end - start))
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

/// The refusal of `what`, a launch argument made by a runtime on another
/// backend than this one's, `runs_on`.
pub(crate) fn foreign_argument(what: &str, runs_on: &str) -> Error {
    Error::Buffer(format!(
        "{what} is a buffer of a runtime on another backend, and this runtime runs on {runs_on}: \
         create the buffer with this runtime (download and upload it to move it)"
    ))
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
        /// The parameter's bits, as the GPU backends pass it (the
        /// interpreter takes `value`).
        #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
        bits: u64,
    },
    Buffer {
        elem: Scalar,
        /// The elements the kernel sees: the view's.
        len: usize,
        /// Where the view starts in the buffer, a multiple of [`VIEW_ALIGN_BYTES`].
        offset_bytes: u64,
        memory: MemoryRef<'a>,
    },
}

/// A borrowed buffer, shared or exclusive as the kernel parameter asks.
pub(crate) enum MemoryRef<'a> {
    #[cfg(feature = "cuda")]
    Cuda(&'a dyn CudaMemory),
    #[cfg(feature = "cuda")]
    CudaMut(&'a mut dyn CudaMemory),
    #[cfg(feature = "wgpu")]
    Wgpu(&'a WgpuBuffer),
    #[cfg(feature = "wgpu")]
    WgpuMut(&'a mut WgpuBuffer),
    Interpreter(&'a InterpreterBuffer),
    InterpreterMut(&'a mut InterpreterBuffer),
}

impl MemoryRef<'_> {
    pub(crate) fn is_mutable(&self) -> bool {
        match self {
            #[cfg(feature = "cuda")]
            MemoryRef::Cuda(_) => false,
            #[cfg(feature = "cuda")]
            MemoryRef::CudaMut(_) => true,
            #[cfg(feature = "wgpu")]
            MemoryRef::Wgpu(_) => false,
            #[cfg(feature = "wgpu")]
            MemoryRef::WgpuMut(_) => true,
            MemoryRef::Interpreter(_) => false,
            MemoryRef::InterpreterMut(_) => true,
        }
    }
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

    /// A buffer or a view of one ([`DeviceBuffer::slice`]) for a `&[T]` parameter.
    pub fn buffer<T: DeviceScalar>(b: impl Into<BufferRef<'a, T>>) -> KernelArg<'a> {
        let view = b.into();
        let memory = match &view.buffer.memory {
            #[cfg(feature = "cuda")]
            Memory::Cuda(slice) => MemoryRef::Cuda(&**slice),
            #[cfg(feature = "wgpu")]
            Memory::Wgpu(buffer, _) => MemoryRef::Wgpu(buffer),
            Memory::Interpreter(buffer, _) => MemoryRef::Interpreter(buffer),
        };
        KernelArg {
            kind: ArgKind::Buffer {
                elem: T::SCALAR,
                len: view.len,
                offset_bytes: view.offset_bytes,
                memory,
            },
        }
    }

    /// A buffer or a view of one ([`DeviceBuffer::slice_mut`]) for a `&mut [T]` parameter.
    pub fn buffer_mut<T: DeviceScalar>(b: impl Into<BufferMut<'a, T>>) -> KernelArg<'a> {
        let view = b.into();
        let offset_bytes = view.offset_bytes;
        let memory = match &mut view.buffer.memory {
            #[cfg(feature = "cuda")]
            Memory::Cuda(slice) => MemoryRef::CudaMut(&mut **slice),
            #[cfg(feature = "wgpu")]
            Memory::Wgpu(buffer, _) => MemoryRef::WgpuMut(buffer),
            Memory::Interpreter(buffer, _) => MemoryRef::InterpreterMut(buffer),
        };
        KernelArg {
            kind: ArgKind::Buffer {
                elem: T::SCALAR,
                len: view.len,
                offset_bytes,
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
            ArgKind::Buffer {
                elem, len, memory, ..
            } => ArgInfo::Buffer {
                elem: *elem,
                len: *len as u64,
                mutable: memory.is_mutable(),
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
