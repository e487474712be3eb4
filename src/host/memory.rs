//! Host memory for a backend's results: reserved fallibly, so that a result too large for the
//! host is a typed error.

use super::{cgroup, HostOptions};
use crate::error::{GpuError, Result};

/// An empty vector with room for `len` elements, or [`GpuError::OutOfMemory`] if the host cannot
/// provide it: backends allocate their outputs with this so an LDE too large for host memory is
/// a typed error, not an abort.
///
/// A request larger than the machine's memory and swap, or than the room its control group's
/// memory limit leaves (in a container), is refused before it is tried: where the kernel
/// overcommits, such a reservation succeeds and the process is killed once its pages are written.
pub fn reserve_host<T>(len: usize, options: &HostOptions) -> Result<Vec<T>> {
    let needed = check_host_room::<T>(len)?;
    let mut vec = Vec::<T>::new();
    vec.try_reserve_exact(len).map_err(|_| host_out_of_memory(needed))?;
    if options.huge_pages {
        advise_huge_pages(&mut vec);
    }
    Ok(vec)
}

/// Types whose all-zero bytes are a valid value: the zero of [`zeroed_host`].
///
/// # Safety
/// Implement only for types of which every all-zero byte pattern is a valid value.
#[cfg(feature = "wgpu")]
pub(crate) unsafe trait ZeroBytes: Copy {}

// SAFETY: `Felt` is a `u64` in Montgomery form (zero bytes are `Felt::ZERO`, and the
// crate moves `Felt` memory as `u64` words everywhere).
#[cfg(feature = "wgpu")]
unsafe impl ZeroBytes for miden_crypto::Felt {}
// SAFETY: `Digest` is `repr(transparent)` over `[u64; 4]`, and zero words are a valid digest.
#[cfg(feature = "wgpu")]
unsafe impl ZeroBytes for crate::hash::Digest {}

/// `len` zero values, or [`GpuError::OutOfMemory`] as [`reserve_host`] says. The memory comes
/// zeroed from the allocator (for large vectors: fresh pages the kernel zero-fills when they are
/// first written), so no thread spends time writing zeros that downloads overwrite, and the
/// page faults happen where the results are first written, in parallel. Large vectors ask for
/// huge pages as [`advise_huge_pages`] says.
#[cfg(feature = "wgpu")]
pub(crate) fn zeroed_host<T: ZeroBytes>(len: usize, options: &HostOptions) -> Result<Vec<T>> {
    let needed = check_host_room::<T>(len)?;
    if len == 0 || core::mem::size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| host_out_of_memory(needed))?;
    // SAFETY: the layout has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(host_out_of_memory(needed));
    }
    if layout.size() >= HUGE_PAGES_FROM && options.huge_pages {
        advise_range(ptr as usize, layout.size());
    }
    // SAFETY: allocated by the global allocator with the layout of `len` values of `T`, every
    // byte zero, which `T: ZeroBytes` makes `len` valid values.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// The bytes `len` values of `T` need, or [`GpuError::OutOfMemory`] if that is more than the
/// machine's memory and swap, or more than the process's control groups leave below their
/// memory limits (less a margin, [`cgroup::Room::margin`]): where the kernel overcommits, such a
/// reservation succeeds and the process is killed once its pages are written.
///
/// Below the machine's memory alone a request always fits the machine: only above it is
/// `/proc/meminfo` read again for the swap, which can change (a commitment reserves dozens of
/// vectors, and reading the file for each delayed the first upload). Reservations from
/// [`CGROUP_CHECK_FROM`] bytes read the control groups' usage, which changes with every
/// allocation. Each reservation is compared with the room left when it is made; pages reserved
/// but not yet written do not count as used.
pub(crate) fn check_host_room<T>(len: usize) -> Result<u64> {
    let size = u64::try_from(core::mem::size_of::<T>()).unwrap_or(u64::MAX);
    let needed = u64::try_from(len).unwrap_or(u64::MAX).saturating_mul(size);
    if needed > host_memory()
        && meminfo_bytes(&["MemTotal:", "SwapTotal:"]).is_some_and(|total| needed > total)
    {
        return Err(host_out_of_memory(needed));
    }
    if needed >= CGROUP_CHECK_FROM {
        if let Some(room) = cgroup::room().filter(|room| needed > room.available()) {
            return Err(GpuError::OutOfMemory {
                memory: "host",
                needed,
                available: room.available(),
            });
        }
    }
    Ok(needed)
}

