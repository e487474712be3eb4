//! FRI layers on the device and the dispatches of `fri.wgsl`: the first layer's rows from coset
//! evaluations, and the folding of a layer into the next one.
//!
//! A layer is stored row-major (a row is the `slots · degree` base elements Winterfell hashes
//! into its leaf), in parts of whole rows, so the row-hashing kernel reads it as it reads LDE
//! rows. Each dispatch stays inside one source part and one destination part.

use miden_crypto::Felt;
use winter_math::{FieldElement, StarkField};

use crate::{
    error::{to_u32, Result},
    hash::HashFunction,
};

use super::kernels::FriParams;
use super::{
    batch::Batch,
    buffers::Chunked,
    constants::PowerTables,
    kernels::{fri_fold, fri_rows},
    shaders::saved_bytes,
    sizes::FELT_BYTES,
    Engine,
};

/// The layout of this module's parameter structs, checked against their WGSL twins.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![describe_params!(FriParams {
        count,
        src_offset,
        dst_offset,
        dst_stride,
        folding,
        degree,
        first,
        log_unit,
        slot_step,
        rows,
        domain_mask,
        root_table,
        alpha,
        f_inv,
    })]
}

// LAYERS
// ================================================================================================

/// A FRI layer on the device: `rows` rows of `slots` elements of `degree` base components;
/// evaluation `k` is slot `k / rows` of row `k mod rows`. The remainder is a layer of one slot
/// per row.
pub(super) struct Layer {
    /// One record per row.
    pub array: Chunked,
    pub slots: u64,
    pub degree: u64,
}

impl Layer {
    /// Allocates a layer, in parts of as many rows as a row chunk of the row hashing with
    /// `hash` holds.
    pub fn new(
        engine: &Engine<'_>,
        rows: u64,
        slots: u64,
        degree: u64,
        hash: HashFunction,
    ) -> Self {
        let width = slots * degree;
        let part_rows = engine.sizes.rows_per_chunk(width as usize, saved_bytes(hash), rows);
        let array =
            Chunked::new(engine.pool, &engine.ctx.device, rows, width * FELT_BYTES, part_rows);
        Self { array, slots, degree }
    }

    /// Number of rows.
    pub fn rows(&self) -> u64 {
        self.array.len
    }

    /// Base elements per row.
    pub fn width(&self) -> u64 {
        self.slots * self.degree
    }

    /// The part holding row `row`, and the element index of the row in it (within one part:
    /// fewer than 2^32 elements).
    fn locate(&self, row: u64) -> (&::wgpu::Buffer, u32) {
        let (buffer, index) = self.array.locate(row);
        (buffer, index * self.width() as u32)
    }
}

// FIRST LAYER
// ================================================================================================

/// Records the writing of coset `coset` of `cosets` into `layer`'s rows: `work` holds the
/// coset's evaluations, one bit-reversed column of `unit` elements per component (each column
/// inside one part). Needs `cosets <= layer.rows()`.
pub(super) fn record_layer_rows(
    batch: &mut Batch,
    work: &Chunked,
    unit: u64,
    coset: u64,
    cosets: u64,
    layer: &Layer,
) -> Result<()> {
    let per_slot = layer.rows() / cosets;
    // Rows `coset + cosets · b` of a dispatch stay in one part.
    let run = (layer.array.part_len / cosets).clamp(1, per_slot);
    for d in 0..layer.degree {
        let (src, src_offset) = work.locate(d * unit);
        for first in (0..per_slot).step_by(run as usize) {
            let (dst, dst_offset) = layer.locate(coset + cosets * first);
            let params = FriParams {
                count: to_u32(run * layer.slots, "elements of a FRI layer's rows")?,
                src_offset,
                dst_offset: to_u32(u64::from(dst_offset) + d, "an offset in a FRI layer")?,
                dst_stride: to_u32(cosets * layer.width(), "the stride of a FRI layer")?,
                folding: to_u32(layer.slots, "the FRI folding factor")?,
                degree: to_u32(layer.degree, "the degree of a FRI element")?,
                first: to_u32(first, "the first row of a FRI layer")?,
                log_unit: unit.ilog2(),
                slot_step: to_u32(per_slot, "the rows of a FRI slot")?,
                ..FriParams::default()
            };
            batch.dispatch_items(fri_rows(), &params, [src, dst], params.count.into())?;
        }
    }
    Ok(())
}

// FOLDING
// ================================================================================================

/// Records the folding of every row of `layer` with `alpha` (its base components) into `next`,
/// whose rows times slots equal `layer`'s rows. `powers` holds the power tables of `layer`'s
/// domain (`rows · slots` points).
pub(super) fn record_fold(
    batch: &mut Batch,
    layer: &Layer,
    next: &Layer,
    alpha: &[Felt],
    powers: (&::wgpu::Buffer, PowerTables),
) -> Result<()> {
    let (rows, folding) = (layer.rows(), layer.slots);
    let offset_inv = Felt::GENERATOR.inv();
    let mut alpha_words = [[0; 2]; 3];
    for (words, &component) in alpha_words.iter_mut().zip(alpha) {
        *words = words_of(component * offset_inv);
    }
    let folding_u32 = to_u32(folding, "the FRI folding factor")?;
    let base = FriParams {
        folding: folding_u32,
        degree: to_u32(layer.degree, "the degree of a FRI element")?,
        rows: to_u32(rows, "the rows of a FRI layer")?,
        domain_mask: to_u32(rows * folding - 1, "the domain of a FRI layer")?,
        root_table: powers.1.root,
        alpha: alpha_words,
        f_inv: words_of(Felt::from(folding_u32).inv()),
        dst_stride: to_u32(next.width(), "the width of a FRI layer")?,
        ..FriParams::default()
    };
    // Aligned runs of rows inside one source part, one destination slot and one destination part.
    let run = layer.array.part_len.min(next.rows()).min(next.array.part_len);
    for first in (0..rows).step_by(run as usize) {
        let (src, src_offset) = layer.locate(first);
        let (dst, dst_offset) = next.locate(first % next.rows());
        let slot = first / next.rows();
        let params = FriParams {
            count: to_u32(run, "rows of a FRI fold")?,
            src_offset,
            dst_offset: to_u32(
                u64::from(dst_offset) + slot * next.degree,
                "an offset in a FRI layer",
            )?,
            first: to_u32(first, "the first row of a FRI fold")?,
            ..base
        };
        batch.dispatch_items(fri_fold(), &params, [src, dst, powers.0], run)?;
    }
    Ok(())
}

/// The Montgomery words of an element as (low, high).
fn words_of(value: Felt) -> [u32; 2] {
    let word = value.inner();
    [word as u32, (word >> 32) as u32]
}
