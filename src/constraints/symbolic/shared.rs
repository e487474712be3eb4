//! What the base and extension symbols implement alike: the compound assignment operators, the
//! trait items a recording cannot follow, and a constant-exponent `exp_vartime`.

use winter_math::FieldElement;

/// The compound assignment operators, from the binary ones.
macro_rules! assign_ops {
    ([$($generics:tt)*] $ty:ty) => {
        impl<$($generics)*> core::ops::AddAssign for $ty {
            fn add_assign(&mut self, rhs: Self) {
                *self = *self + rhs;
            }
        }
        impl<$($generics)*> core::ops::SubAssign for $ty {
            fn sub_assign(&mut self, rhs: Self) {
                *self = *self - rhs;
            }
        }
        impl<$($generics)*> core::ops::MulAssign for $ty {
            fn mul_assign(&mut self, rhs: Self) {
                *self = *self * rhs;
            }
        }
        impl<$($generics)*> core::ops::DivAssign for $ty {
            fn div_assign(&mut self, rhs: Self) {
                *self = *self / rhs;
            }
        }
    };
}
pub(super) use assign_ops;

/// The byte, randomness and serialization traits `FieldElement` requires: a symbol has no
/// bytes, so each marks the recording as failed.
macro_rules! unrecordable_traits {
    ([$($generics:tt)*] $ty:ty, $bytes:expr) => {
        impl<$($generics)*> winter_utils::AsBytes for $ty {
            fn as_bytes(&self) -> &[u8] {
                super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
                &[]
            }
        }
        impl<$($generics)*> winter_utils::Randomizable for $ty {
            const VALUE_SIZE: usize = $bytes;
            fn from_random_bytes(_source: &[u8]) -> Option<Self> {
                super::recorder::fail(super::recorder::Unrecordable::Randomness);
                None
            }
        }
        impl<$($generics)*> winter_utils::Serializable for $ty {
            fn write_into<W: winter_utils::ByteWriter>(&self, _target: &mut W) {
                super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
            }
        }
        impl<$($generics)*> winter_utils::Deserializable for $ty {
            fn read_from<R: winter_utils::ByteReader>(
                _source: &mut R,
            ) -> Result<Self, winter_utils::DeserializationError> {
                super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
                Err(winter_utils::DeserializationError::InvalidValue(
                    "symbolic elements cannot be read".into(),
                ))
            }
        }
    };
}
pub(super) use unrecordable_traits;

/// The `FieldElement` items that view elements as base elements or bytes: a symbol has neither,
/// so each marks the recording as failed. Expanded inside each symbol's `FieldElement` impl.
macro_rules! unrecordable_views {
    () => {
        fn base_element(&self, _i: usize) -> crate::Felt {
            super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
            <crate::Felt as winter_math::FieldElement>::ZERO
        }

        fn slice_as_base_elements(_elements: &[Self]) -> &[crate::Felt] {
            super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
            &[]
        }

        fn slice_from_base_elements(_elements: &[crate::Felt]) -> &[Self] {
            super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
            &[]
        }

        fn elements_as_bytes(_elements: &[Self]) -> &[u8] {
            super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
            &[]
        }

        // SAFETY: reads nothing; a symbol has no bytes.
        unsafe fn bytes_as_elements(
            _bytes: &[u8],
        ) -> Result<&[Self], winter_utils::DeserializationError> {
            super::recorder::fail(super::recorder::Unrecordable::Reinterpretation);
            Err(winter_utils::DeserializationError::InvalidValue(
                "symbolic elements have no bytes".into(),
            ))
        }
    };
}
pub(super) use unrecordable_views;

/// winter-math's default `exp_vartime` for a constant exponent, without its `b == ZERO` early
/// return (the loop gives the same zero word for a zero base).
pub(super) fn exp_vartime<E: FieldElement>(base: E, power: u64) -> E {
    if power == 0 {
        return E::ONE;
    }
    let (mut r, mut b, mut p) = (E::ONE, base, power);
    while p > 0 {
        if p & 1 == 1 {
            r *= b;
        }
        p >>= 1;
        b = b.square();
    }
    r
}
