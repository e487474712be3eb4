//! The composition over the constraint-evaluation domain from a captured graph: a drop-in
//! `ConstraintEvaluator` equal to winter-prover's `DefaultConstraintEvaluator` bit for bit.
//!
//! Every step follows Winterfell's operations in order, so even winter-math's non-canonical
//! words (from `double`, and `add` of such an operand) come out the same:
//! - frames: current = LDE row `step << lde_shift`, next = `+ lde_blowup` (the `TraceLde`'s own);
//! - transition: `Σ α_j.mul_base(C_j)` from zero, then `+= Σ α'_j · A_j` from zero;
//! - boundary groups as in [`BoundaryGroup::evaluate`];
//! - combination: from zero, each column (transition first) `+= value.mul_base(z)`, with
//!   `z = 1 / (x^a − b)` at `step mod (ce_size / a)`, times the exemptions `Π (x − e)` for a
//!   divisor that has them.

use rayon::prelude::*;
use winter_air::{
    Air, AuxRandElements, ConstraintCompositionCoefficients, ConstraintDivisor, EvaluationFrame,
    TransitionConstraints,
};
use winter_math::{batch_inversion, FieldElement};
use winter_prover::{CompositionPolyTrace, ConstraintEvaluator, StarkDomain, TraceLde};

use super::boundary::BoundaryGroup;
use super::capture::{capture, CaptureError};
use super::graph::ConstraintGraph;
use super::interpret::FrameInputs;
use super::periodic::PeriodicTable;
use crate::Felt;

/// CE rows one rayon task evaluates.
const ROWS_PER_TASK: usize = 1024;

// ================================================================================================
// EVALUATOR
// ================================================================================================

/// A constraint evaluator over an AIR's captured graph, with the inputs of
/// `DefaultConstraintEvaluator::new`.
pub struct GraphConstraintEvaluator<'a, A: Air<BaseField = Felt>, E: FieldElement<BaseField = Felt>>
{
    air: &'a A,
    graph: ConstraintGraph,
    transition: TransitionConstraints<E>,
    boundary: Vec<BoundaryGroup<E>>,
    periodic: PeriodicTable,
    random: Vec<Felt>,
}

impl<'a, A, E> GraphConstraintEvaluator<'a, A, E>
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    /// Captures `air`'s constraints and prepares the composition; an error says why the graph
    /// cannot follow the AIR (the caller then uses `DefaultConstraintEvaluator`).
    pub fn new(
        air: &'a A,
        aux_rand_elements: Option<AuxRandElements<E>>,
        composition_coefficients: ConstraintCompositionCoefficients<E>,
    ) -> Result<Self, CaptureError> {
        let graph = capture::<A, E>(air)?;
        let transition = air.get_transition_constraints(&composition_coefficients.transition);
        let boundary =
            BoundaryGroup::all(air, aux_rand_elements.as_ref(), &composition_coefficients.boundary);
        let random = aux_rand_elements
            .map(|elements| E::slice_as_base_elements(elements.rand_elements()).to_vec())
            .unwrap_or_default();
        Ok(Self { air, graph, transition, boundary, periodic: PeriodicTable::new(air), random })
    }

    /// The captured graph.
    pub fn graph(&self) -> &ConstraintGraph {
        &self.graph
    }

    /// The combined composition value of CE step `step`.
    fn row<T: TraceLde<E>>(
        &self,
        step: usize,
        context: &RowContext<'_, T, E>,
        scratch: &mut Scratch<E>,
    ) -> E {
        let lde_step = step << context.lde_shift;
        context.trace.read_main_trace_frame_into(lde_step, &mut scratch.main);
        if let Some(aux) = scratch.aux.as_mut() {
            context.trace.read_aux_trace_frame_into(lde_step, aux);
        }
        let aux_current: &[E] = scratch.aux.as_ref().map_or(&[], |aux| aux.current());
        let aux_next: &[E] = scratch.aux.as_ref().map_or(&[], |aux| aux.next());
        let inputs = FrameInputs {
            main_current: scratch.main.current(),
            main_next: scratch.main.next(),
            aux_current: E::slice_as_base_elements(aux_current),
            aux_next: E::slice_as_base_elements(aux_next),
            periodic: self.periodic.row(step),
            random: &self.random,
        };
        self.graph.interpret(&inputs, self.graph.constants(), &mut scratch.values);

        let values = &scratch.values;
        let mut transition = self
            .graph
            .main_outputs()
            .iter()
            .zip(&context.main_coefficients)
            .fold(E::ZERO, |acc, (&id, &coef)| acc + coef.mul_base(values[id as usize]));
        if scratch.aux.is_some() {
            scratch.aux_results.clear();
            scratch
                .aux_results
                .extend(self.graph.aux_outputs().iter().map(|&id| values[id as usize]));
            transition += E::slice_from_base_elements(&scratch.aux_results)
                .iter()
                .zip(&context.aux_coefficients)
                .fold(E::ZERO, |acc, (&value, &coef)| acc + coef * value);
        }

        let x = context.domain.get_ce_x_at(step);
        let boundary = self
            .boundary
            .iter()
            .map(|group| group.evaluate(scratch.main.current(), aux_current, x, step));
        let mut combined = E::ZERO;
        for (value, divisor) in core::iter::once(transition).chain(boundary).zip(&context.divisors)
        {
            let z = divisor.inverses[step % divisor.inverses.len()];
            combined += if divisor.divisor.exemptions().is_empty() {
                value.mul_base(z)
            } else {
                value.mul_base(z * divisor.divisor.evaluate_exemptions_at(x))
            };
        }
        combined
    }
}

