//! The SM clock, power and throttle reasons while `bench` runs, read through
//! NVML (`nvml-wrapper`, which loads `libnvidia-ml` at run time) by a thread
//! that polls every [`POLL`], so that reading them never delays a launch.
//! Without NVML the samples carry no readings and the report says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;
use warpforge::Runtime;

use super::report::GpuReadings;

/// How often the thread reads the GPU.
const POLL: Duration = Duration::from_millis(5);

/// One reading.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    sm_mhz: u32,
    power_w: f64,
    /// NVML's clock event reasons (`nvmlClocksEventReasons`), bit mask.
    reasons: u64,
}

/// What NVML says of the GPU as a whole, for the report's header.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct GpuFacts {
    pub max_sm_mhz: Option<u32>,
    pub power_limit_w: Option<f64>,
    pub driver: Option<String>,
}

/// The polling thread, or the reason there is none.
pub struct Monitor {
    readings: Arc<Mutex<Vec<Reading>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    facts: GpuFacts,
    /// Why nothing is read, when nothing is.
    pub unavailable: Option<String>,
}

impl Monitor {
    /// Starts polling the NVML device at the PCI address of `rt`'s GPU.
    pub fn start(rt: &Runtime) -> Monitor {
        let readings = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut monitor = Monitor {
            readings: readings.clone(),
            stop: stop.clone(),
            thread: None,
            facts: GpuFacts::default(),
            unavailable: None,
        };
        let pci = match pci_address(rt) {
            Ok(pci) => pci,
            Err(why) => {
                monitor.unavailable = Some(why);
                return monitor;
            }
        };
        let nvml = match Nvml::init() {
            Ok(nvml) => nvml,
            Err(e) => {
                monitor.unavailable = Some(format!("NVML did not load: {e}"));
                return monitor;
            }
        };
        let index = match find_device(&nvml, pci) {
            Ok(index) => index,
            Err(why) => {
                monitor.unavailable = Some(why);
                return monitor;
            }
        };
        if let Ok(device) = nvml.device_by_index(index) {
            monitor.facts = GpuFacts {
                max_sm_mhz: device.max_clock_info(Clock::SM).ok(),
                power_limit_w: device
                    .enforced_power_limit()
                    .ok()
                    .map(|mw| f64::from(mw) / 1e3),
                driver: nvml.sys_driver_version().ok(),
            };
        }
        monitor.thread = Some(std::thread::spawn(move || {
            let Ok(device) = nvml.device_by_index(index) else {
                return;
            };
            while !stop.load(Ordering::Relaxed) {
                let reading = Reading {
                    at: Instant::now(),
                    sm_mhz: device.clock_info(Clock::SM).unwrap_or(0),
                    power_w: device.power_usage().map_or(0.0, |mw| f64::from(mw) / 1e3),
                    reasons: device.current_throttle_reasons().map_or(0, |r| r.bits()),
                };
                readings
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(reading);
                std::thread::sleep(POLL);
            }
        }));
        monitor
    }

    /// The GPU as NVML describes it.
    pub fn facts(&self) -> &GpuFacts {
        &self.facts
    }

    /// The readings taken within `window` (host time): the lowest and the
    /// mean SM clock, the mean power and every throttle reason seen.
    pub fn during(&self, (from, to): (Instant, Instant)) -> Option<GpuReadings> {
        let readings = self.readings.lock().unwrap_or_else(PoisonError::into_inner);
        let inside: Vec<&Reading> = readings
            .iter()
            .rev()
            .take_while(|r| r.at >= from)
            .filter(|r| r.at <= to)
            .collect();
        if inside.is_empty() {
            return None;
        }
        let count = inside.len() as f64;
        Some(GpuReadings {
            readings: inside.len(),
            sm_mhz_min: inside.iter().map(|r| r.sm_mhz).min().unwrap_or(0),
            sm_mhz_mean: inside.iter().map(|r| f64::from(r.sm_mhz)).sum::<f64>() / count,
            power_w_mean: inside.iter().map(|r| r.power_w).sum::<f64>() / count,
            reasons: inside.iter().fold(0, |all, r| all | r.reasons),
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The PCI domain, bus and device of `rt`'s GPU, from the CUDA driver.
fn pci_address(rt: &Runtime) -> Result<(u32, u32, u32), String> {
    use warpforge::cudarc::driver::sys::CUdevice_attribute as Attribute;
    let stream = rt
        .cuda_stream()
        .ok_or_else(|| "the runtime is not a CUDA one".to_string())?;
    let context = stream.context();
    let read = |attribute| {
        context
            .attribute(attribute)
            .map(|v| v as u32)
            .map_err(|e| format!("reading the GPU's PCI address: {e}"))
    };
    Ok((
        read(Attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
        read(Attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
        read(Attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
    ))
}

/// The NVML index of the device at PCI address `pci`.
fn find_device(nvml: &Nvml, pci: (u32, u32, u32)) -> Result<u32, String> {
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML counts no devices: {e}"))?;
    (0..count)
        .find(|&index| {
            nvml.device_by_index(index)
                .and_then(|d| d.pci_info())
                .is_ok_and(|p| (p.domain, p.bus, p.device) == pci)
        })
        .ok_or_else(|| {
            format!(
                "NVML has no device at PCI {:04x}:{:02x}:{:02x}",
                pci.0, pci.1, pci.2
            )
        })
}
