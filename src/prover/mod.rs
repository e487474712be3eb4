//! [`GpuProver`]: any Winterfell prover, with its trace and constraint commitments on a backend.

use std::sync::Arc;

use miden_crypto::Felt;
use winter_air::{
    Air, AuxRandElements, ConstraintCompositionCoefficients, PartitionOptions, ProofOptions,
    TraceInfo,
};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{
    matrix::ColMatrix, CompositionPoly, CompositionPolyTrace, Proof, Prover, ProverError,
    StarkDomain, TracePolyTable,
};

use crate::{backend::Backend, committer::GpuCommitter, error::Result, hash::GpuHasher};

mod channel;
mod compare;
mod constraint_commitment;
mod deep;
mod evaluation;
mod fri_proof;
mod host_polys;
mod options;
mod policy;
mod proof;
mod segment;
pub mod spans;
mod trace_lde;
mod tree;

pub use compare::{compare_proofs, ProofMatch};
pub use constraint_commitment::GpuConstraintCommitment;
pub use evaluation::ConstraintPlacement;
pub use options::ProverOptions;
use policy::CommitterHandle;
pub use policy::FallbackPolicy;
pub use proof::FriPlacement;
pub use segment::{commit_composition, commit_trace_segment, SegmentCommitment, SegmentLde};
pub use trace_lde::GpuTraceLde;

// GPU PROVER
// ================================================================================================

/// Wraps a Winterfell prover `P` and computes its trace and constraint commitments, the
/// constraint evaluation (where the backend can and the AIR's constraints can be recorded: see
/// [`ConstraintPlacement`]), the DEEP composition and the FRI layers on a [`GpuCommitter`]; the
/// AIR, options, public inputs and auxiliary trace stay `P`'s. Proofs are byte-identical to `P`'s own
/// when `P` uses Winterfell's default trace LDE and constraint commitment with
/// `MerkleTree<P::HashFn>`.
///
/// What a backend failure leads to is its [`FallbackPolicy`] (by default: recomputed on the CPU,
/// and every proof verified before it is returned, so a backend that returns wrong data without
/// an error never yields a proof that does not verify).
///
/// ```ignore
/// let prover = GpuProver::new(FibProver::new(options), Backend::Auto)?;
/// let proof = prover.prove(trace)?;
/// ```
pub struct GpuProver<P> {
    inner: P,
    committer: CommitterHandle,
    fri_placement: FriPlacement,
    constraints: ConstraintPlacement,
}

