//! The DEEP composition's linear combination: what a backend is asked for, and the host
//! computation every backend is checked against.
//!
//! winter-prover's DEEP composition polynomial starts from `S = Σ kᵢ·Tᵢ` over every trace and
//! composition polynomial `Tᵢ` (main trace columns in the base field, auxiliary and composition
//! columns in the extension), with coefficients `kᵢ` drawn from the channel; it then subtracts
//! `S(z)` and `S(gz)` and divides by `x − z` and `x − gz`. The combination reads every
//! coefficient of every polynomial, so a backend that kept the polynomials of its commitments
//! ([`crate::ResidentPolys`]) computes it where they are and returns only `S`; the division
//! (linear in `S`'s length) stays on the host.
//!
//! Every element is added in column order with winter_math's operations (`mul_base` for a base
//! column, the extension product otherwise), as the host computation does, so the words of `S`
//! are the host's.

use miden_crypto::Felt;
use rayon::prelude::*;
use winter_math::FieldElement;

use crate::{
    backend::Backend,
    committer::ResidentPolys,
    error::{GpuError, Result},
};

// REQUEST
// ================================================================================================

/// One committed segment's polynomials in a [`CombineRequest`].
#[derive(Debug, Clone, Copy)]
pub struct DeepSegment<'a> {
    /// The polynomials, as base columns (an extension column is `degree` consecutive ones).
    pub polys: &'a ResidentPolys,
    /// Base components per column of the segment: 1 for the main trace, the extension degree
    /// for the auxiliary trace and the composition polynomial.
    pub degree: usize,
}

/// `S = Σ kᵢ·Tᵢ` over the columns of `segments`, in order.
#[derive(Debug, Clone, Copy)]
pub struct CombineRequest<'a> {
    /// The segments, main trace first, as the DEEP coefficients are ordered.
    pub segments: &'a [DeepSegment<'a>],
    /// Degree of the extension `S` and the coefficients live in (1, 2 or 3).
    pub ext_degree: usize,
    /// `ext_degree` base components per column of every segment, in order.
    pub coefficients: &'a [Felt],
}

impl CombineRequest<'_> {
    /// Checks the request against the backend that runs it; returns the polynomial length.
    pub fn validate(&self, backend: Backend) -> Result<usize> {
        let invalid = |reason: String| Err(GpuError::InvalidDeep(reason));
        if !(1..=3).contains(&self.ext_degree) {
            return invalid(format!("extension degree {}; expected 1, 2 or 3", self.ext_degree));
        }
        let Some(first) = self.segments.first() else {
            return invalid("no segments".into());
        };
        let poly_len = first.polys.poly_len();
        let mut columns = 0;
        for (s, segment) in self.segments.iter().enumerate() {
            let polys = segment.polys;
            if polys.backend() != backend {
                return invalid(format!(
                    "segment {s} is held by {}, not {backend}",
                    polys.backend()
                ));
            }
            if polys.poly_len() != poly_len {
                return invalid(format!(
                    "segment {s} has polynomials of {} coefficients, not {poly_len}",
                    polys.poly_len()
                ));
            }
            if segment.degree != 1 && segment.degree != self.ext_degree
                || polys.num_cols() % segment.degree != 0
            {
                return invalid(format!(
                    "segment {s}: {} base columns cannot be columns of degree {}",
                    polys.num_cols(),
                    segment.degree
                ));
            }
            columns += polys.num_cols() / segment.degree;
        }
        if self.coefficients.len() != columns * self.ext_degree {
            return invalid(format!(
                "{} coefficient components for {columns} columns of degree {}",
                self.coefficients.len(),
                self.ext_degree
            ));
        }
        Ok(poly_len)
    }
}

// HOST COMPUTATION
// ================================================================================================

/// Coefficients combined per block: a block of `S` stays in cache while every column adds in.
const BLOCK: usize = 2048;

/// `S = Σ kᵢ·Tᵢ` on the host: `base` columns with `base_coefficients` (`mul_base`), then `ext`
/// columns with `ext_coefficients`, each coefficient of `S` summed in that order.
pub fn combine_on_host<E: FieldElement<BaseField = Felt>>(
    base: &[&[Felt]],
    base_coefficients: &[E],
    ext: &[&[E]],
    ext_coefficients: &[E],
    poly_len: usize,
) -> Vec<E> {
    let mut sum = vec![E::ZERO; poly_len];
    sum.par_chunks_mut(BLOCK).enumerate().for_each(|(block, acc)| {
        let range = block * BLOCK..block * BLOCK + acc.len();
        for (poly, &k) in base.iter().zip(base_coefficients) {
            for (a, &c) in acc.iter_mut().zip(&poly[range.clone()]) {
                *a += k.mul_base(c);
            }
        }
        for (poly, &k) in ext.iter().zip(ext_coefficients) {
            for (a, &c) in acc.iter_mut().zip(&poly[range.clone()]) {
                *a += k * c;
            }
        }
    });
    sum
}
