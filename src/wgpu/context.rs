//! The adapter, device and queue, made once per committer; the translation of wgpu's errors
//! into [`GpuError`]; and the one place the backend submits work, maps buffers and waits for
//! the device: every wait has the options' deadline, and (feature `fault-injection`) submits,
//! maps and waits pass through the committer's fault injector.

use std::sync::{
    mpsc::{self, TryRecvError},
    Arc, Mutex,
};

use tracing::{info, warn};

use super::{Arithmetic, WgpuOptions};
use crate::{
    backend::Backend,
    error::{DeviceFailure, DeviceStatus, GpuError, LossCause, Result},
    hash::RescueLanes,
    health::DeviceHealth,
};

/// Whether `$ctx`'s injector strikes this operation of kind `$operation` (an
/// [`crate::health::inject::Operation`]) and how ([`Context::inject`]): `Ok(true)` for a wait that is to
/// hang. Without feature `fault-injection` it is `Ok(false)`.
macro_rules! injection {
    ($ctx:expr, $operation:ident, $what:expr) => {{
        #[cfg(feature = "fault-injection")]
        let injected = $ctx.inject(crate::health::inject::Operation::$operation, $what);
        #[cfg(not(feature = "fault-injection"))]
        let injected: Result<bool> = {
            let _ = (&$ctx, $what);
            Ok(false)
        };
        injected
    }};
}

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
    /// Whether the device is lost, the deadline of a wait, the fault injector.
    health: Arc<DeviceHealth>,
}

