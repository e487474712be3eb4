//! The shape of a commitment's work, computed on the host before anything is enqueued.
//!
//! A [`Plan`] holds what the kernels need to know about a request (sizes, source columns and
//! their mapping to output columns, scale factors, coset shifts, the hash); a [`Share`] is what
//! one GPU does (its output columns, its LDE rows and its Merkle blocks); [`Passes`] is how the
//! LDE is walked when the device memory budget (see `memory`) asks for streaming; a [`Footprint`]
//! is what one GPU's buffers hold for it, from which the budget picks the pass size. Keeping these
//! apart from the stages lets every stage take the same description of the work.

use miden_crypto::Felt;
use winter_math::{fft::permute_index, FieldElement, StarkField};

use super::{
    composition::CudaKeptEvaluations,
    tables::{self, twiddles_bytes, TwiddleKey},
};
use crate::{
    committer::{CommitRequest, PolyInput, RowHashing, Shape},
    error::{to_u32, Result},
    hash::HashFunction,
};

// PLAN
// ================================================================================================

/// Everything the kernels need to know about a request, computed on the host.
pub(super) struct Plan<'a> {
    pub(super) shape: Shape,
    pub(super) log_n: u32,
    pub(super) log_blowup: u32,
    /// Source columns (trace columns or composition components).
    pub(super) sources: Sources<'a>,
    /// Elements of each source column `m`, and its log2.
    pub(super) source_len: usize,
    pub(super) log_src: u32,
    /// Composition: output column j·k + c is component c's coefficient chunk j.
    pub(super) composition_components: Option<usize>,
    /// Per scale group (1 for a trace, one per composition column index j).
    pub(super) scales: Vec<Felt>,
    /// Base of the polynomials' power factor (1 for a trace, 7^-1 for a composition).
    pub(super) polys_base: Felt,
    /// Shift of the LDE domain folded into the coset bases (7 for a trace, 1 for a composition,
    /// whose coefficients already carry the offset).
    lde_shift: Felt,
    pub(super) hash: HashFunction,
    /// 0 for whole rows, else the partition size.
    pub(super) part: u32,
}

/// Where a commitment's source columns are.
#[derive(Clone, Copy)]
pub(super) enum Sources<'a> {
    /// On the host; `registered` where they lie in memory registered with the driver
    /// (`staged_sources`): they upload by DMA alone, not through the pinned slots.
    Host { columns: &'a [&'a [Felt]], registered: bool },
    /// On a GPU of the committer: a composition it evaluated, component after component.
    Device(&'a CudaKeptEvaluations),
}

impl<'a> Plan<'a> {
    /// The plan of `request`, whose dimensions are `shape`, its sources where `sources` says
    /// (the host columns of `request`, or the kept evaluations it names).
    pub(super) fn new(request: &CommitRequest<'a>, shape: Shape, sources: Sources<'a>) -> Self {
        let log_n = shape.poly_len.ilog2();
        let (source_count, source_len) = match sources {
            Sources::Host { columns, .. } => (columns.len(), columns[0].len()),
            Sources::Device(kept) => (kept.components, kept.ce_size),
        };
        let composition = match request.input {
            PolyInput::Trace { .. } => None,
            PolyInput::Composition { column_len, num_columns, .. }
            | PolyInput::KeptComposition { column_len, num_columns, .. } => {
                Some((column_len, num_columns))
            },
        };
        let (composition_components, scales, polys_base, lde_shift) = match composition {
            None => {
                let inv_n = Felt::new(shape.poly_len as u64).inv();
                (None, vec![inv_n], Felt::ONE, Felt::GENERATOR)
            },
            Some((column_len, num_columns)) => {
                // a_{j·n + r} = m^-1 · 7^-(j·n) · 7^-r · (iNTT output)
                let inv_m = Felt::new(source_len as u64).inv();
                let inv_shift = Felt::GENERATOR.inv();
                let step = inv_shift.exp(column_len as u64);
                let scales = (0..num_columns as u64).map(|j| inv_m * step.exp(j)).collect();
                (Some(source_count), scales, inv_shift, Felt::ONE)
            },
        };
        let part = partition_size(request.row_hashing);
        Self {
            shape,
            log_n,
            log_blowup: request.blowup.ilog2(),
            sources,
            source_len,
            log_src: source_len.ilog2(),
            composition_components,
            scales,
            polys_base,
            lde_shift,
            hash: request.hash,
            part,
        }
    }

    /// Source column, offset and scale group of output column `c`, given the index of the first
    /// source column this GPU uploaded.
    pub(super) fn col_src(&self, c: usize, first_source: usize) -> Result<[u32; 3]> {
        let word = |value: usize| to_u32(value, "a column source of a commitment");
        match self.composition_components {
            None => Ok([word(c - first_source)?, 0, 0]),
            Some(k) => {
                let (j, comp) = (c / k, c % k);
                let off = permute_index(1 << (self.log_src - self.log_n), j);
                Ok([word(comp)?, word(off)?, word(j)?])
            },
        }
    }

