//! The composition over the constraint-evaluation domain on a backend: what it is asked for.
//!
//! The prover records the AIR's composition ([`Composition`]: one graph for the whole row, its
//! per-proof values as parameters) and asks the backend that committed to the trace, and kept
//! its LDE rows ([`KeptRows`]), to evaluate it at every point of the CE domain. The rows are read
//! where the commitment left them, and the composition stays there too ([`KeptEvaluations`]):
//! the constraint commitment reads it where it is, and it comes to the host (as winter-prover's
//! `CompositionPolyTrace` holds it) only where something there needs it. The CPU interpreter of
//! the same graph ([`crate::constraints::GraphConstraintEvaluator`]) is the oracle.

use std::{any::Any, fmt};

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_math::{FieldElement, StarkField};

use super::KeptRows;
use crate::{
    constraints::{Composition, Input, Op},
    error::{EvaluationError, GpuError, Result},
};

// ================================================================================================
// REQUEST
// ================================================================================================

/// One proof's composition over the CE domain, over the trace LDE a backend kept.
#[derive(Debug, Clone)]
pub struct CompositionRequest<'a> {
    /// The recorded composition (graph and parameters).
    pub composition: &'a Composition,
    /// The main segment's LDE rows, kept by the backend's commitment.
    pub main: &'a dyn KeptRows,
    /// The auxiliary segment's LDE rows (base components), where the trace has one.
    pub aux: Option<&'a dyn KeptRows>,
    /// Base columns of the main segment.
    pub main_width: usize,
    /// Base columns of the auxiliary segment (columns times the extension degree; 0 without).
    pub aux_width: usize,
    /// Trace length `n`.
    pub trace_len: usize,
    /// LDE blowup.
    pub lde_blowup: usize,
    /// CE blowup (at most the LDE blowup).
    pub ce_blowup: usize,
    /// Per exponent slot, `offset^e` and `ω_ce^e` ([`Composition::x_power_bases`]).
    pub x_bases: &'a [(Felt, Felt)],
}

impl CompositionRequest<'_> {
    /// The CE domain's size, once the request is checked: powers of two, a CE blowup no larger
    /// than the LDE's, the segments there as the graph reads them, and the parameters the graph
    /// reads.
    pub fn validate(&self) -> Result<usize> {
        let invalid = |error| Err(GpuError::InvalidEvaluation(error));
        let (n, lde, ce) = (self.trace_len, self.lde_blowup, self.ce_blowup);
        if !n.is_power_of_two() || !lde.is_power_of_two() || !ce.is_power_of_two() || ce > lde {
            return invalid(EvaluationError::Domain {
                trace_len: n,
                lde_blowup: lde,
                ce_blowup: ce,
            });
        }
        if self.aux.is_some() != (self.aux_width > 0) {
            return invalid(EvaluationError::AuxSegment { given: self.aux.is_some() });
        }
        let graph = self.composition.graph();
        let degree = graph.extension_degree();
        if graph.composition_outputs().len() != degree {
            return invalid(EvaluationError::NotComposed);
        }
        if self.x_bases.len() != self.composition.x_exponents().len() {
            let expected = self.composition.x_exponents().len();
            return invalid(EvaluationError::XBases { given: self.x_bases.len(), expected });
        }
        for op in graph.nodes() {
            let read = match *op {
                Op::Input(Input::Main { column, .. }) => (column as usize, self.main_width, "main"),
                Op::Input(Input::Aux { column, component, .. }) => {
                    (column as usize * degree + component as usize, self.aux_width, "auxiliary")
                },
                _ => continue,
            };
            if read.0 >= read.1 {
                let (column, width, segment) = read;
                return invalid(EvaluationError::Column { segment, column, width });
            }
        }
        n.checked_mul(ce).ok_or(GpuError::InvalidEvaluation(EvaluationError::Domain {
            trace_len: n,
            lde_blowup: lde,
            ce_blowup: ce,
        }))
    }
}

// KEPT EVALUATIONS
// ================================================================================================

