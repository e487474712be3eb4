//! The constraint evaluation of a proof: on the backend, over the trace LDE it kept, where the
//! AIR's constraints can be recorded; else the wrapped prover's own evaluator.
//!
//! Before the trace commitment the prover decides where the evaluation runs
//! ([`ConstraintPlacement`], the backend's [`GpuCommitter::evaluates_compositions`], and whether
//! [`capture`] follows the AIR's code, with one `info` line saying why not): only an evaluation
//! on the backend keeps the LDE rows there, so that none of them comes to the host. Once the
//! coefficients are drawn the whole composition is recorded ([`Composition`]) and the backend
//! evaluates it, leaving it in its memory for the constraint commitment. A failure there falls
//! back as every step does: the CPU evaluates with the wrapped prover's evaluator over an LDE it
//! computes from the traces (the rows it would read are on the device).

use std::sync::Arc;

use miden_crypto::Felt;
use tracing::{info, info_span, warn};
use winter_air::{Air, AuxRandElements, ConstraintCompositionCoefficients};
use winter_crypto::MerkleTree;
use winter_math::FieldElement;
use winter_prover::{
    matrix::ColMatrix, CompositionPolyTrace, ConstraintEvaluator, DefaultTraceLde, Prover,
    StarkDomain, TraceLde,
};

use super::{policy::Step, proof::ProofSetup, spans, GpuProver, GpuTraceLde};
use crate::{
    committer::{
        composition::{CompositionRequest, KeptEvaluations},
        GpuCommitter, KeptRows,
    },
    constraints::{capture, Composition},
    error::GpuError,
    hash::GpuHasher,
};

/// Where a [`GpuProver`] evaluates the constraints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConstraintPlacement {
    /// On the backend, where it evaluates compositions and the AIR's constraints can be
    /// recorded; elsewhere with the wrapped prover's evaluator.
    #[default]
    Backend,
    /// With the wrapped prover's evaluator on the CPU, whatever the backend: for comparison.
    Cpu,
}

/// What `Prover::new_evaluator` takes besides the AIR: the auxiliary random elements and the
/// composition coefficients.
pub(super) type EvaluatorInputs<E> =
    (Option<AuxRandElements<E>>, ConstraintCompositionCoefficients<E>);

/// The composition over the CE domain, where it was evaluated.
pub(crate) enum CompositionEvaluations<E: FieldElement<BaseField = Felt>> {
    /// On the host, by the wrapped prover's evaluator.
    Host(CompositionPolyTrace<E>),
    /// In the backend's memory, for the constraint commitment to read there.
    Kept(Arc<dyn KeptEvaluations>),
}

/// The traces a CPU evaluation (or a re-read of queried rows) recomputes the LDE from.
#[derive(Clone, Copy)]
pub(super) struct Traces<'a, E: FieldElement<BaseField = Felt>> {
    pub main: &'a ColMatrix<Felt>,
    pub aux: Option<&'a ColMatrix<E>>,
}

impl<P> GpuProver<P>
where
    P: Prover<BaseField = Felt>,
    P::HashFn: GpuHasher,
    P::RandomCoin: 'static,
{
    /// Whether this proof evaluates its constraints on the backend (and so keeps the trace LDE
    /// rows there); a reason not to is logged at `info`.
    pub(super) fn constraints_on_backend<E: FieldElement<BaseField = Felt>>(
        &self,
        air: &P::Air,
        setup: &ProofSetup,
    ) -> bool {
        let committer = setup.committer.committer();
        if setup.constraints != ConstraintPlacement::Backend || !committer.evaluates_compositions()
        {
            return false;
        }
        match capture::<P::Air, E>(air) {
            Ok(_) => true,
            Err(error) => {
                info!(%error, "constraints evaluated on the CPU: the AIR's cannot be recorded");
                false
            },
        }
    }

    /// The composition over the CE domain: on the backend (and left there) where `trace_lde`
    /// kept its rows there, else (or after a backend failure the policy falls back from) with
    /// the wrapped prover's evaluator.
    pub(super) fn evaluate_constraints<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        air: &P::Air,
        trace_lde: &GpuTraceLde<E, P::HashFn>,
        traces: Traces<'_, E>,
        domain: &StarkDomain<Felt>,
        inputs: &EvaluatorInputs<E>,
    ) -> CompositionEvaluations<E> {
        let Some(kept) = trace_lde.kept_rows() else {
            let (aux_rand_elements, coefficients) = inputs.clone();
            let evaluator = self.new_evaluator(air, aux_rand_elements, coefficients);
            return CompositionEvaluations::Host(evaluator.evaluate(trace_lde, domain));
        };
        match self.composition_on_backend::<E>(setup, air, &kept, domain, inputs) {
            Ok(kept) => CompositionEvaluations::Kept(kept),
            Err(reason) => {
                warn!(%reason, "evaluating the constraints on the CPU over an LDE computed again");
                CompositionEvaluations::Host(self.cpu_composition(air, traces, domain, inputs))
            },
        }
    }

    /// The composition evaluated on the CPU with the wrapped prover's evaluator, over an LDE
    /// computed from `traces`: where the backend's evaluation failed, or its result cannot be
    /// read back.
    pub(super) fn cpu_composition<E: FieldElement<BaseField = Felt>>(
        &self,
        air: &P::Air,
        traces: Traces<'_, E>,
        domain: &StarkDomain<Felt>,
        inputs: &EvaluatorInputs<E>,
    ) -> CompositionPolyTrace<E> {
        let lde = cpu_lde::<E, P::HashFn>(air, traces, domain, self.options().partition_options());
        let (aux_rand_elements, coefficients) = inputs.clone();
        self.new_evaluator(air, aux_rand_elements, coefficients).evaluate(&lde, domain)
    }
}

