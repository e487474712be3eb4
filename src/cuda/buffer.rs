//! Typed device memory: allocations that know their element type, length and GPU, and the
//! borrowed ranges of them that kernels and copies take.
//!
//! A [`DeviceBuffer<T>`] owns `len` elements of `T` on one GPU (its context), is counted by its
//! committer's [`Gauge`] and is freed on drop. [`DeviceSlice`] and [`DeviceSliceMut`] are
//! borrowed ranges of one, bounds-checked when cut ([`GpuError::Device`] rather than a panic), so
//! no code offsets raw device addresses: a kernel launch (`kernels`) or a copy (`driver::Stream`)
//! takes these views, and reads the raw address only where it hands it to the driver.
//!
//! cudarc's `CudaSlice` is not used: it allocates stream-ordered (`cuMemAllocAsync`, freed on
//! one stream), records an event on every use for its implicit synchronization and has no hook
//! for the gauge; the pipeline orders its three streams itself with explicit events.

use std::{
    marker::PhantomData,
    ops::{Bound, Range, RangeBounds},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use cudarc::driver::{
    result::{self, DriverError},
    sys, CudaContext,
};
use miden_crypto::Felt;

use super::{
    driver::{bind, check, device_error, refused, DriverResult, Stream},
    health::{driver_call, Health},
};
use crate::{error::GpuError, hash::Digest};

// ELEMENTS
// ================================================================================================

/// A type whose values live in device memory as plain bytes.
///
/// # Safety
/// Implementors are plain data: no padding, every bit pattern a valid value, alignment at most
/// 8 (device allocations and pinned slots are aligned far beyond that), so that bytes may be
/// copied between host and device memory freely.
pub(super) unsafe trait DeviceElement: Copy + Send + Sync + 'static {
    /// The CUDA type a kernel reads one word of this element as (`u64`, `u32` or `u8`); an
    /// element is one or more such words (what the kernels' signature test compares).
    #[cfg(test)]
    const CUDA_WORD: &'static str;
}

// SAFETY: plain integers.
unsafe impl DeviceElement for u8 {
    #[cfg(test)]
    const CUDA_WORD: &'static str = "u8";
}
// SAFETY: plain integers.
unsafe impl DeviceElement for u32 {
    #[cfg(test)]
    const CUDA_WORD: &'static str = "u32";
}
// SAFETY: plain integers.
unsafe impl DeviceElement for u64 {
    #[cfg(test)]
    const CUDA_WORD: &'static str = "u64";
}
// SAFETY: a `Felt` is its Montgomery word (size and alignment 8, asserted in `cuda`); the
// kernels read and write that word.
unsafe impl DeviceElement for Felt {
    #[cfg(test)]
    const CUDA_WORD: &'static str = "u64";
}
// SAFETY: `Digest` is `repr(transparent)` over `[u64; 4]`.
unsafe impl DeviceElement for Digest {
    #[cfg(test)]
    const CUDA_WORD: &'static str = "u64";
}

/// An element made of whole 64-bit words, which a kernel may read word by word.
///
/// # Safety
/// `size_of::<Self>() == 8 * WORDS` and the element is its words in order.
pub(super) unsafe trait Words: DeviceElement {
    /// 64-bit words per element.
    const WORDS: usize;
}

// SAFETY: one word.
unsafe impl Words for u64 {
    const WORDS: usize = 1;
}
// SAFETY: one Montgomery word.
unsafe impl Words for Felt {
    const WORDS: usize = 1;
}
// SAFETY: four words.
unsafe impl Words for Digest {
    const WORDS: usize = 4;
}

// GAUGE AND ALLOCATOR
// ================================================================================================

/// The device bytes one committer's buffers hold on one GPU, and the most they have held at
/// once: every [`DeviceBuffer`] allocated through an [`Allocator`] counts here until it is
/// freed, whatever it serves (pipeline buffers, twiddle tables, resident polynomials, kept FRI
/// layers, a stage's working buffers). A committer's gauge also counts into its GPU's gauge
/// (its parent), which every committer of the process on that GPU shares.
#[derive(Debug, Default)]
pub(super) struct Gauge {
    held: AtomicU64,
    peak: AtomicU64,
    parent: Option<Arc<Gauge>>,
}

impl Gauge {
    /// A gauge whose bytes also count in `parent`.
    pub(super) fn within(parent: Arc<Gauge>) -> Self {
        Self { parent: Some(parent), ..Self::default() }
    }

    /// Bytes held now.
    pub(super) fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// The most bytes held at once.
    pub(super) fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst)
    }

    /// Starts the peak again from the bytes held now.
    pub(super) fn reset_peak(&self) {
        self.peak.store(self.held(), Ordering::SeqCst);
    }

    fn add(&self, bytes: u64) {
        let held = self.held.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(held, Ordering::SeqCst);
        if let Some(parent) = &self.parent {
            parent.add(bytes);
        }
    }

    fn sub(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::SeqCst);
        if let Some(parent) = &self.parent {
            parent.sub(bytes);
        }
    }
}

