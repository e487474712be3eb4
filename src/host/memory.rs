//! Host memory for a backend's results: reserved fallibly, so that a result too large for the
//! host is a typed error.

use crate::error::{GpuError, Result};

/// An empty vector with room for `len` elements, or [`GpuError::OutOfMemory`] if the host cannot
/// provide it: backends allocate their outputs with this so an LDE too large for host memory is
/// a typed error, not an abort.
///
/// A request larger than the machine's memory and swap is refused before it is tried: where the
/// kernel overcommits, such a reservation succeeds and the process is killed once its pages are
/// written.
pub fn reserve_host<T>(len: usize) -> Result<Vec<T>> {
    let needed = (len as u64).saturating_mul(core::mem::size_of::<T>() as u64);
    let out_of_memory = || GpuError::OutOfMemory {
        memory: "host",
        needed,
        available: meminfo_bytes(&["MemAvailable:"]).unwrap_or(0),
    };
    if meminfo_bytes(&["MemTotal:", "SwapTotal:"]).is_some_and(|total| needed > total) {
        return Err(out_of_memory());
    }
    let mut vec = Vec::<T>::new();
    vec.try_reserve_exact(len).map_err(|_| out_of_memory())?;
    Ok(vec)
}

/// The sum of the named `/proc/meminfo` fields in bytes, where they can be read (Linux).
fn meminfo_bytes(fields: &[&str]) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    fields
        .iter()
        .map(|field| {
            let line = info.lines().find(|line| line.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib * 1024)
        })
        .sum()
}
