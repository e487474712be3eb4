//! The kernels around the NTTs: finishing an interpolation (`interpolate.wgsl`), evaluating a
//! coset (`coset.wgsl`, then the forward NTT) and writing evaluations as LDE rows (`rows.wgsl`).

use miden_crypto::Felt;
use winter_math::FieldElement;

use super::kernels::{CosetParams, InterpolateParams, RowsParams};
use super::{
    batch::Batch,
    buffers::Chunked,
    constants::PowerTables,
    kernels::{coset_scale, finish_interpolation, to_rows},
    ntt::record_dif,
};
use crate::error::{to_u32, Result};

/// `offset_table` value meaning "domain offset 1" in `InterpolateParams`.
const NO_OFFSET: u32 = u32::MAX;

// INTERPOLATION
// ================================================================================================

/// A block of consecutive output columns cut from inverse-NTT output columns.
#[derive(Debug, Clone, Copy)]
pub(super) struct CoefficientBlock {
    /// Columns in the block.
    pub num_cols: u64,
    /// log2 of the output column length.
    pub log_len: u32,
    /// Element index of the first source column in its part.
    pub src_offset: u32,
    /// log2 of the source column length (the transform size; also the source column stride).
    pub log_src_len: u32,
    /// Element index of the first output column in its part.
    pub dst_offset: u32,
    /// First coefficient taken from each source column.
    pub first: u32,
    /// Start of the power table of the inverse domain offset, if the offset is not 1.
    pub offset_table: Option<u32>,
}

/// Records `dst[c][j] = src[c][bitrev(first + j)] * offset^-(first + j) / 2^log_src_len`.
pub(super) fn record_finish_interpolation(
    batch: &mut Batch,
    block: CoefficientBlock,
    src: &::wgpu::Buffer,
    dst: &::wgpu::Buffer,
    powers: &::wgpu::Buffer,
) -> Result<()> {
    let count = block.num_cols << block.log_len;
    let factor = Felt::new(1u64 << block.log_src_len).inv().inner();
    let params = InterpolateParams {
        count: to_u32(count, "elements of an interpolation")?,
        log_len: block.log_len,
        src_offset: block.src_offset,
        src_stride: 1 << block.log_src_len,
        log_src_len: block.log_src_len,
        dst_offset: block.dst_offset,
        first: block.first,
        offset_table: block.offset_table.unwrap_or(NO_OFFSET),
        factor_lo: factor as u32,
        factor_hi: (factor >> 32) as u32,
    };
    batch.dispatch_items(finish_interpolation(), &params, [src, dst, powers], count)
}

// COSET INPUT
// ================================================================================================

/// Records `dst[c][t] (+)= src[c][t] * (GENERATOR g^coset)^(exp_offset + t)`.
fn record_coset_scale(
    batch: &mut Batch,
    params: &CosetParams,
    src: &::wgpu::Buffer,
    dst: &::wgpu::Buffer,
    powers: &::wgpu::Buffer,
) -> Result<()> {
    batch.dispatch_items(coset_scale(), params, [src, dst, powers], params.count.into())
}

// COSET EVALUATION
// ================================================================================================

/// The shape of a coset-by-coset evaluation: `num_cols` coefficient columns of `poly_len`
/// (stored one after another) evaluated over the domain `GENERATOR · <g>` of `domain_len`
/// points, as `domain_len / unit` cosets `GENERATOR · g^coset · <g^(domain_len / unit)>` of
/// `unit` points.
#[derive(Debug, Clone, Copy)]
pub(super) struct CosetShape {
    pub num_cols: u64,
    pub poly_len: u64,
    pub unit: u64,
    pub domain_len: u64,
}

/// The device arrays of a coset evaluation.
pub(super) struct CosetArrays<'a> {
    /// The coefficient columns (parts of the field-element part size).
    pub coefficients: &'a Chunked,
    /// `num_cols` columns of `unit` elements (same part size): the coset's evaluations.
    pub work: &'a Chunked,
    /// The power tables of the domain (`Tables::powers`).
    pub powers: &'a ::wgpu::Buffer,
    /// Forward twiddles of size `unit`.
    pub twiddles: &'a ::wgpu::Buffer,
}

/// Records the evaluation of coset `coset` into `work`, bit-reversed: each coefficient column
/// scaled by powers of the coset offset (folded to the coset size when a column is longer than
/// `unit`), then a forward NTT.
pub(super) fn record_coset_evaluation(
    batch: &mut Batch,
    shape: CosetShape,
    coset: u64,
    arrays: CosetArrays<'_>,
    tables: PowerTables,
) -> Result<()> {
    let CosetArrays { coefficients, work, powers, twiddles } = arrays;
    let n = shape.poly_len;
    let params =
        |count: u64, src_offset: u32, dst_offset: u32, exp_offset: u64, accumulate: bool| {
            Ok(CosetParams {
                count: to_u32(count, "elements of a coset scaling")?,
                log_len: shape.unit.ilog2(),
                src_offset,
                src_stride: to_u32(shape.unit, "the points of a coset")?,
                dst_offset,
                exp_offset: to_u32(exp_offset, "the first exponent of a coset scaling")?,
                coset: to_u32(coset, "the index of a coset")?,
                accumulate: u32::from(accumulate),
                domain_mask: to_u32(shape.domain_len - 1, "the points of a domain")?,
                generator_table: tables.generator,
                root_table: tables.root,
            })
        };
    if shape.unit == n {
        // Same layout in and out: one dispatch per part.
        for p in 0..coefficients.num_parts() {
            let (_, len) = coefficients.part_range(p);
            record_coset_scale(
                batch,
                &params(len, 0, 0, 0, false)?,
                coefficients.part(p),
                work.part(p),
                powers,
            )?;
        }
    } else {
        for c in 0..shape.num_cols {
            let (dst, dst_offset) = work.locate(c * shape.unit);
            for block in 0..n / shape.unit {
                let (src, src_offset) = coefficients.locate(c * n + block * shape.unit);
                let p = params(shape.unit, src_offset, dst_offset, block * shape.unit, block > 0)?;
                record_coset_scale(batch, &p, src, dst, powers)?;
            }
        }
    }
    for p in 0..work.num_parts() {
        let (_, len) = work.part_range(p);
        record_dif(batch, work.part(p), 0, len / shape.unit, shape.unit.ilog2(), twiddles)?;
    }
    Ok(())
}

// ROWS
// ================================================================================================

/// The layout of this module's parameter structs, checked against their WGSL twins.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![
        describe_params!(InterpolateParams {
            count,
            log_len,
            src_offset,
            src_stride,
            log_src_len,
            dst_offset,
            first,
            offset_table,
            factor_lo,
            factor_hi,
        }),
        describe_params!(CosetParams {
            count,
            log_len,
            src_offset,
            src_stride,
            dst_offset,
            exp_offset,
            coset,
            accumulate,
            domain_mask,
            generator_table,
            root_table,
        }),
        describe_params!(RowsParams {
            count,
            num_cols,
            src_offset,
            log_len,
            row0,
            row_width,
            col0,
            dst_offset,
        }),
    ]
}

/// Records the transposition of a block of bit-reversed evaluation columns into rows.
pub(super) fn record_to_rows(
    batch: &mut Batch,
    params: &RowsParams,
    src: &::wgpu::Buffer,
    dst: &::wgpu::Buffer,
) -> Result<()> {
    batch.dispatch_items(to_rows(), params, [src, dst], params.count.into())
}
