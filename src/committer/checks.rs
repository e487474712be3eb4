//! The checks of the standalone requests every backend makes first, and the prologue the GPU
//! backends share: each request checked against the hash functions their kernels have, with
//! the same typed errors, before any device work starts.

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::{CommitRequest, Shape};
use super::{LdeRows, RowHashing};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use crate::hash::{blake3_tables::check_row_width, HashFunction};
use crate::{
    error::{GpuError, Result},
    hash::Digest,
};

// STANDALONE REQUESTS
// ================================================================================================

/// Checks the leaf count of a Merkle tree request: a power of two, at least 2.
pub(crate) fn check_leaves(leaves: &[Digest]) -> Result<()> {
    if leaves.len() < 2 || !leaves.len().is_power_of_two() {
        return Err(GpuError::LeafCountNotPowerOfTwo(leaves.len()));
    }
    Ok(())
}

/// Checks an [`LdeRows`] handed to [`super::GpuCommitter::hash_rows`]: columns to hash, whole
/// rows that hold them, and a partition size of at least 1.
pub(crate) fn check_lde_rows(lde: &LdeRows, row_hashing: RowHashing) -> Result<()> {
    if lde.num_cols == 0 {
        return Err(GpuError::ZeroColumns);
    }
    if lde.row_width < lde.num_cols || !lde.data.len().is_multiple_of(lde.row_width) {
        return Err(GpuError::LdeRowLayout {
            elements: lde.data.len(),
            row_width: lde.row_width,
            num_cols: lde.num_cols,
        });
    }
    if let RowHashing::Partitioned(0) = row_hashing {
        return Err(GpuError::InvalidPartition);
    }
    Ok(())
}

// GPU PROLOGUE
// ================================================================================================

/// The hash functions a GPU backend has kernels for, and the checks each of its commitment,
/// row-hashing and tree requests passes before the backend touches its device: the hash
/// function among its kernels' ([`GpuError::UnsupportedHasher`]), the request's own checks, and
/// rows no wider than the BLAKE3 kernels take ([`GpuError::RowTooWide`]).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuRequestChecks {
    /// The hash functions the backend's kernels implement.
    hashes: &'static [HashFunction],
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
impl GpuRequestChecks {
    /// The checks of a backend whose kernels implement `hashes`.
    pub(crate) const fn new(hashes: &'static [HashFunction]) -> Self {
        Self { hashes }
    }

    /// Checks a commitment request ([`CommitRequest::validate`] among them) and returns its
    /// shape.
    pub(crate) fn commit(&self, request: &CommitRequest<'_>) -> Result<Shape> {
        self.hash(request.hash)?;
        let shape = request.validate()?;
        check_row_width(request.hash, shape.num_cols)?;
        Ok(shape)
    }

    /// Checks a row-hashing request.
    pub(crate) fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<()> {
        self.hash(hash)?;
        check_lde_rows(lde, row_hashing)?;
        check_row_width(hash, lde.num_cols)
    }

    /// Checks a Merkle tree request.
    pub(crate) fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<()> {
        self.hash(hash)?;
        check_leaves(leaves)
    }

    /// [`GpuError::UnsupportedHasher`] unless the kernels implement `hash`.
    fn hash(&self, hash: HashFunction) -> Result<()> {
        if self.hashes.contains(&hash) {
            Ok(())
        } else {
            Err(GpuError::UnsupportedHasher(hash.to_string()))
        }
    }
}
