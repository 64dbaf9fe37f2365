//! Timing submitted work ([`crate::Runtime::time_ms`] on wgpu).
//!
//! Every launch is its own submission (see `launch.rs`), so a closure's
//! launches cannot be bracketed inside one pass or one encoder. Instead the
//! timer submits an empty compute pass that writes a timestamp at its start
//! before the work, and one that writes a timestamp at its end after it.
//! Pass-boundary timestamps need only `Features::TIMESTAMP_QUERY` (not the
//! `_INSIDE_ENCODERS` or `_INSIDE_PASSES` extensions), and on Vulkan wgpu
//! writes both at `BOTTOM_OF_PIPE`, which waits for every command submitted
//! earlier on the queue: the second timestamp is taken once the work has
//! finished. Without the feature, the host clock runs from an idle device to
//! the end of the work ([`TimingMethod::HostClock`]).

use std::time::Instant;

use ::wgpu as wg;

use super::WgpuBackend;
use crate::device::TimingMethod;
use crate::Error;

/// Bytes of the two resolved timestamps.
const TIMESTAMP_BYTES: u64 = 2 * std::mem::size_of::<u64>() as u64;

impl WgpuBackend {
    /// The one rule: timestamp queries when the device has them, else the host clock.
    pub(crate) fn timing_method(&self) -> TimingMethod {
        if self
            .device
            .features()
            .contains(wg::Features::TIMESTAMP_QUERY)
        {
            TimingMethod::GpuTimestamps
        } else {
            TimingMethod::HostClock
        }
    }

    /// Milliseconds of the work `work` submits, by [`Self::timing_method`].
    /// Waits for earlier work first, so that none of it is counted.
    pub(crate) fn time_ms(&self, work: impl FnOnce() -> Result<(), Error>) -> Result<f32, Error> {
        self.wait("waiting for earlier work before timing")?;
        if self.timing_method() == TimingMethod::GpuTimestamps {
            return self.time_with_timestamps(work);
        }
        let start = Instant::now();
        work()?;
        self.wait("waiting for the timed work")?;
        Ok((start.elapsed().as_secs_f64() * 1e3) as f32)
    }

    fn time_with_timestamps(&self, work: impl FnOnce() -> Result<(), Error>) -> Result<f32, Error> {
        let op = "timing work with timestamp queries";
        let (queries, resolved, staging) = self.checked(op, || {
            let queries = self.device.create_query_set(&wg::QuerySetDescriptor {
                label: Some("warpforge timing"),
                ty: wg::QueryType::Timestamp,
                count: 2,
            });
            let buffer = |label, usage| {
                self.device.create_buffer(&wg::BufferDescriptor {
                    label: Some(label),
                    size: TIMESTAMP_BYTES,
                    usage,
                    mapped_at_creation: false,
                })
            };
            let resolved = buffer(
                "warpforge timestamps",
                wg::BufferUsages::QUERY_RESOLVE | wg::BufferUsages::COPY_SRC,
            );
            let staging = buffer(
                "warpforge timestamps read back",
                wg::BufferUsages::MAP_READ | wg::BufferUsages::COPY_DST,
            );
            let encoder = self.timestamp_pass(&queries, Some(0), None);
            self.queue.submit([encoder.finish()]);
            (queries, resolved, staging)
        })?;
        work()?;
        self.checked(op, || {
            let mut encoder = self.timestamp_pass(&queries, None, Some(1));
            encoder.resolve_query_set(&queries, 0..2, &resolved, 0);
            encoder.copy_buffer_to_buffer(&resolved, 0, &staging, 0, TIMESTAMP_BYTES);
            self.queue.submit([encoder.finish()]);
        })?;
        let [start, end] = self.read_mapped(&staging, op, |bytes| {
            [0, 8].map(|at| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes")))
        })?;
        let ticks = end.checked_sub(start).ok_or_else(|| {
            Error::Wgpu(format!(
                "{op} failed: {}'s timestamp at the end ({end}) is earlier than at the start \
                 ({start}), so its timestamp queries cannot time work: time on another adapter \
                 (WGPU_ADAPTER_NAME), or on a device without TIMESTAMP_QUERY, which times with \
                 the host clock",
                self.info.name
            ))
        })?;
        let nanoseconds_per_tick = f64::from(self.queue.get_timestamp_period());
        Ok((ticks as f64 * nanoseconds_per_tick / 1e6) as f32)
    }

    /// An encoder holding one empty compute pass that writes timestamp
    /// `begin` at its start and `end` at its end.
    fn timestamp_pass(
        &self,
        queries: &wg::QuerySet,
        begin: Option<u32>,
        end: Option<u32>,
    ) -> wg::CommandEncoder {
        let mut encoder = self
            .device
            .create_command_encoder(&wg::CommandEncoderDescriptor::default());
        encoder.begin_compute_pass(&wg::ComputePassDescriptor {
            label: Some("warpforge timestamp"),
            timestamp_writes: Some(wg::ComputePassTimestampWrites {
                query_set: queries,
                beginning_of_pass_write_index: begin,
                end_of_pass_write_index: end,
            }),
        });
        encoder
    }
}
