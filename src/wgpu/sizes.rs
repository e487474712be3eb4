//! How work is split to fit the device: parts of arrays within one storage binding, staging
//! buffers, row chunks, and hashing dispatches.

use crate::error::{GpuError, Result};

/// Bytes of a field element and of a digest.
pub(super) const FELT_BYTES: u64 = 8;
pub(super) const DIGEST_BYTES: u64 = 32;

// SIZES
// ================================================================================================

/// How work is split to fit the device.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sizes {
    /// Bytes of one part of a chunked array (a power of two within one storage binding).
    pub chunk: u64,
    /// The adapter's largest storage binding: a single row (a row chunk of one row) may exceed
    /// a forced small `chunk`, never this.
    pub binding: u64,
    /// Bytes of each staging buffer of a download queue.
    pub staging: u64,
    /// Most permutations per row in one row-hashing dispatch.
    pub hash_events: u32,
}

impl Sizes {
    /// Smallest chunk a caller may force.
    pub const MIN_CHUNK: u64 = 256;
    /// Largest staging buffer.
    const MAX_STAGING: u64 = 256 << 20;
    /// Permutations per row and dispatch on a software adapter: llvmpipe stops any
    /// invocation after 65535 loop iterations, and a permutation takes up to ~2600.
    const SOFTWARE_HASH_EVENTS: u32 = 16;

    /// Sizes for `limits` (of a software adapter if `software`), with chunks of at most
    /// `max_chunk` bytes if given; staging buffers within one storage binding if
    /// `bound_staging` (kernels write them).
    pub fn new(
        limits: &::wgpu::Limits,
        software: bool,
        max_chunk: Option<u64>,
        bound_staging: bool,
    ) -> Self {
        // Below 4 GiB whatever the adapter reports (Metal reports its whole buffer size): the
        // shading languages take a binding's size in 32 bits (naga's MSL passes the sizes behind
        // `arrayLength` as `uint`).
        let binding =
            limits.max_storage_buffer_binding_size.min(u32::MAX.into()).min(limits.max_buffer_size);
        let wanted = max_chunk.unwrap_or(u64::MAX).max(Self::MIN_CHUNK);
        let chunk = prev_power_of_two(binding.min(wanted));
        let staging_limit = if bound_staging { binding } else { limits.max_buffer_size };
        let staging =
            prev_power_of_two(staging_limit.min(Self::MAX_STAGING).min((16 * chunk).max(1 << 20)));
        let hash_events = if software { Self::SOFTWARE_HASH_EVENTS } else { u32::MAX };
        Self { chunk, binding, staging, hash_events }
    }

    /// Field elements per part.
    pub fn felts(&self) -> u64 {
        self.chunk / FELT_BYTES
    }

    /// Digests per part.
    pub fn digests(&self) -> u64 {
        self.chunk / DIGEST_BYTES
    }

    /// An error unless one row of `row_width` elements fits a storage binding and a staging
    /// buffer.
    pub fn check_row(&self, row_width: usize) -> Result<()> {
        let needed = row_width as u64 * FELT_BYTES;
        let available = self.binding.min(self.staging);
        if needed > available {
            return Err(GpuError::OutOfMemory { memory: "device", needed, available });
        }
        Ok(())
    }

    /// Rows of `row_width` elements per row chunk: a power of two, at most `limit`, such that
    /// the rows and their saved hashing states (`saved_bytes` per row) each fit one part.
    pub fn rows_per_chunk(&self, row_width: usize, saved_bytes: u64, limit: u64) -> u64 {
        let per_row = (row_width as u64 * FELT_BYTES).max(saved_bytes);
        let fit = self.chunk.min(self.staging) / per_row;
        prev_power_of_two(fit.max(1)).min(limit)
    }
}

pub(super) fn prev_power_of_two(x: u64) -> u64 {
    1 << x.ilog2()
}
