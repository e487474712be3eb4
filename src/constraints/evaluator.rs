//! The composition over the constraint-evaluation domain from a recorded [`Composition`]: a
//! drop-in `ConstraintEvaluator` equal to winter-prover's `DefaultConstraintEvaluator` bit for
//! bit, and the CPU oracle of the device evaluations.
//!
//! Winterfell's evaluator, which the composition graph records:
//! - frames: current = LDE row `step << lde_shift`, next = `+ lde_blowup` (the `TraceLde`'s own);
//! - transition: `Σ α_j.mul_base(C_j)`, then `+ Σ α'_j · A_j`;
//! - boundary groups as `boundary` records them;
//! - combination: each column (transition first) times `1 / (x^a − b)`, times the exemptions
//!   `Π (x − e)` for a divisor that has them, summed.

use rayon::prelude::*;
use winter_air::{Air, AuxRandElements, ConstraintCompositionCoefficients, EvaluationFrame};
use winter_math::FieldElement;
use winter_prover::{CompositionPolyTrace, ConstraintEvaluator, StarkDomain, TraceLde};

use super::capture::CaptureError;
use super::compose::Composition;
use super::interpret::FrameInputs;
use crate::Felt;

/// CE rows one rayon task evaluates.
const ROWS_PER_TASK: usize = 1024;

// ================================================================================================
// EVALUATOR
// ================================================================================================

/// A constraint evaluator over an AIR's recorded composition, with the inputs of
/// `DefaultConstraintEvaluator::new`.
pub struct GraphConstraintEvaluator<'a, A: Air<BaseField = Felt>, E: FieldElement<BaseField = Felt>>
{
    air: &'a A,
    composition: Composition,
    _element: core::marker::PhantomData<E>,
}

impl<'a, A, E> GraphConstraintEvaluator<'a, A, E>
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    /// Records `air`'s composition; an error says why the graph cannot follow the AIR (the
    /// caller then uses `DefaultConstraintEvaluator`).
    pub fn new(
        air: &'a A,
        aux_rand_elements: Option<AuxRandElements<E>>,
        composition_coefficients: ConstraintCompositionCoefficients<E>,
    ) -> Result<Self, CaptureError> {
        let composition =
            Composition::new(air, aux_rand_elements.as_ref(), &composition_coefficients)?;
        Ok(Self { air, composition, _element: core::marker::PhantomData })
    }

    /// The recorded composition.
    pub fn composition(&self) -> &Composition {
        &self.composition
    }

    /// The composed value of CE step `step`.
    fn row<T: TraceLde<E>>(
        &self,
        step: usize,
        context: &RowContext<'_, T>,
        scratch: &mut Scratch<E>,
    ) -> E {
        let lde_step = step << context.lde_shift;
        context.trace.read_main_trace_frame_into(lde_step, &mut scratch.main);
        if let Some(aux) = scratch.aux.as_mut() {
            context.trace.read_aux_trace_frame_into(lde_step, aux);
        }
        let aux_current: &[E] = scratch.aux.as_ref().map_or(&[], |aux| aux.current());
        let aux_next: &[E] = scratch.aux.as_ref().map_or(&[], |aux| aux.next());
        let composition = &self.composition;
        composition.x_powers_at(step, context.domain, &mut scratch.x_powers);
        composition.table_row(step, &mut scratch.tables);
        let inputs = FrameInputs {
            main_current: scratch.main.current(),
            main_next: scratch.main.next(),
            aux_current: E::slice_as_base_elements(aux_current),
            aux_next: E::slice_as_base_elements(aux_next),
            periodic: composition.periodic_row(step),
            random: composition.random(),
            x_powers: &scratch.x_powers,
            tables: &scratch.tables,
        };
        let graph = composition.graph();
        graph.interpret(&inputs, graph.constants(), &mut scratch.values);
        scratch.output.clear();
        let outputs = graph.composition_outputs().iter();
        scratch.output.extend(outputs.map(|&id| scratch.values[id as usize]));
        E::slice_from_base_elements(&scratch.output)[0]
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
        let context =
            RowContext { trace, domain, lde_shift: domain.ce_to_lde_blowup().trailing_zeros() };
        let trace_info = trace.trace_info();
        let multi_segment = self.air.trace_info().is_multi_segment();
        let mut result = vec![E::ZERO; domain.ce_domain_size()];
        result.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(task, rows)| {
            let mut scratch = Scratch {
                main: EvaluationFrame::new(trace_info.main_trace_width()),
                aux: multi_segment.then(|| EvaluationFrame::new(trace_info.aux_segment_width())),
                values: Vec::new(),
                x_powers: Vec::new(),
                tables: Vec::new(),
                output: Vec::new(),
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
struct RowContext<'a, T> {
    trace: &'a T,
    domain: &'a StarkDomain<Felt>,
    lde_shift: u32,
}

/// A task's buffers, reused over its rows.
struct Scratch<E: FieldElement<BaseField = Felt>> {
    main: EvaluationFrame<Felt>,
    /// The auxiliary frame, for a multi-segment trace.
    aux: Option<EvaluationFrame<E>>,
    values: Vec<Felt>,
    x_powers: Vec<Felt>,
    tables: Vec<Felt>,
    output: Vec<Felt>,
}
