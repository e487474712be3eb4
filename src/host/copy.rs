//! Copies of large buffers on the host (into and out of pinned staging memory) on a pool of
//! copy threads, with streaming stores.
//!
//! A GPU backend moves gigabytes between its staging buffers and the caller's memory, and those
//! copies, not the GPUs, can bound a commitment. An ordinary store first reads the line it
//! writes into the cache; a streaming (non-temporal) store writes the line whole, so a copy
//! makes two passes over memory instead of three, and leaves the cache to the other threads.
//!
//! The copies run on threads of their own ([`copy_pool`]), not on the caller's rayon pool, so
//! that they do not queue behind the caller's tasks (a prover's constraint evaluation, another
//! proof in a pool). On the caller's pool a copy in pieces of a few megabytes also kept every
//! thread of a large pool busy between pieces, many times the copy's own time in host CPU.

use std::sync::OnceLock;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use rayon::prelude::*;

/// Threads of the copy pool, at most: memory bandwidth, which a few threads of streaming
/// copies reach, bounds a copy, not cores.
const COPY_THREADS: usize = 16;

/// Bytes per parallel task, at most.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const TASK_BYTES: usize = 1 << 20;

/// Bytes per parallel task, at least.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const MIN_TASK_BYTES: usize = 64 << 10;

/// Bytes per task of a copy of `len` bytes on `threads` threads: at most [`TASK_BYTES`], and
/// small enough for two tasks per thread where that leaves them [`MIN_TASK_BYTES`] or more (a
/// trace column of 8 MiB in 1 MiB tasks kept only 8 of 16 threads busy).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn task_bytes(len: usize, threads: usize) -> usize {
    len.div_ceil(2 * threads).next_multiple_of(4096).clamp(MIN_TASK_BYTES, TASK_BYTES)
}

/// The process's copy threads (as many as the host has cores, up to [`COPY_THREADS`]), started
/// by the first copy; `None` where they could not be started, and copies run on the caller's
/// pool.
fn copy_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.min(COPY_THREADS))
            .thread_name(|i| format!("miden-gpu-copy-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `copy` on the copy threads (its parallel iterators on them) and returns its result: for
/// copies and conversions of large buffers on a proof's critical path, which on the caller's
/// pool would wait behind every task queued there (other proofs' constraint evaluations).
pub(crate) fn on_copy_pool<T: Send>(copy: impl FnOnce() -> T + Send) -> T {
    match copy_pool() {
        Some(pool) => pool.install(copy),
        None => copy(),
    }
}

/// Copies `len` bytes from `src` to `dst` on the copy threads.
///
/// # Safety
/// Both ranges must be valid for `len` bytes and must not overlap.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) unsafe fn par_copy(dst: *mut u8, src: *const u8, len: usize) {
    let (to, from) = (dst as usize, src as usize);
    on_copy_pool(|| {
        let task_len = task_bytes(len, rayon::current_num_threads());
        (0..len.div_ceil(task_len)).into_par_iter().for_each(|task| {
            let at = task * task_len;
            // SAFETY: bytes at..at + n of both ranges (see the function's contract).
            unsafe {
                stream_copy((to + at) as *mut u8, (from + at) as *const u8, task_len.min(len - at))
            }
        });
    });
}

/// Copies each `src` into its `dst` (of the same length) on the copy threads, the pairs side by
/// side and each as [`par_copy`].
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn copy_slices<T: Copy + Send + Sync>(pairs: Vec<(&mut [T], &[T])>) {
    for (dst, src) in &pairs {
        assert_eq!(dst.len(), src.len(), "copy between slices of different lengths");
    }
    on_copy_pool(|| {
        pairs.into_par_iter().for_each(|(dst, src)| {
            // SAFETY: two slices of `size_of_val(src)` bytes; a `&mut` slice overlaps no other
            // slice.
            unsafe { par_copy(dst.as_mut_ptr().cast(), src.as_ptr().cast(), size_of_val(src)) }
        })
    });
}

/// Copies `count` runs of `run` bytes, consecutive at `src`, to `dst`, `dst + stride`, ...,
/// on the copy threads.
///
/// # Safety
/// `src` must be valid for `run · count` bytes, every destination run writable, and no
/// destination run may overlap the source or another run.
#[cfg(feature = "cuda")]
pub(crate) unsafe fn par_scatter(
    dst: *mut u8,
    src: *const u8,
    run: usize,
    stride: usize,
    count: usize,
) {
    let (to, from) = (dst as usize, src as usize);
    let runs_per_task = (TASK_BYTES / run.max(1)).max(1);
    on_copy_pool(|| {
        (0..count).into_par_iter().with_min_len(runs_per_task).for_each(|i| {
            // SAFETY: run i of the source and of the destination (see the function's contract).
            unsafe { stream_copy((to + i * stride) as *mut u8, (from + i * run) as *const u8, run) }
        });
    });
}

/// memcpy of one thread, in streaming stores where the target has them (x86-64: SSE2, part of
/// its baseline).
///
/// # Safety
/// As `ptr::copy_nonoverlapping(src, dst, len)`.
#[cfg(all(target_arch = "x86_64", any(feature = "cuda", feature = "wgpu")))]
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    const LINE: usize = 64;
    // the bytes before the first whole cache line of `dst`, copied as usual
    let head = (dst as usize).wrapping_neg() % LINE;
    if len < head + LINE {
        return std::ptr::copy_nonoverlapping(src, dst, len);
    }
    std::ptr::copy_nonoverlapping(src, dst, head);
    let lines = (len - head) / LINE;
    for line in 0..lines {
        let at = head + line * LINE;
        for word in 0..LINE / 16 {
            let offset = at + 16 * word;
            // SAFETY: inside both ranges; the store is 16-byte aligned (`dst + head` is
            // line-aligned), the load may be unaligned.
            let value = _mm_loadu_si128(src.add(offset).cast::<__m128i>());
            _mm_stream_si128(dst.add(offset).cast::<__m128i>(), value);
        }
    }
    let done = head + lines * LINE;
    std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done);
    // streaming stores are weakly ordered: make them visible before the caller signals that
    // the copy is done (to a DMA engine or another thread)
    _mm_sfence();
}

