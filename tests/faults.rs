//! Injected backend faults during a proof end in a CPU fallback with an identical, verifying
//! proof, or (fallback disabled) in a typed error / a panic: never a wrong proof, never a hang.
//!
//! The faults are injected at the `GpuCommitter` boundary, so the same test covers every backend:
//! set `MIDEN_GPU_BACKEND` to run it over wgpu or CUDA (default: the CPU backend).

mod common;

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::Arc,
};

use common::fib::{FibProver, FibTrace};
use miden_crypto::hash::rpo::Rpo256;
use miden_gpu::{
    faults::{Fault, FaultyCommitter},
    Backend, BackendOptions, Felt, GpuCommitter, GpuError, GpuProver, GpuTraceLde,
};
use winter_air::{PartitionOptions, TraceInfo};
use winter_math::{fft, fields::QuadExtension, StarkField};
use winter_prover::{Prover, StarkDomain, Trace};

fn backend() -> Arc<dyn GpuCommitter> {
    let mut options = BackendOptions::from_env().expect("MIDEN_GPU_* variables");
    if options.backend == Backend::Auto {
        options.backend = Backend::Cpu;
    }
    options.create().expect("backend under test")
}

/// The calls of a proof are the main trace, aux trace and constraint commitments, the DEEP
/// evaluation and combination where the backend keeps polynomials, the FRI commit phase (which
/// fails after sending its first layer root) and the openings of the layers it keeps; each one
/// fails in turn. The proofs run on one rayon thread: Winterfell's concurrent grinding keeps the
/// first nonce any thread finds, so only then are two correct proofs equal byte for byte.
#[test]
fn every_fault_at_every_commitment_falls_back_to_an_identical_proof() {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    one_thread.install(fall_back_to_identical_proofs);
}

fn fall_back_to_identical_proofs() {
    let expected = FibProver::<Rpo256>::new(common::fib_proof_options())
        .prove(FibTrace::new(2, 256))
        .unwrap()
        .to_bytes();
    let calls = calls_of_a_proof();
    for fault in Fault::ALL {
        for call in 0..calls {
            let faulty = Arc::new(FaultyCommitter::new(backend(), fault, call));
            let prover = GpuProver::with_committer(
                FibProver::<Rpo256>::new(common::fib_proof_options()),
                faulty.clone(),
            );
            let proof = prover.prove(FibTrace::new(2, 256)).expect("proof with fallback");
            assert!(proof.to_bytes() == expected, "{fault:?} on call {call}: proof differs");
            // a commitment recomputed on the CPU keeps no polynomials: the DEEP steps that
            // would read them run on the host
            assert!(
                faulty.calls() <= calls,
                "{fault:?} on call {call}: {} backend calls, more than a fault-free proof's",
                faulty.calls()
            );
        }
    }
}

#[test]
fn without_fallback_a_fault_is_a_typed_error_or_a_panic_never_a_proof() {
    for fault in Fault::ALL {
        let trace = FibTrace::new(2, 64);
        let domain = StarkDomain::from_twiddles(fft::get_twiddles::<Felt>(64), 8, Felt::GENERATOR);
        let faulty = Arc::new(FaultyCommitter::new(backend(), fault, 0));
        let result = GpuTraceLde::<QuadExtension<Felt>, Rpo256>::try_new(
            &TraceInfo::new_multi_segment(4, 1, 1, 64, vec![]),
            trace.main_segment(),
            &domain,
            PartitionOptions::default(),
            faulty.clone(),
        );
        assert_eq!(result.err(), Some(fault.error(faulty.backend())), "{fault:?}");

        for call in 0..calls_of_a_proof() {
            let faulty = Arc::new(FaultyCommitter::new(backend(), fault, call));
            let expected = fault.error(faulty.backend()).to_string();
            let prover = GpuProver::with_committer(
                FibProver::<Rpo256>::new(common::fib_proof_options()),
                faulty,
            )
            .with_cpu_fallback(false);
            let outcome = catch_unwind(AssertUnwindSafe(|| prover.prove(FibTrace::new(2, 64))));
            let message = outcome.expect_err("a proof was returned despite the fault");
            let text = message.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(text.contains(&expected), "{fault:?}: {text}");
        }
    }
}

/// The backend calls of one fault-free proof of `FibTrace::new(2, 256)`: 4; 7 with the DEEP
/// evaluation and combination and the FRI openings on a backend that keeps polynomials and
/// layers; 8 with the read of the composition's rows on one that keeps those too.
fn calls_of_a_proof() -> usize {
    let counting = Arc::new(FaultyCommitter::new(backend(), Fault::KernelFailure, usize::MAX));
    let prover = GpuProver::with_committer(
        FibProver::<Rpo256>::new(common::fib_proof_options()),
        counting.clone(),
    );
    prover.prove(FibTrace::new(2, 256)).expect("fault-free proof");
    let calls = counting.calls();
    assert!([4, 7, 8].contains(&calls), "{calls} backend calls in a proof");
    calls
}

#[test]
fn typed_errors_of_faults_are_actionable() {
    for fault in Fault::ALL {
        let message = fault.error(Backend::Cuda).to_string();
        assert!(
            message.len() > 20 && !matches!(fault.error(Backend::Cuda), GpuError::ZeroColumns),
            "{message}"
        );
    }
}