impl<P> GpuProver<P>
where
    P: Prover<BaseField = Felt>,
    P::HashFn: GpuHasher,
    P::RandomCoin: 'static,
{
    /// The composition evaluated by the backend over the `kept` rows (main, then auxiliary) and
    /// left there, or why the CPU evaluates instead: the composition could not be recorded, or
    /// the backend failed and the policy falls back (without the fallback, a panic carrying the
    /// typed error, as for every step).
    fn composition_on_backend<E: FieldElement<BaseField = Felt>>(
        &self,
        setup: &ProofSetup,
        air: &P::Air,
        kept: &[&dyn KeptRows],
        domain: &StarkDomain<Felt>,
        (aux_rand_elements, coefficients): &EvaluatorInputs<E>,
    ) -> core::result::Result<Arc<dyn KeptEvaluations>, String> {
        let backend = setup.committer.committer().backend();
        let _span = info_span!(spans::CONSTRAINT_EVALUATION, %backend).entered();
        let composition = Composition::new(air, aux_rand_elements.as_ref(), coefficients)
            .map_err(|error| error.to_string())?;
        let x_bases = composition.x_power_bases(domain);
        let info = air.trace_info();
        let request = CompositionRequest {
            composition: &composition,
            main: kept[0],
            aux: kept.get(1).copied(),
            main_width: info.main_trace_width(),
            aux_width: info.aux_segment_width() * E::EXTENSION_DEGREE,
            trace_len: air.trace_length(),
            lde_blowup: domain.trace_to_lde_blowup(),
            ce_blowup: air.ce_blowup_factor(),
            x_bases: &x_bases,
        };
        let ce_size = air.ce_domain_size();
        let evaluate = |c: &dyn GpuCommitter| {
            let kept = c.evaluate_composition(&request)?;
            if kept.components() != E::EXTENSION_DEGREE || kept.ce_size() != ce_size {
                let condition = format!(
                    "returned {} evaluations of {} components for a CE domain of {ce_size} in a \
                     field of degree {}",
                    kept.ce_size(),
                    kept.components(),
                    E::EXTENSION_DEGREE
                );
                return Err(GpuError::internal(c.backend(), "evaluate_composition", condition));
            }
            Ok(kept)
        };
        match setup.committer.run_step("the constraint evaluation", evaluate) {
            Ok(Step::Done(kept)) => Ok(kept),
            Ok(Step::OnHost(error)) => Err(error.to_string()),
            Err(error) => panic!("the constraint evaluation failed: {error}"),
        }
    }
}

/// Winterfell's own trace LDE of `traces`, for a CPU evaluation when the rows are on the device.
pub(super) fn cpu_lde<E: FieldElement<BaseField = Felt>, H: GpuHasher>(
    air: &impl Air<BaseField = Felt>,
    traces: Traces<'_, E>,
    domain: &StarkDomain<Felt>,
    partition_options: winter_air::PartitionOptions,
) -> DefaultTraceLde<E, H, MerkleTree<H>> {
    let (mut lde, _) = DefaultTraceLde::<E, H, MerkleTree<H>>::new(
        air.trace_info(),
        traces.main,
        domain,
        partition_options,
    );
    if let Some(aux) = traces.aux {
        lde.set_aux_trace(aux, domain);
    }
    lde
}
