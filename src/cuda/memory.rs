//! Device memory budget: how many LDE cosets one pass of the pipeline holds.
//!
//! The whole LDE of a commitment (`columns · n · blowup` elements, plus its row-major copy) is by
//! far the largest thing on a GPU. When it does not fit the budget (the committer's memory limit,
//! else the device's free memory), the pipeline streams it: each pass extends the polynomials
//! over a group of `c` cosets (`c` a power of two dividing the blowup), hashes those rows and
//! downloads them, and the next pass reuses the buffers. Polynomials, leaves and Merkle nodes
//! stay whole. Results do not depend on `c`.
//!
//! Everything a GPU state holds counts against the budget: the buffers (the small power and
//! column tables among them) and the cached twiddle tables, which are `n` words per transform
//! size and direction (64 MiB for the two tables of a 2^22 trace). What a call does not need is
//! freed when keeping it would exceed the budget. The other calls (DEEP, FRI, the single stages)
//! check their working buffers the same way with [`fit`]; every device buffer is counted by its
//! committer's gauge, whose peak never exceeds a memory limit.
//!
//! **One GPU, several committers.** Every committer of the process on a GPU counts into that
//! GPU's `SharedDevice` gauge (`shared_device`). With a memory limit, a call's budget is the limit less what the
//! GPU's gauge holds outside the calling committer's state: other committers' buffers, and the
//! polynomials and FRI layers every committer keeps for a proof's later steps. Without one, the
//! free memory the driver reports already leaves those out. Either way a call checks its budget
//! and allocates during its GPU's turn (`SharedDevice::turn`), so two committers never count
//! the same bytes as free: committers on one GPU take turns call by call, and the GPU's gauge
//! never exceeds the limit.

use super::{
    buffer::{Allocator, DeviceElement, Scratch},
    driver::{bind, check, DriverResult},
    gpu::{Buffers, Gpu, GpuState},
    plan::{BufferSizes, Footprint},
    tables::{twiddles_bytes, TwiddleKey},
    transfer::MAX_RUN_BYTES,
};
use crate::error::{GpuError, Result};

/// Device memory left to the driver and the compiled module when the budget is the device's
/// free memory.
const DRIVER_RESERVE: u64 = 512 << 20;

/// Room kept for the tables of a few kilobytes that the FRI phase uploads for one launch (its
/// folding constants and query indices).
const LAUNCH_TABLES: u64 = 1 << 20;

// PASSES
// ================================================================================================

/// Bytes `buffers` hold once a commitment needing `sizes` has grown them (none shrink).
fn held_with(buffers: &Buffers, sizes: &BufferSizes) -> u64 {
    buffers
        .bytes_each()
        .iter()
        .zip(sizes.in_order())
        .map(|(&held, need)| held.max(need) as u64)
        .sum()
}

/// The most cosets per pass (a power of two up to `blowup`) whose buffers and twiddle tables fit
/// every GPU's budget: `limit` bytes per GPU, or the device's free memory plus what the
/// committer already holds. What a GPU holds from earlier work (larger buffers, other twiddle
/// tables) is freed where keeping it would exceed the budget. [`GpuError::OutOfMemory`] if even
/// one coset per pass does not fit.
pub(super) fn cosets_per_pass(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    footprints: &[Footprint],
    blowup: usize,
    limit: Option<u64>,
) -> Result<usize> {
    let budgets = gpus
        .iter()
        .zip(states.iter())
        .map(|(gpu, state)| budget(gpu, state, limit))
        .collect::<DriverResult<Vec<u64>>>()?;
    let fits = |cosets: usize| {
        footprints.iter().zip(&budgets).all(|(f, &budget)| {
            let streamed = cosets < blowup;
            f.bytes(cosets, blowup) + LAUNCH_TABLES <= budget
                && !(streamed && f.row_bytes * cosets > MAX_RUN_BYTES)
        })
    };
    let mut cosets = blowup;
    while !fits(cosets) {
        if cosets == 1 {
            let needs = footprints
                .iter()
                .zip(&budgets)
                .map(|(f, &budget)| (f.bytes(1, blowup) + LAUNCH_TABLES, budget));
            let (needed, available) = needs
                .clone()
                .find(|(needed, budget)| needed > budget)
                .or(needs.max())
                .expect("at least one GPU");
            return Err(GpuError::OutOfMemory { memory: "device", needed, available });
        }
        cosets /= 2;
    }
    for ((state, f), &budget) in states.iter_mut().zip(footprints).zip(&budgets) {
        let sizes = f.sizes(cosets, blowup);
        let tables = state.twiddles_held() + state.missing_twiddle_bytes(&f.twiddles);
        if held_with(&state.buffers, &sizes) + tables + LAUNCH_TABLES > budget {
            state.release_all_but(&f.twiddles);
        }
    }
    Ok(cosets)
}