/// A composition's evaluations over the CE domain in a backend's memory, left there by
/// [`crate::GpuCommitter::evaluate_composition`] for the constraint commitment
/// ([`crate::PolyInput::KeptComposition`]). A backend's commitment finds its own type through
/// `Any`; the memory is freed when the last handle drops.
pub trait KeptEvaluations: Any + Send + Sync + fmt::Debug {
    /// Base components of each evaluation (the extension degree).
    fn components(&self) -> usize;

    /// Evaluations of each component: the CE domain's size.
    fn ce_size(&self) -> usize;

    /// Every evaluation, components interleaved (`CompositionPolyTrace`'s layout).
    fn read(&self) -> Result<Vec<Felt>>;
}

/// The evaluations of `kept` read to the host, one vector per base component.
pub(crate) fn read_components(kept: &dyn KeptEvaluations) -> Result<Vec<Vec<Felt>>> {
    let words = kept.read()?;
    let k = kept.components();
    Ok((0..k).into_par_iter().map(|c| words.iter().skip(c).step_by(k).copied().collect()).collect())
}

/// Component-major words (`len` evaluations of component 0, then of component 1, ...), as a
/// backend's kernel writes them, interleaved into `CompositionPolyTrace`'s layout.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn interleave(words: &[Felt], components: usize) -> Vec<Felt> {
    let len = words.len() / components.max(1);
    (0..len * components)
        .into_par_iter()
        .map(|i| words[(i % components) * len + i / components])
        .collect()
}

// PARAMETERS
// ================================================================================================

/// Words of the parameters' header.
const HEADER_WORDS: usize = 10;

impl CompositionRequest<'_> {
    /// The per-proof values a composition kernel reads, as one array of u64 words (field
    /// elements as their Montgomery words), the same for every backend. A header of ten words
    /// opens it: `[0]` one, `[1]` p − 2 (the inversion's exponent), then offsets into the array
    /// and counts: `[2]` constants, `[3]` random elements, `[4]` periodic values (row-major),
    /// `[5]` periodic rows, `[6]` periodic width, `[7]` x bases (per exponent slot `offset^e`,
    /// `ω^e`: `x^e` at step `s` is `offset^e · (ω^e)^s`), `[8]` table descriptors, `[9]` tables.
    /// A descriptor is four words: where the table's words are, its width, its entries and its
    /// shift (step `s` reads entry `(s − shift) mod entries`).
    pub fn parameter_words(&self) -> Vec<u64> {
        let composition = self.composition;
        let words = |values: &[Felt]| values.iter().map(Felt::inner).collect::<Vec<_>>();
        let (periodic, periodic_rows, periodic_width) = composition.periodic();
        let bases: Vec<Felt> =
            self.x_bases.iter().flat_map(|&(offset, step)| [offset, step]).collect();
        let tables = composition.tables();
        let mut body: Vec<Vec<u64>> = vec![
            words(composition.graph().constants()),
            words(composition.random()),
            words(periodic),
            words(&bases),
        ];
        let descriptors_at = HEADER_WORDS + body.iter().map(Vec::len).sum::<usize>();
        let mut table_at = descriptors_at + 4 * tables.len();
        let mut descriptors = Vec::with_capacity(4 * tables.len());
        for table in tables {
            let descriptor = [table_at, table.width(), table.len(), table.shift()];
            descriptors.extend(descriptor.map(|w| w as u64));
            table_at += table.words().len();
        }
        body.push(descriptors);
        body.extend(tables.iter().map(|table| words(table.words())));

        let mut at = HEADER_WORDS;
        let mut offsets = [0u64; 4];
        for (offset, part) in offsets.iter_mut().zip(&body) {
            *offset = at as u64;
            at += part.len();
        }
        let header = [
            Felt::ONE.inner(),
            Felt::MODULUS - 2,
            offsets[0],
            offsets[1],
            offsets[2],
            periodic_rows as u64,
            periodic_width as u64,
            offsets[3],
            descriptors_at as u64,
            tables.len() as u64,
        ];
        header.into_iter().chain(body.into_iter().flatten()).collect()
    }
}
