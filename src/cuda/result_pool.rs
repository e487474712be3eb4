//! Host memory for the large results (LDE rows, Merkle leaves and nodes), registered with the
//! driver once and lent to each commitment, so that the GPUs write the results into it by DMA.
//!
//! The rows are most of a commitment's result (5.4 GB of W1's 6.5 GB). Through pinned staging
//! slots a result costs a host copy and, in fresh memory, a page fault per page, inside the
//! GPU's turn; with several GPUs, or several proofs on one, that host work, not the GPUs, set
//! the pace. Registering a fresh vector for each call costs more than the copy it saves, so the
//! committer keeps the registered blocks: a result is lent from one ([`HostBuffer`]), and the
//! block comes back when it drops (a proof keeps its trees' leaves and nodes, for the openings,
//! until it ends). The first commitment of a size
//! registers its blocks (faulted in huge pages by several threads, then pinned: slow for
//! gigabytes of rows); later ones write straight into them.
//!
//! The blocks registered at once, by all the committers of the process, are bounded
//! ([`CudaOptions::pinned_rows_bytes`]): past it, or where the driver refuses, a result takes
//! the staging path into an ordinary vector.
//!
//! [`CudaOptions::pinned_rows_bytes`]: super::CudaOptions::pinned_rows_bytes

