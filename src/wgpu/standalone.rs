//! The per-stage entry points: row hashing of host LDE rows, and a Merkle tree over host
//! leaves.

use tracing::info_span;

use super::{
    buffers::Chunked,
    constants::felt_bytes,
    download::{download_array, DownloadQueue, RecordSink, Sinks, Store, Target},
    hash::{record_hash_rows, sponge_buffer, RowBlock, RowBuffers, RowSource},
    merkle::{push_level_sinks, record_tree_downloads, tree_levels, Layout},
    shaders::saved_bytes,
    sizes::{DIGEST_BYTES, FELT_BYTES},
    upload::{upload, Write},
    Engine,
};
use crate::{
    committer::{LdeRows, RowHashing},
    error::{GpuError, Result},
    hash::{Digest, HashFunction},
    host::zeroed_host,
};

// HASH ROWS AND BUILD TREE
// ================================================================================================

/// Hashes the rows of host LDE rows on the device (`lde` already checked by the caller).
pub(super) fn hash_rows(
    engine: &Engine<'_>,
    lde: &LdeRows,
    row_hashing: RowHashing,
    hash: HashFunction,
) -> Result<Vec<Digest>> {
    let num_rows = lde.num_rows();
    if num_rows == 0 {
        return Ok(Vec::new());
    }
    let device = &engine.ctx.device;
    let rw = lde.row_width;
    engine.sizes.check_row(rw)?;
    let rows_per_chunk = engine.sizes.rows_per_chunk(rw, saved_bytes(hash), engine.sizes.digests());
    let leaf_array =
        Chunked::new(engine.pool, device, num_rows as u64, DIGEST_BYTES, engine.sizes.digests());
    let row_bytes = rw as u64 * FELT_BYTES;
    let row_chunk = Chunked::new(engine.pool, device, rows_per_chunk, row_bytes, rows_per_chunk);
    let sponges = sponge_buffer(engine, hash, row_hashing, lde.num_cols, rows_per_chunk);
    let mut sinks = Sinks::default();
    sinks.digests.push(zeroed_host(num_rows, &engine.host)?);
    sinks.records.push(RecordSink {
        store: Store::Digests(0),
        start: 0,
        record_len: 4,
        groups: 1,
        group_len: num_rows,
    });
    let mut downloads = DownloadQueue::new(engine, Box::new(move || Ok(sinks)));
    info_span!("wgpu.hash_leaves", rows = num_rows, hash = %hash).in_scope(|| {
        for first in (0..num_rows as u64).step_by(rows_per_chunk as usize) {
            let count = rows_per_chunk.min(num_rows as u64 - first);
            let data = &lde.data[first as usize * rw..(first + count) as usize * rw];
            let write = Write {
                bytes: felt_bytes(data),
                array: &row_chunk,
                first: 0,
                record_bytes: row_bytes,
            };
            let staged = upload(engine, downloads.batch(), &[write])?;
            let (leaf_buffer, dst_offset) = leaf_array.locate(first);
            let block = RowBlock {
                num_rows: count,
                row_width: rw,
                num_cols: lde.num_cols,
                src_offset: 0,
                dst_offset,
                source: RowSource::RowMajor,
            };
            let buffers = RowBuffers {
                rows: row_chunk.part(0),
                leaves: leaf_buffer,
                sponges: &sponges,
                copies: None,
            };
            record_hash_rows(
                downloads.batch(),
                hash,
                row_hashing,
                block,
                buffers,
                engine.sizes.hash_events,
            )?;
            downloads.flush()?;
            drop(staged);
        }
        Ok::<_, GpuError>(())
    })?;
    let mut sinks = info_span!("wgpu.download").in_scope(|| {
        download_array(&mut downloads, &leaf_array, DIGEST_BYTES, |first| Target::Records {
            sink: 0,
            first,
        })?;
        downloads.finish()
    })?;
    Ok(sinks.digests.pop().unwrap_or_default())
}

/// Builds a Merkle tree over host leaves on the device (`leaves` already checked by the caller).
pub(super) fn build_tree(
    engine: &Engine<'_>,
    leaves: &[Digest],
    hash: HashFunction,
) -> Result<Vec<Digest>> {
    let device = &engine.ctx.device;
    let len = leaves.len() as u64;
    let leaf_array = Chunked::new(engine.pool, device, len, DIGEST_BYTES, engine.sizes.digests());
    let levels = tree_levels(engine.pool, device, len, engine.sizes.digests());
    let layout = Layout::new(len, 1);
    let mut sinks = Sinks::default();
    sinks.digests.push(zeroed_host(leaves.len(), &engine.host)?);
    push_level_sinks(&mut sinks, Store::Digests(0), leaves.len(), layout);
    let mut downloads = DownloadQueue::new(engine, Box::new(move || Ok(sinks)));
    let write = Write {
        bytes: Digest::slice_as_bytes(leaves),
        array: &leaf_array,
        first: 0,
        record_bytes: DIGEST_BYTES,
    };
    let _staged =
        info_span!("wgpu.upload").in_scope(|| upload(engine, downloads.batch(), &[write]))?;
    info_span!("wgpu.tree").in_scope(|| {
        record_tree_downloads(&mut downloads, hash, &leaf_array, layout, &levels, 0)
    })?;
    let mut sinks = info_span!("wgpu.download").in_scope(|| downloads.finish())?;
    Ok(sinks.digests.pop().unwrap_or_default())
}
