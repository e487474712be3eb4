//! The whole composition row of one proof as a graph: the AIR's transition constraints, the
//! boundary terms, the divisors and the combination, with every per-proof value a parameter.
//!
//! The composition at CE step `i` (point `x`) is what winter-prover's
//! `DefaultConstraintEvaluator` computes there (see `evaluator` for the order of its terms):
//! `Σ_j α_j·C_j + Σ_j α'_j·A_j` times `exemptions(x) / (x^n − 1)`, plus, per boundary divisor
//! `Π (x^a − b)`, the group's `Σ β·(state − expected(x))` divided by it. Field arithmetic is exact,
//! so recording the same sums and products gives the same elements whatever the order.
//!
//! A graph node reads nothing but the frame, so the values a step needs besides the rows are
//! inputs too: `x^e` for each exponent the divisors and polynomials use ([`Input::XPower`], the
//! exponents kept here, not in the structure, so one kernel serves every trace length), and the
//! entries of step tables (large assertion polynomials) at the step ([`Input::Table`]). The
//! composition coefficients, the assertions' values and the divisors' constants are constants
//! of the table. A kernel of the graph therefore serves every proof of the AIR's shape.

use winter_air::{Air, AuxRandElements, ConstraintCompositionCoefficients};
use winter_math::{FieldElement, StarkField};
use winter_prover::StarkDomain;

use super::boundary::BoundaryGroup;
use super::capture::{record_constraints, recording, CaptureError};
use super::graph::{ConstraintGraph, Input, NodeId, Outputs};
use super::periodic::PeriodicTable;
use super::symbolic::{SymBase, SymExt};
use crate::Felt;

// ================================================================================================
// STEP TABLES
// ================================================================================================

/// Values indexed by CE step: step `i` reads entry `(i − shift) mod len` of `width` words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepTable {
    words: Vec<Felt>,
    width: usize,
    shift: usize,
}

impl StepTable {
    /// A table of `words.len() / width` entries of `width` words, read `shift` steps back.
    pub(crate) fn new(words: Vec<Felt>, width: usize, shift: usize) -> Self {
        Self { words, width, shift }
    }

    /// The entries, `width` words each.
    pub fn words(&self) -> &[Felt] {
        &self.words
    }

    /// Words per entry.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.words.len() / self.width
    }

    /// Whether the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// How many steps back step `i` reads: entry `(i − shift) mod len`.
    pub fn shift(&self) -> usize {
        self.shift
    }

    /// The entry step `step` reads.
    fn entry(&self, step: usize) -> &[Felt] {
        let len = self.len();
        let index = (step % len + len - self.shift % len) % len;
        &self.words[index * self.width..(index + 1) * self.width]
    }
}

// ================================================================================================
// RECORDER
// ================================================================================================

/// What the composition's recording collects beside the nodes: the exponents of `x` and the step
/// tables its inputs read.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    x_exponents: Vec<u64>,
    tables: Vec<StepTable>,
    table_words: u32,
}

impl Recorder {
    /// `x^exponent` at the evaluated point (one input per distinct exponent).
    pub(crate) fn x_power(&mut self, exponent: u64) -> SymBase {
        let slot = match self.x_exponents.iter().position(|&e| e == exponent) {
            Some(slot) => slot,
            None => {
                self.x_exponents.push(exponent);
                self.x_exponents.len() - 1
            },
        };
        SymBase::input(Input::XPower(slot as u32))
    }

    /// The evaluated point `x`.
    pub(crate) fn x(&mut self) -> SymBase {
        self.x_power(1)
    }

    /// The words of `table`'s entry at the evaluated step.
    pub(crate) fn table(&mut self, table: StepTable) -> Vec<SymBase> {
        let first = self.table_words;
        self.table_words += table.width as u32;
        self.tables.push(table);
        (first..self.table_words).map(|word| SymBase::input(Input::Table(word))).collect()
    }
}

// ================================================================================================
// COMPOSITION
// ================================================================================================

/// The composition of one proof: the graph (its outputs the composed value's components) and
/// the parameters its inputs read.
#[derive(Debug, Clone)]
pub struct Composition {
    graph: ConstraintGraph,
    periodic: PeriodicTable,
    random: Vec<Felt>,
    x_exponents: Vec<u64>,
    tables: Vec<StepTable>,
    offset: Felt,
}

impl Composition {
    /// Records `air`'s composition with these random elements and coefficients (the
    /// `ConstraintEvaluator`'s inputs); an error says why the AIR's code cannot be recorded.
    pub fn new<A, E>(
        air: &A,
        aux_rand_elements: Option<&AuxRandElements<E>>,
        coefficients: &ConstraintCompositionCoefficients<E>,
    ) -> Result<Self, CaptureError>
    where
        A: Air<BaseField = Felt>,
        E: FieldElement<BaseField = Felt>,
    {
        match E::EXTENSION_DEGREE {
            1 => Self::with_degree::<A, E, 1>(air, aux_rand_elements, coefficients),
            2 => Self::with_degree::<A, E, 2>(air, aux_rand_elements, coefficients),
            3 => Self::with_degree::<A, E, 3>(air, aux_rand_elements, coefficients),
            degree => Err(CaptureError::ExtensionDegree(degree)),
        }
    }

