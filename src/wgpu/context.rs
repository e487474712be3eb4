//! The adapter, device and queue, made once per committer, and the translation of wgpu's
//! errors into [`GpuError`].

use std::sync::{Arc, Mutex};

use tracing::{info, warn};

use crate::{backend::Backend, error::GpuError, error::Result};

/// `MIDEN_GPU_WGPU_INT64=0` turns the 64-bit-integer kernels off.
const INT64_ENV: &str = "MIDEN_GPU_WGPU_INT64";

/// `MIDEN_GPU_WGPU_TIMESTAMPS=0` leaves `TIMESTAMP_QUERY` off (no stage times).
const TIMESTAMPS_ENV: &str = "MIDEN_GPU_WGPU_TIMESTAMPS";

/// `MIDEN_GPU_WGPU_RESCUE_LANES=1` hashes RPO and RPX with one invocation per permutation even
/// where the adapter has subgroups (the quad kernels otherwise).
pub(super) const RESCUE_LANES_ENV: &str = "MIDEN_GPU_WGPU_RESCUE_LANES";

/// `MIDEN_GPU_WGPU_KERNEL_DOWNLOADS=0` downloads LDE rows with copies into the staging buffers
/// even where the row-hashing kernels could write them there themselves.
const KERNEL_DOWNLOADS_ENV: &str = "MIDEN_GPU_WGPU_KERNEL_DOWNLOADS";

/// Invocations per workgroup of every kernel (`WORKGROUP_SIZE` in common.wgsl).
pub(super) const WORKGROUP_SIZE: u64 = 256;

// ADAPTER
// ================================================================================================

/// What backend selection needs to know of the adapter a committer would open, read without
/// opening a device or building a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    /// The adapter's name, API and driver.
    pub name: String,
    /// Whether it is a software rasterizer (lavapipe, llvmpipe, WARP).
    pub software: bool,
}

impl AdapterSummary {
    /// Finds the adapter [`super::WgpuCommitter::new`] would open; `BackendUnavailable` if none.
    pub fn find() -> Result<Self> {
        let info = find_adapter()?.get_info();
        Ok(Self {
            name: adapter_name(&info),
            software: info.device_type == ::wgpu::DeviceType::Cpu,
        })
    }
}

