//! Host <-> device transfers through rings of pinned staging buffers.
//!
//! Pageable memory (the caller's columns, the result vectors) cannot be copied by DMA at full
//! speed, so every transfer goes through a small ring of pinned slots per GPU, reused across
//! calls: the host copies (with all cores, in streaming stores) into or out of one slot while the
//! copy engine moves the others. Registering each call's result vectors with the driver instead,
//! so that the DMA writes them directly, costs more than it saves: pinning and unpinning fresh
//! memory takes longer than copying it out of pinned slots. Downloads of several GPUs are
//! interleaved piece by piece so that every PCIe link is busy at once, and a piece may wait on a
//! device event (e.g. "rows of this chunk hashed"), so the LDE download overlaps hashing.
//! A destination in memory the committer keeps registered (LDE rows, leaves and nodes,
//! `result_pool`) is written by the DMA directly, with no slot and no host copy.

use std::{collections::VecDeque, sync::Arc, time::Instant};

use cudarc::driver::CudaContext;

use super::{
    buffer::{DeviceElement, DeviceSlice, DeviceSliceMut},
    driver::{bind, refused, DriverResult, Event, PinnedBuffer, Stream},
    health::Health,
};
use crate::host::{self, par_copy};

/// Bytes per pinned slot.
const SLOT_BYTES: usize = 32 << 20;
/// Slots per ring: up to this many pieces are in flight per GPU.
const SLOTS: usize = 4;

/// A GPU's ring of pinned slots, each with the event of the last transfer that used it.
pub(super) struct Ring {
    slots: Vec<PinnedBuffer>,
    done: Vec<Event>,
    /// The next slot to use.
    next: usize,
}

impl Ring {
    /// Allocates the ring on `ctx` (once per GPU; reused by every call), its events sharing
    /// `health`.
    pub(super) fn new(ctx: &Arc<CudaContext>, health: &Arc<Health>) -> DriverResult<Self> {
        let slots =
            (0..SLOTS).map(|_| PinnedBuffer::new(ctx, SLOT_BYTES)).collect::<DriverResult<_>>()?;
        let done = (0..SLOTS).map(|_| Event::new(ctx, health)).collect::<DriverResult<_>>()?;
        Ok(Self { slots, done, next: 0 })
    }
}

/// A host destination, exclusively owned by one transfer: `len` bytes in runs of `run` bytes
/// placed `stride` bytes apart (one run, `run == stride == len`, for a contiguous range).
#[derive(Clone, Copy)]
pub(super) struct HostDst {
    ptr: *mut u8,
    len: usize,
    run: usize,
    stride: usize,
    /// The range is registered with the driver: the DMA may write it directly.
    registered: bool,
}

// SAFETY: a HostDst is a unique range of a live allocation (see `HostDst::new`).
unsafe impl Send for HostDst {}
// SAFETY: shared references read the address and layout alone; the range is written only by the one
// download it was handed to.
unsafe impl Sync for HostDst {}

impl HostDst {
    /// # Safety
    /// `ptr..ptr+len` must be writable, stay valid until the transfer completes, and not be
    /// accessed by anything else meanwhile.
    pub(super) unsafe fn new(ptr: *mut u8, len: usize) -> Self {
        Self { ptr, len, run: len, stride: len, registered: false }
    }

    /// The same destination, in memory registered with the driver.
    ///
    /// # Safety
    /// Every run must lie in memory registered (portably) with the driver until the transfer
    /// completes.
    pub(super) unsafe fn registered(self) -> Self {
        Self { registered: true, ..self }
    }

    /// Whether the DMA writes this destination directly.
    fn is_direct(&self) -> bool {
        self.registered && self.is_contiguous()
    }

    /// `count` runs of `run` bytes, the first at `ptr`, each `stride` bytes after the last.
    ///
    /// # Safety
    /// Every run must be writable, stay valid until the transfer completes, and not be accessed
    /// by anything else meanwhile.
    pub(super) unsafe fn strided(ptr: *mut u8, run: usize, stride: usize, count: usize) -> Self {
        if run == stride {
            return Self::new(ptr, run * count);
        }
        Self { ptr, len: run * count, run, stride, registered: false }
    }

    fn is_contiguous(&self) -> bool {
        self.run == self.stride
    }

    /// Bytes per transfer piece: a slot, or as many whole runs as a slot holds.
    fn piece_bytes(&self) -> usize {
        if self.is_contiguous() {
            SLOT_BYTES
        } else {
            (SLOT_BYTES / self.run).max(1) * self.run
        }
    }