    fn with_degree<A, E, const D: usize>(
        air: &A,
        aux_rand_elements: Option<&AuxRandElements<E>>,
        coefficients: &ConstraintCompositionCoefficients<E>,
    ) -> Result<Self, CaptureError>
    where
        A: Air<BaseField = Felt>,
        E: FieldElement<BaseField = Felt>,
    {
        let mut recorder = Recorder::default();
        let (composition, builder) = recording(|| {
            record_composition::<A, E, D>(air, aux_rand_elements, coefficients, &mut recorder)
        })?;
        let graph = builder.finish(Outputs { composition, ..Outputs::default() }, D);
        let random = aux_rand_elements
            .map(|elements| E::slice_as_base_elements(elements.rand_elements()).to_vec())
            .unwrap_or_default();
        Ok(Self {
            graph,
            periodic: PeriodicTable::new(air),
            random,
            x_exponents: recorder.x_exponents,
            tables: recorder.tables,
            offset: air.domain_offset(),
        })
    }

    /// The graph; its [`ConstraintGraph::composition_outputs`] are the composed value.
    pub fn graph(&self) -> &ConstraintGraph {
        &self.graph
    }

    /// The auxiliary random elements' base components.
    pub fn random(&self) -> &[Felt] {
        &self.random
    }

    /// The exponent of each [`Input::XPower`] slot.
    pub fn x_exponents(&self) -> &[u64] {
        &self.x_exponents
    }

    /// The step tables, in the order of their words ([`Input::Table`]).
    pub fn tables(&self) -> &[StepTable] {
        &self.tables
    }

    /// The periodic columns' values, row-major, with the row count and width.
    pub fn periodic(&self) -> (&[Felt], usize, usize) {
        self.periodic.parts()
    }

    /// The periodic values at CE step `step`.
    pub fn periodic_row(&self, step: usize) -> &[Felt] {
        self.periodic.row(step)
    }

    /// `x^e` at CE step `step` for every exponent slot, into `out`.
    pub fn x_powers_at(&self, step: usize, domain: &StarkDomain<Felt>, out: &mut Vec<Felt>) {
        out.clear();
        out.extend(
            self.x_exponents.iter().map(|&e| domain.get_ce_x_power_at(step, e, self.offset.exp(e))),
        );
    }

    /// For each exponent slot, `offset^e` and `ω_ce^e` (`x^e` at step `i` is
    /// `offset^e · (ω_ce^e)^i`), the parameters of a device's evaluation.
    pub fn x_power_bases(&self, domain: &StarkDomain<Felt>) -> Vec<(Felt, Felt)> {
        let generator = Felt::get_root_of_unity(domain.ce_domain_size().ilog2());
        self.x_exponents.iter().map(|&e| (self.offset.exp(e), generator.exp(e))).collect()
    }

    /// The step tables' entries at CE step `step`, concatenated, into `out`.
    pub fn table_row(&self, step: usize, out: &mut Vec<Felt>) {
        out.clear();
        self.tables.iter().for_each(|table| out.extend_from_slice(table.entry(step)));
    }
}

/// Records the AIR's constraints, then the composition of the row (the AIR's boundary code runs
/// inside the recording too, so that its panics are errors); returns the composed value's base
/// components.
fn record_composition<A, E, const D: usize>(
    air: &A,
    aux_rand_elements: Option<&AuxRandElements<E>>,
    coefficients: &ConstraintCompositionCoefficients<E>,
    recorder: &mut Recorder,
) -> Vec<NodeId>
where
    A: Air<BaseField = Felt>,
    E: FieldElement<BaseField = Felt>,
{
    let constant =
        |value: &E| SymExt::<D>::constant(E::slice_as_base_elements(core::slice::from_ref(value)));
    let (main, aux) = record_constraints::<A, D>(air);
    let transition = air.get_transition_constraints(&coefficients.transition);
    let boundary = BoundaryGroup::all(air, aux_rand_elements, &coefficients.boundary);

    // the transition column: Σ α_j·C_j + Σ α'_j·A_j
    let mut value = SymExt::<D>::ZERO;
    for (&id, coefficient) in main.iter().zip(transition.main_constraint_coef().iter()) {
        value += winter_math::ExtensionOf::<SymBase>::mul_base(constant(coefficient), SymBase(id));
    }
    for (components, coefficient) in aux.chunks(D).zip(transition.aux_constraint_coef().iter()) {
        value += constant(coefficient) * SymExt(core::array::from_fn(|c| SymBase(components[c])));
    }

    // every column divided by its divisor (the exemptions multiplied in), then summed
    let trace_info = air.trace_info();
    let main_row: Vec<SymBase> = (0..trace_info.main_trace_width() as u32)
        .map(|column| SymBase::input(Input::Main { column, next: false }))
        .collect();
    let aux_row: Vec<SymExt<D>> = (0..trace_info.aux_segment_width() as u32)
        .map(|column| SymExt::input(|component| Input::Aux { column, component, next: false }))
        .collect();
    let mut columns = vec![(value, transition.divisor().clone())];
    for group in &boundary {
        columns.push((group.record(&main_row, &aux_row, recorder), group.divisor().clone()));
    }
    let mut combined = SymExt::<D>::ZERO;
    for (value, divisor) in columns {
        // winter-prover divides by the numerator's first term, as here
        let (degree, shift) = divisor.numerator()[0];
        let mut factor = (recorder.x_power(degree as u64) - SymBase::constant(shift)).inverse();
        if !divisor.exemptions().is_empty() {
            let x = recorder.x();
            let exemptions = divisor
                .exemptions()
                .iter()
                .fold(SymBase::ONE, |product, &e| product * (x - SymBase::constant(e)));
            factor *= exemptions;
        }
        combined += winter_math::ExtensionOf::<SymBase>::mul_base(value, factor);
    }
    combined.0.iter().map(|component| component.0).collect()
}
