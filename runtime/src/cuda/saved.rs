//! Device copies of part of a buffer: what a tuned launch saves of the
//! call's outputs before candidates overwrite them, and writes back after.

use cudarc::driver::result;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::{driver_error, CudaBackend, CudaMemory};
use crate::Error;

impl CudaBackend {
    /// A new allocation holding `bytes` bytes of `memory` from byte `offset`.
    pub(crate) fn save_bytes(
        &self,
        memory: &dyn CudaMemory,
        offset: u64,
        bytes: usize,
    ) -> Result<CudaSlice<u8>, Error> {
        self.check_owner(memory.context(), || "a buffer of the tuned call".into())?;
        let mut saved = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| driver_error(&format!("allocating {bytes} bytes to save an output"), e))?;
        {
            let (source, _read) = memory.read_ptr(&self.stream);
            let (target, _write) = saved.device_ptr_mut(&self.stream);
            // SAFETY: both ranges lie in live allocations of this context (the
            // caller passes a view's bounds), the guards order the copy on the
            // stream, and the new allocation does not overlap the source.
            unsafe {
                result::memcpy_dtod_async(target, source + offset, bytes, self.stream.cu_stream())
            }
            .map_err(|e| driver_error(&format!("saving {bytes} bytes of an output"), e))?;
        }
        self.check_recorded("saving an output of a tuned call")?;
        Ok(saved)
    }

    /// Writes `saved` back into `memory` from byte `offset`.
    pub(crate) fn restore_bytes(
        &self,
        saved: &CudaSlice<u8>,
        memory: &mut dyn CudaMemory,
        offset: u64,
    ) -> Result<(), Error> {
        self.check_owner(memory.context(), || "a buffer of the tuned call".into())?;
        let bytes = saved.len();
        {
            let (source, _read) = saved.device_ptr(&self.stream);
            let (target, _write) = memory.write_ptr(&self.stream);
            // SAFETY: as in `save_bytes`, with the roles swapped.
            unsafe {
                result::memcpy_dtod_async(target + offset, source, bytes, self.stream.cu_stream())
            }
            .map_err(|e| driver_error(&format!("restoring {bytes} bytes of an output"), e))?;
        }
        self.check_recorded("restoring an output of a tuned call")
    }
}
