//! [`ExecutionProver`]: the Winterfell prover of Miden VM execution traces.
//!
//! `miden_prover` keeps its own `ExecutionProver` private; this is the same prover rebuilt from
//! public items (`ProcessorAir`, `ExecutionTrace` inside a [`MidenTrace`], `PublicInputs`,
//! `ProvingOptions`), so that [`crate::GpuProver`] can wrap it. It uses Winterfell's default
//! trace LDE, constraint evaluator and constraint commitment with `MerkleTree<H>`, exactly as
//! `miden_prover` 0.20 does: proving with it (wrapped or not) gives the bytes
//! `miden_prover::prove` gives.

use core::marker::PhantomData;

use super::MidenTrace;
use miden_air::{ProcessorAir, ProvingOptions, PublicInputs};
use miden_crypto::Felt;
use miden_processor::{ExecutionTrace, StackInputs, StackOutputs};
use tracing::instrument;
use winter_air::{
    AuxRandElements, ConstraintCompositionCoefficients, PartitionOptions, ProofOptions, TraceInfo,
};
use winter_crypto::{ElementHasher, MerkleTree, RandomCoin};
use winter_math::FieldElement;
use winter_prover::{
    matrix::ColMatrix, CompositionPoly, CompositionPolyTrace, DefaultConstraintCommitment,
    DefaultConstraintEvaluator, DefaultTraceLde, Prover, StarkDomain, TracePolyTable,
};

/// Proves Miden VM execution traces with hash function `H` and random coin `R`; a public twin of
/// `miden_prover`'s private `ExecutionProver`.
///
/// ```ignore
/// let prover = ExecutionProver::<Rpo256, RpoRandomCoin>::new(options, stack_inputs, outputs);
/// let proof = GpuProver::new(prover, Backend::Auto)?.prove(MidenTrace::from(trace))?;
/// ```
pub struct ExecutionProver<H, R> {
    random_coin: PhantomData<(H, R)>,
    options: ProofOptions,
    stack_inputs: StackInputs,
    stack_outputs: StackOutputs,
}

impl<H, R> ExecutionProver<H, R>
where
    H: ElementHasher<BaseField = Felt> + Sync,
    R: RandomCoin<BaseField = Felt, Hasher = H> + Send,
{
    /// A prover for the executions that start with `stack_inputs` and end with `stack_outputs`,
    /// with the STARK parameters of `options` (its hash function must be `H`'s).
    pub fn new(
        options: ProvingOptions,
        stack_inputs: StackInputs,
        stack_outputs: StackOutputs,
    ) -> Self {
        Self { random_coin: PhantomData, options: options.into(), stack_inputs, stack_outputs }
    }

    /// Whether `trace` starts with this prover's stack inputs.
    fn are_inputs_valid(&self, trace: &ExecutionTrace) -> bool {
        self.stack_inputs.iter().zip(trace.init_stack_state().iter()).all(|(l, r)| l == r)
    }

    /// Whether `trace` ends with this prover's stack outputs.
    fn are_outputs_valid(&self, trace: &ExecutionTrace) -> bool {
        self.stack_outputs.iter().zip(trace.last_stack_state().iter()).all(|(l, r)| l == r)
    }
}

impl<H, R> Prover for ExecutionProver<H, R>
where
    H: ElementHasher<BaseField = Felt> + Sync,
    R: RandomCoin<BaseField = Felt, Hasher = H> + Send,
{
    type BaseField = Felt;
    type Air = ProcessorAir;
    type Trace = MidenTrace;
    type HashFn = H;
    type VC = MerkleTree<H>;
    type RandomCoin = R;
    type TraceLde<E>
        = DefaultTraceLde<E, H, Self::VC>
    where
        E: FieldElement<BaseField = Felt>;
    type ConstraintEvaluator<'a, E>
        = DefaultConstraintEvaluator<'a, ProcessorAir, E>
    where
        E: FieldElement<BaseField = Felt>;
    type ConstraintCommitment<E>
        = DefaultConstraintCommitment<E, H, Self::VC>
    where
        E: FieldElement<BaseField = Felt>;

    fn options(&self) -> &ProofOptions {
        &self.options
    }

    fn get_pub_inputs(&self, trace: &MidenTrace) -> PublicInputs {
        let trace = trace.execution();
        debug_assert!(self.are_inputs_valid(trace), "stack inputs do not match the trace");
        debug_assert!(self.are_outputs_valid(trace), "stack outputs do not match the trace");
        PublicInputs::new(
            trace.program_info().clone(),
            self.stack_inputs.clone(),
            self.stack_outputs.clone(),
            trace.final_precompile_transcript().state(),
        )
    }

    fn new_trace_lde<E>(
        &self,
        trace_info: &TraceInfo,
        main_trace: &ColMatrix<Felt>,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
    ) -> (Self::TraceLde<E>, TracePolyTable<E>)
    where
        E: FieldElement<BaseField = Felt>,
    {
        DefaultTraceLde::new(trace_info, main_trace, domain, partition_options)
    }

    fn new_evaluator<'a, E>(
        &self,
        air: &'a ProcessorAir,
        aux_rand_elements: Option<AuxRandElements<E>>,
        composition_coefficients: ConstraintCompositionCoefficients<E>,
    ) -> Self::ConstraintEvaluator<'a, E>
    where
        E: FieldElement<BaseField = Felt>,
    {
        DefaultConstraintEvaluator::new(air, aux_rand_elements, composition_coefficients)
    }

    /// Builds Miden's auxiliary (bus) columns from the main trace.
    ///
    /// # Panics
    /// Never in 0.20: `ExecutionTrace::build_aux_trace` always returns `Some` (its `Option` is
    /// unwrapped as `miden_prover` does; Winterfell's prover methods cannot return errors).
    #[instrument(skip_all)]
    fn build_aux_trace<E>(
        &self,
        trace: &MidenTrace,
        aux_rand_elements: &AuxRandElements<E>,
    ) -> ColMatrix<E>
    where
        E: FieldElement<BaseField = Felt>,
    {
        trace
            .execution()
            .build_aux_trace(aux_rand_elements.rand_elements())
            .expect("ExecutionTrace::build_aux_trace always returns Some")
    }

    fn build_constraint_commitment<E>(
        &self,
        composition_poly_trace: CompositionPolyTrace<E>,
        num_constraint_composition_columns: usize,
        domain: &StarkDomain<Felt>,
        partition_options: PartitionOptions,
    ) -> (Self::ConstraintCommitment<E>, CompositionPoly<E>)
    where
        E: FieldElement<BaseField = Felt>,
    {
        DefaultConstraintCommitment::new(
            composition_poly_trace,
            num_constraint_composition_columns,
            domain,
            partition_options,
        )
    }
}
