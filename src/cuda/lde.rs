//! The LDE on one GPU: upload of the source columns, interpolation and the coset extension.
//!
//! The source columns go up through the pinned ring in groups; each group's inverse NTTs (DIF,
//! inverse twiddles) start as soon as its upload is done. `scale_coefficients` then writes the
//! natural-order polynomials (downloaded for the host), and forward NTTs (DIT), whose first pass
//! scales the bit-reversed coefficients by the powers of each coset's base as it loads them, turn
//! those into the evaluations over the cosets of a pass: the LDE buffer holds them column by
//! column, coset by coset. The kernels run on the GPU's compute stream, which an event orders
//! after each group's upload on the copy stream.

use miden_crypto::Felt;

use super::{
    buffer::{DeviceSlice, DeviceSliceMut},
    driver::{DriverResult, Event},
    gpu::{Gpu, GpuState},
    kernels::{self, Grid},
    plan::{Pass, Passes, Plan, Share, Sources},
    program::NTT_BLOCK,
    tables::{self, NttPass},
    timeline::{Stage, Timeline},
};
use crate::error::{to_u32, Result};

/// Trace columns uploaded per group (each group's transforms start once its upload is done).
const UPLOAD_GROUP_COLS: usize = 8;

/// Column source words per output column (source column, offset, scale group).
const COL_SRC_WORDS: usize = 3;

// UPLOAD AND INTERPOLATION
// ================================================================================================

/// One GPU's upload, interpolation and first-pass LDE, enqueued column group by column group:
/// each group's kernels wait only for its own upload, so the transforms of one group overlap the
/// host staging of the next (a composition is one group: it needs every component at once).
pub(super) struct Upload {
    /// (output columns, source columns) per group, local to this GPU.
    pub(super) groups: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    /// First source column of this GPU.
    first_source: usize,
    /// Recorded after each group's polynomials: the last recording is the one waited on.
    pub(super) polys_ready: Event,
    /// Recorded after each group's LDE: the other GPUs gather a group's rows once it is done,
    /// waiting on it before the next group records it again.
    pub(super) lde_ready: Event,
}

impl Upload {
    /// Uploads the small tables (column sources, power tables) and sizes the buffers.
    pub(super) fn new(
        gpu: &Gpu,
        state: &mut GpuState,
        plan: &Plan<'_>,
        share: &Share,
        passes: &Passes,
        coset_tables: &[u64],
    ) -> Result<Self> {
        let n = plan.shape.poly_len;
        let m = plan.source_len;
        let sources = plan.sources_for(&share.cols);
        let cols = share.cols.len();
        let col_src: Vec<[u32; 3]> =
            share.cols.clone().map(|c| plan.col_src(c, sources.start)).collect::<Result<_>>()?;
        let col_src = col_src.as_flattened();
        let polys_tables =
            tables::power_tables(&plan.scales, &[plan.polys_base], plan.log_n, false);
        state.twiddles.table(gpu, plan.interpolation_twiddles())?;
        state.twiddles.table(gpu, plan.lde_twiddles())?;
        let bufs = &mut state.buffers;
        let col_src_buffer = bufs.col_src.get(&gpu.alloc, col_src.len())?;
        gpu.upload_into(col_src_buffer.slice_mut(..col_src.len())?, col_src)?;
        let polys_tables_buffer = bufs.polys_tables.get(&gpu.alloc, polys_tables.len())?;
        gpu.upload_into(polys_tables_buffer.slice_mut(..polys_tables.len())?, &polys_tables)?;
        let lde_tables_buffer = bufs.lde_tables.get(&gpu.alloc, coset_tables.len())?;
        gpu.upload_into(lde_tables_buffer.slice_mut(..coset_tables.len())?, coset_tables)?;
        bufs.source.get(&gpu.alloc, sources.len() * m)?;
        bufs.polys.get(&gpu.alloc, cols * n)?;
        bufs.lde.get(&gpu.alloc, (cols << passes.log_cosets) * n)?;
        let groups = match plan.composition_components {
            Some(_) => vec![(0..cols, 0..sources.len())],
            None => (0..cols)
                .step_by(UPLOAD_GROUP_COLS)
                .map(|g| {
                    let group = g..(g + UPLOAD_GROUP_COLS).min(cols);
                    (group.clone(), group)
                })
                .collect(),
        };
        Ok(Self {
            groups,
            first_source: sources.start,
            polys_ready: gpu.event()?,
            lde_ready: gpu.event()?,
        })
    }

