//! Which backend commits and how: [`BackendOptions`], one value holding the backend's name and
//! the options of every backend compiled in. [`BackendOptions::from_env`] is where the
//! selection reads the environment; each backend's own `from_env` reads its variables.
//!
//! This sits with selection, above the backends: it names their option types, and
//! [`crate::select`] creates a committer from it.

use crate::{backend::Backend, cpu::CpuOptions, error::Result};

/// The environment variable that names the backend: `auto`, `cpu`, `wgpu` or `cuda`
/// ([`BackendOptions::backend`]).
pub const BACKEND_ENV: &str = "MIDEN_GPU_BACKEND";

/// The backend to commit on and the options of each backend; [`BackendOptions::create`] makes
/// the committer. Only the chosen backend's options are used ([`Backend::Auto`] uses those of
/// the backend it settles on).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendOptions {
    /// The backend (default [`Backend::Auto`]).
    pub backend: Backend,
    /// The CPU backend's options, also those of `Auto`'s fallback to the CPU.
    pub cpu: CpuOptions,
    /// The CUDA backend's options.
    #[cfg(feature = "cuda")]
    pub cuda: crate::cuda::CudaOptions,
    /// The wgpu backend's options.
    #[cfg(feature = "wgpu")]
    pub wgpu: crate::wgpu::WgpuOptions,
}

impl BackendOptions {
    /// `backend` with every backend's default options.
    pub fn new(backend: Backend) -> Self {
        Self { backend, ..Self::default() }
    }

    /// The options the environment sets: [`BACKEND_ENV`] (unset or empty means
    /// [`Backend::Auto`]), and each compiled-in backend's variables (`CudaOptions::from_env`,
    /// `WgpuOptions::from_env`). An unknown backend name or a malformed value is an error, not a
    /// silent default.
    pub fn from_env() -> Result<Self> {
        let backend = match std::env::var(BACKEND_ENV) {
            Ok(value) if !value.trim().is_empty() => value.parse()?,
            _ => Backend::Auto,
        };
        Ok(Self {
            backend,
            cpu: CpuOptions::default(),
            #[cfg(feature = "cuda")]
            cuda: crate::cuda::CudaOptions::from_env()?,
            #[cfg(feature = "wgpu")]
            wgpu: crate::wgpu::WgpuOptions::from_env(),
        })
    }
}

impl From<Backend> for BackendOptions {
    fn from(backend: Backend) -> Self {
        Self::new(backend)
    }
}
