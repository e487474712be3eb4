//! The symbolic extension element, standing for `Felt` (degree 1), `QuadExtension<Felt>` or
//! `CubeExtension<Felt>`, lowered to base nodes with winter-math's own formulas.

use core::ops::{Add, Div, Mul, Neg, Sub};

use winter_math::{ExtensionOf, FieldElement};
use winter_utils::DeserializationError;

use super::base::SymBase;
use super::recorder::{fail, Unrecordable};
use super::shared::{assign_ops, exp_vartime, unrecordable_traits};
use crate::constraints::graph::Input;
use crate::Felt;

// ================================================================================================
// SYMBOLIC EXTENSION ELEMENT
// ================================================================================================

/// A symbolic element of the degree-`D` extension of `Felt` (D = 1, 2 or 3), as its base
/// components.
#[derive(Clone, Copy)]
pub(crate) struct SymExt<const D: usize>(pub(crate) [SymBase; D]);

impl<const D: usize> SymExt<D> {
    const fn one() -> [SymBase; D] {
        let mut components = [SymBase::ZERO; D];
        components[0] = SymBase::ONE;
        components
    }

    /// An element of base components read from the frame.
    pub(crate) fn input(component: impl Fn(u8) -> Input) -> Self {
        Self(core::array::from_fn(|c| SymBase::input(component(c as u8))))
    }

    /// An element of new constant slots holding `components`.
    pub(crate) fn constant(components: &[Felt]) -> Self {
        Self(core::array::from_fn(|c| SymBase::constant(components[c])))
    }

    /// The element embedding a base element: `(value, 0, ...)`, as winter-math's `From`.
    fn embed(value: SymBase) -> Self {
        let mut components = [SymBase::ZERO; D];
        components[0] = value;
        Self(components)
    }

    fn map(self, f: impl Fn(SymBase) -> SymBase) -> Self {
        Self(self.0.map(f))
    }

    fn zip(self, rhs: Self, f: impl Fn(SymBase, SymBase) -> SymBase) -> Self {
        Self(core::array::from_fn(|i| f(self.0[i], rhs.0[i])))
    }
}

impl<const D: usize> core::fmt::Debug for SymExt<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<const D: usize> core::fmt::Display for SymExt<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

impl<const D: usize> Default for SymExt<D> {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Equal when every component is the same node; anything else fails the recording.
impl<const D: usize> PartialEq for SymExt<D> {
    fn eq(&self, other: &Self) -> bool {
        let same = self.0.iter().zip(&other.0).all(|(a, b)| a.0 == b.0);
        if !same {
            fail(Unrecordable::Comparison);
        }
        same
    }
}

impl<const D: usize> Eq for SymExt<D> {}

// ARITHMETIC (winter-math's formulas, operation for operation)
// ------------------------------------------------------------------------------------------------

impl<const D: usize> Add for SymExt<D> {
    type Output = Self;
    fn add(self, rhs: Self) -> Self {
        self.zip(rhs, |a, b| a + b)
    }
}

impl<const D: usize> Sub for SymExt<D> {
    type Output = Self;
    fn sub(self, rhs: Self) -> Self {
        self.zip(rhs, |a, b| a - b)
    }
}

impl<const D: usize> Neg for SymExt<D> {
    type Output = Self;
    fn neg(self) -> Self {
        self.map(|a| -a)
    }
}

impl<const D: usize> Mul for SymExt<D> {
    type Output = Self;
    fn mul(self, rhs: Self) -> Self {
        let mut out = [SymBase::ZERO; D];
        match (&self.0[..], &rhs.0[..]) {
            (&[a0], &[b0]) => out[0] = a0 * b0,
            (&[a0, a1], &[b0, b1]) => {
                let a0b0 = a0 * b0;
                out[0] = a0b0 - (a1 * b1).double();
                out[1] = (a0 + a1) * (b0 + b1) - a0b0;
            },
            (a, b) => {
                let a0b0 = a[0] * b[0];
                let a1b1 = a[1] * b[1];
                let a2b2 = a[2] * b[2];
                let a0b0_a0b1_a1b0_a1b1 = (a[0] + a[1]) * (b[0] + b[1]);
                let a0b0_a0b2_a2b0_a2b2 = (a[0] + a[2]) * (b[0] + b[2]);
                let a1b1_a1b2_a2b1_a2b2 = (a[1] + a[2]) * (b[1] + b[2]);
                let a0b0_minus_a1b1 = a0b0 - a1b1;
                out[0] = a1b1_a1b2_a2b1_a2b2 + a0b0_minus_a1b1 - a2b2;
                out[1] = a0b0_a0b1_a1b0_a1b1 + a1b1_a1b2_a2b1_a2b2 - a1b1.double() - a0b0;
                out[2] = a0b0_a0b2_a2b0_a2b2 - a0b0_minus_a1b1;
            },
        }
        Self(out)
    }
}

impl<const D: usize> Div for SymExt<D> {
    type Output = Self;
    fn div(self, _rhs: Self) -> Self {
        fail(Unrecordable::Division);
        Self::ZERO
    }
}

assign_ops!([const D: usize] SymExt<D>);

// CONVERSIONS
// ------------------------------------------------------------------------------------------------

impl<const D: usize> From<SymBase> for SymExt<D> {
    fn from(value: SymBase) -> Self {
        Self::embed(value)
    }
}

impl<const D: usize> From<Felt> for SymExt<D> {
    fn from(value: Felt) -> Self {
        Self::embed(SymBase::constant(value))
    }
}

impl<const D: usize> From<u32> for SymExt<D> {
    fn from(value: u32) -> Self {
        Self::embed(SymBase::from(value))
    }
}

impl<const D: usize> From<u16> for SymExt<D> {
    fn from(value: u16) -> Self {
        Self::embed(SymBase::from(value))
    }
}

impl<const D: usize> From<u8> for SymExt<D> {
    fn from(value: u8) -> Self {
        Self::embed(SymBase::from(value))
    }
}

impl<const D: usize> TryFrom<u64> for SymExt<D> {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        SymBase::try_from(value).map(Self::embed)
    }
}