/// A buffer being mapped for the host: the receiver of its `map_async` callback.
pub(super) type Mapping = mpsc::Receiver<std::result::Result<(), ::wgpu::BufferAsyncError>>;

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
        let health = Arc::new(DeviceHealth::new(Backend::Wgpu, options.wait_timeout));
        let sink = fault.clone();
        let lost = health.clone();
        device.set_device_lost_callback(move |reason, message| {
            let message = format!("device lost ({reason:?}): {message}");
            lost.mark_lost(&message);
            record(&sink, message);
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
            health,
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
    /// turns any error it caused into a [`GpuError`]. Refused at once where the device is lost;
    /// after an error, the device is drained ([`Self::recover`]).
    pub fn checked<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
        self.health.usable()?;
        self.take_fault()?;
        let result = self.scoped(work);
        if let Err(error) = &result {
            return Err(self.recover(error.clone()));
        }
        result
    }

    /// `work` inside the error scopes of [`Self::checked`].
    fn scoped<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
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
                    wgpu_failure(ERROR_SCOPE, format!("out of memory: {error}"))
                },
                other => wgpu_failure(ERROR_SCOPE, other),
            });
        }
        self.take_fault()?;
        result
    }

    /// After a call that failed with `error`: an error that leaves the device unusable marks it
    /// lost (an error of a call during which the device was lost becomes
    /// [`GpuError::DeviceLost`]); otherwise the queue is drained, so that none of the call's
    /// work still runs when its buffers are reused, and a drain that fails marks the device lost.
    fn recover(&self, error: GpuError) -> GpuError {
        self.health.note(&error);
        if self.health.is_lost() {
            return match error {
                GpuError::Device { backend, failure } => {
                    GpuError::DeviceLost { backend, cause: LossCause::Failure(failure) }
                },
                other => other,
            };
        }
        let drained = self.health.wait("draining the queue", false, || {
            let status = self.device.poll(::wgpu::PollType::Poll);
            Ok(status.map_err(|e| wgpu_failure("draining the queue", e))?.is_queue_empty())
        });
        if let Err(drain) = drained {
            self.health.mark_lost(&drain.to_string());
        }
        error
    }

    /// Whether the device is lost.
    pub fn is_lost(&self) -> bool {
        self.health.is_lost()
    }

    /// The device's health (its loss, the wait deadline, the fault injector).
    #[cfg(feature = "fault-injection")]
    pub fn health(&self) -> &Arc<DeviceHealth> {
        &self.health
    }

    // SUBMITS, MAPS AND WAITS
    // --------------------------------------------------------------------------------------------

    /// Submits `commands` to the queue.
    pub fn submit(&self, commands: ::wgpu::CommandBuffer) -> Result<::wgpu::SubmissionIndex> {
        injection!(self, Submit, "queue submit")?;
        Ok(self.queue.submit([commands]))
    }

    /// Starts mapping `bounds` of `buffer` for the host in `mode`; wait for it with
    /// [`Self::wait_for_map`].
    pub fn map(
        &self,
        buffer: &::wgpu::Buffer,
        mode: ::wgpu::MapMode,
        bounds: impl std::ops::RangeBounds<u64>,
    ) -> Result<Mapping> {
        injection!(self, Map, "buffer map")?;
        let (tx, rx) = mpsc::channel();
        buffer.map_async(mode, bounds, move |r| {
            let _ = tx.send(r);
        });
        Ok(rx)
    }

    /// Waits, within the deadline, until `mapping` of `buffer` is mapped; `operation` names
    /// what is waited for. If the wait fails on a device that is not lost, the mapping is let
    /// finish and undone, so that the buffer can be mapped again.
    pub fn wait_for_map(
        &self,
        buffer: &::wgpu::Buffer,
        mapping: &Mapping,
        operation: &'static str,
    ) -> Result<()> {
        let waited = injection!(self, Wait, operation)
            .and_then(|hang| self.poll_map(mapping, operation, hang));
        if waited.is_err() && !self.is_lost() && self.settle_map(mapping, operation).is_ok() {
            buffer.unmap();
        }
        waited
    }

    /// [`Self::wait_for_map`], never struck by the fault injector: for the cleanup after an
    /// error.
    pub fn settle_map(&self, mapping: &Mapping, operation: &'static str) -> Result<()> {
        self.poll_map(mapping, operation, false)
    }

    fn poll_map(&self, mapping: &Mapping, operation: &'static str, hang: bool) -> Result<()> {
        self.health.wait(operation, hang, || {
            self.device.poll(::wgpu::PollType::Poll).map_err(|e| wgpu_failure(operation, e))?;
            match mapping.try_recv() {
                Ok(Ok(())) => Ok(true),
                Ok(Err(e)) => Err(wgpu_failure(operation, e)),
                Err(TryRecvError::Empty) => Ok(false),
                Err(TryRecvError::Disconnected) => {
                    Err(refused(operation, "the mapping was dropped"))
                },
            }
        })
    }

    /// The fault the injector gives this operation of kind `operation`, if any: `Ok(true)` for
    /// a wait that is to hang; an error (a sticky one destroys the device) otherwise.
    #[cfg(feature = "fault-injection")]
    fn inject(
        &self,
        operation: crate::health::inject::Operation,
        what: &'static str,
    ) -> Result<bool> {
        use crate::health::inject::{Injection, Operation};
        match self.health.injected(operation) {
            None => Ok(false),
            Some(Injection::Hang) if operation == Operation::Wait => Ok(true),
            Some(Injection::Sticky) => {
                self.device.destroy();
                let status =
                    DeviceStatus::Internal("the device was destroyed (injected fault)".to_string());
                let failure = DeviceFailure::new(what, status);
                let lost = GpuError::DeviceLost {
                    backend: Backend::Wgpu,
                    cause: LossCause::Failure(failure),
                };
                self.health.note(&lost);
                Err(lost)
            },
            Some(_) => Err(refused(what, "injected fault")),
        }
    }

    /// The recorded uncaptured error or device loss, if any (cleared when read).
    fn take_fault(&self) -> Result<()> {
        let fault = self.fault.lock().map_err(|_| refused("error log", "poisoned"))?.take();
        fault.map_or(Ok(()), |message| Err(wgpu_failure("uncaptured wgpu error", message)))
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

/// The call named by errors the error scopes of [`Context::checked`] caught.
const ERROR_SCOPE: &str = "wgpu error scope";

/// [`GpuError::Device`] for `call`, which failed with wgpu's `error`.
pub(super) fn wgpu_failure(call: &'static str, error: impl std::fmt::Display) -> GpuError {
    let failure = DeviceFailure::new(call, DeviceStatus::Wgpu(error.to_string()));
    GpuError::Device { backend: Backend::Wgpu, failure }
}

/// [`GpuError::Device`] for `call`, refused by a condition this backend checks (`condition`).
pub(super) fn refused(call: &'static str, condition: impl Into<String>) -> GpuError {
    GpuError::internal(Backend::Wgpu, call, condition)
}
