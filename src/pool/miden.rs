//! Miden jobs (feature `miden`): a program's execution and proof on a slot's committer.

use miden_air::{ExecutionProof, ProvingOptions};
use miden_processor::{AdviceInputs, Program, StackInputs, StackOutputs, SyncHost};

use super::{JobHandle, ProverPool};
use crate::miden::prove_with_committer;

impl ProverPool {
    /// Queues the execution of `program` with `host` and its proof on the job's committer
    /// ([`prove_with_committer`]); the job's result is the stack outputs and the proof, its error
    /// [`super::PoolError::Miden`].
    pub fn prove_miden<H>(
        &self,
        program: Program,
        stack_inputs: StackInputs,
        advice_inputs: AdviceInputs,
        mut host: H,
        options: ProvingOptions,
    ) -> JobHandle<(StackOutputs, ExecutionProof)>
    where
        H: SyncHost + Send + 'static,
    {
        self.submit(move |job| {
            let committer = job.committer().clone();
            Ok(prove_with_committer(
                &program,
                stack_inputs,
                advice_inputs,
                &mut host,
                options,
                committer,
            )?)
        })
    }
}
