//! Miden VM integration: `miden_gpu::miden::prove` against `miden_prover::prove`.
//!
//! Proofs of small programs (traces of a few thousand rows, to keep CI short) on the CPU backend,
//! which goes through the same `GpuProver` path as the GPU backends (`MIDEN_GPU_BACKEND` picks
//! another one): byte-identical to `miden_prover`'s, accepted by `miden_verifier`, tampered ones
//! rejected. Around the proof: the options the verifier accepts, and the self-check that catches
//! a backend's wrong commitment (re-proving on the CPU, or the typed error).

#![cfg(feature = "miden")]

use std::sync::Arc;

use miden_assembly::Assembler;
use miden_gpu::{
    compare_proofs,
    faults::WrongRootCommitter,
    miden::{self, programs, MidenProveOptions},
    Backend, BackendOptions, CpuCommitter, Felt, GpuCommitter, ProofMatch,
};
use miden_processor::{AdviceInputs, DefaultHost, Program, StackInputs, StackOutputs};
use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};
use miden_verifier::{ProgramInfo, VerificationError, VerifierError};
use winter_air::proof::Context;

// HELPERS
// ================================================================================================

fn assemble(source: &str) -> Program {
    Assembler::default().assemble_program(source).expect("program assembles")
}

/// The backend the proofs run on: `MIDEN_GPU_BACKEND`, or the CPU.
fn backend_under_test() -> Backend {
    match BackendOptions::from_env().expect("MIDEN_GPU_BACKEND").backend {
        Backend::Auto => Backend::Cpu,
        backend => backend,
    }
}

fn inputs(n: u64) -> StackInputs {
    StackInputs::new(vec![Felt::new(n)]).expect("valid stack inputs")
}

/// Proves `program` on input `n` with `miden_prover` and with `miden_gpu` on the backend under test;
/// asserts the proofs are byte-identical and returns the outputs and the proof.
///
/// Both run on one rayon thread: Winterfell's concurrent grinding keeps the first nonce any
/// thread finds, so with several threads two runs of the same prover may pick different nonces
/// (`compare_proofs` then reports which parts still agree).
fn prove_both(
    program: &Program,
    n: u64,
    options: ProvingOptions,
) -> (StackOutputs, ExecutionProof) {
    prove_both_with_advice(program, n, AdviceInputs::default(), options)
}

/// [`prove_both`] with `advice` as the programs' advice inputs.
fn prove_both_with_advice(
    program: &Program,
    n: u64,
    advice: AdviceInputs,
    options: ProvingOptions,
) -> (StackOutputs, ExecutionProof) {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    one_thread.install(|| prove_both_here(program, n, advice, options))
}

fn prove_both_here(
    program: &Program,
    n: u64,
    advice: AdviceInputs,
    options: ProvingOptions,
) -> (StackOutputs, ExecutionProof) {
    let (cpu_outputs, cpu_proof) = miden_prover::prove(
        program,
        inputs(n),
        advice.clone(),
        &mut DefaultHost::default(),
        options.clone(),
    )
    .expect("miden_prover proves");
    let (outputs, proof) = miden::prove(
        program,
        inputs(n),
        advice,
        &mut DefaultHost::default(),
        options,
        backend_under_test(),
    )
    .expect("miden_gpu proves");
    assert_eq!(outputs, cpu_outputs, "stack outputs differ");
    let agreement = compare_proofs(&stark(&cpu_proof), &stark(&proof));
    assert_eq!(agreement, ProofMatch::Identical, "proofs differ: {agreement}");
    assert!(proof.to_bytes() == cpu_proof.to_bytes(), "identical proofs serialize differently");
    (outputs, proof)
}

/// The STARK proof inside a Miden proof.
fn stark(proof: &ExecutionProof) -> winter_air::proof::Proof {
    proof.clone().into_parts().1
}

fn verify(
    program: &Program,
    n: u64,
    outputs: StackOutputs,
    proof: ExecutionProof,
) -> Result<u32, miden_verifier::VerificationError> {
    miden_verifier::verify(ProgramInfo::from(program.clone()), inputs(n), outputs, proof)
}

fn options(hash_fn: HashFunction, security: u32) -> ProvingOptions {
    match security {
        96 => ProvingOptions::with_96_bit_security(hash_fn),
        _ => ProvingOptions::with_128_bit_security(hash_fn),
    }
}

