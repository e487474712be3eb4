//! The host's GPUs as a worker's metrics see them ([`GpuMonitor`]): utilization, temperature and
//! memory in use, read through NVML (`libnvidia-ml`, loaded at run time by `nvml-wrapper`) at each
//! scrape. A host without NVML (no NVIDIA driver, another vendor, macOS) has no monitor, and the
//! metrics simply lack these gauges.

use std::fmt;

use nvml_wrapper::{enum_wrappers::device::TemperatureSensor, Nvml};
use tracing::debug;

/// One GPU's readings at one moment. A reading the GPU or its driver does not offer is `None`
/// (its gauge is then absent), never a made-up number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSample {
    /// NVML's index of the GPU (the order of `nvidia-smi`).
    pub index: u32,
    /// The GPU's CUDA ordinal in this process (its PCI address matched with the CUDA driver's),
    /// where the `cuda` feature is on and the driver answers.
    pub cuda_ordinal: Option<usize>,
    /// The GPU's name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Percent of the last sample period during which a kernel ran (NVML's GPU utilization).
    pub utilization_percent: Option<u32>,
    /// The GPU die's temperature in degrees Celsius.
    pub temperature_celsius: Option<u32>,
    /// Device memory allocated by every process on the GPU, in bytes, as NVML counts it.
    pub memory_used_bytes: Option<u64>,
}

/// NVML, opened once, and the GPUs it lists.
pub struct GpuMonitor {
    nvml: Nvml,
    gpus: Vec<Gpu>,
}

/// A GPU as listed when the monitor was opened.
struct Gpu {
    index: u32,
    name: String,
    cuda_ordinal: Option<usize>,
}

impl fmt::Debug for GpuMonitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.gpus.iter().map(|gpu| gpu.name.as_str()).collect();
        f.debug_struct("GpuMonitor").field("gpus", &names).finish()
    }
}

impl GpuMonitor {
    /// Loads NVML (`libnvidia-ml.so.1`, `nvml.dll`) and lists the host's GPUs, each with its
    /// CUDA ordinal where the CUDA driver reports the same PCI address.
    ///
    /// # Errors
    /// Why there is no monitor: NVML cannot be loaded or initialized, or lists no GPU.
    pub fn open() -> Result<Self, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML is not available: {e}"))?;
        let count = nvml.device_count().map_err(|e| format!("NVML lists no GPU: {e}"))?;
        let ordinals = cuda_ordinals();
        let gpus: Vec<Gpu> = (0..count)
            .filter_map(|index| {
                let device = nvml
                    .device_by_index(index)
                    .map_err(|error| debug!(index, %error, "NVML cannot open a GPU"))
                    .ok()?;
                let name = device.name().unwrap_or_else(|_| format!("GPU {index}"));
                let cuda_ordinal = device.pci_info().ok().and_then(|pci| {
                    ordinals
                        .iter()
                        .position(|&address| address == (pci.domain, pci.bus, pci.device))
                });
                Some(Gpu { index, name, cuda_ordinal })
            })
            .collect();
        if gpus.is_empty() {
            return Err("NVML lists no GPU".into());
        }
        Ok(Self { nvml, gpus })
    }

    /// Reads every GPU's utilization, temperature and memory in use now (a few NVML calls per
    /// GPU, each well under a millisecond).
    pub fn sample(&self) -> Vec<GpuSample> {
        self.gpus
            .iter()
            .map(|gpu| {
                let device = self.nvml.device_by_index(gpu.index).ok();
                let read = |what: &str, error: nvml_wrapper::error::NvmlError| {
                    debug!(index = gpu.index, %error, "NVML cannot read the {what}");
                };
                let device = device.as_ref();
                GpuSample {
                    index: gpu.index,
                    cuda_ordinal: gpu.cuda_ordinal,
                    name: gpu.name.clone(),
                    utilization_percent: device
                        .and_then(|device| {
                            device.utilization_rates().map_err(|e| read("utilization", e)).ok()
                        })
                        .map(|rates| rates.gpu),
                    temperature_celsius: device.and_then(|device| {
                        device
                            .temperature(TemperatureSensor::Gpu)
                            .map_err(|e| read("temperature", e))
                            .ok()
                    }),
                    memory_used_bytes: device
                        .and_then(|device| {
                            device.memory_info().map_err(|e| read("memory in use", e)).ok()
                        })
                        .map(|memory| memory.used),
                }
            })
            .collect()
    }
}

/// The PCI address (domain, bus, device) of each CUDA ordinal; none without the `cuda` feature
/// or a driver.
fn cuda_ordinals() -> Vec<(u32, u32, u32)> {
    #[cfg(feature = "cuda")]
    {
        match crate::cuda::pci_addresses() {
            Ok(addresses) => {
                return addresses.iter().map(|a| (a.domain, a.bus, a.device)).collect();
            },
            Err(error) => debug!(%error, "no CUDA ordinals for the GPUs' metrics"),
        }
    }
    Vec::new()
}