    /// The source columns a GPU with output columns `cols` uploads.
    pub(super) fn sources_for(&self, cols: &std::ops::Range<usize>) -> std::ops::Range<usize> {
        match self.composition_components {
            None => cols.clone(),
            Some(k) => 0..k,
        }
    }
}

impl Plan<'_> {
    /// Element counts of the buffers of the GPU doing `share` (of `gpus`).
    pub(super) fn footprint(&self, share: &Share, gpus: usize) -> Footprint {
        let (n, shape) = (self.shape.poly_len, &self.shape);
        let t_len = share.t.len();
        Footprint {
            source: self.sources_for(&share.cols).len() * self.source_len,
            polys: share.cols.len() * n,
            lde_per_coset: share.cols.len() * n,
            slab_per_coset: if gpus > 1 { shape.num_cols * t_len } else { 0 },
            rows_per_coset: t_len * shape.row_width,
            row_bytes: shape.row_width * 8,
            digests: shape.lde_len,
            polys_tables: self.scales.len() * tables::power_table_len(self.log_n),
            lde_tables: (self.scales.len() << self.log_blowup)
                * tables::power_table_len(self.log_n),
            col_src: share.cols.len() * 3,
            twiddles: [self.interpolation_twiddles(), self.lde_twiddles()],
        }
    }

    /// The twiddle table of the interpolation: the inverse transform of the source length.
    pub(super) fn interpolation_twiddles(&self) -> TwiddleKey {
        (self.log_src, true)
    }

    /// The twiddle table of the coset evaluations: the forward transform of the polynomial
    /// length.
    pub(super) fn lde_twiddles(&self) -> TwiddleKey {
        (self.log_n, false)
    }

    /// Power tables of the coset scaling, pass after pass (`cosets` cosets each): pass `p`'s
    /// tables start at `p · scales · cosets · power_table_len`.
    pub(super) fn coset_tables(&self, cosets: usize) -> Vec<u64> {
        let blowup = 1usize << self.log_blowup;
        let bases = tables::coset_bases(self.lde_shift, self.log_n + self.log_blowup, blowup);
        bases
            .chunks(cosets)
            .flat_map(|group| tables::power_tables(&self.scales, group, self.log_n, true))
            .collect()
    }
}

/// The kernels' `part`: 0 for whole rows, else the partition size in base elements.
pub(super) fn partition_size(row_hashing: RowHashing) -> u32 {
    match row_hashing {
        RowHashing::WholeRow => 0,
        RowHashing::Partitioned(size) => size.min(u32::MAX as usize) as u32,
    }
}

// FOOTPRINT
// ================================================================================================

/// Element counts of one GPU's buffers for a commitment, from which the bytes of any pass size
/// follow.
#[derive(Debug, Clone, Copy)]
pub(super) struct Footprint {
    /// Uploaded source evaluations.
    pub source: usize,
    /// This GPU's polynomials.
    pub polys: usize,
    /// This GPU's LDE columns, per coset.
    pub lde_per_coset: usize,
    /// Gathered rows (all columns of this GPU's rows; several GPUs only), per coset.
    pub slab_per_coset: usize,
    /// Row-major rows of this GPU, per coset.
    pub rows_per_coset: usize,
    /// Bytes of one coset's row-major row run on the host (its row width, in bytes).
    pub row_bytes: usize,
    /// Digests of the leaves and of the nodes (the LDE domain's rows), each.
    pub digests: usize,
    /// Power table entries of the polynomials' scaling.
    pub polys_tables: usize,
    /// Power table entries of the coset scaling, every pass's.
    pub lde_tables: usize,
    /// Column source entries (32-bit words).
    pub col_src: usize,
    /// The twiddle tables of the interpolation and of the LDE.
    pub twiddles: [TwiddleKey; 2],
}

/// Bytes of each pipeline buffer on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BufferSizes {
    pub source: usize,
    pub polys: usize,
    pub lde: usize,
    pub slab: usize,
    /// One pass's rows, twice over when there are several passes (the rows of one pass
    /// download while the next pass hashes into the other half).
    pub rows: usize,
    pub leaves: usize,
    pub nodes: usize,
    pub polys_tables: usize,
    pub lde_tables: usize,
    pub col_src: usize,
}

impl BufferSizes {
    /// The sizes in the order of `Buffers::bytes_each`.
    pub(super) fn in_order(&self) -> [usize; 10] {
        [
            self.source,
            self.polys,
            self.lde,
            self.slab,
            self.rows,
            self.leaves,
            self.nodes,
            self.polys_tables,
            self.lde_tables,
            self.col_src,
        ]
    }

    fn total(&self) -> u64 {
        self.in_order().iter().map(|&b| b as u64).sum()
    }
}