/// Reservations of at least this many bytes are checked against the control groups' memory
/// limits; smaller ones cannot be what tips a process over its limit by much.
const CGROUP_CHECK_FROM: u64 = 1 << 20;

/// The machine's memory (`MemTotal`, read once: it does not change), or 0 where it cannot be
/// read.
fn host_memory() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| meminfo_bytes(&["MemTotal:"]).unwrap_or(0))
}

fn host_out_of_memory(needed: u64) -> GpuError {
    GpuError::OutOfMemory {
        memory: "host",
        needed,
        available: meminfo_bytes(&["MemAvailable:"]).unwrap_or(0),
    }
}

/// The host memory a new allocation may take now: the machine's available memory
/// (`MemAvailable`), or the room the process's control groups leave below their memory limits
/// (less their margin, as [`reserve_host`] counts it) where that is less; `None` where neither
/// can be read (outside Linux).
pub fn available_host_memory() -> Option<u64> {
    let machine = meminfo_bytes(&["MemAvailable:"]);
    let group = cgroup::room().map(|room| room.available());
    match (machine, group) {
        (Some(machine), Some(group)) => Some(machine.min(group)),
        (machine, group) => machine.or(group),
    }
}

/// The most memory the process has held resident at once since it started (its high-water
/// mark, `VmHWM` in `/proc/self/status`), in bytes; `None` where the system does not report it
/// (outside Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// Reservations of at least this many bytes ask for transparent huge pages.
const HUGE_PAGES_FROM: usize = 32 << 20;

/// Asks the kernel to back the spare capacity of `vec` with transparent huge pages where it is
/// large ([`HUGE_PAGES_FROM`]; Linux, which in its common `madvise` mode gives them only when
/// asked). A backend's results are gigabytes of fresh memory:
/// faulted in 2 MiB at a time instead of 4 KiB, the downloads that fill them spend far less time
/// in the kernel.
fn advise_huge_pages<T>(vec: &mut Vec<T>) {
    let spare = vec.spare_capacity_mut();
    let (start, len) = (spare.as_mut_ptr() as usize, std::mem::size_of_val(spare));
    if len >= HUGE_PAGES_FROM {
        advise_range(start, len);
    }
}

/// Asks Linux for transparent huge pages for the `len` bytes at `start` (no effect elsewhere, or
/// where the kernel has none).
#[cfg(target_os = "linux")]
pub(crate) fn advise_range(start: usize, len: usize) {
    const PAGE: usize = 4096;
    let first = start.next_multiple_of(PAGE);
    let end = (start + len) / PAGE * PAGE;
    // SAFETY: a page-aligned range inside a live allocation; MADV_HUGEPAGE changes how its pages
    // are backed, not their contents. A kernel without THP refuses it, which is harmless.
    unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
}

/// Huge pages are asked for on Linux only.
#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_range(_start: usize, _len: usize) {}

/// The sum of the named `/proc/meminfo` fields in bytes, where they can be read (Linux).
fn meminfo_bytes(fields: &[&str]) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    fields
        .iter()
        .map(|field| {
            let line = info.lines().find(|line| line.starts_with(field))?;
            let kib = line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
            kib.checked_mul(1024)
        })
        .sum()
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use miden_crypto::Felt;
    use winter_math::FieldElement;

    use super::*;
    use crate::hash::Digest;

    #[test]
    fn zeroed_host_holds_zeros_of_the_length_asked() {
        // empty, small (heap) and large (fresh pages with the huge-page advice)
        for len in [0, 1, 1000, (HUGE_PAGES_FROM / 8) + 3] {
            let felts: Vec<Felt> = zeroed_host(len, &HostOptions::default()).expect("fits");
            assert_eq!(felts.len(), len);
            assert!(felts.iter().all(|x| *x == Felt::ZERO));
            let digests: Vec<Digest> = zeroed_host(len / 4, &HostOptions::default()).expect("fits");
            assert_eq!(digests.len(), len / 4);
            assert!(digests.iter().all(|d| *d == Digest::ZERO));
        }
    }

    #[test]
    fn zeroed_host_beyond_memory_is_out_of_memory() {
        match zeroed_host::<Felt>(usize::MAX / 16, &HostOptions::default()) {
            Err(GpuError::OutOfMemory { memory: "host", .. }) => {},
            other => panic!("expected OutOfMemory, got {:?}", other.map(|v| v.len())),
        }
    }
}