impl<const D: usize> TryFrom<u128> for SymExt<D> {
    type Error = String;
    fn try_from(value: u128) -> Result<Self, String> {
        SymBase::try_from(value).map(Self::embed)
    }
}

/// Bytes of an extension element cannot become a symbol faithfully.
impl<const D: usize> TryFrom<&[u8]> for SymExt<D> {
    type Error = DeserializationError;
    fn try_from(_bytes: &[u8]) -> Result<Self, DeserializationError> {
        fail(Unrecordable::Reinterpretation);
        Err(DeserializationError::InvalidValue("symbolic elements have no bytes".into()))
    }
}

/// `mul_base` multiplies every component (winter-math's `ExtensibleField::mul_base`; for D = 1
/// `Felt`'s `self * other`).
impl<const D: usize> ExtensionOf<SymBase> for SymExt<D> {
    fn mul_base(self, other: SymBase) -> Self {
        self.map(|a| a * other)
    }
}

impl<const D: usize> ExtensionOf<Felt> for SymExt<D> {
    fn mul_base(self, other: Felt) -> Self {
        ExtensionOf::<SymBase>::mul_base(self, SymBase::constant(other))
    }
}

unrecordable_traits!([const D: usize] SymExt<D>, 8 * D);

// FIELD ELEMENT
// ------------------------------------------------------------------------------------------------

impl<const D: usize> FieldElement for SymExt<D> {
    type PositiveInteger = u64;
    type BaseField = Felt;

    const EXTENSION_DEGREE: usize = D;
    const ELEMENT_BYTES: usize = 8 * D;
    const IS_CANONICAL: bool = false;
    const ZERO: Self = Self([SymBase::ZERO; D]);
    const ONE: Self = Self(Self::one());

    fn double(self) -> Self {
        self.map(|a| a.double())
    }

    fn square(self) -> Self {
        let mut out = [SymBase::ZERO; D];
        match &self.0[..] {
            &[a0] => out[0] = a0 * a0,
            &[a0, a1] => {
                let a1_sq = a1.square();
                out[0] = a0.square() - a1_sq.double();
                out[1] = (a0 * a1).double() + a1_sq;
            },
            a => {
                let a2_sq = a[2].square();
                let a1_a2 = a[1] * a[2];
                out[0] = a[0].square() + a1_a2.double();
                out[1] = (a[0] * a[1] + a1_a2).double() + a2_sq;
                out[2] = (a[0] * a[2]).double() + a[1].square() + a2_sq;
            },
        }
        Self(out)
    }

    /// `Felt` overrides `exp` with a constant-time loop; the extensions keep the default.
    fn exp(self, power: u64) -> Self {
        if D == 1 {
            Self::embed(self.0[0].exp(power))
        } else {
            exp_vartime(self, power)
        }
    }

    fn exp_vartime(self, power: u64) -> Self {
        exp_vartime(self, power)
    }

    fn inv(self) -> Self {
        fail(Unrecordable::Inversion);
        Self::ZERO
    }

    /// `Felt`'s conjugate is itself; an extension's conjugate is not recorded.
    fn conjugate(&self) -> Self {
        if D != 1 {
            fail(Unrecordable::Conjugate);
        }
        *self
    }

    super::shared::unrecordable_views!();
}