impl Footprint {
    /// Buffer bytes with `cosets` cosets per pass out of `blowup`.
    pub(super) fn sizes(&self, cosets: usize, blowup: usize) -> BufferSizes {
        let halves = if cosets < blowup { 2 } else { 1 };
        BufferSizes {
            source: self.source * 8,
            polys: self.polys * 8,
            lde: self.lde_per_coset * cosets * 8,
            slab: self.slab_per_coset * cosets * 8,
            rows: self.rows_per_coset * cosets * 8 * halves,
            leaves: self.digests * 32,
            nodes: self.digests * 32,
            polys_tables: self.polys_tables * 8,
            lde_tables: self.lde_tables * 8,
            col_src: self.col_src * 4,
        }
    }

    /// Device bytes of a pass of `cosets` cosets out of `blowup`: the buffers and the twiddle
    /// tables.
    pub(super) fn bytes(&self, cosets: usize, blowup: usize) -> u64 {
        self.sizes(cosets, blowup).total() + twiddles_bytes(&self.twiddles)
    }
}

// PASSES
// ================================================================================================

/// How the LDE is walked: `passes` passes of `cosets` cosets each (one pass of every coset
/// unless the device memory budget asks for streaming).
#[derive(Debug, Clone, Copy)]
pub(super) struct Passes {
    pub(super) cosets: usize,
    pub(super) log_cosets: u32,
    pub(super) count: usize,
}

impl Passes {
    /// `blowup / cosets` passes of `cosets` cosets each.
    pub(super) fn new(cosets: usize, blowup: usize) -> Self {
        Self { cosets, log_cosets: cosets.ilog2(), count: blowup / cosets }
    }

    /// First coset of pass `p`.
    pub(super) fn k0(&self, p: usize) -> usize {
        p * self.cosets
    }

    /// The last pass over the LDE of `plan` (there is at least one: `cosets` divides the
    /// blowup).
    pub(super) fn last<'p>(&self, plan: &'p Plan<'p>) -> Pass<'p> {
        Pass { plan, passes: *self, index: self.count - 1 }
    }

    /// The passes over the LDE of `plan`, in order.
    pub(super) fn each<'p>(&self, plan: &'p Plan<'p>) -> impl Iterator<Item = Pass<'p>> {
        let passes = *self;
        (0..passes.count).map(move |index| Pass { plan, passes, index })
    }
}

/// One pass over a commitment's LDE, as the stages on each GPU see it: the plan, how the LDE is
/// walked, and which pass this is.
#[derive(Clone, Copy)]
pub(super) struct Pass<'p> {
    pub(super) plan: &'p Plan<'p>,
    pub(super) passes: Passes,
    pub(super) index: usize,
}

impl<'p> Pass<'p> {
    /// The first pass over the LDE of `plan` (the one that step 1 extends the columns over).
    pub(super) fn first(plan: &'p Plan<'p>, passes: Passes) -> Self {
        Self { plan, passes, index: 0 }
    }

    /// Whether this is the last pass (the one after which the subtrees are built).
    pub(super) fn is_last(&self) -> bool {
        self.index + 1 == self.passes.count
    }

    /// The first coset of this pass.
    pub(super) fn k0(&self) -> usize {
        self.passes.k0(self.index)
    }
}

// SHARES
// ================================================================================================

/// What one GPU does: its output columns, its LDE rows (as a t-range: rows t·blowup + k) and its
/// Merkle blocks.
#[derive(Debug, Clone)]
pub(super) struct Share {
    pub(super) cols: std::ops::Range<usize>,
    pub(super) t: std::ops::Range<usize>,
    pub(super) blocks: std::ops::Range<usize>,
}

impl Share {
    /// The shares of `gpus` GPUs: the output columns and the 2^log_b Merkle blocks (with the
    /// t-values below them) split evenly between them.
    pub(super) fn for_gpus(shape: &Shape, gpus: usize, log_b: u32) -> Vec<Share> {
        let blocks = 1usize << log_b;
        split(shape.num_cols, gpus)
            .into_iter()
            .zip(split(blocks, gpus))
            .map(|(cols, blocks)| {
                let per_block = shape.poly_len >> log_b;
                Share { cols, t: blocks.start * per_block..blocks.end * per_block, blocks }
            })
            .collect()
    }
}

/// Splits `count` items into `parts` contiguous ranges whose sizes differ by at most one.
fn split(count: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    (0..parts).map(|p| count * p / parts..count * (p + 1) / parts).collect()
}

/// log2 of the number of Merkle blocks for `gpus` GPUs over 2^log_n t-values: one block for one
/// GPU, else at least 8 per GPU (so uneven splits stay within 1/8), and at most one per t-value.
pub(super) fn log_blocks(gpus: usize, log_n: u32) -> u32 {
    if gpus == 1 {
        0
    } else {
        ((gpus * 8).next_power_of_two().ilog2()).min(log_n)
    }
}