    /// Uploads group `index` (if this GPU has it), interpolates it and extends it over the
    /// cosets of the `first` pass.
    pub(super) fn enqueue_group(
        &self,
        gpu: &Gpu,
        state: &mut GpuState,
        first: Pass<'_>,
        index: usize,
        timeline: &mut Timeline,
    ) -> Result<()> {
        let Some((group, group_sources)) = self.groups.get(index).cloned() else {
            return Ok(());
        };
        let plan = first.plan;
        let n = plan.shape.poly_len;
        let m = plan.source_len;
        let source = state.buffers.source.current_mut()?;
        for i in group_sources.clone() {
            let dst = source.slice_mut(i * m..(i + 1) * m)?;
            let s = self.first_source + i;
            match plan.sources {
                Sources::Host { columns, registered: true } => {
                    // SAFETY: the caller of the commitment holds the block of registered memory
                    // the sources lie in, unchanged, until the call has ended (every transfer
                    // done).
                    unsafe { gpu.upload_registered(dst, columns[s])? };
                },
                Sources::Host { columns, registered: false } => {
                    gpu.upload(&mut state.ring, dst, columns[s])?;
                },
                // the evaluation that wrote them has ended (it synchronized)
                Sources::Device(kept) => {
                    gpu.copy.copy_peer(dst, kept.buffer.slice(s * m..(s + 1) * m)?)?;
                },
            }
        }
        let _uploaded = gpu.wait_for_uploads()?;
        timeline.mark(gpu, Stage::Wait)?;
        ntt(
            gpu,
            source.slice_mut(group_sources.start * m..group_sources.end * m)?,
            group_sources.len(),
            plan.log_src,
            state.twiddles.table(gpu, plan.interpolation_twiddles())?,
            true,
        )?;
        let bufs = &mut state.buffers;
        let sources = ColumnSources {
            input: bufs.source.current()?.as_slice(),
            col_src: bufs
                .col_src
                .current()?
                .slice(group.start * COL_SRC_WORDS..group.end * COL_SRC_WORDS)?,
            pow_tables: bufs.polys_tables.current()?.as_slice(),
            src_len: m as u64,
            src_stride: to_u32(m / n, "the stride of a source column")?,
        };
        let polys = bufs.polys.current_mut()?.slice_mut(group.start * n..group.end * n)?;
        scale(gpu, polys, &sources, plan.log_n, group.len())?;
        timeline.mark(gpu, Stage::Interpolate)?;
        self.polys_ready.record(&gpu.compute)?;
        coset_lde(gpu, state, first, group)?;
        timeline.mark(gpu, Stage::Lde)?;
        self.lde_ready.record(&gpu.compute)?;
        Ok(())
    }
}

// COSET LDE
// ================================================================================================

/// Enqueues the LDE of `pass` (every column of this GPU); returns its completion event.
pub(super) fn enqueue_pass_lde(
    gpu: &Gpu,
    state: &mut GpuState,
    share: &Share,
    pass: Pass<'_>,
    timeline: &mut Timeline,
) -> Result<Event> {
    timeline.mark(gpu, Stage::Wait)?;
    coset_lde(gpu, state, pass, 0..share.cols.len())?;
    timeline.mark(gpu, Stage::Lde)?;
    gpu.completion()
}

/// Evaluates local columns `group` over the cosets of `pass`: the first DIT pass scales the
/// bit-reversed coefficients by the powers of each coset's base as it loads them, the others run
/// in place. The LDE buffer then holds those columns over the pass's cosets (column by column,
/// coset by coset).
fn coset_lde(
    gpu: &Gpu,
    state: &mut GpuState,
    pass: Pass<'_>,
    group: std::ops::Range<usize>,
) -> DriverResult<()> {
    let (plan, passes) = (pass.plan, &pass.passes);
    let n = plan.shape.poly_len;
    let m = plan.source_len;
    // the pass's power tables: one per (scale group, coset of the pass)
    let pass_tables_len = plan.scales.len() * passes.cosets * tables::power_table_len(plan.log_n);
    let pass_tables = pass.index * pass_tables_len;
    let twiddles = state.twiddles.table(gpu, plan.lde_twiddles())?;
    let bufs = &mut state.buffers;
    let segments = group.len() << passes.log_cosets;
    let mut lde = bufs
        .lde
        .current_mut()?
        .slice_mut((group.start << passes.log_cosets) * n..(group.end << passes.log_cosets) * n)?;
    let sources = CosetSources {
        columns: ColumnSources {
            input: bufs.source.current()?.as_slice(),
            col_src: bufs
                .col_src
                .current()?
                .slice(group.start * COL_SRC_WORDS..group.end * COL_SRC_WORDS)?,
            pow_tables: bufs
                .lde_tables
                .current()?
                .slice(pass_tables..pass_tables + pass_tables_len)?,
            src_len: m as u64,
            src_stride: to_u32(m / n, "the stride of a source column")?,
        },
        log_slots: passes.log_cosets,
    };
    // a column has at least 2 coefficients (`CommitRequest::validate`), so there is a first pass
    let mut dit = tables::ntt_passes(plan.log_n).into_iter();
    if let Some(first) = dit.next() {
        coset_first_pass(gpu, lde.reborrow(), &sources, segments, plan.log_n, twiddles, first)?;
    }
    dit.try_for_each(|pass| {
        ntt_pass(gpu, lde.reborrow(), segments, plan.log_n, twiddles, pass, false)
    })
}

// KERNEL LAUNCHES
// ================================================================================================

