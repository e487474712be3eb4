//! Faulting in the pages of large result vectors from background threads while the GPUs
//! compute, so that the copies that fill them run at memory speed.

/// The spare capacity of `vec` as a byte range (start address, length), for [`prefault`].
pub(crate) fn spare_bytes<T>(vec: &mut Vec<T>) -> (usize, usize) {
    let spare = vec.spare_capacity_mut();
    (spare.as_mut_ptr() as usize, std::mem::size_of_val(spare))
}

/// The default thread count of [`prefault`]: a quarter of the host's cores, at most 4: more
/// threads fault no faster and contend with the copies out of pinned staging. The commitment
/// starts them once its inputs are staged: beside the upload's copies they compete for the same
/// memory and slow the upload many times over. Started after it, they fault pages in while the
/// GPUs compute, which shortens most the commitments whose host copies of the LDE rows bound
/// them (RPX's, whose hashing is short).
pub fn default_prefault_threads() -> usize {
    std::thread::available_parallelism().map_or(0, |cores| (cores.get() / 4).min(4))
}

/// Background threads faulting in memory; joined on drop.
pub(crate) struct Prefault(Vec<std::thread::JoinHandle<()>>);

impl Drop for Prefault {
    fn drop(&mut self) {
        for thread in self.0.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Starts faulting in the byte `ranges` (of freshly reserved result vectors) from `threads`
/// background threads (none for 0), front first, with Linux's `MADV_POPULATE_WRITE`: the kernel
/// maps zeroed pages and no byte is written from user space, so copies into the ranges may run
/// meanwhile.
///
/// A GPU backend's results (gigabytes of LDE rows) reach the host through copies whose speed is
/// bound by the page faults and zeroing of fresh memory; done while the GPUs compute, they
/// leave the copies at memory speed, which matters most where several GPUs download at once.
/// The guard must be dropped before the vectors are freed.
pub(crate) fn prefault(ranges: &[(usize, usize)], threads: usize) -> Prefault {
    const STEP: usize = 64 << 20;
    let steps: Vec<(usize, usize)> = ranges
        .iter()
        .flat_map(|&(start, len)| {
            (0..len.div_ceil(STEP)).map(move |i| (start + i * STEP, STEP.min(len - i * STEP)))
        })
        .collect();
    let steps = std::sync::Arc::new(steps);
    let threads = (0..threads)
        .map(|i| {
            let steps = steps.clone();
            std::thread::spawn(move || {
                for &(start, len) in steps.iter().skip(i).step_by(threads) {
                    populate(start, len);
                }
            })
        })
        .collect();
    Prefault(threads)
}

#[cfg(target_os = "linux")]
fn populate(start: usize, len: usize) {
    const PAGE: usize = 4096;
    let first = start.next_multiple_of(PAGE);
    let end = (start + len) / PAGE * PAGE;
    if end > first {
        // SAFETY: a page-aligned range inside a live allocation (see `prefault`);
        // MADV_POPULATE_WRITE only maps pages, zero-filled where new, and changes no contents.
        unsafe {
            libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_POPULATE_WRITE)
        };
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_start: usize, _len: usize) {}
