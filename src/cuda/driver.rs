//! Thin RAII wrappers over the CUDA driver API (through cudarc's `result`/`sys` layers): status
//! conversion, pinned memory, streams and events, and the copies a stream enqueues between typed
//! device ranges (device memory: `buffer`; modules and launches: `launch`, `kernels`).
//!
//! cudarc's safe layer (`CudaStream`, `CudaEvent`, `CudaSlice`) tracks events per allocation and
//! synchronizes implicitly; the commit pipeline orders its streams itself, so it uses these small
//! owners instead: each frees its handle on drop with its context bound, and every call's status
//! becomes a [`GpuError`].

use std::sync::Arc;

use cudarc::driver::{
    result::{self, DriverError},
    sys, CudaContext,
};

use crate::{backend::Backend, error::GpuError};

/// Result of a driver call, with the failing call named.
pub(super) type DriverResult<T> = Result<T, GpuError>;

/// Converts a driver status into [`GpuError::Device`], naming what failed.
pub(super) fn check<T>(result: Result<T, DriverError>, what: &str) -> DriverResult<T> {
    result.map_err(|e| device_error(what, e))
}

/// [`GpuError::Device`] for a failed driver call.
pub(super) fn device_error(what: &str, e: DriverError) -> GpuError {
    let name = e.error_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    GpuError::Device { backend: Backend::Cuda, message: format!("{what}: {name} ({text})") }
}

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
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}

// SAFETY: plain host memory owned by this value; users order device access with events.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

// STREAMS AND EVENTS
// ================================================================================================

/// A non-blocking stream.
pub(super) struct Stream {
    raw: sys::CUstream,
    ctx: Arc<CudaContext>,
}

impl Stream {
    /// Creates a stream on `ctx` that does not synchronize with the legacy default stream.
    pub(super) fn new(ctx: &Arc<CudaContext>) -> DriverResult<Self> {
        bind(ctx)?;
        let raw = check(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            "cuStreamCreate",
        )?;
        Ok(Self { raw, ctx: ctx.clone() })
    }

    /// The raw handle.
    pub(super) fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// Makes later work on this stream wait for `event`.
    pub(super) fn wait(&self, event: &Event) -> DriverResult<()> {
        check(
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

    /// Blocks until all work on this stream is done.
    pub(super) fn synchronize(&self) -> DriverResult<()> {
        check(unsafe { result::stream::synchronize(self.raw) }, "cuStreamSynchronize")
    }

    /// The context the stream belongs to.
    pub(super) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

// SAFETY: stream handles may be used from any thread with their context bound.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

/// An event, with or without timing.
pub(super) struct Event {
    raw: sys::CUevent,
    ctx: Arc<CudaContext>,
}

impl Event {
    /// A synchronization-only event (no timestamps: cheaper to record and wait on).
    pub(super) fn new(ctx: &Arc<CudaContext>) -> DriverResult<Self> {
        Self::with_flags(ctx, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
    }

    /// An event that records a timestamp, for per-stage device times.
    pub(super) fn timed(ctx: &Arc<CudaContext>) -> DriverResult<Self> {
        Self::with_flags(ctx, sys::CUevent_flags::CU_EVENT_DEFAULT)
    }

    fn with_flags(ctx: &Arc<CudaContext>, flags: sys::CUevent_flags) -> DriverResult<Self> {
        bind(ctx)?;
        let raw = check(result::event::create(flags), "cuEventCreate")?;
        Ok(Self { raw, ctx: ctx.clone() })
    }

    /// Records the event at the current end of `stream`.
    pub(super) fn record(&self, stream: &Stream) -> DriverResult<()> {
        check(unsafe { result::event::record(self.raw, stream.raw) }, "cuEventRecord")
    }

    /// Blocks until the recorded work is done; reports any asynchronous fault before it.
    pub(super) fn synchronize(&self) -> DriverResult<()> {
        check(unsafe { result::event::synchronize(self.raw) }, "cuEventSynchronize")
    }

    /// Milliseconds from `start` to this event (both timed and complete).
    pub(super) fn elapsed_since(&self, start: &Event) -> DriverResult<f32> {
        check(unsafe { result::event::elapsed(start.raw, self.raw) }, "cuEventElapsedTime")
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

// SAFETY: event handles may be used from any thread with their context bound.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}
