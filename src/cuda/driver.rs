//! Thin RAII wrappers over the CUDA driver API (through cudarc's `result`/`sys` layers): status
//! conversion, device and pinned memory, streams and events (modules and launches: `launch`).
//!
//! cudarc's safe layer tracks events per allocation and synchronizes implicitly; the commit
//! pipeline orders its streams itself, so it uses these small owners instead: each frees its
//! handle on drop with its context bound, and every call's status becomes a [`GpuError`].

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

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

// DEVICE MEMORY
// ================================================================================================

/// The device bytes one committer's buffers hold on one GPU, and the most they have held at
/// once: every [`DeviceBuffer`] allocated through an [`Allocator`] counts here until it is
/// freed, whatever it serves (pipeline buffers, twiddle tables, resident polynomials, a stage's
/// working buffers).
#[derive(Debug, Default)]
pub(super) struct Gauge {
    held: AtomicU64,
    peak: AtomicU64,
}

impl Gauge {
    /// Bytes held now.
    pub(super) fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// The most bytes held at once.
    pub(super) fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst)
    }

    fn add(&self, bytes: u64) {
        let held = self.held.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(held, Ordering::SeqCst);
    }

    fn sub(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::SeqCst);
    }
}

/// Where a committer allocates on one GPU: the device's context and the committer's gauge.
pub(super) struct Allocator {
    pub ctx: Arc<CudaContext>,
    pub gauge: Arc<Gauge>,
}

/// A device allocation of `bytes` bytes, counted by its allocator's gauge, freed on drop.
pub(super) struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
    gauge: Arc<Gauge>,
}

impl DeviceBuffer {
    /// Allocates `bytes` (at least 1) on `alloc`'s device; out of memory is
    /// [`GpuError::OutOfMemory`].
    pub(super) fn new(alloc: &Allocator, bytes: usize) -> DriverResult<Self> {
        bind(&alloc.ctx)?;
        let bytes = bytes.max(1);
        match unsafe { result::malloc_sync(bytes) } {
            Ok(ptr) => {
                alloc.gauge.add(bytes as u64);
                Ok(Self { ptr, bytes, ctx: alloc.ctx.clone(), gauge: alloc.gauge.clone() })
            },
            Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                let available = result::mem_get_info().map(|(free, _)| free as u64).unwrap_or(0);
                Err(GpuError::OutOfMemory { memory: "device", needed: bytes as u64, available })
            },
            Err(e) => Err(device_error("cuMemAlloc", e)),
        }
    }

    /// Address of byte 0.
    pub(super) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Size in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            let _ = unsafe { result::free_sync(self.ptr) };
        }
        self.gauge.sub(self.bytes as u64);
    }
}

// SAFETY: the allocation is plain device memory owned by this value.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

/// A reusable device buffer that grows to the largest size asked of it.
#[derive(Default)]
pub(super) struct Scratch(Option<DeviceBuffer>);

impl Scratch {
    /// The address of a buffer of at least `bytes`, reallocated only when too small.
    pub(super) fn get(
        &mut self,
        alloc: &Allocator,
        bytes: usize,
    ) -> DriverResult<sys::CUdeviceptr> {
        match &self.0 {
            Some(buffer) if buffer.bytes() >= bytes => Ok(buffer.ptr()),
            _ => {
                self.0 = None; // free first: the old and new buffers need not fit together
                let buffer = DeviceBuffer::new(alloc, bytes)?;
                let ptr = buffer.ptr();
                self.0 = Some(buffer);
                Ok(ptr)
            },
        }
    }

    /// Bytes held now.
    pub(super) fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, DeviceBuffer::bytes)
    }

    /// Frees the buffer (the next `get` allocates anew).
    pub(super) fn release(&mut self) {
        self.0 = None;
    }

    /// Hands the buffer over to the caller (the next `get` allocates anew).
    pub(super) fn take(&mut self) -> Option<DeviceBuffer> {
        self.0.take()
    }
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

    /// Enqueues an asynchronous host-to-device copy.
    ///
    /// # Safety
    /// `src..src+bytes` must stay valid and unmodified until the copy completes, and `dst` must
    /// be a device range of at least `bytes`.
    pub(super) unsafe fn copy_htod(
        &self,
        dst: sys::CUdeviceptr,
        src: *const u8,
        bytes: usize,
    ) -> DriverResult<()> {
        check(
            sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), bytes, self.raw).result(),
            "cuMemcpyHtoDAsync",
        )
    }

    /// Enqueues an asynchronous device-to-host copy.
    ///
    /// # Safety
    /// `dst..dst+bytes` must stay valid and untouched by the host until the copy completes.
    pub(super) unsafe fn copy_dtoh(
        &self,
        dst: *mut u8,
        src: sys::CUdeviceptr,
        bytes: usize,
    ) -> DriverResult<()> {
        check(
            sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, self.raw).result(),
            "cuMemcpyDtoHAsync",
        )
    }

    /// Enqueues a copy between two devices' memory (or within one device).
    pub(super) fn copy_peer(
        &self,
        dst: sys::CUdeviceptr,
        dst_ctx: &Arc<CudaContext>,
        src: sys::CUdeviceptr,
        src_ctx: &Arc<CudaContext>,
        bytes: usize,
    ) -> DriverResult<()> {
        let status = if Arc::ptr_eq(dst_ctx, src_ctx) {
            unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.raw) }
        } else {
            unsafe {
                sys::cuMemcpyPeerAsync(
                    dst,
                    dst_ctx.cu_ctx(),
                    src,
                    src_ctx.cu_ctx(),
                    bytes,
                    self.raw,
                )
            }
        };
        check(status.result(), "cuMemcpyPeerAsync")
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
