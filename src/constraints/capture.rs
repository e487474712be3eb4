//! Recording an AIR's own transition constraint code into a [`ConstraintGraph`].

use std::panic::{catch_unwind, AssertUnwindSafe};

use winter_air::{Air, AuxRandElements, EvaluationFrame};
use winter_math::FieldElement;

use super::graph::{ConstraintGraph, GraphBuilder, Input, NodeId, Outputs};
use super::symbolic::{record, Recorded, SymBase, SymExt, Unrecordable};
use crate::Felt;

// ================================================================================================
// ERRORS
// ================================================================================================

/// Why an AIR's constraints could not be captured; its prover's own evaluator then runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// The constraint code performs an operation a graph cannot follow.
    #[error("the AIR's constraints perform {operation}, which a graph cannot follow ({count} unrecordable operations)")]
    Unrecordable {
        /// The first such operation.
        operation: Unrecordable,
        /// How many unrecordable operations the recording met.
        count: usize,
    },
    /// The constraint code panicked on symbolic elements.
    #[error("the AIR's constraint code panicked on symbolic elements: {0}")]
    Panicked(String),
    /// The extension field has a degree no symbolic type stands for.
    #[error("extension degree {0} has no symbolic field (1, 2 and 3 have)")]
    ExtensionDegree(usize),
    /// A capture was started from inside another one on the same thread.
    #[error("a capture is already recording on this thread")]
    Nested,
}

// ================================================================================================
// CAPTURE
// ================================================================================================

/// Records `air`'s `evaluate_transition` and (for a multi-segment trace)
/// `evaluate_aux_transition`, with auxiliary values in the extension field `E`, into a graph.
///
/// One capture serves every frame of a proof; values the AIR holds (public inputs) become
/// constants of the graph's table.
pub fn capture<A, E>(air: &A) -> Result<ConstraintGraph, CaptureError>
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    match E::EXTENSION_DEGREE {
        1 => capture_with::<A, 1>(air),
        2 => capture_with::<A, 2>(air),
        3 => capture_with::<A, 3>(air),
        degree => Err(CaptureError::ExtensionDegree(degree)),
    }
}

/// The capture with auxiliary elements of degree `D`.
fn capture_with<A: Air<BaseField = Felt>, const D: usize>(
    air: &A,
) -> Result<ConstraintGraph, CaptureError> {
    let ((main, aux), builder) = recording(|| record_constraints::<A, D>(air))?;
    Ok(builder.finish(Outputs { main, aux, ..Outputs::default() }, D))
}

/// Runs `body` in a fresh recording: its result and the recorded nodes, or why the recording
/// cannot stand for the code it ran (an unrecordable operation, a panic, a nested recording).
pub(crate) fn recording<T>(body: impl FnOnce() -> T) -> Result<(T, GraphBuilder), CaptureError> {
    let recorded = record(|| catch_unwind(AssertUnwindSafe(body)));
    let Recorded { result, builder, failure } = recorded.ok_or(CaptureError::Nested)?;
    // an unrecordable operation first: a panic after it may come from its placeholder
    if let Some((operation, count)) = failure {
        return Err(CaptureError::Unrecordable { operation, count });
    }
    let result = result.map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic".into());
        CaptureError::Panicked(message)
    })?;
    Ok((result, builder))
}

/// Runs the AIR's constraint code on symbolic frames; returns the output nodes.
pub(crate) fn record_constraints<A: Air<BaseField = Felt>, const D: usize>(
    air: &A,
) -> (Vec<NodeId>, Vec<NodeId>) {
    let trace_info = air.trace_info();
    let context = air.context();
    let num_periodic = air.get_periodic_column_values().len();
    let periodic: Vec<SymBase> =
        (0..num_periodic as u32).map(|j| SymBase::input(Input::Periodic(j))).collect();

    let main_row = |next: bool| -> Vec<SymBase> {
        (0..trace_info.main_trace_width() as u32)
            .map(|column| SymBase::input(Input::Main { column, next }))
            .collect()
    };
    let main_frame = EvaluationFrame::from_rows(main_row(false), main_row(true));
    let mut main = vec![SymBase::ZERO; context.num_main_transition_constraints()];
    air.evaluate_transition(&main_frame, &periodic, &mut main);
    let main_outputs = main.iter().map(|value| value.0).collect();

    if !trace_info.is_multi_segment() {
        return (main_outputs, Vec::new());
    }
    let aux_row = |next: bool| -> Vec<SymExt<D>> {
        (0..trace_info.aux_segment_width() as u32)
            .map(|column| SymExt::input(|component| Input::Aux { column, component, next }))
            .collect()
    };
    let aux_frame = EvaluationFrame::from_rows(aux_row(false), aux_row(true));
    let random = (0..trace_info.get_num_aux_segment_rand_elements() as u32)
        .map(|index| SymExt::input(|component| Input::Random { index, component }))
        .collect();
    let random = AuxRandElements::new(random);
    let mut aux = vec![SymExt::<D>::ZERO; context.num_aux_transition_constraints()];
    air.evaluate_aux_transition(&main_frame, &aux_frame, &periodic, &random, &mut aux);
    let aux_outputs = aux.iter().flat_map(|value| value.0.map(|component| component.0)).collect();
    (main_outputs, aux_outputs)
}
