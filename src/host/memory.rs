//! Host memory for a backend's results: reserved fallibly, so that a result too large for the
//! host is a typed error.

use crate::error::{GpuError, Result};

/// An empty vector with room for `len` elements, or [`GpuError::OutOfMemory`] if the host cannot
/// provide it: backends allocate their outputs with this so an LDE too large for host memory is
/// a typed error, not an abort.
pub fn reserve_host<T>(len: usize) -> Result<Vec<T>> {
    let mut vec = Vec::<T>::new();
    vec.try_reserve_exact(len).map_err(|_| GpuError::OutOfMemory {
        memory: "host",
        needed: (len as u64).saturating_mul(core::mem::size_of::<T>() as u64),
        available: host_available_bytes(),
    })?;
    Ok(vec)
}

/// `MemAvailable` from `/proc/meminfo` (0 where it cannot be read); for error messages only.
fn host_available_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}
