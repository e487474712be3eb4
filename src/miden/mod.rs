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
//! Only RPO256 and RPX256 have GPU kernels. For BLAKE3 and Poseidon2 [`prove`] returns
//! [`ProveError::Gpu`]`(`[`GpuError::UnsupportedHasher`]`)` before executing anything; there is
//! deliberately no silent CPU fallback, since a caller who picked a GPU prover should learn that
//! it is not being used. Call `miden_prover::prove` for those hash functions.
//!
//! ## Device failures
//! A backend failure in the middle of a proof (device lost, out of memory) is recomputed on the
//! CPU with a warning, [`GpuProver`]'s default: the proof is the same, only slower.

use std::{sync::Arc, time::Instant};

use miden_air::{ExecutionProof, HashFunction as MidenHashFunction, ProvingOptions};
use miden_crypto::Felt;
use miden_processor::{
    crypto::{RandomCoin, Rpo256, RpoRandomCoin, Rpx256, RpxRandomCoin},
    AdviceInputs, ExecutionTrace, Program, StackInputs, StackOutputs, SyncHost,
};
use tracing::{info, instrument};
use winter_prover::{Proof, Prover, Trace};

use crate::{
    backend::Backend,
    committer::GpuCommitter,
    error::GpuError,
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
/// - [`ProveError::Gpu`] with [`GpuError::UnsupportedHasher`] if `options` names a hash function
///   other than RPO256 or RPX256 (checked first, nothing is executed), or with the backend's
///   error if an explicitly requested backend cannot be created.
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
    gpu_hash_function(options.hash_fn())?;
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
    let function = gpu_hash_function(hash_fn)?;

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

    let proof = match function {
        HashFunction::Rpo256 => prove_trace::<Rpo256, RpoRandomCoin>(
            trace,
            options,
            stack_inputs,
            stack_outputs.clone(),
            committer,
        ),
        HashFunction::Rpx256 => prove_trace::<Rpx256, RpxRandomCoin>(
            trace,
            options,
            stack_inputs,
            stack_outputs.clone(),
            committer,
        ),
    }?;

    Ok((stack_outputs, ExecutionProof::new(proof, hash_fn, precompile_requests)))
}

// HELPERS
// ================================================================================================

/// The GPU function for a Miden hash function, or [`GpuError::UnsupportedHasher`].
pub fn gpu_hash_function(hash_fn: MidenHashFunction) -> Result<HashFunction, GpuError> {
    match hash_fn {
        MidenHashFunction::Rpo256 => Ok(HashFunction::Rpo256),
        MidenHashFunction::Rpx256 => Ok(HashFunction::Rpx256),
        other => Err(GpuError::UnsupportedHasher(format!("{other:?}"))),
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
