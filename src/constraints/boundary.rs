//! Boundary constraints grouped by divisor, recorded into the composition as winter-prover's
//! evaluator computes them.
//!
//! The groups come from winter-air's own `BoundaryConstraints` (`Air::get_boundary_constraints`);
//! winter-prover's evaluation of them is private to it, so it is followed here term for term:
//! per group, the main terms then the auxiliary ones, each set in the order single value, small
//! polynomial (fewer than 63 coefficients, evaluated at `x · x_offset`), large polynomial
//! (winter-prover tabulates it over the CE domain). A large polynomial of at most 256
//! coefficients is evaluated at `x · x_offset` as a small one is, the same value at every step:
//! two operations a coefficient a step on the device cost less than its table (an FFT of the CE
//! domain's size on the host and its upload, every proof). A larger one becomes a step table of
//! the composition.

use core::ops::{Add, Sub};

use winter_air::{Air, BoundaryConstraint, ConstraintDivisor};
use winter_math::{fft, ExtensionOf, FieldElement};

use super::compose::{Recorder, StepTable};
use super::symbolic::{SymBase, SymExt};
use crate::Felt;

/// Polynomials with at least this many coefficients are tabulated (winter-prover's bound).
const SMALL_POLY_DEGREE: usize = 63;

/// Large polynomials of up to this many coefficients are evaluated in the composition.
const EVALUATED_POLY_MAX: usize = 256;

// ================================================================================================
// TERMS
// ================================================================================================

/// How one assertion's expected value is found at a step.
#[derive(Debug, Clone)]
enum Expected<F> {
    /// One value for every step.
    Single(F),
    /// A small polynomial in `x · x_offset`.
    SmallPoly { poly: Vec<F>, x_offset: Felt },
    /// A large polynomial, in the order of winter-prover's large ones.
    LargePoly(LargePoly<F>),
}

/// How a large polynomial's value at a step is found.
#[derive(Debug, Clone)]
enum LargePoly<F> {
    /// Evaluated in `x · x_offset`, as a small one.
    Evaluated { poly: Vec<F>, x_offset: Felt },
    /// Its values over the CE domain, read `step_offset` steps back.
    Tabulated { values: Vec<F>, step_offset: usize },
}

/// One assertion: `coefficient · (state[column] − expected(x))`.
#[derive(Debug, Clone)]
struct Term<F, E> {
    column: usize,
    expected: Expected<F>,
    coefficient: E,
}

impl<F, E> Term<F, E>
where
    F: FieldElement<BaseField = Felt>,
    E: FieldElement<BaseField = Felt> + ExtensionOf<F>,
{
    fn new<A: Air<BaseField = Felt>>(source: &BoundaryConstraint<F, E>, air: &A) -> Self {
        let poly = source.poly();
        let expected = if poly.len() == 1 {
            Expected::Single(poly[0])
        } else if poly.len() < SMALL_POLY_DEGREE {
            Expected::SmallPoly { poly: poly.to_vec(), x_offset: source.poly_offset().1 }
        } else if poly.len() <= EVALUATED_POLY_MAX {
            let x_offset = source.poly_offset().1;
            Expected::LargePoly(LargePoly::Evaluated { poly: poly.to_vec(), x_offset })
        } else {
            let twiddles = fft::get_twiddles::<Felt>(poly.len());
            let blowup = air.ce_domain_size() / poly.len();
            let values =
                fft::evaluate_poly_with_offset(poly, &twiddles, air.domain_offset(), blowup);
            let step_offset = source.poly_offset().0 * air.ce_blowup_factor();
            Expected::LargePoly(LargePoly::Tabulated { values, step_offset })
        };
        Self { column: source.column(), expected, coefficient: *source.cc() }
    }

    /// The order winter-prover evaluates a group's terms in: single, small, large.
    fn rank(&self) -> u8 {
        match self.expected {
            Expected::Single(_) => 0,
            Expected::SmallPoly { .. } => 1,
            Expected::LargePoly(_) => 2,
        }
    }

    /// `coefficient · (state[column] − expected(x))` on symbols of the term's field.
    fn record<S: TermValue<F>, const D: usize>(
        &self,
        state: &[S],
        recorder: &mut Recorder,
    ) -> SymExt<D> {
        let expected = match &self.expected {
            Expected::Single(value) => S::constant(*value),
            Expected::SmallPoly { poly, x_offset }
            | Expected::LargePoly(LargePoly::Evaluated { poly, x_offset }) => {
                let x = recorder.x() * SymBase::constant(*x_offset);
                poly.iter().rev().fold(S::constant(F::ZERO), |acc, &coeff| {
                    acc.mul_symbol(x) + S::constant(coeff)
                })
            },
            Expected::LargePoly(LargePoly::Tabulated { values, step_offset }) => {
                let words = F::slice_as_base_elements(values).to_vec();
                let table = StepTable::new(words, F::EXTENSION_DEGREE, *step_offset);
                S::from_words(&recorder.table(table))
            },
        };
        let coefficient = E::slice_as_base_elements(core::slice::from_ref(&self.coefficient));
        (state[self.column] - expected).times(SymExt::constant(coefficient))
    }
}

