//! Polynomials kept on the GPUs after a commitment, for the DEEP combination.
//!
//! A commitment leaves each GPU's polynomials in that GPU's `polys` buffer (its share of the
//! output columns, column after column). Keeping them costs no copy: the buffer is taken from
//! the GPU's state and the next commitment allocates a new one. The bytes kept are counted per
//! GPU and come off the memory budget of later work until the last holder drops them.

use std::{
    ops::Range,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use miden_crypto::Felt;

use super::buffer::DeviceBuffer;

/// One GPU's columns of a resident segment.
pub(super) struct ResidentShare {
    /// Index of the GPU in its committer.
    pub gpu: usize,
    /// The segment's base columns held here.
    pub cols: Range<usize>,
    /// `cols.len()` polynomials of the segment's length, one after another.
    pub buffer: DeviceBuffer<Felt>,
    held: Arc<AtomicU64>,
}

impl ResidentShare {
    /// Takes `buffer` as GPU `gpu`'s share, counting its bytes in `held`.
    pub fn new(
        gpu: usize,
        cols: Range<usize>,
        buffer: DeviceBuffer<Felt>,
        held: Arc<AtomicU64>,
    ) -> Self {
        held.fetch_add(buffer.bytes() as u64, Ordering::SeqCst);
        Self { gpu, cols, buffer, held }
    }
}

impl Drop for ResidentShare {
    fn drop(&mut self) {
        self.held.fetch_sub(self.buffer.bytes() as u64, Ordering::SeqCst);
    }
}

/// A segment's polynomials on the GPUs of one committer (the storage of a
/// [`crate::ResidentPolys`] held by the CUDA backend).
pub(super) struct CudaResident {
    /// Identifies the committer whose GPUs hold the shares.
    pub committer: u64,
    /// The shares, in column order.
    pub shares: Vec<ResidentShare>,
}

impl CudaResident {
    /// Base columns of the segment, over every share.
    pub fn num_cols(&self) -> usize {
        self.shares.iter().map(|s| s.cols.len()).sum()
    }
}