#[cfg(all(not(target_arch = "x86_64"), any(feature = "cuda", feature = "wgpu")))]
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    std::ptr::copy_nonoverlapping(src, dst, len);
}

#[cfg(all(test, any(feature = "cuda", feature = "wgpu")))]
mod tests {
    use super::*;

    /// Bytes whose pattern repeats only every 64 KiB, so a byte copied to the wrong place shows.
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed ^ (i >> 8) as u8)).collect()
    }

    #[test]
    fn par_copy_copies_every_byte_at_any_alignment() {
        for (len, skew) in
            [(0, 0), (5, 3), (63, 1), (64, 0), (200, 17), (3 << 20, 9), (5_000_011, 61)]
        {
            let src = pattern(len + 64, 7);
            let mut dst = vec![0u8; len + 64];
            // SAFETY: both ranges hold `len` bytes after the skew and are distinct vectors.
            unsafe { par_copy(dst.as_mut_ptr().add(skew), src.as_ptr().add(64 - skew), len) };
            assert_eq!(&dst[skew..skew + len], &src[64 - skew..64 - skew + len], "len {len}");
            assert!(dst[..skew].iter().chain(&dst[skew + len..]).all(|&b| b == 0), "len {len}");
        }
    }

    #[test]
    fn tasks_keep_every_thread_busy_within_their_bounds() {
        // thread counts of small and large hosts, whatever this machine has
        for threads in [1, 2, 16, 64] {
            for len in [0, 1, 64 << 10, 3 << 20, 8 << 20, 32 << 20, 1 << 30] {
                let task = task_bytes(len, threads);
                let at = format!("{len} bytes on {threads} threads: {task}-byte tasks");
                assert!((MIN_TASK_BYTES..=TASK_BYTES).contains(&task), "{at}");
                assert_eq!(task % 4096, 0, "{at}");
                if len >= 2 * threads * MIN_TASK_BYTES {
                    assert!(len.div_ceil(task) >= threads, "{at}");
                }
            }
        }
    }

    #[test]
    fn copies_run_on_the_copy_threads_whatever_pool_calls_them() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let caller = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for outside in [true, false] {
            let names = std::sync::Mutex::new(std::collections::BTreeSet::new());
            let copy = || {
                on_copy_pool(|| {
                    assert_eq!(rayon::current_num_threads(), cores.min(COPY_THREADS));
                    (0..64).into_par_iter().for_each(|_| {
                        let name = std::thread::current().name().unwrap_or("").to_owned();
                        names.lock().unwrap().insert(name);
                    });
                })
            };
            if outside {
                copy();
            } else {
                caller.install(copy);
            }
            let names = names.into_inner().unwrap();
            assert!(names.iter().all(|n| n.starts_with("miden-gpu-copy-")), "{names:?}");
        }
    }

    #[test]
    fn copy_slices_copies_every_pair() {
        let sources: Vec<Vec<u8>> = [3 << 20, 0, 4097, 1 << 20]
            .iter()
            .zip(5..)
            .map(|(&len, seed)| pattern(len, seed))
            .collect();
        let mut targets: Vec<Vec<u8>> = sources.iter().map(|s| vec![0u8; s.len()]).collect();
        copy_slices(
            targets
                .iter_mut()
                .zip(&sources)
                .map(|(d, s)| (d.as_mut_slice(), s.as_slice()))
                .collect(),
        );
        assert_eq!(targets, sources);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn par_scatter_places_every_run() {
        for (run, stride, count) in [(8, 24, 1000), (584, 4672, 3001), (100, 100, 70_000)] {
            let src = pattern(run * count, 3);
            let mut dst = vec![0u8; stride * count];
            // SAFETY: the destination holds `count` strides; the source `run · count` bytes.
            unsafe { par_scatter(dst.as_mut_ptr(), src.as_ptr(), run, stride, count) };
            for i in 0..count {
                assert_eq!(&dst[i * stride..i * stride + run], &src[i * run..(i + 1) * run]);
                assert!(dst[i * stride + run..(i + 1) * stride].iter().all(|&b| b == 0));
            }
        }
    }
}