impl<A, E> ConstraintEvaluator<E> for GraphConstraintEvaluator<'_, A, E>
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    type Air = A;

    fn evaluate<T: TraceLde<E>>(
        self,
        trace: &T,
        domain: &StarkDomain<Felt>,
    ) -> CompositionPolyTrace<E> {
        let divisors = core::iter::once(self.transition.divisor())
            .chain(self.boundary.iter().map(BoundaryGroup::divisor))
            .map(|divisor| Divisor::new(divisor, domain))
            .collect();
        let context = RowContext {
            trace,
            domain,
            lde_shift: domain.ce_to_lde_blowup().trailing_zeros(),
            main_coefficients: self.transition.main_constraint_coef(),
            aux_coefficients: self.transition.aux_constraint_coef(),
            divisors,
        };
        let trace_info = trace.trace_info();
        let multi_segment = self.air.trace_info().is_multi_segment();
        let mut result = vec![E::ZERO; domain.ce_domain_size()];
        result.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(task, rows)| {
            let mut scratch = Scratch {
                main: EvaluationFrame::new(trace_info.main_trace_width()),
                aux: multi_segment.then(|| EvaluationFrame::new(trace_info.aux_segment_width())),
                values: Vec::new(),
                aux_results: Vec::new(),
            };
            for (k, value) in rows.iter_mut().enumerate() {
                *value = self.row(task * ROWS_PER_TASK + k, &context, &mut scratch);
            }
        });
        CompositionPolyTrace::new(result)
    }
}

// ================================================================================================
// ROW STATE
// ================================================================================================

/// What every row reads.
struct RowContext<'a, T, E: FieldElement<BaseField = Felt>> {
    trace: &'a T,
    domain: &'a StarkDomain<Felt>,
    lde_shift: u32,
    main_coefficients: Vec<E>,
    aux_coefficients: Vec<E>,
    divisors: Vec<Divisor<'a>>,
}

/// One column's divisor with its inverse values `1 / (x^a − b)` over the `ce_size / a`
/// distinct points (winter-prover's `get_inv_evaluation`).
struct Divisor<'a> {
    divisor: &'a ConstraintDivisor<Felt>,
    inverses: Vec<Felt>,
}

impl<'a> Divisor<'a> {
    fn new(divisor: &'a ConstraintDivisor<Felt>, domain: &StarkDomain<Felt>) -> Self {
        let (degree, shift) = divisor.numerator()[0];
        let degree = degree as u64;
        let offset_exp = domain.offset().exp(degree);
        let values: Vec<Felt> = (0..domain.ce_domain_size() / degree as usize)
            .map(|i| domain.get_ce_x_power_at(i, degree, offset_exp) - shift)
            .collect();
        Self { divisor, inverses: batch_inversion(&values) }
    }
}

/// A task's buffers, reused over its rows.
struct Scratch<E: FieldElement<BaseField = Felt>> {
    main: EvaluationFrame<Felt>,
    /// The auxiliary frame, for a multi-segment trace.
    aux: Option<EvaluationFrame<E>>,
    values: Vec<Felt>,
    aux_results: Vec<Felt>,
}
