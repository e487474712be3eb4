//! Miden VM integration (feature `miden`): [`prove`], a twin of `miden_prover::prove` whose trace
//! and constraint commitments run on a [`Backend`].
//!
//! The program is executed by `miden_processor` as usual; the trace is then proven by
//! [`GpuProver`] wrapped around [`ExecutionProver`] (the public twin of `miden_prover`'s private
//! prover), so everything but the commitments (AIR, auxiliary bus columns, constraint evaluation,
//! DEEP composition, FRI, grinding) is Miden's and Winterfell's own code. The resulting
//! [`ExecutionProof`] is byte-identical to `miden_prover::prove`'s for the same inputs and is
//! accepted by `miden_verifier::verify`.
//!
//! ## Hash functions
//! All five of Miden's: RPO256 and RPX256 (with their own random coins), Poseidon2, BLAKE3-192
//! and BLAKE3-256 (with Winterfell's random coin), as `miden_prover` pairs them.
//!
//! ## Device failures
//! A backend failure in the middle of a proof (device lost, out of memory) is recomputed on the
//! CPU with a warning, [`GpuProver`]'s default: the proof is the same, only slower.

use std::{sync::Arc, time::Instant};

use miden_air::{ExecutionProof, HashFunction as MidenHashFunction, ProvingOptions};
use miden_crypto::Felt;
use miden_processor::{
    crypto::{
        Blake3_192, Blake3_256, Poseidon2, RandomCoin, Rpo256, RpoRandomCoin, Rpx256,
        RpxRandomCoin, WinterRandomCoin,
    },
    AdviceInputs, ExecutionTrace, Program, StackInputs, StackOutputs, SyncHost,
};
use tracing::{info, instrument};
use winter_prover::{Proof, Prover, Trace};

use crate::{
    backend::Backend,
    committer::GpuCommitter,
    hash::{GpuHasher, HashFunction},
    prover::GpuProver,
};

mod error;
mod execution_prover;
pub mod programs;

pub use error::ProveError;
pub use execution_prover::ExecutionProver;

// PROVE
// ================================================================================================

/// Executes `program` and proves its execution with the trace and constraint commitments on
/// `backend`; the twin of `miden_prover::prove` (same inputs, same outputs, same proof bytes).
///
/// Returns the stack outputs and the proof. The backend is created for this one call; to reuse
/// a device across proofs, create it once with [`Backend::create`] and call
/// [`prove_with_committer`].
///
/// # Errors
/// - [`ProveError::Gpu`] with the backend's error if an explicitly requested backend cannot be
///   created.
/// - [`ProveError::Execution`] if the program fails to execute.
/// - [`ProveError::Prover`] if the STARK prover rejects the trace.
pub fn prove(
    program: &Program,
    stack_inputs: StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ProvingOptions,
    backend: Backend,
) -> Result<(StackOutputs, ExecutionProof), ProveError> {
    let committer = backend.create()?;
    prove_with_committer(program, stack_inputs, advice_inputs, host, options, committer)
}

/// [`prove`] on a committer that already exists (a backend created once for many proofs).
///
/// # Errors
/// As [`prove`], except that no backend is created here.
#[instrument("prove_program", skip_all)]
pub fn prove_with_committer(
    program: &Program,
    stack_inputs: StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ProvingOptions,
    committer: Arc<dyn GpuCommitter>,
) -> Result<(StackOutputs, ExecutionProof), ProveError> {
    let hash_fn = options.hash_fn();

    let now = Instant::now();
    let mut trace = miden_processor::execute(
        program,
        stack_inputs.clone(),
        advice_inputs,
        host,
        *options.execution_options(),
    )?;
    info!(
        main_width = trace.info().main_trace_width(),
        aux_width = trace.info().aux_segment_width(),
        steps = trace.trace_len_summary().trace_len(),
        padded_steps = trace.trace_len_summary().padded_trace_len(),
        elapsed_ms = now.elapsed().as_millis() as u64,
        "generated execution trace"
    );

    let stack_outputs = trace.stack_outputs().clone();
    let precompile_requests = trace.take_precompile_requests();

    let (inputs, outputs) = (stack_inputs, stack_outputs.clone());
    let proof = match hash_fn {
        MidenHashFunction::Rpo256 => {
            prove_trace::<Rpo256, RpoRandomCoin>(trace, options, inputs, outputs, committer)
        },
        MidenHashFunction::Rpx256 => {
            prove_trace::<Rpx256, RpxRandomCoin>(trace, options, inputs, outputs, committer)
        },
        MidenHashFunction::Poseidon2 => prove_trace::<Poseidon2, WinterRandomCoin<Poseidon2>>(
            trace, options, inputs, outputs, committer,
        ),
        MidenHashFunction::Blake3_192 => prove_trace::<Blake3_192, WinterRandomCoin<Blake3_192>>(
            trace, options, inputs, outputs, committer,
        ),
        MidenHashFunction::Blake3_256 => prove_trace::<Blake3_256, WinterRandomCoin<Blake3_256>>(
            trace, options, inputs, outputs, committer,
        ),
    }?;

    Ok((stack_outputs, ExecutionProof::new(proof, hash_fn, precompile_requests)))
}

// HELPERS
// ================================================================================================

/// The GPU function for a Miden hash function (every member has one).
pub fn gpu_hash_function(hash_fn: MidenHashFunction) -> HashFunction {
    match hash_fn {
        MidenHashFunction::Rpo256 => HashFunction::Rpo256,
        MidenHashFunction::Rpx256 => HashFunction::Rpx256,
        MidenHashFunction::Poseidon2 => HashFunction::Poseidon2,
        MidenHashFunction::Blake3_192 => HashFunction::Blake3_192,
        MidenHashFunction::Blake3_256 => HashFunction::Blake3_256,
    }
}

/// Proves `trace` with [`ExecutionProver`] for hasher `H`, wrapped in a [`GpuProver`].
fn prove_trace<H, R>(
    trace: ExecutionTrace,
    options: ProvingOptions,
    stack_inputs: StackInputs,
    stack_outputs: StackOutputs,
    committer: Arc<dyn GpuCommitter>,
) -> Result<Proof, ProveError>
where
    H: GpuHasher,
    R: RandomCoin<BaseField = Felt, Hasher = H> + Send,
{
    let prover = ExecutionProver::<H, R>::new(options, stack_inputs, stack_outputs);
    Ok(GpuProver::with_committer(prover, committer).prove(trace)?)
}
