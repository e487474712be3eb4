//! The options of the wgpu backend, as a value; [`WgpuOptions::from_env`] is the one place the
//! backend reads the environment (and [`prepare_headless_vulkan`] the one place it changes it).

use std::time::Duration;

use super::Arithmetic;
use crate::{
    hash::RescueLanes,
    health::{parse_wait_timeout, DEFAULT_WAIT_TIMEOUT, WAIT_TIMEOUT_ENV},
    host::HostOptions,
};

/// How a [`super::WgpuCommitter`] picks its adapter and builds its kernels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgpuOptions {
    /// The graphics APIs to look for adapters on (default: Vulkan, Metal and DX12, the compute
    /// APIs; OpenGL only when asked for).
    pub backends: ::wgpu::Backends,
    /// Open the adapter whose name contains this text (any case), instead of the
    /// high-performance one.
    pub adapter_name: Option<String>,
    /// The kernels' integer arithmetic; `None` (the default) takes [`Arithmetic::U64`] where the
    /// adapter has `SHADER_INT64`, else [`Arithmetic::U32`]. [`Arithmetic::U64`] on an adapter
    /// without 64-bit integers is [`crate::GpuError::BackendUnavailable`].
    pub arithmetic: Option<Arithmetic>,
    /// Invocations per RPO/RPX permutation in whole-row hashing and Merkle trees; `None` (the
    /// default) takes [`RescueLanes::Quad`] where the adapter has subgroup operations, else
    /// [`RescueLanes::Single`]. Quads on an adapter without them are
    /// [`crate::GpuError::BackendUnavailable`].
    pub rescue_lanes: Option<RescueLanes>,
    /// Time each commitment's stages with timestamp queries where the adapter has
    /// `TIMESTAMP_QUERY` (default `true`).
    pub timestamps: bool,
    /// Let kernels write the staging buffers of downloads where the adapter allows it (Vulkan
    /// and Metal with `MAPPABLE_PRIMARY_BUFFERS`; default `true`): the row-hashing kernels then
    /// write the rows they read there, and the LDE rows need no copy on the device's queue.
    pub kernel_downloads: bool,
    /// Split device arrays into parts of at most this many bytes (rounded down to a power of
    /// two, at least 256) instead of the adapter's binding limit; makes tests run the
    /// multi-part paths on small inputs.
    pub max_chunk_bytes: Option<u64>,
    /// How result vectors are reserved on the host.
    pub host: HostOptions,
    /// The deadline of every wait on the device (default [`DEFAULT_WAIT_TIMEOUT`], 120 s): a
    /// wait that exceeds it is [`crate::GpuError::Timeout`], and the committer counts its device
    /// as lost.
    pub wait_timeout: Duration,
}

impl Default for WgpuOptions {
    fn default() -> Self {
        Self {
            backends: ::wgpu::Backends::PRIMARY,
            adapter_name: None,
            arithmetic: None,
            rescue_lanes: None,
            timestamps: true,
            kernel_downloads: true,
            max_chunk_bytes: None,
            host: HostOptions::default(),
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }
}

impl WgpuOptions {
    /// The defaults, with wgpu's own variables where set: `WGPU_BACKEND` (the APIs, a
    /// comma-separated list such as `vulkan` or `metal,dx12`) and `WGPU_ADAPTER_NAME` (part of
    /// the adapter's name; blank leaves the default), and [`WAIT_TIMEOUT_ENV`] (seconds; a value
    /// that is not a positive number is logged and leaves the default).
    pub fn from_env() -> Self {
        let defaults = Self::default();
        let wait_timeout = std::env::var(WAIT_TIMEOUT_ENV)
            .ok()
            .filter(|text| !text.trim().is_empty())
            .and_then(|text| {
                let parsed = parse_wait_timeout(&text);
                if parsed.is_none() {
                    tracing::warn!(%text, "{WAIT_TIMEOUT_ENV} is not a positive number of seconds");
                }
                parsed
            });
        Self {
            backends: ::wgpu::Backends::from_env().unwrap_or(defaults.backends),
            adapter_name: std::env::var("WGPU_ADAPTER_NAME").ok().filter(|n| !n.trim().is_empty()),
            wait_timeout: wait_timeout.unwrap_or(defaults.wait_timeout),
            ..defaults
        }
    }
}

// HEADLESS VULKAN
// ================================================================================================

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
