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
    advise_huge_pages(&mut vec);
    Ok(vec)
}

/// Reservations of at least this many bytes ask for transparent huge pages.
const HUGE_PAGES_FROM: usize = 32 << 20;

/// The environment variable that, set to `0`, stops large result vectors from asking Linux for
/// transparent huge pages.
pub const HUGE_PAGES_ENV: &str = "MIDEN_GPU_HUGE_PAGES";

/// Whether [`HUGE_PAGES_ENV`] leaves the advice on (read once).
fn huge_pages_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(HUGE_PAGES_ENV).map_or(true, |v| v.trim() != "0"))
}

/// Asks the kernel to back the spare capacity of `vec` with transparent huge pages where it is
/// large ([`HUGE_PAGES_FROM`]; Linux, which in its common `madvise` mode gives them only when
/// asked), unless [`HUGE_PAGES_ENV`] is `0`. A backend's results are gigabytes of fresh memory:
/// faulted in 2 MiB at a time instead of 4 KiB, the downloads that fill them spend far less time
/// in the kernel.
pub(crate) fn advise_huge_pages<T>(vec: &mut Vec<T>) {
    let spare = vec.spare_capacity_mut();
    let (start, len) = (spare.as_mut_ptr() as usize, std::mem::size_of_val(spare));
    if len >= HUGE_PAGES_FROM && huge_pages_enabled() {
        advise(start, len);
    }
}

#[cfg(target_os = "linux")]
fn advise(start: usize, len: usize) {
    const PAGE: usize = 4096;
    let first = start.next_multiple_of(PAGE);
    let end = (start + len) / PAGE * PAGE;
    // SAFETY: a page-aligned range inside a live allocation; MADV_HUGEPAGE changes how its pages
    // are backed, not their contents. A kernel without THP refuses it, which is harmless.
    unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise(_start: usize, _len: usize) {}

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