/// In-place batched NTT of `segments` contiguous segments of 2^log_n elements (`data`).
pub(super) fn ntt(
    gpu: &Gpu,
    mut data: DeviceSliceMut<'_, Felt>,
    segments: usize,
    log_n: u32,
    twiddles: DeviceSlice<'_, Felt>,
    dif: bool,
) -> DriverResult<()> {
    let mut passes = tables::ntt_passes(log_n);
    if dif {
        passes.reverse();
    }
    passes
        .into_iter()
        .try_for_each(|pass| ntt_pass(gpu, data.reborrow(), segments, log_n, twiddles, pass, dif))
}

/// Threads per block of a pass over tiles of 2^(t_bits + c_bits) elements (two per thread at
/// least).
fn ntt_block(pass: &NttPass) -> u32 {
    NTT_BLOCK.min(1 << (pass.t_bits + pass.c_bits - 1))
}

/// Enqueues one `ntt_pass` over `segments` segments of 2^log_n elements.
fn ntt_pass(
    gpu: &Gpu,
    data: DeviceSliceMut<'_, Felt>,
    segments: usize,
    log_n: u32,
    twiddles: DeviceSlice<'_, Felt>,
    pass: NttPass,
    dif: bool,
) -> DriverResult<()> {
    let grid = Grid {
        blocks: to_u32(segments << (log_n - pass.t_bits - pass.c_bits), "blocks of an NTT pass")?,
        threads_per_block: ntt_block(&pass),
    };
    // SAFETY: `data` holds segments·2^log_n elements, the twiddle table 2^log_n.
    unsafe {
        kernels::ntt_pass(
            &gpu.kernels.ntt_pass,
            &gpu.compute,
            grid,
            data,
            twiddles,
            log_n,
            pass.b0,
            pass.t_bits,
            pass.c_bits,
            dif as u32,
        )
    }
}

/// Enqueues `scale_coefficients` over `cols` output columns of 2^log_n coefficients, read from
/// `sources` (their power tables: the polynomials' scaling): their natural-order polynomials.
fn scale(
    gpu: &Gpu,
    out: DeviceSliceMut<'_, Felt>,
    sources: &ColumnSources<'_>,
    log_n: u32,
    cols: usize,
) -> DriverResult<()> {
    let total = (cols << log_n) as u64;
    // a grid-stride loop over at most 132 · 64 blocks
    let grid = Grid { blocks: total.div_ceil(256).min(132 * 64) as u32, threads_per_block: 256 };
    // SAFETY: `out` holds the `cols` columns of 2^log_n elements, the column sources their
    // sources in the input and their scale groups in the power tables.
    unsafe {
        kernels::scale_coefficients(
            &gpu.kernels.scale_coefficients,
            &gpu.compute,
            grid,
            out,
            sources.input,
            sources.col_src,
            sources.pow_tables,
            log_n,
            tables::split_bits(log_n),
            sources.src_len,
            sources.src_stride,
            total,
        )
    }
}

/// Where the kernels of a group of output columns read them: the source columns' bit-reversed
/// coefficients (`src_len` each, `src_stride` apart in an output column), each output column's
/// source (column, offset, scale group), and the power tables that scale them.
struct ColumnSources<'a> {
    input: DeviceSlice<'a, Felt>,
    col_src: DeviceSlice<'a, u32>,
    pow_tables: DeviceSlice<'a, u64>,
    src_len: u64,
    src_stride: u32,
}

/// Where `coset_ntt_first_pass` reads a group's coefficients and powers, and the cosets it
/// evaluates each column over (2^log_slots).
struct CosetSources<'a> {
    columns: ColumnSources<'a>,
    log_slots: u32,
}

/// Enqueues `coset_ntt_first_pass` (DIT pass `pass`, the first) over `segments` segments of
/// 2^log_n elements of `out`: columns times 2^log_slots cosets.
fn coset_first_pass(
    gpu: &Gpu,
    out: DeviceSliceMut<'_, Felt>,
    sources: &CosetSources<'_>,
    segments: usize,
    log_n: u32,
    twiddles: DeviceSlice<'_, Felt>,
    pass: NttPass,
) -> DriverResult<()> {
    let grid = Grid {
        blocks: to_u32(segments << (log_n - pass.t_bits), "blocks of a coset NTT pass")?,
        threads_per_block: ntt_block(&pass),
    };
    // SAFETY: `out` holds segments·2^log_n elements, the column sources and power tables were
    // uploaded for these columns and cosets, the twiddle table holds 2^log_n.
    unsafe {
        kernels::coset_ntt_first_pass(
            &gpu.kernels.coset_ntt_first_pass,
            &gpu.compute,
            grid,
            out,
            sources.columns.input,
            sources.columns.col_src,
            sources.columns.pow_tables,
            twiddles,
            log_n,
            pass.t_bits,
            sources.log_slots,
            tables::split_bits(log_n),
            sources.columns.src_len,
            sources.columns.src_stride,
        )
    }
}
