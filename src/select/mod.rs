//! Backend selection: the committer of a [`BackendOptions`], explicit or automatic.
//!
//! This sits above every backend: it names them, asks which are usable and creates the chosen
//! one. [`Backend::Auto`] decides from what the system reports (a CUDA driver and device, a
//! wgpu adapter's type) before any device, kernel or pipeline is made for a backend it will not
//! use, so a machine with only software adapters settles on the CPU at once.

mod options;

pub use options::{BackendOptions, BACKEND_ENV};

use core::str::FromStr;
use std::sync::Arc;

use tracing::{info, warn};

use crate::{
    backend::Backend,
    committer::GpuCommitter,
    cpu::{CpuCommitter, CpuOptions},
    error::{GpuError, Result},
};

impl Backend {
    /// Creates the committer for this backend with every backend's default options (see
    /// [`BackendOptions::create`]).
    pub fn create(self) -> Result<Arc<dyn GpuCommitter>> {
        BackendOptions::new(self).create()
    }
}

impl BackendOptions {
    /// Creates the committer of [`Self::backend`] with its options.
    ///
    /// An explicit backend that cannot be used is [`GpuError::BackendUnavailable`]; only
    /// [`Backend::Auto`] falls back, and it logs what it chose and why.
    pub fn create(&self) -> Result<Arc<dyn GpuCommitter>> {
        match self.backend {
            Backend::Cpu => Ok(Arc::new(CpuCommitter::with_options(self.cpu))),
            Backend::Wgpu => create_wgpu(self),
            Backend::Cuda => create_cuda(self),
            Backend::Auto => {
                let committer = create_cuda(self)
                    .or_else(|cuda| {
                        log_skipped(Backend::Cuda, &cuda);
                        create_hardware_wgpu(self)
                    })
                    .or_else(|wgpu| {
                        log_skipped(Backend::Wgpu, &wgpu);
                        warn!("no GPU backend available; committing on the CPU");
                        Ok::<_, GpuError>(cpu_committer(self.cpu))
                    })?;
                info!(
                    backend = %committer.backend(),
                    device = %committer.device_name(),
                    "backend selected"
                );
                Ok(committer)
            },
        }
    }
}

/// Logs why [`Backend::Auto`] did not take `backend`: a setting that names something absent (a
/// device list with no such device) as a warning, since what the user asked for is not done; a
/// missing device or driver as information.
fn log_skipped(backend: Backend, reason: &GpuError) {
    match reason {
        GpuError::InvalidDeviceList { .. } => {
            warn!(%backend, %reason, "backend not used: its settings are invalid")
        },
        _ => info!(%backend, %reason, "backend not used"),
    }
}

fn cpu_committer(options: CpuOptions) -> Arc<dyn GpuCommitter> {
    Arc::new(CpuCommitter::with_options(options))
}

impl FromStr for Backend {
    type Err = GpuError;

    fn from_str(s: &str) -> Result<Self> {
        let name = s.trim().to_ascii_lowercase();
        [Self::Auto, Self::Cpu, Self::Wgpu, Self::Cuda]
            .into_iter()
            .find(|backend| backend.name() == name)
            .ok_or_else(|| GpuError::UnknownBackend(s.to_string()))
    }
}

// BACKEND CONSTRUCTORS
// ================================================================================================

#[cfg(feature = "cuda")]
fn create_cuda(options: &BackendOptions) -> Result<Arc<dyn GpuCommitter>> {
    Ok(Arc::new(crate::cuda::CudaCommitter::with_options(options.cuda.clone())?))
}

#[cfg(not(feature = "cuda"))]
fn create_cuda(_: &BackendOptions) -> Result<Arc<dyn GpuCommitter>> {
    Err(not_compiled(Backend::Cuda, "cuda"))
}

#[cfg(feature = "wgpu")]
fn create_wgpu(options: &BackendOptions) -> Result<Arc<dyn GpuCommitter>> {
    Ok(Arc::new(crate::wgpu::WgpuCommitter::with_options(options.wgpu.clone())?))
}

#[cfg(not(feature = "wgpu"))]
fn create_wgpu(_: &BackendOptions) -> Result<Arc<dyn GpuCommitter>> {
    Err(not_compiled(Backend::Wgpu, "wgpu"))
}

/// `Auto` takes wgpu only on a hardware adapter: a software rasterizer (lavapipe, WARP) is
/// slower than the CPU backend. The adapter's type is read before a device is opened.
#[cfg(feature = "wgpu")]
fn create_hardware_wgpu(options: &BackendOptions) -> Result<Arc<dyn GpuCommitter>> {
    let adapter = crate::wgpu::AdapterSummary::find(&options.wgpu)?;
    if adapter.software {
        return Err(GpuError::BackendUnavailable {
            backend: Backend::Wgpu,
            reason: format!("only a software adapter is present ({})", adapter.name),
        });
    }
    create_wgpu(options)
}

#[cfg(not(feature = "wgpu"))]
fn create_hardware_wgpu(options: &BackendOptions) -> Result<Arc<dyn GpuCommitter>> {
    create_wgpu(options)
}

#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
fn not_compiled(backend: Backend, feature: &str) -> GpuError {
    GpuError::BackendUnavailable {
        backend,
        reason: format!("miden-gpu was built without the `{feature}` feature"),
    }
}
