//! Backend selection: explicit, from `MIDEN_GPU_BACKEND`, or automatic.

use core::{fmt, str::FromStr};
use std::sync::Arc;

use tracing::{info, warn};

use crate::{
    committer::GpuCommitter,
    cpu::CpuCommitter,
    error::{GpuError, Result},
};

/// The environment variable that overrides [`Backend::Auto`]: `auto`, `cpu`, `wgpu` or `cuda`.
pub const BACKEND_ENV: &str = "MIDEN_GPU_BACKEND";

/// The backends a commitment can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// CUDA if compiled in and a device is present, else a hardware wgpu adapter, else the CPU.
    #[default]
    Auto,
    /// The rayon CPU backend (always available).
    Cpu,
    /// WGSL kernels through wgpu (Metal, Vulkan, DX12).
    Wgpu,
    /// CUDA kernels through cudarc and NVRTC (feature `cuda`).
    Cuda,
}

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

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Wgpu => "wgpu",
            Self::Cuda => "cuda",
        })
    }
}

impl FromStr for Backend {
    type Err = GpuError;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "wgpu" => Ok(Self::Wgpu),
            "cuda" => Ok(Self::Cuda),
            _ => Err(GpuError::UnknownBackend(s.to_string())),
        }
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
    Ok(Arc::new(crate::wgpu::WgpuCommitter::new()?))
}

#[cfg(not(feature = "wgpu"))]
fn create_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    Err(not_compiled(Backend::Wgpu, "wgpu"))
}

/// `Auto` takes wgpu only on a hardware adapter: a software rasterizer (lavapipe, WARP) is
/// slower than the CPU backend.
#[cfg(feature = "wgpu")]
fn create_hardware_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    let committer = crate::wgpu::WgpuCommitter::new()?;
    if committer.is_software() {
        return Err(GpuError::BackendUnavailable {
            backend: Backend::Wgpu,
            reason: format!("only a software adapter is present ({})", committer.device_name()),
        });
    }
    Ok(Arc::new(committer))
}

#[cfg(not(feature = "wgpu"))]
fn create_hardware_wgpu() -> Result<Arc<dyn GpuCommitter>> {
    create_wgpu()
}

#[allow(dead_code)]
fn not_compiled(backend: Backend, feature: &str) -> GpuError {
    GpuError::BackendUnavailable {
        backend,
        reason: format!("miden-gpu was built without the `{feature}` feature"),
    }
}
