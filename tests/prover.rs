//! `GpuProver` on the CPU backend: proofs byte-identical to Winterfell's default prover for every
//! field extension and hash, that verify; tampered proofs are rejected. And Winterfell's own
//! transcript, which the prover mirrors, held to the pinned release's.

mod common;

use std::sync::Arc;

use miden_crypto::hash::{blake::Blake3_256, rpo::Rpo256};
use miden_gpu::{CpuCommitter, GpuProver, HashFunction};
use winter_air::{BatchingMethod, FieldExtension, ProofOptions};
use winter_prover::Prover;

use common::fib::{FibProver, FibTrace};

#[test]
fn gpu_prover_matches_winterfell_on_cpu_backend() {
    common::check_proofs(Arc::new(CpuCommitter::new()), &HashFunction::ALL);
}

/// BLAKE3 of the serialized proof of a fixed Fibonacci trace under winter-prover 0.13.1.
///
/// `GpuProver` mirrors winter-prover's private proof flow (the order of the Fiat–Shamir draws,
/// the proof's layout), which the exact `=0.13.1` pins in Cargo.toml hold still. A new winter
/// release that changes the transcript changes this digest: the mirrored code must then be
/// checked against the new release before the pins move.
const PINNED_PROOF_DIGEST: &str =
    "0xb3744d667a64c1c91eb52cdc1f3a6e78630adb8a412578e6e22131a296a64a14";

#[test]
fn winterfell_transcript_is_the_pinned_releases() {
    let options = ProofOptions::new(
        27,
        8,
        0,
        FieldExtension::Quadratic,
        4,
        31,
        BatchingMethod::Linear,
        BatchingMethod::Linear,
    );
    // One thread: Winterfell's concurrent grinding keeps the first nonce any thread finds.
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    let (winterfell, gpu_prover) = one_thread.install(|| {
        let winterfell = FibProver::<Rpo256>::new(options.clone())
            .prove(FibTrace::new(3, 1 << 10))
            .expect("Winterfell proof")
            .to_bytes();
        let gpu_prover = GpuProver::with_committer(
            FibProver::<Rpo256>::new(options.clone()),
            Arc::new(CpuCommitter::new()),
        )
        .with_cpu_fallback(false)
        .prove(FibTrace::new(3, 1 << 10))
        .expect("GpuProver proof")
        .to_bytes();
        (winterfell, gpu_prover)
    });
    assert!(winterfell == gpu_prover, "GpuProver's proof differs from Winterfell's");
    let digest = String::from(Blake3_256::hash(&winterfell));
    assert_eq!(
        digest, PINNED_PROOF_DIGEST,
        "Winterfell's proof of a fixed trace changed: its transcript is no longer the pinned \
         release's, which GpuProver mirrors"
    );
}
