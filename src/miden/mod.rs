//! Miden VM integration (feature `miden`): [`prove`], a twin of `miden_prover::prove` whose trace
//! and constraint commitments run on a [`Backend`].
//!
//! The program is executed by `miden_processor`, on its fast processor with the trace built on
//! every core, or on its reference processor ([`Execution`]); the trace is then proven by
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
//! ## Device failures and wrong results
//! A backend failure in the middle of a proof (device lost, out of memory) is recomputed on the
//! CPU with a warning, as [`FallbackPolicy`] says by default: the proof is the same, only
//! slower. A wrong
//! result that a backend returns as a success is caught by the self-check: every proof is
//! verified with `miden_verifier` before it is returned, and one that does not verify is proven
//! again on the CPU backend with a warning, or is [`ProveError::SelfCheck`]
//! ([`MidenProveOptions`]). Proving options the verifier would refuse are refused before
//! anything runs ([`check_proving_options`]).

use std::{sync::Arc, time::Instant};

use miden_air::{ExecutionProof, HashFunction as MidenHashFunction, ProvingOptions};
use miden_crypto::Felt;
use miden_processor::{
    crypto::{
        Blake3_192, Blake3_256, Poseidon2, RandomCoin, Rpo256, RpoRandomCoin, Rpx256,
        RpxRandomCoin, WinterRandomCoin,
    },
    AdviceInputs, Program, StackInputs, StackOutputs, SyncHost,
};
use miden_verifier::{ProgramInfo, VerificationError};
use tracing::{info, instrument, warn};
use winter_air::{ProofOptions, TraceInfo};
use winter_prover::{Proof, Prover, Trace};

use crate::{
    backend::Backend,
    committer::GpuCommitter,
    cpu::CpuCommitter,
    hash::{GpuHasher, HashFunction},
    prover::{ConstraintPlacement, FallbackPolicy, GpuProver},
};

mod error;
mod execution;
mod execution_prover;
mod options;
pub mod programs;
mod trace;

pub use error::ProveError;
pub use execution::Execution;
pub use execution_prover::ExecutionProver;
pub use options::{accepted_pairs, check_proving_options, verifier_accepts, MidenProveOptions};
pub use trace::MidenTrace;

// PROVE
// ================================================================================================

/// Executes `program` and proves its execution with the trace and constraint commitments on
/// `backend`; the twin of `miden_prover::prove` (same inputs, same outputs, same proof bytes).
///
/// Returns the stack outputs and the proof, checked with `miden_verifier` (the defaults of
/// [`MidenProveOptions`]). The backend is created for this one call; to reuse a device across
/// proofs, create it once with [`Backend::create`] and call [`prove_with_committer`].
///
/// # Errors
/// - [`ProveError::UnacceptableOptions`] if `miden_verifier` would refuse proofs made with
///   `options` (checked first).
/// - [`ProveError::Gpu`] with the backend's error if an explicitly requested backend cannot be
///   created.
/// - [`ProveError::Execution`] if the program fails to execute.
/// - [`ProveError::Prover`] if the STARK prover rejects the trace.
/// - [`ProveError::SelfCheck`] if neither the backend's proof nor the CPU backend's verifies.
/// - [`ProveError::NondeterministicExecution`] if the CPU fallback's execution ends otherwise.
pub fn prove(
    program: &Program,
    stack_inputs: StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ProvingOptions,
    backend: Backend,
) -> Result<(StackOutputs, ExecutionProof), ProveError> {
    check_proving_options(&options)?;
    let committer = backend.create()?;
    prove_with_committer(program, stack_inputs, advice_inputs, host, options, committer)
}

/// [`prove`] on a committer that already exists (a backend created once for many proofs).
///
/// # Errors
/// As [`prove`], except that no backend is created here.
pub fn prove_with_committer(
    program: &Program,
    stack_inputs: StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ProvingOptions,
    committer: Arc<dyn GpuCommitter>,
) -> Result<(StackOutputs, ExecutionProof), ProveError> {
    let checks = MidenProveOptions::default();
    prove_with_options(program, stack_inputs, advice_inputs, host, options, committer, &checks)
}