/// Where a committer allocates on one GPU: the device's context, the committer's gauge and its
/// health (allocations pass through its fault injector; a lost device's memory is not freed).
pub(super) struct Allocator {
    pub ctx: Arc<CudaContext>,
    pub gauge: Arc<Gauge>,
    pub health: Arc<Health>,
}

// BUFFERS
// ================================================================================================

/// `len` elements of `T` on one GPU, counted by its allocator's gauge, freed on drop.
pub(super) struct DeviceBuffer<T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    /// Bytes allocated: `len` elements, at least 1 byte.
    bytes: usize,
    ctx: Arc<CudaContext>,
    gauge: Arc<Gauge>,
    health: Arc<Health>,
    _elements: PhantomData<T>,
}

impl<T: DeviceElement> DeviceBuffer<T> {
    /// Allocates `len` elements (at least 1 byte) on `alloc`'s device; out of memory is
    /// [`GpuError::OutOfMemory`].
    pub(super) fn new(alloc: &Allocator, len: usize) -> DriverResult<Self> {
        let needed = len.checked_mul(size_of::<T>()).ok_or(GpuError::OutOfMemory {
            memory: "device",
            needed: u64::MAX,
            available: 0,
        })?;
        bind(&alloc.ctx)?;
        let bytes = needed.max(1);
        // SAFETY: the context is bound; the driver allocates `bytes` bytes (at least 1) and returns
        // their address or an error.
        match driver_call!(alloc.health, Allocation, unsafe { result::malloc_sync(bytes) }) {
            Ok(ptr) => {
                alloc.gauge.add(bytes as u64);
                Ok(Self {
                    ptr,
                    len,
                    bytes,
                    ctx: alloc.ctx.clone(),
                    gauge: alloc.gauge.clone(),
                    health: alloc.health.clone(),
                    _elements: PhantomData,
                })
            },
            Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                let available = result::mem_get_info().map(|(free, _)| free as u64).unwrap_or(0);
                Err(GpuError::OutOfMemory { memory: "device", needed: bytes as u64, available })
            },
            Err(e) => Err(device_error("cuMemAlloc", e)),
        }
    }

    /// Elements held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every element, to read.
    pub(super) fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice { ptr: self.ptr, len: self.len, ctx: &self.ctx, _elements: PhantomData }
    }

    /// Every element, to write.
    pub(super) fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut { ptr: self.ptr, len: self.len, ctx: &self.ctx, _elements: PhantomData }
    }

    /// Elements `range`, to read; [`GpuError::Device`] if it exceeds the buffer.
    pub(super) fn slice(&self, range: impl RangeBounds<usize>) -> DriverResult<DeviceSlice<'_, T>> {
        self.as_slice().slice(range)
    }

    /// Elements `range`, to write; [`GpuError::Device`] if it exceeds the buffer.
    pub(super) fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> DriverResult<DeviceSliceMut<'_, T>> {
        self.as_slice_mut().into_slice(range)
    }
}

impl<T> Drop for DeviceBuffer<T> {
    /// Frees the memory; `cuMemFree` waits for the device work that may still use it. On a lost
    /// device the memory is left to the context: that work may never end.
    fn drop(&mut self) {
        if !self.health.is_lost() && bind(&self.ctx).is_ok() {
            // SAFETY: `ptr` is this value's allocation, freed once here; `cuMemFree` waits for the
            // device work that may still use it.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
        self.gauge.sub(self.bytes as u64);
    }
}

// SAFETY: the allocation is plain device memory owned by this value.
unsafe impl<T> Send for DeviceBuffer<T> {}
// SAFETY: shared references read the address and length alone; device writes go through `&mut`
// slices or kernels ordered by events.
unsafe impl<T> Sync for DeviceBuffer<T> {}

// SLICES
// ================================================================================================

/// A borrowed range of a [`DeviceBuffer`], to read (a kernel's `const T*`, a copy's source).
#[derive(Clone, Copy)]
pub(super) struct DeviceSlice<'a, T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: &'a Arc<CudaContext>,
    _elements: PhantomData<&'a [T]>,
}

/// A borrowed range of a [`DeviceBuffer`], to write (a kernel's `T*`, a copy's destination).
pub(super) struct DeviceSliceMut<'a, T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: &'a Arc<CudaContext>,
    _elements: PhantomData<&'a mut [T]>,
}

