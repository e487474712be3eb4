//! Row hashing (`hash_rows.wgsl`, `blake3_rows.wgsl`): one invocation per row, or for whole rows
//! of RPO/RPX on a device with subgroups one quad per row (`hash_rows_quad.wgsl`), reading the
//! row-major LDE (the quad kernel can also read the NTT's output directly).

use super::kernels::HashRowsParams;
use super::{
    batch::Batch,
    buffers::{PooledBuffer, STORAGE},
    kernels::{hash_rows, hash_rows_quad},
    shaders::{self, QUAD_HASHES},
    Engine,
};
use crate::{
    committer::RowHashing,
    error::{to_u32, Result},
    hash::HashFunction,
};

/// The layout of this module's parameter structs, checked against their WGSL twins.
#[cfg(test)]
pub(super) fn params_layouts() -> Vec<super::params_layout::ParamsLayout> {
    use super::params_layout::describe_params;
    vec![describe_params!(HashRowsParams {
        num_rows,
        row_width,
        num_cols,
        partition_size,
        src_offset,
        dst_offset,
        first_event,
        num_events,
        total_events,
        copy_offset,
        copy_rows,
        coset_rows,
        log_len,
        row0,
    })]
}

/// How the rows of a [`RowBlock`] lie in their buffer.
#[derive(Debug, Clone, Copy)]
pub(super) enum RowSource {
    /// Row-major, `row_width` elements apart, from `src_offset` on.
    RowMajor,
    /// The columns of a coset evaluation as the NTT leaves them, in bit-reversed order: column
    /// `c` from `src_offset + c·2^log_len` on, row `r` of the block at position
    /// `bitrev(row0 + r)`. Only `hash_rows_quad` reads it (see [`on_quads`]).
    Coset { log_len: u32, row0: u32 },
}

/// A block of consecutive rows and where their leaves go.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowBlock {
    pub num_rows: u64,
    pub row_width: usize,
    pub num_cols: usize,
    /// Element index of the first row in its buffer.
    pub src_offset: u32,
    /// Digest index of the first leaf in its buffer.
    pub dst_offset: u32,
    /// How the rows lie in [`RowBuffers::rows`].
    pub source: RowSource,
}

/// The buffers of a row-hashing dispatch.
pub(super) struct RowBuffers<'a> {
    pub rows: &'a ::wgpu::Buffer,
    pub leaves: &'a ::wgpu::Buffer,
    /// [`saved_bytes`](super::shaders::saved_bytes) per row when a row takes more than one dispatch; else any buffer.
    pub sponges: &'a ::wgpu::Buffer,
    /// Where the rows go for the host, if the hashing kernel writes them there (see
    /// [`on_quads`]): a staging buffer and the element offset of the first row.
    pub copies: Option<(&'a ::wgpu::Buffer, u64)>,
}

/// The chunk size in elements (0 for the whole row) and the events of one row: permutations
/// of the algebraic hashes, or blocks of BLAKE3 (whose outer message advances within them).
fn schedule(hash: HashFunction, row_hashing: RowHashing, num_cols: usize) -> (u64, u64) {
    let num_cols = num_cols as u64;
    let blocks = |len: u64| len.div_ceil(8);
    match row_hashing {
        RowHashing::WholeRow => (0, blocks(num_cols)),
        RowHashing::Partitioned(size) => {
            // Chunks of at least the row length are one chunk: same result with any such size.
            let size = (size as u64).min(num_cols);
            let parts = num_cols.div_ceil(size);
            let last = num_cols - (parts - 1) * size;
            let inner = (parts - 1) * blocks(size) + blocks(last);
            let outer = if hash.is_algebraic() { (parts - 1) / 2 + 1 } else { 0 };
            (size, inner + outer)
        },
    }
}

/// Whether hashing rows of `num_cols` elements needs saved states, with at most `max_events`
/// events per dispatch.
pub(super) fn needs_sponges(
    hash: HashFunction,
    row_hashing: RowHashing,
    num_cols: usize,
    max_events: u32,
) -> bool {
    schedule(hash, row_hashing, num_cols).1 > u64::from(max_events)
}

/// Whether rows are hashed on quads (`hash_rows_quad`): whole rows of RPO/RPX on a device
/// whose batches use quads. Only that kernel can also copy its rows for the host
/// ([`RowBuffers::copies`]).
pub(super) fn on_quads(batch: &Batch, hash: HashFunction, row_hashing: RowHashing) -> bool {
    batch.rescue_quads() && QUAD_HASHES.contains(&hash) && row_hashing == RowHashing::WholeRow
}

/// Records the hashing of `block` into leaves, in dispatches of at most `max_events`
/// permutations per row; the kernel also writes the rows to `buffers.copies`, if given (only
/// where [`on_quads`]).
pub(super) fn record_hash_rows(
    batch: &mut Batch,
    hash: HashFunction,
    row_hashing: RowHashing,
    block: RowBlock,
    buffers: RowBuffers<'_>,
    max_events: u32,
) -> Result<()> {
    let (partition_size, total_events) = schedule(hash, row_hashing, block.num_cols);
    let partition_size = to_u32(partition_size, "the partition of a row")?;
    let total_events = to_u32(total_events, "the hashing steps of a row")?;
    let on_quads = on_quads(batch, hash, row_hashing);
    debug_assert!(on_quads || buffers.copies.is_none(), "only hash_rows_quad copies rows");
    debug_assert!(
        on_quads || matches!(block.source, RowSource::RowMajor),
        "only hash_rows_quad reads coset evaluations"
    );
    let (coset_rows, log_len, row0) = match block.source {
        RowSource::RowMajor => (0, 0, 0),
        RowSource::Coset { log_len, row0 } => (1, log_len, row0),
    };
    // Without copies, the quad kernel's copy binding takes the sponge buffer, never written
    // through it.
    let (copies, copy_offset) = buffers.copies.unwrap_or((buffers.sponges, 0));
    let mut first_event = 0;
    while first_event < total_events {
        let num_events = max_events.min(total_events - first_event);
        let params = HashRowsParams {
            num_rows: to_u32(block.num_rows, "rows of a hashing block")?,
            row_width: to_u32(block.row_width, "the row width of a hashing block")?,
            num_cols: to_u32(block.num_cols, "columns of a hashing block")?,
            partition_size,
            src_offset: block.src_offset,
            dst_offset: block.dst_offset,
            first_event,
            num_events,
            total_events,
            copy_offset: to_u32(copy_offset, "the first row copied for the host")?,
            copy_rows: u32::from(buffers.copies.is_some()),
            coset_rows,
            log_len,
            row0,
        };
        if on_quads {
            let bound = [buffers.rows, buffers.leaves, buffers.sponges, copies];
            batch.dispatch_items(hash_rows_quad(hash), &params, bound, block.num_rows)?;
        } else {
            let bound = [buffers.rows, buffers.leaves, buffers.sponges];
            batch.dispatch_items(hash_rows(hash), &params, bound, block.num_rows)?;
        }
        first_event += num_events;
    }
    Ok(())
}

/// The saved states of `rows` rows, if rows take more than one hashing dispatch (else a
/// placeholder to bind).
pub(super) fn sponge_buffer(
    engine: &Engine<'_>,
    hash: HashFunction,
    row_hashing: RowHashing,
    num_cols: usize,
    rows: u64,
) -> PooledBuffer {
    let max_events = engine.sizes.hash_events;
    let rows = if needs_sponges(hash, row_hashing, num_cols, max_events) { rows } else { 1 };
    engine.pool.acquire(&engine.ctx.device, rows * shaders::saved_bytes(hash), STORAGE)
}
