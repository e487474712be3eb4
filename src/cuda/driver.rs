//! Thin RAII wrappers over the CUDA driver API (through cudarc's `result`/`sys` layers): pinned
//! memory, streams and events, and the copies a stream enqueues between typed
//! device ranges (device memory: `buffer`; modules and launches: `launch`, `kernels`).
//!
//! cudarc's safe layer (`CudaStream`, `CudaEvent`, `CudaSlice`) tracks events per allocation and
//! synchronizes implicitly; the commit pipeline orders its streams itself, so it uses these small
//! owners instead: each frees its handle on drop with its context bound, and every call's status
//! becomes a [`GpuError`](crate::GpuError) (`status`). Streams and events share their committer's [`Health`]: waits have its
//! deadline, and records and waits pass through its fault injector.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use super::health::{self, driver_call, Health};
pub(super) use super::status::{check, device_error, refused, DriverResult};

/// Binds `ctx` to the calling thread (driver calls act on the current context).
pub(super) fn bind(ctx: &Arc<CudaContext>) -> DriverResult<()> {
    check(ctx.bind_to_thread(), "cuCtxSetCurrent")
}

// PINNED HOST MEMORY
// ================================================================================================

/// Page-locked host memory (portable across contexts), freed on drop.
pub(super) struct PinnedBuffer {
    ptr: *mut u8,
    ctx: Arc<CudaContext>,
}

impl PinnedBuffer {
    /// Allocates `bytes` of page-locked memory, readable at full speed by the host (not
    /// write-combined: downloads are read back by the CPU).
    pub(super) fn new(ctx: &Arc<CudaContext>, bytes: usize) -> DriverResult<Self> {
        bind(ctx)?;
        let ptr = check(
            // SAFETY: the context is bound; the driver returns a page-locked block of `bytes` bytes
            // or an error.
            unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) },
            "cuMemHostAlloc",
        )?;
        Ok(Self { ptr: ptr.cast(), ctx: ctx.clone() })
    }

    /// The first byte.
    pub(super) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: `ptr` is this value's block, freed once here with its context bound.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}

// SAFETY: plain host memory owned by this value; users order device access with events.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared references read the address alone; the block's bytes are reached through raw
// pointers whose users order their accesses with events.
unsafe impl Sync for PinnedBuffer {}

// STREAMS AND EVENTS
// ================================================================================================

/// A non-blocking stream.
pub(super) struct Stream {
    raw: sys::CUstream,
    ctx: Arc<CudaContext>,
    health: Arc<Health>,
}

impl Stream {
    /// Creates a stream on `ctx` that does not synchronize with the legacy default stream.
    pub(super) fn new(ctx: &Arc<CudaContext>, health: &Arc<Health>) -> DriverResult<Self> {
        bind(ctx)?;
        let raw = check(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            "cuStreamCreate",
        )?;
        Ok(Self { raw, ctx: ctx.clone(), health: health.clone() })
    }

    /// The raw handle.
    pub(super) fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// Makes later work on this stream wait for `event`.
    pub(super) fn wait(&self, event: &Event) -> DriverResult<()> {
        check(
            // SAFETY: the stream and the event are live handles of this value and of `event`.
            unsafe {
                result::stream::wait_event(
                    self.raw,
                    event.raw,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            },
            "cuStreamWaitEvent",
        )
    }

    /// Blocks until all work on this stream is done, within the wait deadline.
    pub(super) fn synchronize(&self) -> DriverResult<()> {
        // SAFETY: the stream is live while `self` is.
        health::wait(&self.health, "cuStreamSynchronize", || unsafe {
            sys::cuStreamQuery(self.raw)
        })
    }

    /// [`Self::synchronize`], never struck by the fault injector: the recovery after a failed
    /// call.
    pub(super) fn drain(&self) -> DriverResult<()> {
        // SAFETY: the stream is live while `self` is.
        health::drain(&self.health, "draining a stream", || unsafe { sys::cuStreamQuery(self.raw) })
    }

    /// The context the stream belongs to.
    pub(super) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The health of the stream's committer.
    pub(super) fn health(&self) -> &Health {
        &self.health
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: `raw` is this value's stream, destroyed once here with its context bound (the
            // driver lets its queued work finish).
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

// SAFETY: stream handles may be used from any thread with their context bound.
unsafe impl Send for Stream {}
// SAFETY: the driver serializes calls on one stream handle from several threads.
unsafe impl Sync for Stream {}

/// An event, with or without timing.
pub(super) struct Event {
    raw: sys::CUevent,
    ctx: Arc<CudaContext>,
    health: Arc<Health>,
}

impl Event {
    /// A synchronization-only event (no timestamps: cheaper to record and wait on).
    pub(super) fn new(ctx: &Arc<CudaContext>, health: &Arc<Health>) -> DriverResult<Self> {
        Self::with_flags(ctx, health, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
    }

    /// An event that records a timestamp, for per-stage device times.
    pub(super) fn timed(ctx: &Arc<CudaContext>, health: &Arc<Health>) -> DriverResult<Self> {
        Self::with_flags(ctx, health, sys::CUevent_flags::CU_EVENT_DEFAULT)
    }

    fn with_flags(
        ctx: &Arc<CudaContext>,
        health: &Arc<Health>,
        flags: sys::CUevent_flags,
    ) -> DriverResult<Self> {
        bind(ctx)?;
        let raw = check(result::event::create(flags), "cuEventCreate")?;
        Ok(Self { raw, ctx: ctx.clone(), health: health.clone() })
    }

    /// Records the event at the current end of `stream`.
    pub(super) fn record(&self, stream: &Stream) -> DriverResult<()> {
        // SAFETY: the event and the stream are live handles of `self` and `stream`.
        let status = driver_call!(self.health, Record, unsafe {
            result::event::record(self.raw, stream.raw)
        });
        check(status, "cuEventRecord")
    }

    /// Blocks until the recorded work is done, within the wait deadline; reports any
    /// asynchronous fault before it.
    pub(super) fn synchronize(&self) -> DriverResult<()> {
        // SAFETY: the event is live while `self` is.
        health::wait(&self.health, "cuEventSynchronize", || unsafe { sys::cuEventQuery(self.raw) })
    }

    /// Milliseconds from `start` to this event (both timed and complete).
    pub(super) fn elapsed_since(&self, start: &Event) -> DriverResult<f32> {
        // SAFETY: both events are live handles of `self` and `start`.
        check(unsafe { result::event::elapsed(start.raw, self.raw) }, "cuEventElapsedTime")
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: `raw` is this value's event, destroyed once here with its context bound.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

// SAFETY: event handles may be used from any thread with their context bound.
unsafe impl Send for Event {}
// SAFETY: the driver serializes calls on one event handle from several threads.
unsafe impl Sync for Event {}