/// Prepares a process without a desktop session for Vulkan compute: where `XDG_RUNTIME_DIR` is
/// unset, turns off Mesa's device-select layer (`NODEVICE_SELECT=1`), which otherwise looks for a
/// Wayland display that compute does not need and prints
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` Changes the process
/// environment, so call it at the start of `main`, before any other thread runs.
pub fn prepare_headless_vulkan() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none()
        && std::env::var_os("NODEVICE_SELECT").is_none()
    {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

/// The adapter to open: `WGPU_ADAPTER_NAME` picks one by name, `WGPU_BACKEND` the APIs, which
/// are otherwise Vulkan, Metal and DX12 (the compute APIs; OpenGL only when asked for), and the
/// high-performance adapter is preferred. Public so that kernels of one's own (the WGSL
/// field-arithmetic test's) run on the adapter the backend uses; `BackendUnavailable` if none.
pub fn find_adapter() -> Result<::wgpu::Adapter> {
    let descriptor = ::wgpu::InstanceDescriptor {
        backends: ::wgpu::Backends::PRIMARY.with_env(),
        ..::wgpu::InstanceDescriptor::from_env_or_default()
    };
    let instance = ::wgpu::Instance::new(&descriptor);
    if let Ok(adapter) = ::wgpu::util::initialize_adapter_from_env(&instance, None) {
        return Ok(adapter);
    }
    pollster::block_on(instance.request_adapter(&::wgpu::RequestAdapterOptions {
        power_preference: ::wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
    }))
    .map_err(|e| unavailable(format!("no adapter: {e}")))
}

/// A human-readable name of an adapter.
fn adapter_name(info: &::wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {})", info.name, info.backend, info.driver_info)
}

// CONTEXT
// ================================================================================================

/// A wgpu device and everything known about its adapter.
pub(super) struct Context {
    pub device: ::wgpu::Device,
    pub queue: ::wgpu::Queue,
    pub info: ::wgpu::AdapterInfo,
    pub limits: ::wgpu::Limits,
    /// The device has `SHADER_INT64`: kernels use native 32x32 -> 64-bit products.
    pub int64: bool,
    /// The device has `TIMESTAMP_QUERY`: commitments report their stage times.
    pub timestamps: bool,
    /// The device has subgroup operations, with subgroups of at least 4 invocations that tile a
    /// workgroup: the quad kernels of RPO and RPX are built.
    pub quads: bool,
    /// Invocations per RPO/RPX permutation in whole-row hashing and Merkle trees: 4 (quads)
    /// where `quads`, unless `MIDEN_GPU_WGPU_RESCUE_LANES=1`; else 1.
    pub rescue_lanes: u32,
    /// Kernels may write the staging buffers of downloads (`MAPPABLE_PRIMARY_BUFFERS`, on Vulkan
    /// and Metal, unless `MIDEN_GPU_WGPU_KERNEL_DOWNLOADS=0`): the quad row-hashing kernels
    /// write the rows they read there, and the LDE rows need no copy on the device's queue.
    pub kernel_downloads: bool,
    /// The first error wgpu reported outside an error scope, or the reason the device was lost.
    fault: Arc<Mutex<Option<String>>>,
}

impl Context {
    /// Opens a device on the adapter [`find_adapter`] finds, with the adapter's best limits, and `TIMESTAMP_QUERY` where the adapter
    /// has it (unless `MIDEN_GPU_WGPU_TIMESTAMPS=0`). `int64`: use 64-bit integers if the
    /// adapter has them (`None`, unless `MIDEN_GPU_WGPU_INT64=0`), never (`Some(false)`), or
    /// always (`Some(true)`: an error without them).
    pub fn new(int64: Option<bool>) -> Result<Self> {
        let adapter = find_adapter()?;
        let info = adapter.get_info();
        let downlevel = adapter.get_downlevel_capabilities();
        if !downlevel.flags.contains(::wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            return Err(unavailable(format!("adapter {} has no compute shaders", info.name)));
        }
        let has_int64 = adapter.features().contains(::wgpu::Features::SHADER_INT64);
        let int64 = match int64 {
            Some(true) if !has_int64 => {
                return Err(unavailable(format!("adapter {} has no 64-bit integers", info.name)))
            },
            Some(wanted) => wanted,
            None => has_int64 && std::env::var(INT64_ENV).map_or(true, |v| v.trim() != "0"),
        };
        let timestamps = adapter.features().contains(::wgpu::Features::TIMESTAMP_QUERY)
            && std::env::var(TIMESTAMPS_ENV).map_or(true, |v| v.trim() != "0");
        let limits = adapter.limits();
        let quads = adapter.features().contains(::wgpu::Features::SUBGROUP)
            && limits.min_subgroup_size >= 4
            && limits.max_subgroup_size > 0
            && WORKGROUP_SIZE.is_multiple_of(limits.max_subgroup_size as u64);
        let rescue_lanes =
            if quads && std::env::var(RESCUE_LANES_ENV).map_or(true, |v| v.trim() != "1") {
                4
            } else {
                1
            };
        // DX12 keeps read-back buffers in heaps that shaders cannot write.
        let kernel_downloads =
            adapter.features().contains(::wgpu::Features::MAPPABLE_PRIMARY_BUFFERS)
                && matches!(info.backend, ::wgpu::Backend::Vulkan | ::wgpu::Backend::Metal)
                && std::env::var(KERNEL_DOWNLOADS_ENV).map_or(true, |v| v.trim() != "0");
        let mut required_features = ::wgpu::Features::empty();
        if kernel_downloads {
            required_features |= ::wgpu::Features::MAPPABLE_PRIMARY_BUFFERS;
        }
        if quads {
            required_features |= ::wgpu::Features::SUBGROUP;
        }
        if int64 {
            required_features |= ::wgpu::Features::SHADER_INT64;
        }
        if timestamps {
            required_features |= ::wgpu::Features::TIMESTAMP_QUERY;
        }
        let (device, queue) =
            pollster::block_on(adapter.request_device(&::wgpu::DeviceDescriptor {
                label: Some("miden-gpu"),
                required_features,
                required_limits: limits.clone(),
                experimental_features: ::wgpu::ExperimentalFeatures::disabled(),
                memory_hints: ::wgpu::MemoryHints::Performance,
                trace: ::wgpu::Trace::Off,
            }))
            .map_err(|e| unavailable(format!("cannot open {}: {e}", info.name)))?;

        let fault = Arc::new(Mutex::new(None));
        let sink = fault.clone();
        device.on_uncaptured_error(Arc::new(move |error: ::wgpu::Error| {
            warn!(%error, "wgpu error");
            record(&sink, error.to_string());
        }));
        let sink = fault.clone();
        device.set_device_lost_callback(move |reason, message| {
            record(&sink, format!("device lost ({reason:?}): {message}"));
        });
        info!(
            adapter = %info.name,
            backend = ?info.backend,
            device_type = ?info.device_type,
            int64,
            timestamps,
            rescue_lanes,
            kernel_downloads,
            subgroup_sizes = ?(limits.min_subgroup_size, limits.max_subgroup_size),
            max_binding = limits.max_storage_buffer_binding_size,
            max_buffer = limits.max_buffer_size,
            "wgpu device opened"
        );
        Ok(Self {
            device,
            queue,
            info,
            limits,
            int64,
            timestamps,
            quads,
            rescue_lanes,
            kernel_downloads,
            fault,
        })
    }

    /// Whether the adapter is a software rasterizer (lavapipe, llvmpipe, WARP).
    pub fn is_software(&self) -> bool {
        self.info.device_type == ::wgpu::DeviceType::Cpu
    }

    /// A human-readable name of the adapter.
    pub fn name(&self) -> String {
        adapter_name(&self.info)
    }

    /// Runs `work` inside error scopes for validation, out-of-memory and internal errors, and
    /// turns any error it caused into a [`GpuError`].
    pub fn checked<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
        self.take_fault()?;
        self.device.push_error_scope(::wgpu::ErrorFilter::Internal);
        self.device.push_error_scope(::wgpu::ErrorFilter::OutOfMemory);
        self.device.push_error_scope(::wgpu::ErrorFilter::Validation);
        let result = work();
        let mut errors = Vec::new();
        for _ in 0..3 {
            if let Some(error) = pollster::block_on(self.device.pop_error_scope()) {
                errors.push(error);
            }
        }
        if let Some(error) = errors.into_iter().next() {
            return Err(match error {
                ::wgpu::Error::OutOfMemory { .. } => {
                    device_error(format!("out of memory: {error}"))
                },
                other => device_error(other.to_string()),
            });
        }
        self.take_fault()?;
        result
    }

    /// The recorded uncaptured error or device loss, if any (cleared when read).
    fn take_fault(&self) -> Result<()> {
        let fault =
            self.fault.lock().map_err(|_| device_error("error log poisoned".into()))?.take();
        fault.map_or(Ok(()), |message| Err(device_error(message)))
    }
}

/// Keeps the first error.
fn record(sink: &Mutex<Option<String>>, message: String) {
    if let Ok(mut slot) = sink.lock() {
        slot.get_or_insert(message);
    }
}

/// [`GpuError::BackendUnavailable`] for this backend.
pub(super) fn unavailable(reason: String) -> GpuError {
    GpuError::BackendUnavailable { backend: Backend::Wgpu, reason }
}

/// [`GpuError::Device`] for this backend.
pub(super) fn device_error(message: String) -> GpuError {
    GpuError::Device { backend: Backend::Wgpu, message }
}
