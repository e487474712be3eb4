//! Miden VM integration: `miden_gpu::miden::prove` against `miden_prover::prove`.
//!
//! Proofs of small programs (traces of a few thousand rows, to keep CI short) on the CPU backend,
//! which goes through the same `GpuProver` path as the GPU backends (`MIDEN_GPU_BACKEND` picks
//! another one): byte-identical to `miden_prover`'s, accepted by `miden_verifier`, tampered ones
//! rejected.

#![cfg(feature = "miden")]

use miden_assembly::Assembler;
use miden_gpu::{
    compare_proofs,
    miden::{self, programs},
    Backend, BackendOptions, Felt, ProofMatch,
};
use miden_processor::{AdviceInputs, DefaultHost, Program, StackInputs, StackOutputs};
use miden_prover::{ExecutionProof, HashFunction, ProvingOptions};
use miden_verifier::ProgramInfo;

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
