//! warpforge-runtime. STUB: the public interface that macro-generated code
//! calls; the bodies are being written.

use std::marker::PhantomData;

use warpforge_codegen::eval::HostValue;
use warpforge_codegen::ir::Scalar;
use warpforge_codegen::KernelDef;

pub use half::{bf16, f16};

/// Everything that can go wrong in the runtime; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Stub(String),
}

/// Element types that can live in device buffers and be passed as scalars.
pub trait DeviceScalar: Copy + Send + Sync + 'static {
    const SCALAR: Scalar;
    fn host_value(self) -> HostValue;
}

/// A typed buffer in device memory.
pub struct DeviceBuffer<T: DeviceScalar> {
    _t: PhantomData<T>,
}

impl<T: DeviceScalar> DeviceBuffer<T> {
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Launch dimensions: blocks per grid, and threads per block unless the kernel
/// declares its block shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub blocks: [u32; 3],
    pub threads: Option<[u32; 3]>,
}

/// One launch argument, borrowed for the duration of the launch.
pub enum KernelArg<'a> {
    Scalar {
        ty: Scalar,
        value: HostValue,
        bits: u64,
    },
    Buffer(PhantomData<&'a ()>),
}

impl<'a> KernelArg<'a> {
    pub fn scalar<T: DeviceScalar>(v: T) -> KernelArg<'a> {
        let _ = v;
        todo!()
    }
    pub fn buffer<T: DeviceScalar>(b: &'a DeviceBuffer<T>) -> KernelArg<'a> {
        let _ = b;
        todo!()
    }
    pub fn buffer_mut<T: DeviceScalar>(b: &'a mut DeviceBuffer<T>) -> KernelArg<'a> {
        let _ = b;
        todo!()
    }
}

pub struct Runtime {}

impl Runtime {
    pub fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), Error> {
        let _ = (def, consts, grid, args);
        todo!()
    }
}
