//! The wgpu backend: one adapter (Vulkan, Metal or DX12) and its queue,
//! storage buffers, the pipeline cache and launches of WGSL variants.
//!
//! wgpu reports most failures asynchronously, to an error scope or to the
//! device's uncaptured-error handler (whose default panics). Every operation
//! here runs inside error scopes and turns what they catch into an
//! [`Error::Wgpu`]; the handler records whatever escapes them (errors of
//! other threads' scopes never land in ours), and the next operation reports it.

mod launch;
#[cfg(test)]
#[path = "../../tests/common/mesa.rs"]
mod mesa;
mod saved;
mod timing;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ::wgpu::{self as wg, util::DeviceExt};

use crate::device::{DeviceBackend, DeviceInfo, WgpuDeviceInfo};
use crate::scalar::{bytes_of, values_from_bytes, DeviceScalar};
use crate::variants::VariantCache;
use crate::Error;
use warpforge_codegen::ir::Scalar;

pub(crate) use launch::WgslVariant;

/// wgpu copies and maps buffers in units of 4 bytes.
const COPY_ALIGN: u64 = ::wgpu::COPY_BUFFER_ALIGNMENT;

pub(crate) struct WgpuBackend {
    pub(crate) device: wg::Device,
    pub(crate) queue: wg::Queue,
    pub(crate) info: DeviceInfo,
    /// Errors that reached the uncaptured-error handler or the device-lost
    /// callback, reported by the next operation.
    escaped: Arc<Mutex<Vec<String>>>,
    /// Shared with the runtimes forked from this one (same device).
    pipelines: Arc<VariantCache<Option<[u32; 3]>, WgslVariant>>,
    id: u64,
}

/// A storage buffer of `len` elements, rounded up to whole 4-byte words.
pub(crate) struct WgpuBuffer {
    pub(crate) buffer: wg::Buffer,
    pub(crate) len: usize,
    /// The [`WgpuBackend::id`] of the runtime that made it.
    owner: u64,
}

/// The end of the work submitted when it was recorded.
pub(crate) struct WgpuEvent {
    device: wg::Device,
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl WgpuEvent {
    /// Waits until the work before the event is done (waiting for the device
    /// also waits for what was submitted after it, which is all wgpu offers).
    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        if !self.done.load(Ordering::Acquire) {
            self.device
                .poll(wg::PollType::wait_indefinitely())
                .map_err(|e| Error::Wgpu(format!("waiting for an event: {e}")))?;
        }
        Ok(())
    }
}

/// Numbers runtimes, so buffers know theirs (wgpu's handles compare equal
/// across instances).
static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(0);