/// [`prove_with_committer`], with the self-check and its CPU fallback as `checks` says.
///
/// With [`MidenProveOptions::self_check`], the proof is verified with `miden_verifier` before
/// it is returned. One that does not verify is proven again on the CPU backend with a warning
/// (the program is executed again, with the same host and a copy of the advice inputs) if
/// [`MidenProveOptions::cpu_fallback`] is on, and that proof is checked too.
///
/// # Errors
/// As [`prove`]; [`ProveError::SelfCheck`] names the backend whose proof failed the check.
pub fn prove_with_options(
    program: &Program,
    stack_inputs: StackInputs,
    advice_inputs: AdviceInputs,
    host: &mut impl SyncHost,
    options: ProvingOptions,
    committer: Arc<dyn GpuCommitter>,
    checks: &MidenProveOptions,
) -> Result<(StackOutputs, ExecutionProof), ProveError> {
    let inputs = (stack_inputs, advice_inputs);
    let admit = |_: &TraceInfo, _: &ProofOptions| Ok::<_, ProveError>(((), committer));
    prove_admitted(program, inputs, host, options, checks, admit)
}

/// [`prove_with_options`], asking `admit` for the committer once the program has executed and
/// before its proof starts, given the trace's shape and the proof options (the pool reserves
/// host memory and chooses the job's GPU there); what `admit` returns beside the committer is
/// held until the proof is checked, and its error ends the call.
#[instrument("prove_program", skip_all)]
pub(crate) fn prove_admitted<G, E: From<ProveError>>(
    program: &Program,
    (stack_inputs, advice_inputs): (StackInputs, AdviceInputs),
    host: &mut impl SyncHost,
    options: ProvingOptions,
    checks: &MidenProveOptions,
    admit: impl FnOnce(&TraceInfo, &ProofOptions) -> Result<(G, Arc<dyn GpuCommitter>), E>,
) -> Result<(StackOutputs, ExecutionProof), E> {
    check_proving_options(&options)?;
    let policy = checks.policy();
    let fallback_advice = (policy.self_check && policy.cpu_fallback).then(|| advice_inputs.clone());
    let inputs = stack_inputs.clone();
    let execution = checks.execution;
    let (outputs, proof, (_admitted, backend)) = execute_and_prove(
        program,
        (inputs, advice_inputs, execution),
        host,
        (options.clone(), policy, checks.constraints),
        admit,
    )?;
    if !policy.self_check {
        return Ok((outputs, proof));
    }
    let Err(failure) = verify_proof(program, &stack_inputs, &outputs, &proof, checks) else {
        return Ok((outputs, proof));
    };
    let Some(advice_inputs) = fallback_advice else {
        return Err(ProveError::SelfCheck { backend, source: failure }.into());
    };

    warn!(%backend, reason = %failure, "the proof does not verify; proving again on the CPU backend");
    let cpu: Arc<dyn GpuCommitter> = Arc::new(CpuCommitter::new());
    let inputs = stack_inputs.clone();
    let admitted = |_: &TraceInfo, _: &ProofOptions| Ok::<_, E>(((), cpu));
    let (cpu_outputs, cpu_proof, _) = execute_and_prove(
        program,
        (inputs, advice_inputs, execution),
        host,
        (options, policy, checks.constraints),
        admitted,
    )?;
    if cpu_outputs != outputs {
        return Err(ProveError::NondeterministicExecution.into());
    }
    verify_proof(program, &stack_inputs, &cpu_outputs, &cpu_proof, checks)
        .map_err(|source| ProveError::SelfCheck { backend: Backend::Cpu, source })?;
    Ok((cpu_outputs, cpu_proof))
}

