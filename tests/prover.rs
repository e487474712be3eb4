//! `GpuProver` on the CPU backend: proofs byte-identical to Winterfell's default prover for every
//! field extension and hash, that verify; tampered proofs are rejected.

mod common;

use std::sync::Arc;

use miden_gpu::{CpuCommitter, HashFunction};

#[test]
fn gpu_prover_matches_winterfell_on_cpu_backend() {
    common::check_proofs(Arc::new(CpuCommitter::new()), &HashFunction::ALL);
}