/// Fibonacci at the given options: identical proofs, expected outputs, verified.
fn check_fibonacci(hash_fn: HashFunction, security: u32) {
    const N: u64 = 100;
    let program = assemble(programs::FIBONACCI);
    let (outputs, proof) = prove_both(&program, N, options(hash_fn, security));
    assert_eq!(outputs.get_stack_item(0), Some(programs::fibonacci_outputs(N)[0]));
    assert_eq!(outputs.get_stack_item(1), Some(programs::fibonacci_outputs(N)[1]));
    assert_eq!(verify(&program, N, outputs, proof).expect("proof verifies"), security);
}

// IDENTICAL, VERIFIED PROOFS
// ================================================================================================

#[test]
fn rpo_96_matches_miden_prover() {
    check_fibonacci(HashFunction::Rpo256, 96);
}

#[test]
fn rpo_128_matches_miden_prover() {
    check_fibonacci(HashFunction::Rpo256, 128);
}

#[test]
fn rpx_96_matches_miden_prover() {
    check_fibonacci(HashFunction::Rpx256, 96);
}

#[test]
fn rpx_128_matches_miden_prover() {
    check_fibonacci(HashFunction::Rpx256, 128);
}

/// At 96 bits only: `miden_verifier` 0.20 accepts Poseidon2 proofs with the recursive 96-bit or
/// the regular 128-bit options, and `with_128_bit_security` gives the recursive 128-bit set.
#[test]
fn poseidon2_96_matches_miden_prover() {
    check_fibonacci(HashFunction::Poseidon2, 96);
}

#[test]
fn blake3_192_96_matches_miden_prover() {
    check_fibonacci(HashFunction::Blake3_192, 96);
}

#[test]
fn blake3_256_128_matches_miden_prover() {
    check_fibonacci(HashFunction::Blake3_256, 128);
}

/// The hasher and memory chiplets (and the range checker they feed) in the trace.
#[test]
fn hash_memory_program_matches_miden_prover() {
    const N: u64 = 16;
    let program = assemble(programs::HASH_MEMORY);
    let (outputs, proof) = prove_both(&program, N, options(HashFunction::Rpo256, 96));
    verify(&program, N, outputs, proof).expect("proof verifies");
}

/// 32-bit operations on advice values: the range checker and the advice provider in the trace,
/// over the quadratic extension with RPX.
#[test]
fn u32_advice_program_matches_miden_prover() {
    const N: u64 = 24;
    let program = assemble(programs::U32_ADVICE);
    let values = (0..N).map(|i| 0x9E37_79B9u64.wrapping_mul(i + 1) & 0xFFFF_FFFF);
    let advice = AdviceInputs::default().with_stack_values(values).expect("u32 advice values");
    let (outputs, proof) =
        prove_both_with_advice(&program, N, advice, options(HashFunction::Rpx256, 96));
    assert_ne!(outputs.get_stack_item(0), Some(Felt::new(0)), "the loop ran");
    verify(&program, N, outputs, proof).expect("proof verifies");
}

/// With RPO and RPX the backend grinds and returns the first nonce, as `miden_prover` on one
/// thread does: the proof is the same on any number of threads (with Winterfell's concurrent
/// grinding, several threads keep whichever nonce one of them finds first).
#[test]
fn proofs_with_sponge_coins_are_the_same_on_any_number_of_threads() {
    let program = assemble(programs::FIBONACCI);
    for hash_fn in [HashFunction::Rpo256, HashFunction::Rpx256] {
        let (_, one_thread) = prove_both(&program, 100, options(hash_fn, 96));
        for threads in [2, 5] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            let (_, proof) = pool.install(|| {
                miden::prove(
                    &program,
                    inputs(100),
                    AdviceInputs::default(),
                    &mut DefaultHost::default(),
                    options(hash_fn, 96),
                    backend_under_test(),
                )
                .expect("miden_gpu proves")
            });
            assert!(proof.to_bytes() == one_thread.to_bytes(), "{hash_fn:?}, {threads} threads");
        }
    }
}

// TAMPERING
// ================================================================================================

