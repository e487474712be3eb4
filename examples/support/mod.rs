//! Workloads shared by `bench_commit` and the criterion benches: random (never zero) trace
//! columns, and every backend this build and machine can run.

#![allow(dead_code)]

use std::sync::Arc;

use miden_gpu::{Backend, CommitRequest, Felt, GpuCommitter, HashFunction, PolyInput, RowHashing};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// `cols` columns of `rows` random non-zero field elements.
pub fn random_columns(seed: u64, cols: usize, rows: usize) -> Vec<Vec<Felt>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..cols)
        .map(|_| (0..rows).map(|_| Felt::new(rng.random_range(1..u64::MAX))).collect())
        .collect()
}

/// The trace-commitment request of a workload (blowup, whole-row hashing).
pub fn trace_request<'a>(columns: &'a [&'a [Felt]], blowup: usize, hash: HashFunction) -> CommitRequest<'a> {
    CommitRequest {
        input: PolyInput::Trace { columns },
        blowup,
        row_hashing: RowHashing::WholeRow,
        hash,
    }
}

/// Every backend present among `wanted` (all three if `None`): the CPU always, wgpu on any
/// adapter (lavapipe too), CUDA if built and a device is there. Backends that are missing are
/// reported on stderr.
pub fn available_backends(wanted: Option<&[Backend]>) -> Vec<Arc<dyn GpuCommitter>> {
    [Backend::Cpu, Backend::Wgpu, Backend::Cuda]
        .into_iter()
        .filter(|backend| wanted.is_none_or(|w| w.contains(backend)))
        .filter_map(|backend| match backend.create() {
            Ok(committer) => Some(committer),
            Err(error) => {
                eprintln!("skipping {backend}: {error}");
                None
            },
        })
        .collect()
}

/// Permutations of one trace commitment: one per 8 elements of each row, one per tree node.
pub fn permutations(lde_rows: usize, cols: usize) -> usize {
    lde_rows * cols.div_ceil(8) + lde_rows - 1
}
