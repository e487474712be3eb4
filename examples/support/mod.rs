//! Workloads shared by `bench_commit` and the criterion benches: random (never zero) trace
//! columns, commitment requests, and every backend this build and machine can run.
//!
//! - [`targets`]: the committers to time, each with the device times of its stages;
//! - [`device_times`]: those device times in one form for every GPU backend, and the kernel
//!   rates they give.

#![allow(dead_code)]

pub mod device_times;
pub mod targets;

use std::sync::Arc;

use miden_gpu::{Backend, CommitRequest, Felt, GpuCommitter, HashFunction, PolyInput, RowHashing};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;
use winter_math::StarkField;

/// Every backend this crate has, in the order they are timed: the CPU first, so that the GPU
/// backends can be compared with it.
pub const ALL_BACKENDS: [Backend; 3] = [Backend::Cpu, Backend::Wgpu, Backend::Cuda];

// WORKLOADS
// ================================================================================================

/// `cols` columns of `rows` random non-zero field elements (columns generated in parallel, each
/// from its own seed drawn from `seed`).
pub fn random_columns(seed: u64, cols: usize, rows: usize) -> Vec<Vec<Felt>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let seeds: Vec<u64> = (0..cols).map(|_| rng.random()).collect();
    seeds
        .into_par_iter()
        .map(|seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..rows).map(|_| Felt::new(rng.random_range(1..Felt::MODULUS))).collect()
        })
        .collect()
}

/// The trace-commitment request of a workload (blowup, whole-row hashing).
pub fn trace_request<'a>(
    columns: &'a [&'a [Felt]],
    blowup: usize,
    hash: HashFunction,
) -> CommitRequest<'a> {
    CommitRequest {
        input: PolyInput::Trace { columns },
        blowup,
        row_hashing: RowHashing::WholeRow,
        hash,
    }
}

/// The shape of a trace commitment: `cols` columns of 2^`log_rows` rows, extended `blowup`
/// times, rows hashed whole with `hash`.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// log2 of the trace length.
    pub log_rows: u32,
    /// Base columns.
    pub cols: usize,
    /// LDE blowup.
    pub blowup: usize,
    /// Row and tree hash.
    pub hash: HashFunction,
}

impl Workload {
    /// Trace rows.
    pub fn rows(&self) -> usize {
        1 << self.log_rows
    }

    /// LDE rows.
    pub fn lde_rows(&self) -> usize {
        self.rows() * self.blowup
    }

    /// Bytes of the LDE rows, as stored (rows padded to multiples of 8 elements), in GiB.
    pub fn lde_gib(&self) -> f64 {
        (self.lde_rows() * self.cols.div_ceil(8) * 8 * 8) as f64 / (1u64 << 30) as f64
    }

    /// Permutations of the row hashes (BLAKE3: compressions): one per 8 elements of each LDE
    /// row, plus BLAKE3's parent nodes over a row of more than one 1024-byte chunk.
    pub fn leaf_permutations(&self) -> usize {
        let parents = if self.hash.is_algebraic() { 0 } else { self.cols.div_ceil(128) - 1 };
        self.lde_rows() * (self.cols.div_ceil(8) + parents)
    }

    /// Permutations (BLAKE3: compressions) of the Merkle tree: one per node.
    pub fn tree_permutations(&self) -> usize {
        self.lde_rows() - 1
    }

    /// Permutations of the whole commitment.
    pub fn permutations(&self) -> usize {
        self.leaf_permutations() + self.tree_permutations()
    }

    /// The workload's random columns (one seed per shape).
    pub fn columns(&self) -> Vec<Vec<Felt>> {
        random_columns(u64::from(self.log_rows) * 1000 + self.cols as u64, self.cols, self.rows())
    }
}

// BACKENDS
// ================================================================================================

/// Every backend present among `wanted` (all three if `None`): the CPU always, wgpu on any
/// adapter (lavapipe too), CUDA if built and a device is there. Backends that are missing are
/// reported on stderr.
pub fn available_backends(wanted: Option<&[Backend]>) -> Vec<Arc<dyn GpuCommitter>> {
    targets::targets(wanted.unwrap_or(&ALL_BACKENDS), &[], &targets::CudaTuning::default())
        .iter()
        .filter_map(|target| target.committer().ok())
        .collect()
}