/// The comparison the other tests rely on tells proofs of other inputs apart, and treats a
/// changed grinding nonce (alone) as a proof of the same commitments.
#[test]
fn proof_comparison_catches_other_commitments() {
    let program = assemble(programs::FIBONACCI);
    let options = options(HashFunction::Rpo256, 96);
    let (_, proof) = prove_both(&program, 100, options.clone());
    let (_, other) = prove_both(&program, 101, options);
    let (proof, other) = (stark(&proof), stark(&other));
    assert_eq!(compare_proofs(&proof, &proof.clone()), ProofMatch::Identical);
    assert_eq!(compare_proofs(&proof, &other), ProofMatch::Mismatch("commitments"));
    let mut renonced = proof.clone();
    renonced.pow_nonce ^= 1;
    assert!(matches!(compare_proofs(&proof, &renonced), ProofMatch::OtherGrindingNonce { .. }));
    let mut reopened = proof.clone();
    reopened.num_unique_queries ^= 1;
    assert_eq!(compare_proofs(&proof, &reopened), ProofMatch::Mismatch("query openings"));
}

#[test]
fn tampered_proofs_are_rejected() {
    const N: u64 = 20;
    let program = assemble(programs::FIBONACCI);
    let (outputs, proof) = prove_both(&program, N, options(HashFunction::Rpx256, 96));
    let bytes = proof.to_bytes();

    // one flipped byte anywhere: either no longer a proof, or a proof that does not verify
    let mut verified = 0;
    for position in [8, bytes.len() / 3, bytes.len() / 2, bytes.len() - 40] {
        let mut tampered = bytes.clone();
        tampered[position] ^= 0x01;
        if let Ok(tampered) = ExecutionProof::from_bytes(&tampered) {
            assert!(
                verify(&program, N, outputs.clone(), tampered).is_err(),
                "proof with byte {position} flipped was accepted"
            );
            verified += 1;
        }
    }
    assert!(verified > 0, "no tampered proof reached the verifier");

    // a claimed output that the program did not produce
    let mut wrong = outputs.as_int_vec();
    wrong[0] = if wrong[0] == 0 { 1 } else { wrong[0] - 1 };
    let wrong = StackOutputs::try_from_ints(wrong).expect("valid stack outputs");
    let proof = ExecutionProof::from_bytes(&bytes).expect("proof deserializes");
    assert!(verify(&program, N, wrong, proof.clone()).is_err(), "wrong output was accepted");

    // the untouched proof still verifies
    verify(&program, N, outputs, proof).expect("proof verifies");
}

// OPTIONS THE VERIFIER ACCEPTS
// ================================================================================================

/// Every hash function at both security levels: `verifier_accepts` (the mirror of
/// `miden_verifier`'s option sets) agrees with the verifier itself. One real proof is relabelled
/// with each pair's hash function and proof options; the verifier checks the options first, so
/// it answers `UnacceptableProofOptions` exactly for the pairs it refuses (any other failure, or
/// a panic on the relabelled proof, comes after the options passed).
#[test]
fn accepted_options_agree_with_miden_verifier() {
    const N: u64 = 8;
    let program = assemble(programs::FIBONACCI);
    let (outputs, proof) = prove_both(&program, N, options(HashFunction::Rpo256, 96));
    let hashes = [
        HashFunction::Rpo256,
        HashFunction::Rpx256,
        HashFunction::Poseidon2,
        HashFunction::Blake3_192,
        HashFunction::Blake3_256,
    ];
    let mut accepted = Vec::new();
    for hash_fn in hashes {
        for security in [96, 128] {
            let options = options(hash_fn, security);
            let (_, mut stark, requests) = proof.clone().into_parts();
            let context = &stark.context;
            stark.context = Context::new::<Felt>(
                context.trace_info().clone(),
                options.clone().into(),
                context.num_constraints(),
            );
            let relabelled = ExecutionProof::new(stark, hash_fn, requests);
            let outputs = outputs.clone();
            let refused = std::panic::catch_unwind(|| verify(&program, N, outputs, relabelled))
                .is_ok_and(|result| {
                    matches!(
                        result,
                        Err(VerificationError::ProgramVerificationError(
                            _,
                            VerifierError::UnacceptableProofOptions
                        ))
                    )
                });
            assert_eq!(
                miden::verifier_accepts(&options),
                !refused,
                "{hash_fn:?} at {security} bits: the verifier refuses it: {refused}"
            );
            if !refused {
                accepted.push((hash_fn, security));
            }
        }
    }
    assert_eq!(miden::accepted_pairs(), accepted);
}

