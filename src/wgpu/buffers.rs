//! Device memory: a pool that keeps buffers for reuse across calls, and arrays split into
//! parts that each fit one storage binding.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use super::context::Context;
use crate::error::Result;

/// Idle bytes the pool keeps for later calls; beyond this, released buffers are freed.
const POOL_IDLE_BYTES: u64 = 8 << 30;

// BUFFER POOL
// ================================================================================================

/// Usage of every storage buffer: bound by kernels, written by uploads, read by downloads.
pub(super) const STORAGE: ::wgpu::BufferUsages = ::wgpu::BufferUsages::STORAGE
    .union(::wgpu::BufferUsages::COPY_DST)
    .union(::wgpu::BufferUsages::COPY_SRC);

#[derive(Default)]
struct Idle {
    buffers: HashMap<(u64, ::wgpu::BufferUsages), Vec<::wgpu::Buffer>>,
    bytes: u64,
}

/// Buffers by (size, usage); sizes are rounded up to a power of two so that shapes that
/// differ a little share buffers.
#[derive(Clone, Default)]
pub(super) struct BufferPool {
    idle: Arc<Mutex<Idle>>,
}

impl BufferPool {
    /// A buffer of at least `size` bytes (rounded up to a power of two, at least 256).
    pub fn acquire(
        &self,
        device: &::wgpu::Device,
        size: u64,
        usage: ::wgpu::BufferUsages,
    ) -> PooledBuffer {
        self.acquire_reporting(device, size, usage, false).0
    }

    /// A staging buffer for uploads (`MAP_WRITE | COPY_SRC`), mapped for writing: a new one is
    /// mapped at creation, a reused one is mapped here (waiting for the device to finish with
    /// it).
    pub fn acquire_upload(&self, ctx: &Context, size: u64) -> Result<PooledBuffer> {
        let usage = ::wgpu::BufferUsages::MAP_WRITE | ::wgpu::BufferUsages::COPY_SRC;
        let (buffer, reused) = self.acquire_reporting(&ctx.device, size, usage, true);
        if reused {
            let mapping = ctx.map(&buffer, ::wgpu::MapMode::Write, ..)?;
            ctx.wait_for_map(&buffer, &mapping, "waiting for an upload buffer")?;
        }
        Ok(buffer)
    }

    /// A pooled or new buffer, and whether it was reused; a new one is mapped at creation if
    /// `mapped`.
    fn acquire_reporting(
        &self,
        device: &::wgpu::Device,
        size: u64,
        usage: ::wgpu::BufferUsages,
        mapped: bool,
    ) -> (PooledBuffer, bool) {
        let size = size.max(256).next_power_of_two();
        let reused = self.idle.lock().ok().and_then(|mut idle| {
            let buffer = idle.buffers.get_mut(&(size, usage))?.pop()?;
            idle.bytes -= size;
            Some(buffer)
        });
        let was_reused = reused.is_some();
        let buffer = reused.unwrap_or_else(|| {
            device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("miden-gpu"),
                size,
                usage,
                mapped_at_creation: mapped,
            })
        });
        (PooledBuffer { buffer: Some(buffer), pool: self.clone() }, was_reused)
    }

    fn release(&self, buffer: ::wgpu::Buffer) {
        if let Ok(mut idle) = self.idle.lock() {
            let size = buffer.size();
            if idle.bytes + size <= POOL_IDLE_BYTES {
                idle.bytes += size;
                idle.buffers.entry((size, buffer.usage())).or_default().push(buffer);
            }
        }
    }
}

/// A buffer on loan from a [`BufferPool`]; returned to it when dropped.
pub(super) struct PooledBuffer {
    buffer: Option<::wgpu::Buffer>,
    pool: BufferPool,
}

impl std::ops::Deref for PooledBuffer {
    type Target = ::wgpu::Buffer;

    fn deref(&self) -> &::wgpu::Buffer {
        self.buffer.as_ref().expect("a pooled buffer is present until dropped")
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.release(buffer);
        }
    }
}

// CHUNKED ARRAYS
// ================================================================================================

/// A logical array of `len` records of `record_bytes` bytes, stored in parts of `part_len`
/// records (a power of two), each part its own buffer so that it fits one binding.
pub(super) struct Chunked {
    parts: Vec<PooledBuffer>,
    /// Records per part.
    pub part_len: u64,
    /// Records in all.
    pub len: u64,
}

impl Chunked {
    /// Allocates the parts of an array of `len` records.
    pub fn new(
        pool: &BufferPool,
        device: &::wgpu::Device,
        len: u64,
        record_bytes: u64,
        part_len: u64,
    ) -> Self {
        debug_assert!(part_len.is_power_of_two());
        let parts = (0..len.div_ceil(part_len))
            .map(|p| {
                let records = (len - p * part_len).min(part_len);
                pool.acquire(device, records * record_bytes, STORAGE)
            })
            .collect();
        Self { parts, part_len, len }
    }

    /// The part holding record `index`, and the record's offset in it (below `part_len`, whose
    /// records fit one binding: fewer than 2^32 bytes).
    pub fn locate(&self, index: u64) -> (&::wgpu::Buffer, u32) {
        let part = (index / self.part_len) as usize;
        (&self.parts[part], (index % self.part_len) as u32)
    }

    /// The buffer of part `p`.
    pub fn part(&self, p: usize) -> &::wgpu::Buffer {
        &self.parts[p]
    }

    /// Number of parts.
    pub fn num_parts(&self) -> usize {
        self.parts.len()
    }

    /// The records of part `p`: its first record index and how many it holds.
    pub fn part_range(&self, p: usize) -> (u64, u64) {
        let first = p as u64 * self.part_len;
        (first, (self.len - first).min(self.part_len))
    }
}
