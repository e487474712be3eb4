//! The adapter, device and queue, made once per committer, and the translation of wgpu's
//! errors into [`GpuError`].

use std::sync::{Arc, Mutex};

use tracing::{info, warn};

use super::{Arithmetic, WgpuOptions};
use crate::{backend::Backend, error::GpuError, error::Result, hash::RescueLanes};

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
    /// Finds the adapter [`super::WgpuCommitter::with_options`] would open with `options`;
    /// `BackendUnavailable` if none.
    pub fn find(options: &WgpuOptions) -> Result<Self> {
        let info = find_adapter(options)?.get_info();
        Ok(Self {
            name: adapter_name(&info),
            software: info.device_type == ::wgpu::DeviceType::Cpu,
        })
    }
}

/// The adapter to open: among those of `options.backends`, the first whose name contains
/// `options.adapter_name` (any case), else the high-performance one. Public so that kernels of
/// one's own (the WGSL field-arithmetic test's) run on the adapter the backend uses;
/// `BackendUnavailable` if none (or none has the name asked for).
pub fn find_adapter(options: &WgpuOptions) -> Result<::wgpu::Adapter> {
    let instance = ::wgpu::Instance::new(::wgpu::InstanceDescriptor {
        backends: options.backends,
        ..::wgpu::InstanceDescriptor::new_without_display_handle()
    });
    if let Some(wanted) = &options.adapter_name {
        let wanted = wanted.to_lowercase();
        let adapters = pollster::block_on(instance.enumerate_adapters(options.backends));
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        return adapters
            .into_iter()
            .find(|adapter| adapter.get_info().name.to_lowercase().contains(&wanted))
            .ok_or_else(|| {
                unavailable(format!("no adapter named like `{wanted}` among {names:?}"))
            });
    }
    pollster::block_on(instance.request_adapter(&::wgpu::RequestAdapterOptions {
        power_preference: ::wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
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
    /// Invocations per RPO/RPX permutation in whole-row hashing and Merkle trees: quads only
    /// where `quads`, as [`WgpuOptions::rescue_lanes`] says.
    pub rescue_lanes: RescueLanes,
    /// Kernels may write the staging buffers of downloads (`MAPPABLE_PRIMARY_BUFFERS`, on Vulkan
    /// and Metal, unless [`WgpuOptions::kernel_downloads`] is off): the quad row-hashing kernels
    /// write the rows they read there, and the LDE rows need no copy on the device's queue.
    pub kernel_downloads: bool,
    /// The first error wgpu reported outside an error scope, or the reason the device was lost.
    fault: Arc<Mutex<Option<String>>>,
}

impl Context {
    /// Opens a device on the adapter [`find_adapter`] finds for `options`, with the adapter's
    /// best limits, and the features the options ask for where the adapter has them: 64-bit
    /// integers, subgroups, `TIMESTAMP_QUERY`, `MAPPABLE_PRIMARY_BUFFERS`. An arithmetic or
    /// rescue lanes the adapter cannot run is `BackendUnavailable`.
    pub fn new(options: &WgpuOptions) -> Result<Self> {
        let adapter = find_adapter(options)?;
        let info = adapter.get_info();
        let downlevel = adapter.get_downlevel_capabilities();
        if !downlevel.flags.contains(::wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            return Err(unavailable(format!("adapter {} has no compute shaders", info.name)));
        }
        let has_int64 = adapter.features().contains(::wgpu::Features::SHADER_INT64);
        let int64 = match options.arithmetic {
            Some(Arithmetic::U64) if !has_int64 => {
                return Err(unavailable(format!("adapter {} has no 64-bit integers", info.name)))
            },
            Some(arithmetic) => arithmetic == Arithmetic::U64,
            None => has_int64,
        };
        let timestamps =
            adapter.features().contains(::wgpu::Features::TIMESTAMP_QUERY) && options.timestamps;
        let limits = adapter.limits();
        let quads = adapter.features().contains(::wgpu::Features::SUBGROUP)
            && info.subgroup_min_size >= 4
            && info.subgroup_max_size > 0
            && WORKGROUP_SIZE.is_multiple_of(info.subgroup_max_size as u64);
        let rescue_lanes = match options.rescue_lanes {
            Some(RescueLanes::Quad) if !quads => {
                return Err(unavailable(format!(
                    "adapter {} has no subgroups of 4 or more invocations for the quad kernels",
                    info.name
                )))
            },
            Some(lanes) => lanes,
            None if quads => RescueLanes::Quad,
            None => RescueLanes::Single,
        };
        // DX12 keeps read-back buffers in heaps that shaders cannot write.
        let kernel_downloads =
            adapter.features().contains(::wgpu::Features::MAPPABLE_PRIMARY_BUFFERS)
                && matches!(info.backend, ::wgpu::Backend::Vulkan | ::wgpu::Backend::Metal)
                && options.kernel_downloads;
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
            rescue_lanes = rescue_lanes.count(),
            kernel_downloads,
            subgroup_sizes = ?(info.subgroup_min_size, info.subgroup_max_size),
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
        let internal = self.device.push_error_scope(::wgpu::ErrorFilter::Internal);
        let out_of_memory = self.device.push_error_scope(::wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(::wgpu::ErrorFilter::Validation);
        let result = work();
        // Innermost first. Scopes belong to the calling thread, as every wgpu call of `work`
        // does.
        let mut errors = Vec::new();
        for scope in [validation, out_of_memory, internal] {
            if let Some(error) = pollster::block_on(scope.pop()) {
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