    /// The destination of source bytes `by..by + len` (whole runs unless contiguous).
    fn offset(self, by: usize, len: usize) -> Self {
        debug_assert!(by + len <= self.len);
        if self.is_contiguous() {
            // SAFETY: inside the range handed to `new`.
            return Self { ptr: unsafe { self.ptr.add(by) }, len, run: len, stride: len, ..self };
        }
        debug_assert!(by.is_multiple_of(self.run) && len.is_multiple_of(self.run));
        Self {
            // SAFETY: run `by / run` lies inside the runs handed to `strided`.
            ptr: unsafe { self.ptr.add(by / self.run * self.stride) },
            len,
            ..self
        }
    }
}

/// Longest run of a strided download (one slot): longer runs are the caller's to avoid.
pub(super) const MAX_RUN_BYTES: usize = SLOT_BYTES;

/// One device range to download into a host range of the same length.
pub(super) struct Download<'a> {
    /// The bytes on the GPU.
    src: DeviceSlice<'a, u8>,
    /// Destination on the host.
    dst: HostDst,
    /// Event the copy must wait for (the kernel that produces the data), if any.
    ready: Option<&'a Event>,
}

impl<'a> Download<'a> {
    /// Downloads `src` into `dst` once `ready` (if any) has passed; [`GpuError::Device`] if
    /// their sizes differ.
    pub(super) fn new<T: DeviceElement>(
        src: DeviceSlice<'a, T>,
        dst: HostDst,
        ready: Option<&'a Event>,
    ) -> DriverResult<Self> {
        let src = src.as_bytes();
        check_lengths(dst.len, src.len())?;
        Ok(Self { src, dst, ready })
    }
}

/// [`GpuError::Device`] unless a copy's destination of `dst` elements fits its source of `src`
/// exactly.
pub(super) fn check_lengths(dst: usize, src: usize) -> DriverResult<()> {
    if dst == src {
        return Ok(());
    }
    Err(refused("device copy", format!("a copy of {src} elements into a destination of {dst}")))
}

/// One GPU's side of a transfer: its context, copy stream and ring.
pub(super) struct Lane<'a> {
    pub ctx: &'a Arc<CudaContext>,
    pub stream: &'a Stream,
    pub ring: &'a mut Ring,
}

/// Copies `src` into `dst` (of the same length, else [`GpuError::Device`]) through the ring, on
/// `lane`'s stream; returns when every byte is staged (the DMA of the last slots may still be
/// running: order later work on the lane's stream or record an event on it).
pub(super) fn upload<T: DeviceElement>(
    lane: &mut Lane<'_>,
    dst: DeviceSliceMut<'_, T>,
    src: &[T],
) -> DriverResult<()> {
    check_lengths(dst.len(), src.len())?;
    let mut dst = dst.into_bytes();
    // SAFETY: a `DeviceElement` is plain bytes without padding.
    let src = unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), size_of_val(src)) };
    bind(lane.ctx)?;
    for (i, piece) in src.chunks(SLOT_BYTES).enumerate() {
        let slot = lane.ring.next;
        lane.ring.next = (slot + 1) % SLOTS;
        lane.ring.done[slot].synchronize()?; // the slot's previous transfer is finished
        let staging = lane.ring.slots[slot].as_mut_ptr();
        let at = i * SLOT_BYTES;
        let piece_dst = dst.slice_mut(at..at + piece.len())?;
        // SAFETY: the slot holds SLOT_BYTES >= piece.len() bytes and no transfer uses it now;
        // its bytes stay untouched until the slot's event has passed.
        unsafe {
            par_copy(staging, piece.as_ptr(), piece.len());
            lane.stream.copy_htod(piece_dst, staging)?;
        }
        lane.ring.done[slot].record(lane.stream)?;
    }
    Ok(())
}

/// Where the host thread spent a download: waiting for the GPUs (kernels the pieces depend on,
/// and the DMA) or copying out of the pinned slots. Copy time close to the whole means the host
/// copies, not the GPUs, bound the commitment.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DownloadStats {
    /// Bytes delivered to the host.
    pub bytes: usize,
    /// Of those, bytes the DMA wrote into registered memory directly.
    pub direct: usize,
    /// Time blocked on slot events.
    pub wait: std::time::Duration,
    /// Time copying from slots to the destinations.
    pub copy: std::time::Duration,
}

