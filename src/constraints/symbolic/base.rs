//! The symbolic base element, standing for `Felt`.

use core::ops::{Add, Div, Mul, Neg, Sub};

use winter_math::{ExtensionOf, FieldElement};
use winter_utils::DeserializationError;

use super::recorder::{constant, fail, node, Unrecordable};
use crate::constraints::graph::{Input, NodeId, Op, ONE_NODE, ZERO_NODE};
use crate::Felt;

// ================================================================================================
// SYMBOLIC BASE ELEMENT
// ================================================================================================

/// A handle to a node of the active recording, standing for a `Felt`.
#[derive(Clone, Copy)]
pub(crate) struct SymBase(pub(crate) NodeId);

impl SymBase {
    /// A frame input.
    pub(crate) fn input(input: Input) -> Self {
        Self(node(Op::Input(input)))
    }

    /// A new constant slot.
    pub(crate) fn constant(value: Felt) -> Self {
        Self(constant(value))
    }

    /// `1 / self` as a node: the composition's divisors, never zero on the CE domain (an AIR's own
    /// `inv` is not recorded).
    pub(crate) fn inverse(self) -> Self {
        Self(node(Op::Inv(self.0)))
    }

    /// `Felt::exp`, step by step: winter-math's constant-time square-and-multiply over all 64
    /// bits (the unused products are dead nodes, removed when the graph is finished).
    fn exp_constant_time(self, power: u64) -> Self {
        let mut r = Self::ONE;
        for i in (0..64).rev() {
            r = r.square();
            let b = r * self;
            if (power >> i) & 1 == 1 {
                r = b;
            }
        }
        r
    }
}

impl core::fmt::Debug for SymBase {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl core::fmt::Display for SymBase {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

impl Default for SymBase {
    fn default() -> Self {
        Self::ZERO
    }
}

/// The same node is the same value; different nodes prove nothing, so the recording fails.
impl PartialEq for SymBase {
    fn eq(&self, other: &Self) -> bool {
        if self.0 != other.0 {
            fail(Unrecordable::Comparison);
        }
        self.0 == other.0
    }
}

impl Eq for SymBase {}

// ARITHMETIC
// ------------------------------------------------------------------------------------------------

impl Add for SymBase {
    type Output = Self;
    fn add(self, rhs: Self) -> Self {
        Self(node(Op::Add(self.0, rhs.0)))
    }
}

impl Sub for SymBase {
    type Output = Self;
    fn sub(self, rhs: Self) -> Self {
        Self(node(Op::Sub(self.0, rhs.0)))
    }
}

impl Mul for SymBase {
    type Output = Self;
    fn mul(self, rhs: Self) -> Self {
        Self(node(Op::Mul(self.0, rhs.0)))
    }
}

impl Neg for SymBase {
    type Output = Self;
    fn neg(self) -> Self {
        Self(node(Op::Neg(self.0)))
    }
}

impl Div for SymBase {
    type Output = Self;
    fn div(self, _rhs: Self) -> Self {
        fail(Unrecordable::Division);
        Self::ZERO
    }
}

super::shared::assign_ops!([] SymBase);

// CONVERSIONS
// ------------------------------------------------------------------------------------------------

impl From<Felt> for SymBase {
    fn from(value: Felt) -> Self {
        Self::constant(value)
    }
}

impl From<u32> for SymBase {
    fn from(value: u32) -> Self {
        Self::constant(Felt::from(value))
    }
}

impl From<u16> for SymBase {
    fn from(value: u16) -> Self {
        Self::constant(Felt::from(value))
    }
}

impl From<u8> for SymBase {
    fn from(value: u8) -> Self {
        Self::constant(Felt::from(value))
    }
}

impl TryFrom<u64> for SymBase {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        Felt::try_from(value).map(Self::constant)
    }
}

impl TryFrom<u128> for SymBase {
    type Error = String;
    fn try_from(value: u128) -> Result<Self, String> {
        Felt::try_from(value).map(Self::constant)
    }
}

impl TryFrom<&[u8]> for SymBase {
    type Error = DeserializationError;
    fn try_from(bytes: &[u8]) -> Result<Self, DeserializationError> {
        Felt::try_from(bytes).map(Self::constant)
    }
}

/// `Felt`'s own `mul_base` is `self * other`.
impl ExtensionOf<Felt> for SymBase {
    fn mul_base(self, other: Felt) -> Self {
        self * Self::constant(other)
    }
}

super::shared::unrecordable_traits!([] SymBase, 8);

// FIELD ELEMENT
// ------------------------------------------------------------------------------------------------

impl FieldElement for SymBase {
    type PositiveInteger = u64;
    type BaseField = Felt;

    const EXTENSION_DEGREE: usize = 1;
    const ELEMENT_BYTES: usize = 8;
    const IS_CANONICAL: bool = false;
    const ZERO: Self = Self(ZERO_NODE);
    const ONE: Self = Self(ONE_NODE);

    fn double(self) -> Self {
        Self(node(Op::Double(self.0)))
    }

    fn exp(self, power: u64) -> Self {
        self.exp_constant_time(power)
    }

    fn exp_vartime(self, power: u64) -> Self {
        super::shared::exp_vartime(self, power)
    }

    fn inv(self) -> Self {
        fail(Unrecordable::Inversion);
        Self::ZERO
    }

    /// `Felt`'s conjugate is the element itself.
    fn conjugate(&self) -> Self {
        *self
    }

    super::shared::unrecordable_views!();
}
