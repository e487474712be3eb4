//! Miden jobs (feature `miden`): a program's execution and proof on a slot's committer.

use miden_air::{ExecutionProof, ProvingOptions};
use miden_processor::{AdviceInputs, Program, StackInputs, StackOutputs, SyncHost};

use super::{main_segment_bytes, proof_host_bytes, JobHandle, ProverPool};
use crate::miden::{prove_admitted, Execution, MidenProveOptions};

impl ProverPool {
    /// Queues the execution of `program` with `host` and its proof on the job's committer
    /// (as [`crate::miden::prove_with_committer`], the proof checked), its estimated host memory
    /// ([`proof_host_bytes`], and the copy of the main segment that the default parallel
    /// execution holds) reserved between the execution and the proof. The program executes
    /// during a start turn ([`super::JobContext::start_turn`]), and the job's slot is chosen
    /// once it has executed, when its proof starts; the job's result is
    /// the stack outputs and the proof, its error [`super::PoolError::Miden`] (or
    /// [`super::PoolError::OutOfMemory`]).
    pub fn prove_miden<H>(
        &self,
        program: Program,
        stack_inputs: StackInputs,
        advice_inputs: AdviceInputs,
        host: H,
        options: ProvingOptions,
    ) -> JobHandle<(StackOutputs, ExecutionProof)>
    where
        H: SyncHost + Send + 'static,
    {
        let checks = MidenProveOptions::default();
        self.prove_miden_with(program, (stack_inputs, advice_inputs), host, options, checks)
    }

    /// [`Self::prove_miden`], executing and checking as `checks` says (as
    /// [`crate::miden::prove_with_options`]).
    pub fn prove_miden_with<H>(
        &self,
        program: Program,
        (stack_inputs, advice_inputs): (StackInputs, AdviceInputs),
        mut host: H,
        options: ProvingOptions,
        checks: MidenProveOptions,
    ) -> JobHandle<(StackOutputs, ExecutionProof)>
    where
        H: SyncHost + Send + 'static,
    {
        self.submit(move |job| {
            // held while the program executes: the job's slot is chosen after it
            let start_turn = job.start_turn();
            prove_admitted(
                &program,
                (stack_inputs, advice_inputs),
                &mut host,
                options,
                &checks,
                |trace, options| {
                    drop(start_turn);
                    // after the parallel execution, `MidenTrace` holds a corrected copy of the
                    // main segment beside the execution trace's own
                    let copy = match checks.execution {
                        Execution::Parallel => main_segment_bytes(trace),
                        Execution::Reference => 0,
                    };
                    let reserved =
                        job.reserve_host(proof_host_bytes(trace, options).saturating_add(copy))?;
                    Ok((reserved, job.committer().clone()))
                },
            )
        })
    }
}
