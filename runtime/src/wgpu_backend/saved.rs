//! Device copies of part of a buffer: what a tuned launch saves of the
//! call's outputs before candidates overwrite them, and writes back after.
//!
//! Copies move whole 4-byte words (wgpu's copy alignment). A view starts at
//! a multiple of 256 bytes and a buffer's size is a whole number of words, so
//! the word-rounded range stays inside the buffer; where it reaches past the
//! view's last element (an odd number of f16 values), the restore writes
//! back the bytes the save read there, which the launch did not change.

use super::{wg, WgpuBackend, WgpuBuffer, COPY_ALIGN};
use crate::Error;

impl WgpuBackend {
    /// A new buffer holding `bytes` bytes (rounded up to whole words) of
    /// `source` from byte `offset`.
    pub(crate) fn save_bytes(
        &self,
        source: &WgpuBuffer,
        offset: u64,
        bytes: usize,
    ) -> Result<WgpuBuffer, Error> {
        self.check_owner(source, "a buffer of the tuned call")?;
        let size = (bytes as u64).next_multiple_of(COPY_ALIGN);
        let op = format!("saving {bytes} bytes of an output");
        let saved = self.checked(&op, || {
            let saved = self.device.create_buffer(&wg::BufferDescriptor {
                label: Some("warpforge saved output"),
                size,
                usage: wg::BufferUsages::COPY_SRC | wg::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = self
                .device
                .create_command_encoder(&wg::CommandEncoderDescriptor::default());
            encoder.copy_buffer_to_buffer(&source.buffer, offset, &saved, 0, size);
            self.queue.submit([encoder.finish()]);
            saved
        })?;
        Ok(self.wrap(saved, (size / COPY_ALIGN) as usize))
    }

    /// Writes `saved` back into `target` from byte `offset`.
    pub(crate) fn restore_bytes(
        &self,
        saved: &WgpuBuffer,
        target: &mut WgpuBuffer,
        offset: u64,
    ) -> Result<(), Error> {
        self.check_owner(target, "a buffer of the tuned call")?;
        self.checked("restoring an output of a tuned call", || {
            let mut encoder = self
                .device
                .create_command_encoder(&wg::CommandEncoderDescriptor::default());
            encoder.copy_buffer_to_buffer(
                &saved.buffer,
                0,
                &target.buffer,
                offset,
                saved.buffer.size(),
            );
            self.queue.submit([encoder.finish()]);
        })
    }
}