/// A range that a kernel of another GPU may read directly: its GPU's memory is open to that
/// GPU (peer access), or it is that GPU's own. Made by `Gpu::readable`.
#[derive(Clone, Copy)]
pub(super) struct PeerSlice<'a, T>(DeviceSlice<'a, T>);

impl<'a, T: DeviceElement> PeerSlice<'a, T> {
    /// `slice`, to be read by kernels of a GPU that may access its memory.
    ///
    /// # Safety
    /// Every GPU that launches a kernel with it must have peer access to `slice`'s GPU enabled
    /// (or be that GPU).
    pub(super) unsafe fn readable(slice: DeviceSlice<'a, T>) -> Self {
        Self(slice)
    }

    /// The device address of the first element (a unified address, valid on the peers).
    pub(super) fn device_ptr(&self) -> sys::CUdeviceptr {
        self.0.device_ptr()
    }
}

/// `range` within `len` elements, or [`GpuError::Device`] naming it.
fn bounds(range: impl RangeBounds<usize>, len: usize) -> DriverResult<Range<usize>> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(start), Some(end)) if start <= end && end <= len => Ok(start..end),
        _ => Err(refused(
            "device range",
            format!(
                "{:?}..{:?} out of bounds of {len} elements",
                range.start_bound(),
                range.end_bound()
            ),
        )),
    }
}

impl<'a, T: DeviceElement> DeviceSlice<'a, T> {
    /// Elements in the range.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The context of the GPU that holds the range.
    pub(super) fn ctx(&self) -> &'a Arc<CudaContext> {
        self.ctx
    }

    /// The device address of the first element, for the driver.
    pub(super) fn device_ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Elements `range` of this range; [`GpuError::Device`] if it exceeds it.
    pub(super) fn slice(self, range: impl RangeBounds<usize>) -> DriverResult<Self> {
        let Range { start, end } = bounds(range, self.len)?;
        Ok(Self { ptr: self.ptr + (start * size_of::<T>()) as u64, len: end - start, ..self })
    }

    /// The same memory as bytes (for transfers).
    pub(super) fn as_bytes(self) -> DeviceSlice<'a, u8> {
        DeviceSlice {
            ptr: self.ptr,
            len: self.len * size_of::<T>(),
            ctx: self.ctx,
            _elements: PhantomData,
        }
    }
}

impl<'a, T: Words> DeviceSlice<'a, T> {
    /// The same memory as 64-bit words (for kernels that gather words of any element).
    pub(super) fn as_words(self) -> DeviceSlice<'a, u64> {
        DeviceSlice {
            ptr: self.ptr,
            len: self.len * T::WORDS,
            ctx: self.ctx,
            _elements: PhantomData,
        }
    }
}

impl<'a, T: DeviceElement> DeviceSliceMut<'a, T> {
    /// Elements in the range.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The context of the GPU that holds the range.
    pub(super) fn ctx(&self) -> &'a Arc<CudaContext> {
        self.ctx
    }

    /// The device address of the first element, for the driver.
    pub(super) fn device_ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// A shorter-lived write view of the same range (to pass on while keeping this one).
    pub(super) fn reborrow(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut { ptr: self.ptr, len: self.len, ctx: self.ctx, _elements: PhantomData }
    }

    /// The same range, to read, for as long as this view was to live.
    pub(super) fn into_read(self) -> DeviceSlice<'a, T> {
        DeviceSlice { ptr: self.ptr, len: self.len, ctx: self.ctx, _elements: PhantomData }
    }

    /// Elements `range` of this range; [`GpuError::Device`] if it exceeds it.
    pub(super) fn into_slice(self, range: impl RangeBounds<usize>) -> DriverResult<Self> {
        let Range { start, end } = bounds(range, self.len)?;
        Ok(Self { ptr: self.ptr + (start * size_of::<T>()) as u64, len: end - start, ..self })
    }

    /// Elements `range` of this range, borrowed from it; [`GpuError::Device`] if it exceeds it.
    pub(super) fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> DriverResult<DeviceSliceMut<'_, T>> {
        self.reborrow().into_slice(range)
    }

    /// The elements before `mid` and those from it, two disjoint write views;
    /// [`GpuError::Device`] if `mid` exceeds the range.
    pub(super) fn split_at(self, mid: usize) -> DriverResult<(Self, Self)> {
        bounds(..mid, self.len)?;
        let high = Self {
            ptr: self.ptr + (mid * size_of::<T>()) as u64,
            len: self.len - mid,
            ctx: self.ctx,
            _elements: PhantomData,
        };
        Ok((Self { len: mid, ..self }, high))
    }

    /// The same memory as bytes (for transfers).
    pub(super) fn into_bytes(self) -> DeviceSliceMut<'a, u8> {
        DeviceSliceMut {
            ptr: self.ptr,
            len: self.len * size_of::<T>(),
            ctx: self.ctx,
            _elements: PhantomData,
        }
    }
}

