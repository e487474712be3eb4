//! The names of the backends a commitment can run on.
//!
//! This is a foundation module: errors and backends name themselves with [`Backend`], and
//! nothing here depends on any backend. Choosing and creating one lives in [`crate::select`].

use core::fmt;

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
    /// The lower-case name, as [`crate::select::BACKEND_ENV`] and the command lines take it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Wgpu => "wgpu",
            Self::Cuda => "cuda",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