/// A symbol standing for a value of a term's field `F` (`Felt` or the extension).
trait TermValue<F>: Copy + Add<Output = Self> + Sub<Output = Self> {
    /// A new constant of `value`.
    fn constant(value: F) -> Self;
    /// The value of these base words (`F`'s components).
    fn from_words(words: &[SymBase]) -> Self;
    /// `self · x` for a base symbol `x`.
    fn mul_symbol(self, x: SymBase) -> Self;
    /// `coefficient · self`, in the extension.
    fn times<const D: usize>(self, coefficient: SymExt<D>) -> SymExt<D>;
}

impl TermValue<Felt> for SymBase {
    fn constant(value: Felt) -> Self {
        SymBase::constant(value)
    }

    fn from_words(words: &[SymBase]) -> Self {
        words[0]
    }

    fn mul_symbol(self, x: SymBase) -> Self {
        self * x
    }

    fn times<const D: usize>(self, coefficient: SymExt<D>) -> SymExt<D> {
        ExtensionOf::<SymBase>::mul_base(coefficient, self)
    }
}

impl<F: FieldElement<BaseField = Felt>, const N: usize> TermValue<F> for SymExt<N> {
    fn constant(value: F) -> Self {
        SymExt::constant(F::slice_as_base_elements(core::slice::from_ref(&value)))
    }

    fn from_words(words: &[SymBase]) -> Self {
        SymExt(core::array::from_fn(|c| words[c]))
    }

    fn mul_symbol(self, x: SymBase) -> Self {
        ExtensionOf::<SymBase>::mul_base(self, x)
    }

    fn times<const D: usize>(self, coefficient: SymExt<D>) -> SymExt<D> {
        // an auxiliary term's field is the coefficients' extension: N = D
        coefficient * SymExt(core::array::from_fn(|c| self.0[c]))
    }
}

/// The terms of one segment, in evaluation order.
fn terms<F, E, A>(source: &[BoundaryConstraint<F, E>], air: &A) -> Vec<Term<F, E>>
where
    F: FieldElement<BaseField = Felt>,
    E: FieldElement<BaseField = Felt> + ExtensionOf<F>,
    A: Air<BaseField = Felt>,
{
    let mut terms: Vec<_> = source.iter().map(|constraint| Term::new(constraint, air)).collect();
    terms.sort_by_key(Term::rank);
    terms
}

// ================================================================================================
// GROUPS
// ================================================================================================

/// The assertions sharing one divisor: main terms, then auxiliary ones.
#[derive(Debug, Clone)]
pub(crate) struct BoundaryGroup<E: FieldElement<BaseField = Felt>> {
    divisor: ConstraintDivisor<Felt>,
    main: Vec<Term<Felt, E>>,
    aux: Vec<Term<E, E>>,
}

impl<E: FieldElement<BaseField = Felt>> BoundaryGroup<E> {
    /// The groups of `air`'s boundary constraints: one per main divisor, an auxiliary group
    /// joining the main group of an equal divisor or appended after them.
    pub(crate) fn all<A: Air<BaseField = Felt>>(
        air: &A,
        aux_rand_elements: Option<&winter_air::AuxRandElements<E>>,
        coefficients: &[E],
    ) -> Vec<Self> {
        let source = air.get_boundary_constraints(aux_rand_elements, coefficients);
        let mut groups: Vec<Self> = source
            .main_constraints()
            .iter()
            .map(|group| Self {
                divisor: group.divisor().clone(),
                main: terms(group.constraints(), air),
                aux: Vec::new(),
            })
            .collect();
        for group in source.aux_constraints() {
            let mut aux = terms(group.constraints(), air);
            match groups.iter_mut().find(|g| &g.divisor == group.divisor()) {
                Some(existing) => {
                    existing.aux.append(&mut aux);
                    existing.aux.sort_by_key(Term::rank);
                },
                None => {
                    groups.push(Self { divisor: group.divisor().clone(), main: Vec::new(), aux })
                },
            }
        }
        groups
    }

    /// The group's divisor.
    pub(crate) fn divisor(&self) -> &ConstraintDivisor<Felt> {
        &self.divisor
    }

    /// The group's sum at the evaluated point, on the current rows' symbols.
    pub(crate) fn record<const D: usize>(
        &self,
        main: &[SymBase],
        aux: &[SymExt<D>],
        recorder: &mut Recorder,
    ) -> SymExt<D> {
        let mut result = SymExt::<D>::ZERO;
        for term in &self.main {
            result += term.record(main, recorder);
        }
        for term in &self.aux {
            result += term.record(aux, recorder);
        }
        result
    }
}