impl<P> GpuProver<P>
where
    P: Prover<BaseField = Felt>,
    P::HashFn: GpuHasher,
    P::RandomCoin: 'static,
{
    /// Wraps `inner`, committing on `backend` with its default options (see
    /// [`Backend::create`]). A backend failure during a proof falls back to the CPU with a
    /// warning; see [`Self::with_cpu_fallback`].
    pub fn new(inner: P, backend: Backend) -> Result<Self> {
        Ok(Self::with_committer(inner, backend.create()?))
    }

    /// Wraps `inner`, creating the committer of `options.backend` and taking the other options.
    pub fn with_options(inner: P, options: &ProverOptions) -> Result<Self> {
        Ok(Self::with_committer(inner, options.backend.create()?)
            .with_fri_placement(options.fri_placement)
            .with_constraint_placement(options.constraint_placement)
            .with_policy(options.policy()))
    }

    /// Wraps `inner`, committing on the given committer, with the default [`FallbackPolicy`].
    pub fn with_committer(inner: P, committer: Arc<dyn GpuCommitter>) -> Self {
        Self {
            inner,
            committer: CommitterHandle::new(committer, FallbackPolicy::default()),
            fri_placement: FriPlacement::Backend,
            constraints: ConstraintPlacement::Backend,
        }
    }

    /// Where the constraints are evaluated (on the backend by default, where it can and the
    /// AIR's constraints can be recorded; see [`ConstraintPlacement`]).
    pub fn with_constraint_placement(mut self, placement: ConstraintPlacement) -> Self {
        self.constraints = placement;
        self
    }

    /// Where the DEEP composition and the FRI commit phase run (on the backend by default); the
    /// polynomials are kept on the device for the backend's alone
    /// ([`FallbackPolicy::keep_polys`]).
    pub fn with_fri_placement(mut self, placement: FriPlacement) -> Self {
        self.fri_placement = placement;
        self
    }

    /// Proves under `policy` (which replaces the CPU fallback, kept polynomials and self-check
    /// set so far).
    pub fn with_policy(mut self, policy: FallbackPolicy) -> Self {
        *self.committer.policy_mut() = policy;
        self
    }

    /// Whether a backend failure mid-proof is recomputed on the CPU (the default) or panics with
    /// the typed error ([`FallbackPolicy::cpu_fallback`]).
    pub fn with_cpu_fallback(mut self, enabled: bool) -> Self {
        self.committer.policy_mut().cpu_fallback = enabled;
        self
    }

    /// Whether each proof is verified before `prove` returns it (the default;
    /// [`FallbackPolicy::self_check`]). Verification costs much the same whatever the trace
    /// length (it reads the queried rows, not the trace), so it is a small share of a proof of
    /// a long trace and a larger one of a fast proof of a short trace; turned off, `prove`
    /// returns whatever the backend's data gives.
    pub fn with_self_check(mut self, enabled: bool) -> Self {
        self.committer.policy_mut().self_check = enabled;
        self
    }

    /// Where this prover's own proofs run: the polynomials are kept on the device only for a
    /// DEEP composition there.
    fn setup(&self) -> proof::ProofSetup {
        let mut committer = self.committer.clone();
        committer.policy_mut().keep_polys &= self.fri_placement == FriPlacement::Backend;
        proof::ProofSetup {
            committer,
            fri_placement: self.fri_placement,
            constraints: self.constraints,
        }
    }

    /// The committer in use.
    pub fn committer(&self) -> &Arc<dyn GpuCommitter> {
        self.committer.committer()
    }

    /// The policy the proofs follow.
    pub fn policy(&self) -> FallbackPolicy {
        self.committer.policy()
    }

    /// The wrapped prover.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

impl<P> Prover for GpuProver<P>
where
    P: Prover<BaseField = Felt>,
    P::HashFn: GpuHasher,
    P::RandomCoin: 'static,
{
    type BaseField = Felt;
    type Air = P::Air;
    type Trace = P::Trace;
    type HashFn = P::HashFn;
    type VC = MerkleTree<P::HashFn>;
    type RandomCoin = P::RandomCoin;
    type TraceLde<E>
        = GpuTraceLde<E, P::HashFn>
    where
        E: FieldElement<BaseField = Felt>;
    type ConstraintEvaluator<'a, E>
        = P::ConstraintEvaluator<'a, E>
    where
        E: FieldElement<BaseField = Felt>;
    type ConstraintCommitment<E>
        = GpuConstraintCommitment<E, P::HashFn>
    where
        E: FieldElement<BaseField = Felt>;

    fn prove(&self, trace: Self::Trace) -> core::result::Result<Proof, ProverError>
    where
        <Self::Air as Air>::PublicInputs: Send,
    {
        self.prove_trace(trace)
    }

    fn get_pub_inputs(&self, trace: &Self::Trace) -> <Self::Air as Air>::PublicInputs {
        self.inner.get_pub_inputs(trace)
    }

    fn options(&self) -> &ProofOptions {
        self.inner.options()
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
        GpuTraceLde::with_polys(trace_info, main_trace, domain, partition_options, &self.committer)
            .unwrap_or_else(|error| panic!("main trace commitment failed: {error}"))
    }

    fn new_evaluator<'a, E>(
        &self,
        air: &'a Self::Air,
        aux_rand_elements: Option<AuxRandElements<E>>,
        composition_coefficients: ConstraintCompositionCoefficients<E>,
    ) -> Self::ConstraintEvaluator<'a, E>
    where
        E: FieldElement<BaseField = Felt>,
    {
        self.inner.new_evaluator(air, aux_rand_elements, composition_coefficients)
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
        GpuConstraintCommitment::new(
            composition_poly_trace,
            num_constraint_composition_columns,
            domain,
            partition_options,
            &self.committer,
        )
    }

    fn build_aux_trace<E>(
        &self,
        main_trace: &Self::Trace,
        aux_rand_elements: &AuxRandElements<E>,
    ) -> ColMatrix<E>
    where
        E: FieldElement<BaseField = Felt>,
    {
        self.inner.build_aux_trace(main_trace, aux_rand_elements)
    }
}