/// Grows every GPU's buffers to their sizes for passes of `cosets` cosets (the rows buffer only
/// where the rows come to the host: not with `rows_kept`), before a commitment queues any work:
/// growing a buffer frees the old one first, and a free waits for the device to idle, so a
/// buffer grown mid-pipeline would hold the host until the work queued before it ends (and the
/// downloads that the host then runs with it).
pub(super) fn grow(
    gpus: &[&Gpu],
    states: &mut [&mut GpuState],
    footprints: &[Footprint],
    cosets: usize,
    blowup: usize,
    rows_kept: bool,
) -> DriverResult<()> {
    fn grow_one<T: DeviceElement>(
        s: &mut Scratch<T>,
        a: &Allocator,
        bytes: usize,
    ) -> DriverResult<()> {
        match bytes / size_of::<T>() {
            0 => Ok(()),
            len => s.get(a, len).map(drop),
        }
    }
    for ((gpu, state), f) in gpus.iter().zip(states.iter_mut()).zip(footprints) {
        let mut sizes = f.sizes(cosets, blowup);
        if rows_kept {
            sizes.rows = 0;
        }
        let (buffers, alloc) = (&mut state.buffers, &gpu.alloc);
        grow_one(&mut buffers.source, alloc, sizes.source)?;
        grow_one(&mut buffers.polys, alloc, sizes.polys)?;
        grow_one(&mut buffers.lde, alloc, sizes.lde)?;
        grow_one(&mut buffers.slab, alloc, sizes.slab)?;
        grow_one(&mut buffers.rows, alloc, sizes.rows)?;
        grow_one(&mut buffers.leaves, alloc, sizes.leaves)?;
        grow_one(&mut buffers.nodes, alloc, sizes.nodes)?;
        grow_one(&mut buffers.polys_tables, alloc, sizes.polys_tables)?;
        grow_one(&mut buffers.lde_tables, alloc, sizes.lde_tables)?;
        grow_one(&mut buffers.col_src, alloc, sizes.col_src)?;
    }
    Ok(())
}

/// Checks that `needed` bytes of buffers, with the twiddle tables `twiddles`, fit one GPU's
/// budget (as [`cosets_per_pass`] counts it), freeing what the GPU holds from earlier work when
/// it would not fit beside them. [`GpuError::OutOfMemory`] if they do not fit at all.
pub(super) fn fit(
    gpu: &Gpu,
    state: &mut GpuState,
    needed: u64,
    twiddles: &[TwiddleKey],
    limit: Option<u64>,
) -> Result<()> {
    let budget = budget(gpu, state, limit)?;
    let buffers = needed + LAUNCH_TABLES;
    let tables = twiddles_bytes(twiddles);
    if buffers + tables > budget {
        return Err(GpuError::OutOfMemory {
            memory: "device",
            needed: buffers + tables,
            available: budget,
        });
    }
    if state.held() + state.missing_twiddle_bytes(twiddles) + buffers > budget {
        state.release_all_but(twiddles);
    }
    Ok(())
}

/// One GPU's budget: `limit` less what the process holds on the GPU outside this state (see
/// the module documentation), or its free memory plus what its state holds, less
/// [`DRIVER_RESERVE`].
fn budget(gpu: &Gpu, state: &GpuState, limit: Option<u64>) -> DriverResult<u64> {
    if let Some(limit) = limit {
        let outside = gpu.device.gauge.held().saturating_sub(state.held());
        return Ok(limit.saturating_sub(outside));
    }
    bind(&gpu.ctx)?;
    let (free, _) = check(cudarc::driver::result::mem_get_info(), "cuMemGetInfo")?;
    Ok((free as u64 + state.held()).saturating_sub(DRIVER_RESERVE))
}