/// Runs every lane's downloads, interleaving the lanes piece by piece; returns when all bytes
/// are on the host.
pub(super) fn download(
    lanes: &mut [Lane<'_>],
    jobs: Vec<Vec<Download<'_>>>,
) -> DriverResult<DownloadStats> {
    let mut queues: Vec<VecDeque<Download<'_>>> = Vec::with_capacity(jobs.len());
    for lane_jobs in jobs {
        let mut queue = VecDeque::new();
        for job in lane_jobs {
            if job.dst.is_direct() {
                queue.push_back(job);
                continue;
            }
            let len = job.dst.len;
            let piece = job.dst.piece_bytes();
            for p in 0..len.div_ceil(piece) {
                let at = p * piece;
                let bytes = piece.min(len - at);
                queue.push_back(Download {
                    src: job.src.slice(at..at + bytes)?,
                    dst: job.dst.offset(at, bytes),
                    // only the first piece needs to wait: the stream keeps order
                    ready: if p == 0 { job.ready } else { None },
                });
            }
        }
        queues.push(queue);
    }
    let mut in_flight: Vec<VecDeque<(usize, HostDst)>> =
        lanes.iter().map(|_| VecDeque::new()).collect();
    let mut stats = DownloadStats::default();
    let mut direct = vec![false; lanes.len()];

    // Issue round-robin; when a lane's ring is full, finish its oldest piece first.
    while queues.iter().any(|q| !q.is_empty()) {
        for (lane_index, lane) in lanes.iter_mut().enumerate() {
            let Some(piece) = queues[lane_index].pop_front() else {
                continue;
            };
            if piece.dst.is_direct() {
                bind(lane.ctx)?;
                if let Some(ready) = piece.ready {
                    lane.stream.wait(ready)?;
                }
                // SAFETY: registered memory of the piece's length, exclusively this transfer's
                // until the lane's stream is synchronized below.
                unsafe { lane.stream.copy_dtoh(piece.dst.ptr, piece.src)? };
                direct[lane_index] = true;
                stats.bytes += piece.dst.len;
                stats.direct += piece.dst.len;
                continue;
            }
            if in_flight[lane_index].len() == SLOTS {
                finish_oldest(lane, &mut in_flight[lane_index], &mut stats)?;
            }
            bind(lane.ctx)?;
            let slot = lane.ring.next;
            lane.ring.next = (slot + 1) % SLOTS;
            if let Some(ready) = piece.ready {
                lane.stream.wait(ready)?;
            }
            // SAFETY: the slot is free (finished above or never used in this call) and holds at
            // least the piece's bytes (a piece is at most a slot).
            unsafe { lane.stream.copy_dtoh(lane.ring.slots[slot].as_mut_ptr(), piece.src)? };
            lane.ring.done[slot].record(lane.stream)?;
            in_flight[lane_index].push_back((slot, piece.dst));
        }
    }
    for ((lane, queue), direct) in lanes.iter_mut().zip(in_flight.iter_mut()).zip(direct) {
        while !queue.is_empty() {
            finish_oldest(lane, queue, &mut stats)?;
        }
        if direct {
            bind(lane.ctx)?;
            let start = Instant::now();
            lane.stream.synchronize()?;
            stats.wait += start.elapsed();
        }
    }
    Ok(stats)
}

/// Waits for the lane's oldest download piece and copies it to its host destination.
fn finish_oldest(
    lane: &mut Lane<'_>,
    queue: &mut VecDeque<(usize, HostDst)>,
    stats: &mut DownloadStats,
) -> DriverResult<()> {
    let (slot, dst) = queue.pop_front().expect("caller checks non-empty");
    bind(lane.ctx)?;
    let start = Instant::now();
    lane.ring.done[slot].synchronize()?;
    let synced = Instant::now();
    // SAFETY: the DMA into the slot is complete; dst is exclusively ours (HostDst::new).
    unsafe { par_scatter(dst, lane.ring.slots[slot].as_mut_ptr()) };
    stats.wait += synced - start;
    stats.copy += synced.elapsed();
    stats.bytes += dst.len;
    Ok(())
}

/// Copies `dst.len` bytes from `src` into the runs of `dst`, with all cores.
///
/// # Safety
/// `src` must be valid for `dst.len` bytes and overlap none of `dst`'s runs.
unsafe fn par_scatter(dst: HostDst, src: *const u8) {
    if dst.is_contiguous() {
        return par_copy(dst.ptr, src, dst.len);
    }
    host::par_scatter(dst.ptr, src, dst.run, dst.stride, dst.len / dst.run);
}
