//! Wgpu backend: placeholder until its kernels land; construction always fails.

use crate::{
    backend::Backend,
    committer::{CommitRequest, Commitment, GpuCommitter, LdeRows, RowHashing},
    error::{GpuError, Result},
    hash::{Digest, HashFunction},
};

/// The Wgpu backend (not implemented yet).
pub struct WgpuCommitter(());

impl WgpuCommitter {
    /// Always [`GpuError::BackendUnavailable`] until the backend lands.
    pub fn new() -> Result<Self> {
        Err(unavailable())
    }

    /// Whether the adapter is a software rasterizer.
    pub fn is_software(&self) -> bool {
        true
    }
}

fn unavailable() -> GpuError {
    GpuError::BackendUnavailable { backend: Backend::Wgpu, reason: "not implemented yet".into() }
}

impl GpuCommitter for WgpuCommitter {
    fn backend(&self) -> Backend {
        Backend::Wgpu
    }

    fn device_name(&self) -> String {
        String::new()
    }

    fn commit(&self, _: &CommitRequest<'_>) -> Result<Commitment> {
        Err(unavailable())
    }

    fn hash_rows(&self, _: &LdeRows, _: RowHashing, _: HashFunction) -> Result<Vec<Digest>> {
        Err(unavailable())
    }

    fn build_tree(&self, _: &[Digest], _: HashFunction) -> Result<Vec<Digest>> {
        Err(unavailable())
    }
}
