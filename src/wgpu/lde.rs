//! The kernels around the NTTs: finishing an interpolation (`interpolate.wgsl`), preparing a
//! coset evaluation (`coset.wgsl`) and writing evaluations as LDE rows (`rows.wgsl`).

use bytemuck::{Pod, Zeroable};
use miden_crypto::Felt;
use winter_math::FieldElement;

use super::{batch::Batch, pipelines::Kernel};

/// `offset_table` value meaning "domain offset 1" in `InterpolateParams`.
const NO_OFFSET: u32 = u32::MAX;

// INTERPOLATION
// ================================================================================================

/// `InterpolateParams` of interpolate.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct InterpolateParams {
    count: u32,
    log_len: u32,
    src_offset: u32,
    src_stride: u32,
    log_src_len: u32,
    dst_offset: u32,
    first: u32,
    offset_table: u32,
    factor_lo: u32,
    factor_hi: u32,
}

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
) {
    let count = block.num_cols << block.log_len;
    let factor = Felt::new(1u64 << block.log_src_len).inv().inner();
    let params = InterpolateParams {
        count: count as u32,
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
    batch.dispatch_items(Kernel::FinishInterpolation, &params, &[src, dst, powers], count);
}

// COSET INPUT
// ================================================================================================

/// `CosetParams` of coset.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct CosetParams {
    pub count: u32,
    pub log_len: u32,
    pub src_offset: u32,
    pub src_stride: u32,
    pub dst_offset: u32,
    pub exp_offset: u32,
    pub coset: u32,
    pub accumulate: u32,
    pub domain_mask: u32,
    pub generator_table: u32,
    pub root_table: u32,
}

/// Records `dst[c][t] (+)= src[c][t] * (GENERATOR g^coset)^(exp_offset + t)`.
pub(super) fn record_coset_scale(
    batch: &mut Batch,
    params: &CosetParams,
    src: &::wgpu::Buffer,
    dst: &::wgpu::Buffer,
    powers: &::wgpu::Buffer,
) {
    batch.dispatch_items(Kernel::CosetScale, params, &[src, dst, powers], params.count as u64);
}

// ROWS
// ================================================================================================

/// `RowsParams` of rows.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct RowsParams {
    pub count: u32,
    pub num_cols: u32,
    pub src_offset: u32,
    pub log_len: u32,
    pub row0: u32,
    pub row_width: u32,
    pub col0: u32,
    pub dst_offset: u32,
}

/// Records the transposition of a block of bit-reversed evaluation columns into rows.
pub(super) fn record_to_rows(
    batch: &mut Batch,
    params: &RowsParams,
    src: &::wgpu::Buffer,
    dst: &::wgpu::Buffer,
) {
    batch.dispatch_items(Kernel::ToRows, params, &[src, dst], params.count as u64);
}