/// Executes `program` as `execution` says, asks `admit` (see [`prove_admitted`]) and proves the
/// trace on the committer it gives with `options`, its steps following `policy` (whose checks
/// are the caller's: [`FallbackPolicy::checked_by_caller`]); returns what `admit` returned
/// beside the committer, and the committer's backend, with the results.
fn execute_and_prove<G, E: From<ProveError>>(
    program: &Program,
    (stack_inputs, advice_inputs, execution): (StackInputs, AdviceInputs, Execution),
    host: &mut impl SyncHost,
    (options, policy, constraints): (ProvingOptions, FallbackPolicy, ConstraintPlacement),
    admit: impl FnOnce(&TraceInfo, &ProofOptions) -> Result<(G, Arc<dyn GpuCommitter>), E>,
) -> Result<(StackOutputs, ExecutionProof, (G, Backend)), E> {
    let hash_fn = options.hash_fn();

    let now = Instant::now();
    let mut trace = execution::execute(
        program,
        stack_inputs.clone(),
        advice_inputs,
        host,
        *options.execution_options(),
        execution,
    )
    .map_err(ProveError::from)?;
    let summary = trace.execution().trace_len_summary();
    info!(
        ?execution,
        main_width = trace.info().main_trace_width(),
        aux_width = trace.info().aux_segment_width(),
        steps = summary.trace_len(),
        padded_steps = summary.padded_trace_len(),
        elapsed_ms = now.elapsed().as_millis() as u64,
        "generated execution trace"
    );

    let (admitted, committer) = admit(trace.info(), &ProofOptions::from(options.clone()))?;
    let backend = committer.backend();
    let stack_outputs = trace.execution().stack_outputs().clone();
    let precompile_requests = trace.take_precompile_requests();

    let (inputs, outputs) = (stack_inputs, stack_outputs.clone());
    let placement = (policy.checked_by_caller(), constraints);
    let proof = prove_trace(trace, options, (inputs, outputs), committer, placement)?;

    Ok((
        stack_outputs,
        ExecutionProof::new(proof, hash_fn, precompile_requests),
        (admitted, backend),
    ))
}

/// Verifies `proof` of `program` as `miden verify` does (`miden_verifier`, with the precompile
/// verifiers of `checks`).
#[instrument("self_check", skip_all)]
fn verify_proof(
    program: &Program,
    stack_inputs: &StackInputs,
    stack_outputs: &StackOutputs,
    proof: &ExecutionProof,
    checks: &MidenProveOptions,
) -> Result<(), Box<VerificationError>> {
    let program_info = ProgramInfo::new(program.hash(), program.kernel().clone());
    miden_verifier::verify_with_precompiles(
        program_info,
        stack_inputs.clone(),
        stack_outputs.clone(),
        proof.clone(),
        &checks.precompile_verifiers,
    )
    .map(|_| ())
    .map_err(Box::new)
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

/// Proves `trace` with [`ExecutionProver`] for the options' hash function, wrapped in a
/// [`GpuProver`] on `committer` under the policy, evaluating the constraints where the placement
/// says.
///
/// Not generic on purpose: the prover of every hash function is compiled here, in this crate,
/// once; the callers generic over their host (every program that proves) only execute.
fn prove_trace(
    trace: MidenTrace,
    options: ProvingOptions,
    public: (StackInputs, StackOutputs),
    committer: Arc<dyn GpuCommitter>,
    placement: (FallbackPolicy, ConstraintPlacement),
) -> Result<Proof, ProveError> {
    match options.hash_fn() {
        MidenHashFunction::Rpo256 => {
            prove_trace_with::<Rpo256, RpoRandomCoin>(trace, options, public, committer, placement)
        },
        MidenHashFunction::Rpx256 => {
            prove_trace_with::<Rpx256, RpxRandomCoin>(trace, options, public, committer, placement)
        },
        MidenHashFunction::Poseidon2 => prove_trace_with::<Poseidon2, WinterRandomCoin<Poseidon2>>(
            trace, options, public, committer, placement,
        ),
        MidenHashFunction::Blake3_192 => {
            prove_trace_with::<Blake3_192, WinterRandomCoin<Blake3_192>>(
                trace, options, public, committer, placement,
            )
        },
        MidenHashFunction::Blake3_256 => {
            prove_trace_with::<Blake3_256, WinterRandomCoin<Blake3_256>>(
                trace, options, public, committer, placement,
            )
        },
    }
}

/// [`prove_trace`] for hasher `H` and its random coin `R`.
fn prove_trace_with<H, R>(
    trace: MidenTrace,
    options: ProvingOptions,
    (stack_inputs, stack_outputs): (StackInputs, StackOutputs),
    committer: Arc<dyn GpuCommitter>,
    (policy, constraints): (FallbackPolicy, ConstraintPlacement),
) -> Result<Proof, ProveError>
where
    H: GpuHasher,
    R: RandomCoin<BaseField = Felt, Hasher = H> + Send + 'static,
{
    let prover = ExecutionProver::<H, R>::new(options, stack_inputs, stack_outputs);
    let prover = GpuProver::with_committer(prover, committer)
        .with_policy(policy)
        .with_constraint_placement(constraints);
    Ok(prover.prove(trace)?)
}
