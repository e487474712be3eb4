//! The DEEP composition over resident polynomials: what a backend is asked for, and the host
//! computations every backend is checked against.
//!
//! Before the DEEP coefficients are drawn, the prover sends the out-of-domain frame: every
//! trace and composition polynomial at `z` and `gz` ([`EvaluateRequest`]). A backend evaluates
//! blocks of 1024 coefficients by Horner's rule, as winter_math's
//! `polynom::eval` steps, and the host joins the blocks.
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
    error::{DeepError, GpuError, Result},
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
        let (poly_len, columns) = check_segments(self.segments, self.ext_degree, backend)?;
        if self.coefficients.len() != columns * self.ext_degree {
            return Err(GpuError::InvalidDeep(DeepError::CoefficientCount {
                received: self.coefficients.len(),
                columns,
                degree: self.ext_degree,
            }));
        }
        Ok(poly_len)
    }
}

/// Every column of `segments` at two points (the out-of-domain frame's `z` and `gz`).
#[derive(Debug, Clone, Copy)]
pub struct EvaluateRequest<'a> {
    /// The segments, in the order of the frame's columns.
    pub segments: &'a [DeepSegment<'a>],
    /// Degree of the extension the points and values live in (1, 2 or 3).
    pub ext_degree: usize,
    /// The two points, `ext_degree` base components each.
    pub points: &'a [Felt],
}

impl EvaluateRequest<'_> {
    /// Checks the request against the backend that runs it; returns the polynomial length.
    pub fn validate(&self, backend: Backend) -> Result<usize> {
        // the segments' check bounds the extension degree before it sizes the points
        let (poly_len, _) = check_segments(self.segments, self.ext_degree, backend)?;
        if self.points.len() != 2 * self.ext_degree {
            return Err(GpuError::InvalidDeep(DeepError::PointCount {
                received: self.points.len(),
                degree: self.ext_degree,
            }));
        }
        Ok(poly_len)
    }
}

/// Coefficients per block of a backend's evaluation (fewer for shorter polynomials).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) const EVALUATION_BLOCK: usize = 1024;

/// Joins a backend's block values into each column's values at the two points: `partials`
/// holds, for column `c`, block `b` (of `block_len` coefficients) and point `p`, `degree`
/// components at `((c·blocks + b)·2 + p)·degree`, the block's polynomial at the point; the
/// value is `Σ_b partial_b·x^(b·block_len)`, by Horner's rule over the blocks. Returns, for
/// column `c` and point `p`, `degree` components at `(c·2 + p)·degree`.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn join_blocks(
    partials: &[Felt],
    points: &[Felt],
    poly_len: usize,
    block_len: usize,
    degree: usize,
) -> Vec<Felt> {
    let blocks = poly_len / block_len;
    match degree {
        1 => join_blocks_in::<Felt>(partials, points, blocks, block_len),
        2 => join_blocks_in::<winter_math::fields::QuadExtension<Felt>>(
            partials, points, blocks, block_len,
        ),
        _ => join_blocks_in::<winter_math::fields::CubeExtension<Felt>>(
            partials, points, blocks, block_len,
        ),
    }
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn join_blocks_in<E: FieldElement<BaseField = Felt>>(
    partials: &[Felt],
    points: &[Felt],
    blocks: usize,
    block_len: usize,
) -> Vec<Felt> {
    let partials = E::slice_from_base_elements(partials);
    let points = E::slice_from_base_elements(points);
    // x^block_len by products alone, as the host division raises its step
    let steps: Vec<E> =
        points.iter().map(|&x| (0..block_len).fold(E::ONE, |power, _| power * x)).collect();
    // on the copy threads: the backend's call holds the GPU's turn, and the caller's pool may be
    // busy with other proofs
    let values: Vec<E> = crate::host::on_copy_pool(|| {
        partials
            .par_chunks(blocks * 2)
            .flat_map_iter(|column| {
                let steps = &steps;
                (0..2).map(move |p| {
                    (0..blocks).rev().fold(E::ZERO, |acc, b| acc * steps[p] + column[b * 2 + p])
                })
            })
            .collect()
    });
    E::slice_as_base_elements(&values).to_vec()
}

/// The polynomial length of `segments` and their number of columns, checked against the
/// backend and the extension degree.
fn check_segments(
    segments: &[DeepSegment<'_>],
    ext_degree: usize,
    backend: Backend,
) -> Result<(usize, usize)> {
    let invalid = |error: DeepError| Err(GpuError::InvalidDeep(error));
    if !(1..=3).contains(&ext_degree) {
        return invalid(DeepError::ExtensionDegree(ext_degree));
    }
    let Some(first) = segments.first() else {
        return invalid(DeepError::NoSegments);
    };
    let poly_len = first.polys.poly_len();
    let mut columns = 0;
    for (s, segment) in segments.iter().enumerate() {
        let polys = segment.polys;
        if polys.backend() != backend {
            return invalid(DeepError::SegmentBackend {
                segment: s,
                held_by: polys.backend(),
                expected: backend,
            });
        }
        if polys.poly_len() != poly_len {
            return invalid(DeepError::SegmentLength {
                segment: s,
                poly_len: polys.poly_len(),
                expected: poly_len,
            });
        }
        let known_degree = segment.degree == 1 || segment.degree == ext_degree;
        if !known_degree || !polys.num_cols().is_multiple_of(segment.degree) {
            return invalid(DeepError::SegmentColumns {
                segment: s,
                base_columns: polys.num_cols(),
                degree: segment.degree,
                ext_degree,
            });
        }
        columns += polys.num_cols() / segment.degree;
    }
    Ok((poly_len, columns))
}

// HOST COMPUTATION
// ================================================================================================

/// Coefficients combined per block: a block of `S` stays in cache while every column adds in.
const BLOCK: usize = 2048;

/// `S = Σ kᵢ·Tᵢ` on the host: `base` columns with `base_coefficients` (`mul_base`), then `ext`
/// columns with `ext_coefficients`, each coefficient of `S` summed in that order.
///
/// A host computation over polynomials the caller holds, not a request to a backend: the
/// columns are expected to have `poly_len` coefficients each and one coefficient per column.
///
/// # Panics
/// If a column has fewer than `poly_len` coefficients.
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
