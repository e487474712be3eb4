//! A commitment's source columns copied into registered host memory before its call takes the
//! GPUs' turn, so that inside the turn their upload is DMA alone.
//!
//! Through the pinned slots (`transfer::upload`) the host copies each column into a slot while
//! the copy engine moves the previous one: the call's upload waits on that copy, inside the turn
//! and beside every other proof's host work, and with several proofs a GPU that copy took many
//! times the GPU's own interpolation and LDE. In a block of the committer's `result_pool` the
//! copy runs before the turn, on the copy threads, and the DMA reads the columns where they lie. A committer that registers nothing
//! (`CudaOptions::pinned_rows_bytes` 0, the default for a lone committer) uploads through the
//! slots as before.

use std::sync::Arc;

use miden_crypto::Felt;

use super::result_pool::ResultPool;
use crate::{
    committer::PolyInput,
    host::{copy_slices, HostBuffer},
};

/// The sources of one commitment, one after another in a registered block.
pub(super) struct StagedSources {
    block: HostBuffer<Felt>,
    /// Elements per source.
    len: usize,
}

impl StagedSources {
    /// The sources of `input` copied into a block of `pool` (on the copy threads), or `None`
    /// where the pool lends none or the sources differ in length.
    pub(super) fn copy(pool: &Arc<ResultPool>, input: &PolyInput<'_>) -> Option<Self> {
        let sources = input.sources();
        let len = sources.first()?.len();
        if len == 0 || sources.iter().any(|s| s.len() != len) {
            return None;
        }
        let mut block = pool.take::<Felt>(len.checked_mul(sources.len())?)?;
        let _span = tracing::debug_span!("cuda.stage_sources", bytes = block.len() * 8).entered();
        copy_slices(block.chunks_mut(len).zip(sources.iter().copied()).collect());
        Some(Self { block, len })
    }

    /// The sources in the block, in the order of `input`'s.
    pub(super) fn slices(&self) -> Vec<&[Felt]> {
        self.block.chunks(self.len).collect()
    }
}
