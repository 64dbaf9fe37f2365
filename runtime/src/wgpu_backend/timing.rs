//! Timing submitted work ([`crate::Runtime::time_parts_ms`] on wgpu).
//!
//! Every launch is its own submission (see `launch.rs`), so a closure's
//! launches cannot be bracketed inside one pass or one encoder. Instead the
//! timer submits an empty compute pass that writes a timestamp at its start
//! before the work, and after each piece of it one that writes a timestamp at
//! its end. Pass-boundary timestamps need only `Features::TIMESTAMP_QUERY`
//! (not the `_INSIDE_ENCODERS` or `_INSIDE_PASSES` extensions), and on Vulkan
//! wgpu writes them at `BOTTOM_OF_PIPE`, which waits for every command
//! submitted earlier on the queue: a piece's closing timestamp is taken once
//! it has finished. Without the feature, the host clock runs from an idle
//! device to the end of each piece ([`TimingMethod::HostClock`]).

use std::time::Instant;

use ::wgpu as wg;

use super::WgpuBackend;
use crate::device::TimingMethod;
use crate::Error;

/// Bytes of one resolved timestamp.
const TIMESTAMP_BYTES: u64 = std::mem::size_of::<u64>() as u64;

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

    /// Milliseconds of each of `parts` pieces of work (`part(index)`), by
    /// [`Self::timing_method`]. Waits for earlier work first, so that none
    /// of it is counted.
    pub(crate) fn time_parts_ms(
        &self,
        parts: usize,
        mut part: impl FnMut(usize) -> Result<(), Error>,
    ) -> Result<Vec<f32>, Error> {
        self.wait("waiting for earlier work before timing")?;
        if self.timing_method() == TimingMethod::GpuTimestamps {
            return self.time_with_timestamps(parts, part);
        }
        (0..parts)
            .map(|index| {
                let start = Instant::now();
                part(index)?;
                self.wait("waiting for the timed work")?;
                Ok((start.elapsed().as_secs_f64() * 1e3) as f32)
            })
            .collect()
    }

    fn time_with_timestamps(
        &self,
        parts: usize,
        mut part: impl FnMut(usize) -> Result<(), Error>,
    ) -> Result<Vec<f32>, Error> {
        let op = "timing work with timestamp queries";
        let marks = u32::try_from(parts + 1)
            .ok()
            .filter(|&marks| marks <= wg::QUERY_SET_MAX_QUERIES)
            .ok_or_else(|| {
                Error::Wgpu(format!(
                    "{op} failed: {parts} pieces of work need {} timestamps, and a wgpu query \
                     set holds at most {}: time fewer pieces per call",
                    parts + 1,
                    wg::QUERY_SET_MAX_QUERIES
                ))
            })?;
        let bytes = u64::from(marks) * TIMESTAMP_BYTES;
        let (queries, resolved, staging) = self.checked(op, || {
            let queries = self.device.create_query_set(&wg::QuerySetDescriptor {
                label: Some("warpforge timing"),
                ty: wg::QueryType::Timestamp,
                count: marks,
            });
            let buffer = |label, usage| {
                self.device.create_buffer(&wg::BufferDescriptor {
                    label: Some(label),
                    size: bytes,
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
        for index in 0..parts {
            part(index)?;
            let mark = index as u32 + 1;
            self.checked(op, || {
                let mut encoder = self.timestamp_pass(&queries, None, Some(mark));
                if mark + 1 == marks {
                    encoder.resolve_query_set(&queries, 0..marks, &resolved, 0);
                    encoder.copy_buffer_to_buffer(&resolved, 0, &staging, 0, bytes);
                }
                self.queue.submit([encoder.finish()]);
            })?;
        }
        let stamps: Vec<u64> = self.read_mapped(&staging, op, |bytes| {
            bytes
                .chunks_exact(TIMESTAMP_BYTES as usize)
                .map(|stamp| u64::from_le_bytes(stamp.try_into().expect("8 bytes")))
                .collect()
        })?;
        let nanoseconds_per_tick = f64::from(self.queue.get_timestamp_period());
        stamps
            .windows(2)
            .map(|pair| {
                let ticks = pair[1].checked_sub(pair[0]).ok_or_else(|| {
                    Error::Wgpu(format!(
                        "{op} failed: {}'s timestamp at the end of a piece ({}) is earlier \
                         than at its start ({}), so its timestamp queries cannot time work: \
                         time on another adapter (WGPU_ADAPTER_NAME), or on a device without \
                         TIMESTAMP_QUERY, which times with the host clock",
                        self.info.name, pair[1], pair[0]
                    ))
                })?;
                Ok((ticks as f64 * nanoseconds_per_tick / 1e6) as f32)
            })
            .collect()
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