// SCRATCH
// ================================================================================================

/// A reusable device buffer that grows to the largest length asked of it.
pub(super) struct Scratch<T>(Option<DeviceBuffer<T>>);

impl<T> Default for Scratch<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T: DeviceElement> Scratch<T> {
    /// A buffer of at least `len` elements, reallocated only when too small.
    pub(super) fn get(
        &mut self,
        alloc: &Allocator,
        len: usize,
    ) -> DriverResult<&mut DeviceBuffer<T>> {
        if self.0.as_ref().is_none_or(|buffer| buffer.len() < len) {
            self.0 = None; // free first: the old and new buffers need not fit together
            self.0 = Some(DeviceBuffer::new(alloc, len)?);
        }
        self.current_mut()
    }

    /// The buffer as last sized by [`Self::get`]; [`GpuError::Device`] if there is none.
    pub(super) fn current(&self) -> DriverResult<&DeviceBuffer<T>> {
        self.0.as_ref().ok_or_else(unsized_scratch)
    }

    /// The buffer as last sized by [`Self::get`], to write; [`GpuError::Device`] if there is
    /// none.
    pub(super) fn current_mut(&mut self) -> DriverResult<&mut DeviceBuffer<T>> {
        self.0.as_mut().ok_or_else(unsized_scratch)
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
    pub(super) fn take(&mut self) -> Option<DeviceBuffer<T>> {
        self.0.take()
    }
}

fn unsized_scratch() -> GpuError {
    refused("device scratch", "a device buffer was used before it was allocated")
}

// COPIES
// ================================================================================================

/// Copies between host memory, device ranges and peers, enqueued on a stream: the typed side of
/// the driver's streams.
impl Stream {
    /// Enqueues an asynchronous copy of `dst.len()` elements from host memory at `src` into
    /// `dst`.
    ///
    /// # Safety
    /// `src` must be valid for `dst.len()` elements and stay valid and unmodified until the copy
    /// completes.
    pub(super) unsafe fn copy_htod<T: DeviceElement>(
        &self,
        dst: DeviceSliceMut<'_, T>,
        src: *const T,
    ) -> DriverResult<()> {
        let bytes = dst.len() * size_of::<T>();
        let status = driver_call!(
            self.health(),
            Upload,
            sys::cuMemcpyHtoDAsync_v2(dst.device_ptr(), src.cast(), bytes, self.raw()).result()
        );
        check(status, "cuMemcpyHtoDAsync")
    }

    /// Enqueues an asynchronous copy of `src` into host memory at `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for `src.len()` elements and stay valid and untouched by the host
    /// until the copy completes.
    pub(super) unsafe fn copy_dtoh<T: DeviceElement>(
        &self,
        dst: *mut T,
        src: DeviceSlice<'_, T>,
    ) -> DriverResult<()> {
        let bytes = src.len() * size_of::<T>();
        let status = driver_call!(
            self.health(),
            Download,
            sys::cuMemcpyDtoHAsync_v2(dst.cast(), src.device_ptr(), bytes, self.raw()).result()
        );
        check(status, "cuMemcpyDtoHAsync")
    }

    /// Enqueues a copy of `src` into `dst`, on the same GPU or between two (a peer copy);
    /// [`GpuError::Device`] if their lengths differ. Both buffers must outlive the copy: their
    /// owners order their release after it (an event or a synchronization), as for a kernel.
    pub(super) fn copy_peer<T: DeviceElement>(
        &self,
        dst: DeviceSliceMut<'_, T>,
        src: DeviceSlice<'_, T>,
    ) -> DriverResult<()> {
        if dst.len() != src.len() {
            return Err(refused(
                "cuMemcpyPeerAsync",
                format!("a copy of {} elements into a range of {}", src.len(), dst.len()),
            ));
        }
        let bytes = src.len() * size_of::<T>();
        let (dst_ctx, src_ctx) = (dst.ctx(), src.ctx());
        let status = if Arc::ptr_eq(dst_ctx, src_ctx) {
            // SAFETY: both ranges lie in live allocations of `bytes` bytes (their slices'
            // promise), of one context.
            unsafe {
                sys::cuMemcpyDtoDAsync_v2(dst.device_ptr(), src.device_ptr(), bytes, self.raw())
            }
        } else {
            // SAFETY: both ranges lie in live allocations of `bytes` bytes (their slices'
            // promise), each in the live context named beside it.
            unsafe {
                sys::cuMemcpyPeerAsync(
                    dst.device_ptr(),
                    dst_ctx.cu_ctx(),
                    src.device_ptr(),
                    src_ctx.cu_ctx(),
                    bytes,
                    self.raw(),
                )
            }
        };
        check(status.result(), "cuMemcpyPeerAsync")
    }
}