/// A pair the verifier refuses is refused before the program runs (this one would fail), with
/// the accepted pairs named.
#[test]
fn unacceptable_options_are_refused_before_execution() {
    let program = assemble("begin push.1 push.2 assert_eq end");
    for (hash_fn, security) in [(HashFunction::Blake3_256, 96), (HashFunction::Blake3_192, 128)] {
        let error = miden::prove(
            &program,
            inputs(1),
            AdviceInputs::default(),
            &mut DefaultHost::default(),
            options(hash_fn, security),
            Backend::Cpu,
        )
        .expect_err("refused");
        assert!(matches!(error, miden::ProveError::UnacceptableOptions { .. }), "{error}");
        let message = error.to_string();
        for pair in ["rpo at 96 or 128 bits", "blake3-192 at 96 bits", "blake3-256 at 128 bits"] {
            assert!(message.contains(pair), "`{pair}` not in: {message}");
        }
    }
}

// SELF-CHECK
// ================================================================================================

/// Proves Fibonacci(`N`) on [`WrongRootCommitter`], on one rayon thread: with `checks`, or,
/// for `None`, with `prove_with_committer` (the defaults, the command line's call).
fn prove_on_wrong_roots(
    checks: Option<&MidenProveOptions>,
) -> (Program, Result<(StackOutputs, ExecutionProof), miden::ProveError>) {
    let program = assemble(programs::FIBONACCI);
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    let result = one_thread.install(|| {
        let (inputs, advice, options) =
            (inputs(SELF_CHECK_N), AdviceInputs::default(), options(HashFunction::Rpo256, 96));
        let committer: Arc<dyn GpuCommitter> =
            Arc::new(WrongRootCommitter::new(Arc::new(CpuCommitter::new())));
        let host = &mut DefaultHost::default();
        match checks {
            Some(checks) => miden::prove_with_options(
                &program, inputs, advice, host, options, committer, checks,
            ),
            None => miden::prove_with_committer(&program, inputs, advice, host, options, committer),
        }
    });
    (program, result)
}

const SELF_CHECK_N: u64 = 50;

/// Without the self-check, the wrong commitment gives a proof that does not verify: the case the
/// check is for.
#[test]
fn wrong_commitment_gives_a_proof_that_does_not_verify() {
    let checks = MidenProveOptions { self_check: false, ..MidenProveOptions::default() };
    let (program, result) = prove_on_wrong_roots(Some(&checks));
    let (outputs, proof) = result.expect("proves without checking");
    assert!(verify(&program, SELF_CHECK_N, outputs, proof).is_err(), "the bad proof verified");
}

/// With the self-check and its fallback (the defaults, as `miden-gpu prove` proves), the proof
/// is made again on the CPU: it verifies and is `miden_prover`'s.
#[test]
fn self_check_reproves_a_wrong_proof_on_the_cpu() {
    let (program, result) = prove_on_wrong_roots(None);
    let (outputs, proof) = result.expect("the CPU fallback proves");
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("rayon pool");
    let (_, cpu_proof) = one_thread
        .install(|| {
            miden_prover::prove(
                &program,
                inputs(SELF_CHECK_N),
                AdviceInputs::default(),
                &mut DefaultHost::default(),
                options(HashFunction::Rpo256, 96),
            )
        })
        .expect("miden_prover proves");
    assert!(proof.to_bytes() == cpu_proof.to_bytes(), "the fallback's proof is not miden_prover's");
    verify(&program, SELF_CHECK_N, outputs, proof).expect("the fallback's proof verifies");
}

/// With the fallback off, the wrong proof is the typed error, not a result.
#[test]
fn self_check_without_fallback_is_a_typed_error() {
    let checks = MidenProveOptions { cpu_fallback: false, ..MidenProveOptions::default() };
    let (_, result) = prove_on_wrong_roots(Some(&checks));
    match result {
        Err(miden::ProveError::SelfCheck { backend, .. }) => assert_eq!(backend, Backend::Cpu),
        Err(error) => panic!("another error: {error}"),
        Ok(_) => panic!("a proof that does not verify was returned"),
    }
}
