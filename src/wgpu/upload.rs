//! Uploads: host bytes are copied in parallel (streaming stores) into mapped staging buffers
//! (pooled, so that their pinned host memory is reused across calls), and copies from them into
//! the device arrays are recorded in a batch (ordered before the work recorded after them).

use super::{
    batch::Batch,
    buffers::{Chunked, PooledBuffer},
    context::wgpu_failure,
    Engine,
};
use crate::{error::Result, host::copy_slices};

/// One host slice to write into an array, from record `first` on.
pub(super) struct Write<'a> {
    pub bytes: &'a [u8],
    pub array: &'a Chunked,
    pub first: u64,
    pub record_bytes: u64,
}

/// A piece of a write that lands in one part and one staging buffer.
struct Segment<'a> {
    bytes: &'a [u8],
    dst: &'a ::wgpu::Buffer,
    dst_offset: u64,
}

/// Staging buffers of recorded uploads: keep them until the batch is submitted.
#[must_use = "staging buffers must outlive the submission of their copies"]
pub(super) struct Staged {
    _buffers: Vec<PooledBuffer>,
}

/// Uploads `writes` and records the copies into `batch`.
pub(super) fn upload(
    engine: &Engine<'_>,
    batch: &mut Batch,
    writes: &[Write<'_>],
) -> Result<Staged> {
    let capacity = engine.sizes.staging;
    // Split every write at part boundaries and into pieces that fit a staging buffer.
    let mut segments = Vec::new();
    for write in writes {
        let mut index = write.first;
        let mut rest = write.bytes;
        while !rest.is_empty() {
            let (dst, offset) = write.array.locate(index);
            let in_part = (write.array.part_len - offset as u64) * write.record_bytes;
            let take = in_part
                .min(rest.len() as u64)
                .min(capacity / write.record_bytes * write.record_bytes);
            let (head, tail) = rest.split_at(take as usize);
            segments.push(Segment {
                bytes: head,
                dst,
                dst_offset: offset as u64 * write.record_bytes,
            });
            rest = tail;
            index += take / write.record_bytes;
        }
    }
    // Fill staging buffers of up to `capacity` bytes, each with its segments in parallel.
    let mut staged = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let mut end = start;
        let mut size = 0;
        while end < segments.len() && size + segments[end].bytes.len() as u64 <= capacity {
            size += segments[end].bytes.len() as u64;
            end += 1;
        }
        let group = &segments[start..end];
        let staging = engine.pool.acquire_upload(engine.ctx, size)?;
        {
            let mut view = staging
                .slice(..size)
                .get_mapped_range_mut()
                .map_err(|e| wgpu_failure("writing an upload", e))?;
            let mut whole = view.slice(..);
            // SAFETY: the view is the whole of a mapped staging buffer, `whole.len()` bytes that
            // nothing else accesses while it lives; wgpu zero-fills new buffers, so the bytes
            // are initialized, and the streaming copies below only write them (never read: the
            // memory may be write-combined).
            let mut rest: &mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(whole.as_raw_element_ptr().as_ptr(), whole.len())
            };
            let mut targets = Vec::with_capacity(group.len());
            for segment in group {
                let (head, tail) = rest.split_at_mut(segment.bytes.len());
                targets.push((head, segment.bytes));
                rest = tail;
            }
            copy_slices(targets);
        }
        staging.unmap();
        let mut offset = 0;
        for segment in group {
            let len = segment.bytes.len() as u64;
            batch.copy(&staging, offset, segment.dst, segment.dst_offset, len);
            offset += len;
        }
        staged.push(staging);
        start = end;
    }
    Ok(Staged { _buffers: staged })
}
