//! Loaded CUDA modules and kernel launches, over the driver API (through cudarc's
//! `result`/`sys` layers).
//!
//! Like the owners in `driver`, a [`Module`] unloads itself on drop with its context bound; a
//! [`Kernel`] launches on a given stream with its arguments built by [`kernel_args!`], and with
//! `MIDEN_GPU_CUDA_SYNC=1` synchronizes after each launch so that a fault names its kernel.

use core::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use super::driver::{bind, check, DriverResult, Stream};
use crate::{backend::Backend, error::GpuError};

// MODULES AND LAUNCHES
// ================================================================================================

/// A loaded module, unloaded on drop.
pub(super) struct Module {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
}

impl Module {
    /// Loads a CUBIN image into `ctx`.
    pub(super) fn load(ctx: &Arc<CudaContext>, cubin: &[u8]) -> DriverResult<Self> {
        bind(ctx)?;
        let raw =
            check(unsafe { result::module::load_data(cubin.as_ptr().cast()) }, "cuModuleLoadData")?;
        Ok(Self { raw, ctx: ctx.clone() })
    }

    /// Looks up a kernel by its `extern "C"` name.
    pub(super) fn function(&self, name: &str) -> DriverResult<Kernel> {
        let c_name = std::ffi::CString::new(name).map_err(|_| GpuError::Device {
            backend: Backend::Cuda,
            message: format!("kernel name `{name}` contains a NUL byte"),
        })?;
        let raw = check(
            unsafe { result::module::get_function(self.raw, c_name) },
            "cuModuleGetFunction",
        )?;
        Ok(Kernel { raw, name: name.to_string(), lanes: 1 })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

// SAFETY: module handles may be used from any thread with their context bound.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

/// A kernel of a loaded [`Module`] (valid while the module is).
pub(super) struct Kernel {
    raw: sys::CUfunction,
    name: String,
    /// Threads that work on one item (a row, a Merkle node) together.
    lanes: u32,
}

// SAFETY: function handles are immutable driver objects.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    /// This kernel with `lanes` threads per item.
    pub(super) fn with_lanes(self, lanes: u32) -> Self {
        Self { lanes, ..self }
    }

    /// Threads per item: a launch over `n` items runs `n · lanes` threads.
    pub(super) fn lanes(&self) -> u32 {
        self.lanes
    }

    /// Launches the kernel with `grid` blocks of `block` threads on `stream`.
    ///
    /// Launch-configuration errors are returned here; with `MIDEN_GPU_CUDA_SYNC=1` the stream is
    /// also synchronized so that a fault is attributed to this kernel.
    ///
    /// # Safety
    /// `args` must point at values whose types and order match the kernel's parameters, and every
    /// device pointer among them must be valid for what the kernel accesses.
    pub(super) unsafe fn launch(
        &self,
        stream: &Stream,
        grid: u32,
        block: u32,
        args: &mut [*mut c_void],
    ) -> DriverResult<()> {
        if grid == 0 {
            return Ok(());
        }
        check(
            result::launch_kernel(self.raw, (grid, 1, 1), (block, 1, 1), 0, stream.raw(), args),
            &self.name,
        )?;
        if debug_sync() {
            stream.synchronize().map_err(|e| match e {
                GpuError::Device { backend, message } => {
                    GpuError::Device { backend, message: format!("{}: {message}", self.name) }
                },
                other => other,
            })?;
        }
        Ok(())
    }
}

/// Whether `MIDEN_GPU_CUDA_SYNC=1` asks for a synchronization after every launch.
fn debug_sync() -> bool {
    static SYNC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SYNC.get_or_init(|| std::env::var("MIDEN_GPU_CUDA_SYNC").is_ok_and(|v| v == "1"))
}

/// Kernel arguments: pointers to the given local values, in order.
macro_rules! kernel_args {
    ($($arg:expr),* $(,)?) => {
        [$((&mut $arg) as *mut _ as *mut core::ffi::c_void),*]
    };
}
pub(super) use kernel_args;
