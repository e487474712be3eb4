//! Thin RAII wrappers over the CUDA driver API (through cudarc's `result`/`sys` layers): status
//! conversion, pinned memory, streams and events, and the copies a stream enqueues between typed
//! device ranges (device memory: `buffer`; modules and launches: `launch`, `kernels`).
//!
//! cudarc's safe layer (`CudaStream`, `CudaEvent`, `CudaSlice`) tracks events per allocation and
//! synchronizes implicitly; the commit pipeline orders its streams itself, so it uses these small
//! owners instead: each frees its handle on drop with its context bound, and every call's status
//! becomes a [`GpuError`]. Streams and events share their committer's [`Health`]: waits have its
//! deadline, and records and waits pass through its fault injector.

use std::sync::Arc;

use cudarc::driver::{
    result::{self, DriverError},
    sys, CudaContext,
};

use super::health::{self, driver_call, Health};
use crate::{backend::Backend, error::GpuError};

/// Result of a driver call, with the failing call named.
pub(super) type DriverResult<T> = Result<T, GpuError>;

/// Converts a driver status into [`GpuError::Device`], naming what failed.
pub(super) fn check<T>(result: Result<T, DriverError>, what: &str) -> DriverResult<T> {
    result.map_err(|e| device_error(what, e))
}

/// [`GpuError::Device`] for a failed driver call, or [`GpuError::DeviceLost`] for an error after
/// which the context is unusable ([`is_sticky`]).
pub(super) fn device_error(what: &str, e: DriverError) -> GpuError {
    let name = e.error_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let message = format!("{what}: {name} ({text})");
    if is_sticky(e.0) {
        GpuError::DeviceLost { backend: Backend::Cuda, message }
    } else {
        GpuError::Device { backend: Backend::Cuda, message }
    }
}

/// Whether the driver keeps reporting `status` for every later call in the context (a fault in
/// a kernel, an uncorrectable memory error, a context torn down): the process must start anew
/// to use the device.
fn is_sticky(status: sys::CUresult) -> bool {
    use sys::CUresult::*;
    matches!(
        status,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
            | CUDA_ERROR_DEINITIALIZED
            | CUDA_ERROR_DEVICE_UNAVAILABLE
            | CUDA_ERROR_EXTERNAL_DEVICE
    )
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