impl WgpuBackend {
    pub(crate) fn new() -> Result<WgpuBackend, Error> {
        // WGPU_BACKEND, WGPU_ADAPTER_NAME and friends still choose, as wgpu documents.
        let instance =
            wg::Instance::new(wg::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wg::RequestAdapterOptions {
            power_preference: wg::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        }))
        .map_err(|e| {
            Error::NoDevice(format!(
                "wgpu found no adapter ({e}): install a GPU driver with Vulkan, Metal or DX12 \
                 support, or Mesa's CPU Vulkan driver lavapipe (Debian/Ubuntu: `apt-get install \
                 mesa-vulkan-drivers libvulkan1`)"
            ))
        })?;
        let adapter_info = adapter.get_info();
        // Only what the adapter offers: asking for more fails the device.
        let features = adapter.features()
            & (wg::Features::SHADER_F16 | wg::Features::SUBGROUP | wg::Features::TIMESTAMP_QUERY);
        let (device, queue) = pollster::block_on(adapter.request_device(&wg::DeviceDescriptor {
            label: Some("warpforge"),
            required_features: features,
            required_limits: adapter.limits(),
            experimental_features: wg::ExperimentalFeatures::disabled(),
            memory_hints: wg::MemoryHints::Performance,
            trace: wg::Trace::Off,
        }))
        .map_err(|e| {
            Error::NoDevice(format!(
                "wgpu could not open {} ({:?}): {e}. Update the graphics driver, or pick another \
                 adapter with WGPU_ADAPTER_NAME",
                adapter_info.name, adapter_info.backend
            ))
        })?;
        let backend = WgpuBackend::on_device(device, queue);
        // This device is ours, so what escapes the error scopes comes to us; an
        // app's device keeps the handlers the app set (see `on_device`).
        let sink = backend.escaped.clone();
        backend
            .device
            .on_uncaptured_error(Arc::new(move |error: wg::Error| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(error.to_string());
            }));
        let sink = backend.escaped.clone();
        backend
            .device
            .set_device_lost_callback(move |reason, message| {
                // Dropping the runtime destroys the device; that is no error.
                if reason != wg::DeviceLostReason::Destroyed {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("the device was lost ({reason:?}): {message}"));
                }
            });
        Ok(backend)
    }

    /// A backend on a device and queue, its own or an app's. Every operation
    /// runs in error scopes, so an app's device needs no handler of ours;
    /// what escapes the scopes (errors of work the app interleaves from other
    /// threads) goes to the app's uncaptured-error handler.
    pub(crate) fn on_device(device: wg::Device, queue: wg::Queue) -> WgpuBackend {
        let features = device.features() & (wg::Features::SHADER_F16 | wg::Features::SUBGROUP);
        let info = device_info(&device.adapter_info(), &device.limits(), features);
        WgpuBackend {
            device,
            queue,
            info,
            escaped: Arc::new(Mutex::new(Vec::new())),
            pipelines: Arc::default(),
            id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A backend on the same device and queue, sharing pipelines and
    /// buffers (the same id): wgpu has one queue per device, so a fork adds
    /// no concurrency and its work stays in submission order.
    pub(crate) fn fork(&self) -> WgpuBackend {
        WgpuBackend {
            device: self.device.clone(),
            queue: self.queue.clone(),
            info: self.info.clone(),
            escaped: self.escaped.clone(),
            pipelines: self.pipelines.clone(),
            id: self.id,
        }
    }

    /// A flag that becomes true when the work submitted so far is done.
    pub(crate) fn record_event(&self) -> WgpuEvent {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        self.queue
            .on_submitted_work_done(move || flag.store(true, Ordering::Release));
        WgpuEvent {
            device: self.device.clone(),
            done,
        }
    }

    /// Runs `work` inside error scopes; what they catch, or what escaped
    /// since the last operation, becomes an error about `op`.
    fn checked<R>(&self, op: &str, work: impl FnOnce() -> R) -> Result<R, Error> {
        let scopes = [
            self.device.push_error_scope(wg::ErrorFilter::OutOfMemory),
            self.device.push_error_scope(wg::ErrorFilter::Validation),
            self.device.push_error_scope(wg::ErrorFilter::Internal),
        ];
        let result = work();
        // Scopes pop innermost first.
        let mut caught: Vec<wg::Error> = scopes
            .into_iter()
            .rev()
            .filter_map(|scope| pollster::block_on(scope.pop()))
            .collect();
        if let Some(error) = caught.pop() {
            return Err(wgpu_error(op, &error));
        }
        self.check_escaped(op)?;
        Ok(result)
    }

    fn check_escaped(&self, op: &str) -> Result<(), Error> {
        let escaped =
            std::mem::take(&mut *self.escaped.lock().unwrap_or_else(PoisonError::into_inner));
        if escaped.is_empty() {
            return Ok(());
        }
        Err(Error::Wgpu(format!(
            "wgpu reported an error while {op} (possibly from earlier work: submissions run \
             asynchronously): {}",
            escaped.join("; ")
        )))
    }

    fn check_owner(&self, buffer: &WgpuBuffer, what: &str) -> Result<(), Error> {
        if buffer.owner != self.id {
            return Err(Error::Buffer(format!(
                "{what} belongs to another runtime's wgpu device: create the buffer with this \
                 runtime (download and upload it to move it)"
            )));
        }
        Ok(())
    }

    pub(crate) fn upload<T: DeviceScalar>(&self, data: &[T]) -> Result<WgpuBuffer, Error> {
        check_element::<T>()?;
        let bytes = padded_bytes(data);
        self.check_size::<T>(data.len(), bytes.len() as u64)?;
        let op = format!("uploading {} {} values", data.len(), T::SCALAR.name());
        let buffer = self.checked(&op, || {
            self.device
                .create_buffer_init(&wg::util::BufferInitDescriptor {
                    label: None,
                    contents: &bytes,
                    usage: storage_usage(),
                })
        })?;
        Ok(self.wrap(buffer, data.len()))
    }

    pub(crate) fn alloc_zeroed<T: DeviceScalar>(&self, len: usize) -> Result<WgpuBuffer, Error> {
        check_element::<T>()?;
        let size = padded_size::<T>(len);
        self.check_size::<T>(len, size)?;
        let op = format!("allocating {len} {} values", T::SCALAR.name());
        // wgpu zero-initializes every buffer.
        let buffer = self.checked(&op, || {
            self.device.create_buffer(&wg::BufferDescriptor {
                label: None,
                size,
                usage: storage_usage(),
                mapped_at_creation: false,
            })
        })?;
        Ok(self.wrap(buffer, len))
    }

    /// Takes an app's buffer as `len` elements of `T` (see
    /// [`crate::DeviceBuffer::from_wgpu_buffer`]).
    pub(crate) fn adopt<T: DeviceScalar>(
        &self,
        buffer: wg::Buffer,
        len: usize,
    ) -> Result<WgpuBuffer, Error> {
        check_element::<T>()?;
        let needed = padded_size::<T>(len);
        self.check_size::<T>(len, needed)?;
        let missing = storage_usage() - buffer.usage();
        if !missing.is_empty() {
            return Err(Error::Buffer(format!(
                "the wgpu::Buffer lacks the usages {missing:?}: create it with \
                 BufferUsages::STORAGE | COPY_SRC | COPY_DST (kernels bind it, copies and downloads \
                 copy it)"
            )));
        }
        if buffer.size() < needed {
            return Err(Error::Buffer(format!(
                "the wgpu::Buffer has {} bytes and {len} {} values need {needed} (rounded up to \
                 whole 4-byte words): pass a smaller length or a larger buffer",
                buffer.size(),
                T::SCALAR.name()
            )));
        }
        Ok(self.wrap(buffer, len))
    }

    fn wrap(&self, buffer: wg::Buffer, len: usize) -> WgpuBuffer {
        WgpuBuffer {
            buffer,
            len,
            owner: self.id,
        }
    }

    pub(crate) fn download<T: DeviceScalar>(&self, source: &WgpuBuffer) -> Result<Vec<T>, Error> {
        self.check_owner(source, "the buffer to download")?;
        let op = format!("downloading {} {} values", source.len, T::SCALAR.name());
        // An app's buffer may be longer than its elements.
        let size = padded_size::<T>(source.len);
        let staging = self.checked(&op, || {
            let staging = self.device.create_buffer(&wg::BufferDescriptor {
                label: Some("warpforge download"),
                size,
                usage: wg::BufferUsages::MAP_READ | wg::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = self
                .device
                .create_command_encoder(&wg::CommandEncoderDescriptor::default());
            encoder.copy_buffer_to_buffer(&source.buffer, 0, &staging, 0, size);
            self.queue.submit([encoder.finish()]);
            staging
        })?;
        self.read_mapped(&staging, &op, |bytes| {
            values_from_bytes(&bytes[..source.len * std::mem::size_of::<T>()])
        })
    }

    /// Maps `staging` (a `MAP_READ` buffer that submitted copies fill),
    /// waits for the device, and hands its bytes to `read`.
    fn read_mapped<R>(
        &self,
        staging: &wg::Buffer,
        op: &str,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, Error> {
        let mapped = Arc::new(Mutex::new(None));
        let sink = mapped.clone();
        staging.map_async(wg::MapMode::Read, .., move |result| {
            *sink.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
        });
        self.wait(op)?;
        let outcome = mapped.lock().unwrap_or_else(PoisonError::into_inner).take();
        match outcome {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(Error::Wgpu(format!("{op} failed: mapping the copy: {e}"))),
            None => {
                return Err(Error::Wgpu(format!(
                    "{op} failed: the copy was not mapped after the device went idle; this is a \
                     bug in wgpu or the driver: report it with the adapter's name ({})",
                    self.info.name
                )))
            }
        }
        let value = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::Wgpu(format!("{op} failed: reading the mapped copy: {e}")))?;
            read(&view)
        };
        staging.unmap();
        Ok(value)
    }

    /// Buffer-to-buffer copy of equal-length buffers (the caller checks the
    /// lengths): the elements, rounded up to 4 bytes, which both hold.
    pub(crate) fn copy<T: DeviceScalar>(
        &self,
        source: &WgpuBuffer,
        target: &mut WgpuBuffer,
    ) -> Result<(), Error> {
        self.check_owner(source, "the buffer to copy from")?;
        self.check_owner(target, "the buffer to copy into")?;
        self.checked("copying a buffer on the device", || {
            let mut encoder = self
                .device
                .create_command_encoder(&wg::CommandEncoderDescriptor::default());
            encoder.copy_buffer_to_buffer(
                &source.buffer,
                0,
                &target.buffer,
                0,
                padded_size::<T>(source.len),
            );
            self.queue.submit([encoder.finish()]);
        })
    }

    pub(crate) fn copy_from_host<T: DeviceScalar>(
        &self,
        target: &mut WgpuBuffer,
        data: &[T],
    ) -> Result<(), Error> {
        self.check_owner(target, "the buffer to copy into")?;
        if target.len != data.len() {
            return Err(Error::Buffer(format!(
                "cannot copy {} host values into a device buffer of {} {} values: the lengths must \
                 be equal (upload a new buffer to change the length)",
                data.len(),
                target.len,
                T::SCALAR.name()
            )));
        }
        let bytes = padded_bytes(data);
        let op = format!(
            "copying {} {} values to the device",
            data.len(),
            T::SCALAR.name()
        );
        self.checked(&op, || self.queue.write_buffer(&target.buffer, 0, &bytes))
    }

    /// Waits until all submitted work has finished.
    pub(crate) fn wait(&self, op: &str) -> Result<(), Error> {
        self.device
            .poll(wg::PollType::wait_indefinitely())
            .map_err(|e| Error::Wgpu(format!("{op} failed: waiting for the device: {e}")))?;
        self.check_escaped(op)
    }

    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        self.wait("waiting for the device")
    }

    /// Refuses buffers past the adapter's limits with a message, before wgpu
    /// would refuse them with a validation error.
    fn check_size<T: DeviceScalar>(&self, len: usize, bytes: u64) -> Result<(), Error> {
        let DeviceBackend::Wgpu(limits) = &self.info.backend else {
            return Ok(());
        };
        if bytes > limits.max_buffer_size {
            return Err(Error::Buffer(format!(
                "a buffer of {len} {} values ({bytes} bytes) is larger than {} allows ({} bytes): \
                 split the data into smaller buffers",
                T::SCALAR.name(),
                self.info.name,
                limits.max_buffer_size
            )));
        }
        Ok(())
    }
}

fn storage_usage() -> wg::BufferUsages {
    wg::BufferUsages::STORAGE | wg::BufferUsages::COPY_SRC | wg::BufferUsages::COPY_DST
}

/// Refuses element types WGSL has no storage type for.
fn check_element<T: DeviceScalar>() -> Result<(), Error> {
    match T::SCALAR {
        Scalar::F32 | Scalar::I32 | Scalar::U32 | Scalar::F16 => Ok(()),
        other => Err(Error::Buffer(format!(
            "buffers of {} are not supported on the wgpu backend: WGSL stores only f32, i32, u32 \
             and f16. Convert the data to one of those, or run on CUDA (WARPFORGE_BACKEND=cuda)",
            other.name()
        ))),
    }
}

fn padded_size<T>(len: usize) -> u64 {
    ((len * std::mem::size_of::<T>()) as u64).next_multiple_of(COPY_ALIGN)
}

/// The bytes of `data`, zero-padded to a whole number of 4-byte words.
fn padded_bytes<T: DeviceScalar>(data: &[T]) -> Vec<u8> {
    let mut bytes = bytes_of(data).to_vec();
    bytes.resize(padded_size::<T>(data.len()) as usize, 0);
    bytes
}

fn wgpu_error(op: &str, error: &wg::Error) -> Error {
    let advice = match error {
        wg::Error::OutOfMemory { .. } => {
            ": the device is out of memory; free buffers you no longer need or use smaller sizes"
        }
        _ => "",
    };
    Error::Wgpu(format!("{op} failed: {error}{advice}"))
}

fn device_info(
    adapter: &wg::AdapterInfo,
    limits: &wg::Limits,
    features: wg::Features,
) -> DeviceInfo {
    let driver = if adapter.driver_info.is_empty() {
        adapter.driver.clone()
    } else {
        format!("{} ({})", adapter.driver, adapter.driver_info)
    };
    DeviceInfo {
        backend: DeviceBackend::Wgpu(WgpuDeviceInfo {
            api: api_name(adapter.backend).to_string(),
            driver,
            shader_f16: features.contains(wg::Features::SHADER_F16),
            subgroup_sizes: features
                .contains(wg::Features::SUBGROUP)
                .then_some((adapter.subgroup_min_size, adapter.subgroup_max_size)),
            max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_uniform_buffer_binding_size: limits.max_uniform_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
        }),
        name: adapter.name.clone(),
        ordinal: 0,
        compute_capability: (0, 0),
        sm_count: 0,
        max_threads_per_block: limits.max_compute_invocations_per_workgroup,
        max_block_dims: [
            limits.max_compute_workgroup_size_x,
            limits.max_compute_workgroup_size_y,
            limits.max_compute_workgroup_size_z,
        ],
        max_grid_dims: [limits.max_compute_workgroups_per_dimension; 3],
        // Workgroup memory is static in WGSL: there is no opt-in above a default.
        shared_mem_per_block: limits.max_compute_workgroup_storage_size,
        shared_mem_per_block_optin: limits.max_compute_workgroup_storage_size,
        shared_mem_per_sm: 0,
        registers_per_block: 0,
        warp_size: adapter.subgroup_min_size,
        l2_cache_bytes: 0,
        total_memory_bytes: 0,
        driver_version: (0, 0),
    }
}

fn api_name(backend: wg::Backend) -> &'static str {
    match backend {
        wg::Backend::Vulkan => "Vulkan",
        wg::Backend::Metal => "Metal",
        wg::Backend::Dx12 => "DX12",
        wg::Backend::Gl => "OpenGL",
        wg::Backend::BrowserWebGpu => "WebGPU",
        wg::Backend::Noop => "no-op",
    }
}
