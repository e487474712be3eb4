//! Backend selection: explicit, from `MIDEN_GPU_BACKEND`, or automatic.
//!
//! This sits above every backend: it names them, asks which are usable and creates the chosen
//! one. [`Backend::Auto`] decides from what the system reports (a CUDA driver and device, a
//! wgpu adapter's type) before any device, kernel or pipeline is made for a backend it will not
//! use, so a machine with only software adapters settles on the CPU at once.

use core::str::FromStr;
use std::sync::Arc;

use tracing::{info, warn};

use crate::{
    backend::Backend,
    committer::GpuCommitter,
    cpu::CpuCommitter,
    error::{GpuError, Result},
};

/// The environment variable that overrides [`Backend::Auto`]: `auto`, `cpu`, `wgpu` or `cuda`.
pub const BACKEND_ENV: &str = "MIDEN_GPU_BACKEND";

impl Backend {
    /// Reads [`BACKEND_ENV`]; unset or empty means [`Backend::Auto`], an unknown name is an
    /// error.
    pub fn from_env() -> Result<Self> {
        match std::env::var(BACKEND_ENV) {
            Ok(value) if !value.trim().is_empty() => value.parse(),
            _ => Ok(Self::Auto),
        }
    }

    /// Creates the committer for this backend.
    ///
    /// An explicit backend that cannot be used is [`GpuError::BackendUnavailable`]; only
    /// [`Backend::Auto`] falls back, and it logs what it chose and why.
    pub fn create(self) -> Result<Arc<dyn GpuCommitter>> {
        match self {
            Self::Cpu => Ok(Arc::new(CpuCommitter::new())),
            Self::Wgpu => create_wgpu(),
            Self::Cuda => create_cuda(),
            Self::Auto => {
                let committer = create_cuda()
                    .or_else(|cuda| {
                        info!(reason = %cuda, "CUDA backend not used");
                        create_hardware_wgpu()
                    })
                    .or_else(|wgpu| {
                        info!(reason = %wgpu, "wgpu backend not used");
                        warn!("no GPU backend available; committing on the CPU");
                        Ok::<_, GpuError>(Arc::new(CpuCommitter::new()) as Arc<dyn GpuCommitter>)
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
fn create_cuda() -> Result<Arc<dyn GpuCommitter>> {
    Ok(Arc::new(crate::cuda::CudaCommitter::new()?))
}

#[cfg(not(feature = "cuda"))]
fn create_cuda() -> Result<Arc<dyn GpuCommitter>> {
    Err(not_compiled(Backend::Cuda, "cuda"))
}

#[cfg(feature = "wgpu")]
fn create_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    let options = crate::wgpu::WgpuOptions::from_env();
    Ok(Arc::new(crate::wgpu::WgpuCommitter::with_options(options)?))
}

#[cfg(not(feature = "wgpu"))]
fn create_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    Err(not_compiled(Backend::Wgpu, "wgpu"))
}

/// `Auto` takes wgpu only on a hardware adapter: a software rasterizer (lavapipe, WARP) is
/// slower than the CPU backend. The adapter's type is read before a device is opened.
#[cfg(feature = "wgpu")]
fn create_hardware_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    let adapter = crate::wgpu::AdapterSummary::find(&crate::wgpu::WgpuOptions::from_env())?;
    if adapter.software {
        return Err(GpuError::BackendUnavailable {
            backend: Backend::Wgpu,
            reason: format!("only a software adapter is present ({})", adapter.name),
        });
    }
    create_wgpu()
}

#[cfg(not(feature = "wgpu"))]
fn create_hardware_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    create_wgpu()
}

#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
fn not_compiled(backend: Backend, feature: &str) -> GpuError {
    GpuError::BackendUnavailable {
        backend,
        reason: format!("miden-gpu was built without the `{feature}` feature"),
    }
}