use std::{
    alloc::Layout,
    ptr::NonNull,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use cudarc::driver::{sys, CudaContext};

use super::{
    buffer::DeviceElement,
    driver::{bind, check, DriverResult},
};
use crate::host::{
    advise_huge_pages_range, check_host_room, default_prefault_threads, prefault, HostBuffer,
    LentBlock,
};

/// Blocks are whole huge pages (and so whole pages).
const BLOCK_ALIGN: usize = 2 << 20;

/// A registered block is reused for a request down to this fraction of its size (a larger
/// block would tie up memory a smaller commitment does not need).
const MIN_USE_DIVISOR: usize = 2;

/// Bytes registered by every pool of the process, lent or free.
static REGISTERED: AtomicU64 = AtomicU64::new(0);

/// Registered host blocks, lent for large results.
pub(super) struct ResultPool {
    ctx: Arc<CudaContext>,
    /// Bytes that may be registered at once by the process's pools (lent and free).
    limit: u64,
    /// Blocks registered and not lent.
    free: Mutex<Vec<Block>>,
}

/// A registered allocation.
struct Block {
    ptr: NonNull<u8>,
    bytes: usize,
}

// SAFETY: a block is plain host memory owned by whoever holds the value.
unsafe impl Send for Block {}
// SAFETY: shared references read the address and size alone; the block's bytes are written only by
// whoever holds it exclusively.
unsafe impl Sync for Block {}

impl ResultPool {
    /// A pool registering at most `limit` bytes, with `ctx` (the registration is portable: every
    /// context of the process may copy into the blocks).
    pub(super) fn new(ctx: Arc<CudaContext>, limit: u64) -> Arc<Self> {
        Arc::new(Self { ctx, limit, free: Mutex::default() })
    }

    /// `len` elements in a registered block, or `None` where the pool may not register one more
    /// (the caller stages through a vector). The values are whatever the block held: the caller
    /// overwrites them all.
    pub(super) fn take<T: DeviceElement>(self: &Arc<Self>, len: usize) -> Option<HostBuffer<T>> {
        let bytes = len.checked_mul(size_of::<T>())?.next_multiple_of(BLOCK_ALIGN);
        let block = self.reuse(bytes).or_else(|| self.register(bytes))?;
        let lent = Lent { block: Some(block), pool: self.clone() };
        // SAFETY: blocks are 2 MiB aligned, hold `bytes >= len · size_of::<T>()` and are
        // initialized (zeroed when allocated, then only written with elements); every bit
        // pattern is a valid `T` (`DeviceElement`).
        Some(unsafe { HostBuffer::lent(Box::new(lent), len) })
    }

    /// The smallest free block of at least `bytes` that is not too large for them.
    fn reuse(&self, bytes: usize) -> Option<Block> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let best = (free.iter().enumerate())
            .filter(|(_, b)| b.bytes >= bytes && b.bytes / MIN_USE_DIVISOR <= bytes)
            .min_by_key(|(_, b)| b.bytes)
            .map(|(i, _)| i)?;
        Some(free.swap_remove(best))
    }

    /// A new block of `bytes`, where the limit (after freeing this pool's unused blocks) and
    /// the host allow and the driver registers it.
    fn register(&self, bytes: usize) -> Option<Block> {
        let bytes_u64 = bytes as u64;
        let within_limit = |now: u64| now.checked_add(bytes_u64).filter(|&n| n <= self.limit);
        while REGISTERED.fetch_update(Ordering::SeqCst, Ordering::SeqCst, within_limit).is_err() {
            let block = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            self.release(block);
        }
        let block = self.allocate(bytes);
        if block.is_none() {
            REGISTERED.fetch_sub(bytes_u64, Ordering::SeqCst);
        }
        block
    }

    /// Allocates (zeroed) and registers `bytes`: in huge pages where the kernel has them,
    /// faulted in by several threads first (the driver's own faulting, one page at a time, is
    /// far slower for a large block).
    fn allocate(&self, bytes: usize) -> Option<Block> {
        check_host_room::<u8>(bytes).ok()?;
        let layout = Layout::from_size_align(bytes, BLOCK_ALIGN).ok()?;
        let _span = tracing::info_span!("cuda.register_rows_block", bytes).entered();
        // SAFETY: a non-zero size (callers ask for whole blocks).
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
        advise_huge_pages_range(ptr.as_ptr() as usize, bytes);
        drop(prefault(&[(ptr.as_ptr() as usize, bytes)], default_prefault_threads().max(2)));
        let block = Block { ptr, bytes };
        match register(&self.ctx, &block) {
            Ok(()) => Some(block),
            Err(e) => {
                tracing::info!(bytes, error = %e, "cuda: rows stage through pinned slots instead");
                // SAFETY: allocated above with this layout, never registered.
                unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
                None
            },
        }
    }

    /// Unregisters and frees `block`, and stops counting it.
    fn release(&self, block: Block) {
        REGISTERED.fetch_sub(block.bytes as u64, Ordering::SeqCst);
        if bind(&self.ctx).is_ok() {
            // SAFETY: registered by `register` and lent to no one.
            let _ = unsafe { sys::cuMemHostUnregister(block.ptr.as_ptr().cast()) };
        }
        let layout =
            Layout::from_size_align(block.bytes, BLOCK_ALIGN).expect("checked at allocation");
        // SAFETY: allocated by `allocate` with this layout.
        unsafe { std::alloc::dealloc(block.ptr.as_ptr(), layout) };
    }

    /// Takes back a lent block.
    fn give_back(&self, block: Block) {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).push(block);
    }
}

impl Drop for ResultPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        for block in free {
            self.release(block);
        }
    }
}

/// Registers `block` for DMA from every context (portable).
fn register(ctx: &Arc<CudaContext>, block: &Block) -> DriverResult<()> {
    bind(ctx)?;
    // SAFETY: the block is a live allocation of `bytes` bytes, unregistered before it is freed.
    check(
        unsafe {
            sys::cuMemHostRegister_v2(
                block.ptr.as_ptr().cast(),
                block.bytes,
                sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result(),
        "cuMemHostRegister",
    )
}

/// A block on loan, back to its pool on drop.
struct Lent {
    block: Option<Block>,
    pool: Arc<ResultPool>,
}

// SAFETY: the block's bytes are this loan's alone until it drops.
unsafe impl LentBlock for Lent {
    fn as_ptr(&self) -> NonNull<u8> {
        self.block.as_ref().expect("held until drop").ptr
    }

    fn bytes(&self) -> usize {
        self.block.as_ref().expect("held until drop").bytes
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.give_back(block);
        }
    }
}
