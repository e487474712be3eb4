//! The CPU interpreter of a [`ConstraintGraph`] over one frame: the oracle of device kernels.

use super::graph::{ConstraintGraph, Input, Op};
use crate::Felt;

// ================================================================================================
// FRAME INPUTS
// ================================================================================================

/// The values one evaluation reads; extension elements as their base components, flattened
/// (winter-math's `slice_as_base_elements` layout).
#[derive(Debug, Clone, Copy)]
pub struct FrameInputs<'a> {
    /// Main trace row at the step.
    pub main_current: &'a [Felt],
    /// Main trace row at the next step.
    pub main_next: &'a [Felt],
    /// Auxiliary trace row at the step.
    pub aux_current: &'a [Felt],
    /// Auxiliary trace row at the next step.
    pub aux_next: &'a [Felt],
    /// Periodic column values at the step.
    pub periodic: &'a [Felt],
    /// Auxiliary random elements.
    pub random: &'a [Felt],
    /// `x^e` for each exponent slot of a composition (empty for a capture).
    pub x_powers: &'a [Felt],
    /// A composition's step tables' entries at the step, concatenated (empty for a capture).
    pub tables: &'a [Felt],
}

// ================================================================================================
// INTERPRETER
// ================================================================================================

impl ConstraintGraph {
    /// Evaluates every node over one frame with `constants` as the constants table (the graph's
    /// own, or another capture's of the same structure); `values` is scratch space and holds
    /// every node's value afterwards. Read the results with [`ConstraintGraph::main_outputs`]
    /// and [`ConstraintGraph::aux_outputs`].
    pub fn interpret(&self, inputs: &FrameInputs<'_>, constants: &[Felt], values: &mut Vec<Felt>) {
        let degree = self.extension_degree;
        values.clear();
        values.reserve(self.nodes.len());
        for op in &self.nodes {
            let value = match *op {
                Op::Const(slot) => constants[slot as usize],
                Op::Input(input) => match input {
                    Input::Main { column, next } => {
                        let row = if next { inputs.main_next } else { inputs.main_current };
                        row[column as usize]
                    },
                    Input::Aux { column, component, next } => {
                        let row = if next { inputs.aux_next } else { inputs.aux_current };
                        row[column as usize * degree + component as usize]
                    },
                    Input::Periodic(column) => inputs.periodic[column as usize],
                    Input::Random { index, component } => {
                        inputs.random[index as usize * degree + component as usize]
                    },
                    Input::XPower(slot) => inputs.x_powers[slot as usize],
                    Input::Table(word) => inputs.tables[word as usize],
                },
                op => op.apply(|id| values[id as usize]).unwrap_or_default(),
            };
            values.push(value);
        }
    }
}
