//! The one interface every backend implements: [`GpuCommitter`].
//!
//! A commitment request is expressed over **base field columns only**. An extension-field
//! segment (quadratic or cubic) is split by the prover integration into its base components
//! (column `j`, component `c` becomes base column `j·k + c`): the LDE is linear over the base
//! field, and Winterfell hashes extension rows as their flattened base elements, so a backend
//! that handles base columns reproduces every segment bit for bit.
//!
//! One call goes from host evaluations to polynomials, LDE rows, row hashes and the Merkle tree,
//! so a GPU backend keeps the data on the device from upload to tree and downloads only what
//! the prover needs (coefficients, LDE rows, tree nodes).
//!
//! The folder holds this layer whole: the trait and its commitment request and result types
//! here, and the requests and results of the proof's later device steps beside it ([`deep`],
//! [`fri`], [`grind`]), the domain check they share, the polynomials a backend keeps
//! ([`ResidentPolys`]), the stage times it reports ([`StageTimes`]), and the request checks
//! every backend makes first (`checks`).

mod checks;
pub mod composition;
pub mod deep;
pub(crate) mod domain;
pub mod fri;
pub mod grind;
mod resident;
mod stage_times;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use checks::GpuRequestChecks;
pub(crate) use checks::{check_lde_rows, check_leaves};
pub use resident::ResidentPolys;
pub use stage_times::StageTimes;

use std::{fmt, sync::Arc};

use miden_crypto::Felt;

use self::{
    composition::{CompositionRequest, KeptEvaluations},
    deep::{CombineRequest, EvaluateRequest},
    domain::lde_domain_len,
    fri::{FoldingChannel, FriLayers, FriRequest},
    grind::GrindRequest,
};
use crate::{
    backend::Backend,
    error::{GpuError, Result},
    hash::{Digest, HashFunction},
    host::{self, DeviceHold, HostBuffer},
};

/// Width of one segment of Winterfell's `RowMatrix` (`DEFAULT_SEGMENT_WIDTH`): LDE rows are
/// padded to a multiple of this many base elements.
pub const SEGMENT_WIDTH: usize = 8;

// REQUEST
// ================================================================================================

/// Where the polynomials of a segment come from.
#[derive(Debug, Clone, Copy)]
pub enum PolyInput<'a> {
    /// Evaluations of each base column over the trace domain (size `n`, no offset), as in
    /// `ColMatrix::interpolate_columns`. Every column has `n` elements.
    Trace {
        /// The base columns.
        columns: &'a [&'a [Felt]],
    },
    /// Evaluations of the composition polynomial over the constraint-evaluation domain
    /// (size `m`, offset `Felt::GENERATOR`), one slice per base component, as in
    /// `CompositionPoly::new`: each component is interpolated with the offset and its first
    /// `num_columns · column_len` coefficients are cut into `num_columns` polynomials. The
    /// output base column `j·k + c` is chunk `j` of component `c` (`k = components.len()`).
    Composition {
        /// One slice of `m` evaluations per base component.
        components: &'a [&'a [Felt]],
        /// Length of each composition column (the trace length `n`).
        column_len: usize,
        /// Number of composition columns.
        num_columns: usize,
    },
    /// [`PolyInput::Composition`], its evaluations where [`GpuCommitter::evaluate_composition`]
    /// left them: a backend that evaluated them reads them there; any other reads them to the
    /// host first ([`KeptEvaluations::read`]).
    KeptComposition {
        /// The evaluations over the constraint-evaluation domain.
        evaluations: &'a dyn KeptEvaluations,
        /// Length of each composition column (the trace length `n`).
        column_len: usize,
        /// Number of composition columns.
        num_columns: usize,
    },
}

impl<'a> PolyInput<'a> {
    /// The source slices on the host: the trace's columns or the composition's components
    /// (none for kept evaluations).
    #[cfg(feature = "cuda")]
    pub(crate) fn sources(&self) -> &'a [&'a [Felt]] {
        match *self {
            PolyInput::Trace { columns } => columns,
            PolyInput::Composition { components, .. } => components,
            PolyInput::KeptComposition { .. } => &[],
        }
    }

    /// The same input read from `sources` (as many slices, of the same lengths) instead.
    #[cfg(feature = "cuda")]
    pub(crate) fn with_sources<'b>(&self, sources: &'b [&'b [Felt]]) -> PolyInput<'b> {
        debug_assert_eq!(sources.len(), self.sources().len());
        match *self {
            PolyInput::Trace { .. } => PolyInput::Trace { columns: sources },
            PolyInput::Composition { column_len, num_columns, .. }
            | PolyInput::KeptComposition { column_len, num_columns, .. } => {
                PolyInput::Composition { components: sources, column_len, num_columns }
            },
        }
    }

    /// The polynomials' coefficients, computed on the host with Winterfell's FFT: the CPU
    /// backend's interpolation, and a GPU backend's for inputs its device cannot transform.
    /// Kept evaluations are read to the host first (an error of that read is returned).
    pub fn interpolate_on_host(&self) -> Result<Vec<Vec<Felt>>> {
        Ok(match *self {
            PolyInput::Trace { columns } => host::interpolate_columns(columns),
            PolyInput::Composition { components, column_len, num_columns } => {
                host::interpolate_composition(components, column_len, num_columns)
            },
            PolyInput::KeptComposition { evaluations, column_len, num_columns } => {
                let components = composition::read_components(evaluations)?;
                let slices: Vec<&[Felt]> = components.iter().map(Vec::as_slice).collect();
                host::interpolate_composition(&slices, column_len, num_columns)
            },
        })
    }
}

/// `commit` of `request` with its kept evaluations read to the host first (a composition
/// input), for a backend that does not hold them; any other request as it is.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn commit_from_host<T>(
    request: &CommitRequest<'_>,
    commit: impl FnOnce(&CommitRequest<'_>) -> Result<T>,
) -> Result<T> {
    let PolyInput::KeptComposition { evaluations, column_len, num_columns } = request.input else {
        return commit(request);
    };
    let components = composition::read_components(evaluations)?;
    let slices: Vec<&[Felt]> = components.iter().map(Vec::as_slice).collect();
    let input = PolyInput::Composition { components: &slices, column_len, num_columns };
    commit(&CommitRequest { input, ..*request })
}

/// How each LDE row is hashed into its Merkle leaf (Winterfell's `commit_to_rows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowHashing {
    /// Leaf = `hash_elements(row)`.
    WholeRow,
    /// Leaf = `merge_many([hash_elements(chunk) for chunk in row.chunks(size)])`, `size` in base
    /// elements; applied even when the row fits in one chunk, as Winterfell does.
    Partitioned(usize),
}

/// One segment commitment to compute.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The polynomials' source.
    pub input: PolyInput<'a>,
    /// LDE blowup factor (power of two, at least 2).
    pub blowup: usize,
    /// How rows are hashed into leaves.
    pub row_hashing: RowHashing,
    /// The hash function for leaves and tree.
    pub hash: HashFunction,
}

/// The validated dimensions of a [`CommitRequest`]. Every product of them that a commitment
/// stores fits in a `usize`: `lde_len · row_width` (the LDE's elements) and `num_cols · poly_len`
/// (the polynomials' coefficients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Polynomial length `n` (trace length).
    pub poly_len: usize,
    /// LDE rows `n · blowup`.
    pub lde_len: usize,
    /// Base columns of the output (polynomials and LDE columns).
    pub num_cols: usize,
    /// Base elements per stored LDE row (`num_cols` rounded up to [`SEGMENT_WIDTH`]).
    pub row_width: usize,
}

impl CommitRequest<'_> {
    /// Checks the request and returns its dimensions; every backend calls this first. Sizes are
    /// computed with checked arithmetic: dimensions whose products overflow are a typed error
    /// naming them ([`GpuError::DomainTooLarge`], [`GpuError::InvalidComposition`],
    /// [`GpuError::SizeOverflow`]).
    pub fn validate(&self) -> Result<Shape> {
        if self.blowup < 2 || !self.blowup.is_power_of_two() {
            return Err(GpuError::InvalidBlowup(self.blowup));
        }
        if let RowHashing::Partitioned(0) = self.row_hashing {
            return Err(GpuError::InvalidPartition);
        }
        let (poly_len, num_cols) = match self.input {
            PolyInput::Trace { columns } => (check_columns(columns)?, columns.len()),
            PolyInput::Composition { .. } | PolyInput::KeptComposition { .. } => {
                let (m, components, column_len, num_columns) = match self.input {
                    PolyInput::Composition { components, column_len, num_columns } => {
                        (check_columns(components)?, components.len(), column_len, num_columns)
                    },
                    PolyInput::KeptComposition { evaluations, column_len, num_columns } => {
                        let m = evaluations.ce_size();
                        if evaluations.components() == 0 {
                            return Err(GpuError::ZeroColumns);
                        }
                        if m < 2 || !m.is_power_of_two() {
                            return Err(GpuError::TraceLengthNotPowerOfTwo(m));
                        }
                        (m, evaluations.components(), column_len, num_columns)
                    },
                    PolyInput::Trace { .. } => unreachable!("matched above"),
                };
                if column_len < 2 || !column_len.is_power_of_two() {
                    return Err(GpuError::TraceLengthNotPowerOfTwo(column_len));
                }
                // the coefficients the columns take: at most the evaluations (a product that
                // overflows takes more than any slice holds)
                let needed = num_columns.checked_mul(column_len);
                if num_columns == 0 || needed.is_none_or(|needed| needed > m) {
                    return Err(GpuError::InvalidComposition {
                        evaluations: m,
                        columns: num_columns,
                        column_len,
                    });
                }
                let num_cols =
                    num_columns.checked_mul(components).ok_or(GpuError::SizeOverflow {
                        what: "composition base columns",
                        count: num_columns,
                        size: components,
                    })?;
                (column_len, num_cols)
            },
        };
        let lde_len = lde_domain_len(poly_len, self.blowup)?;
        let overflow = |what, count, size| GpuError::SizeOverflow { what, count, size };
        let row_width = num_cols.checked_next_multiple_of(SEGMENT_WIDTH).ok_or(overflow(
            "LDE row width",
            num_cols,
            1,
        ))?;
        lde_len.checked_mul(row_width).ok_or(overflow("LDE rows", lde_len, row_width))?;
        num_cols.checked_mul(poly_len).ok_or(overflow("polynomials", num_cols, poly_len))?;
        Ok(Shape { poly_len, lde_len, num_cols, row_width })
    }
}

/// Checks that there is at least one column and all have one power-of-two length; returns it.
fn check_columns(columns: &[&[Felt]]) -> Result<usize> {
    let first = columns.first().ok_or(GpuError::ZeroColumns)?;
    let n = first.len();
    if let Some((column, c)) = columns.iter().enumerate().find(|(_, c)| c.len() != n) {
        return Err(GpuError::ColumnLengthMismatch { column, expected: n, actual: c.len() });
    }
    if n < 2 || !n.is_power_of_two() {
        return Err(GpuError::TraceLengthNotPowerOfTwo(n));
    }
    Ok(n)
}

// RESULT
// ================================================================================================

/// LDE rows in Winterfell's `RowMatrix` layout: row-major base elements, each row padded with
/// zeros to `row_width` (a multiple of Winterfell's segment width, 8); the first `num_cols` are the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdeRows {
    /// `num_rows · row_width` base elements (a vector, or memory a backend lent and takes back
    /// when the rows drop).
    pub data: HostBuffer<Felt>,
    /// Stored elements per row.
    pub row_width: usize,
    /// Meaningful elements per row (base columns).
    pub num_cols: usize,
}

impl LdeRows {
    /// Number of rows (none where `row_width` is 0).
    pub fn num_rows(&self) -> usize {
        self.data.len().checked_div(self.row_width).unwrap_or(0)
    }

    /// The `num_cols` base elements of row `i`.
    ///
    /// # Panics
    /// If row `i` is not in `data`, as slice indexing does.
    pub fn row(&self, i: usize) -> &[Felt] {
        let start = i * self.row_width;
        &self.data[start..start + self.num_cols]
    }
}

/// Everything a segment commitment produces.
#[derive(Debug, Clone)]
pub struct Commitment {
    /// Coefficients of each output base column (`num_cols` vectors of `poly_len`); empty where
    /// they stay on the device instead ([`Self::resident`]).
    pub polys: Vec<Vec<Felt>>,
    /// The LDE over the LDE domain (`poly_len · blowup` rows, natural order, offset
    /// `Felt::GENERATOR`).
    pub lde: LdeRows,
    /// Row hashes, one per LDE row: the Merkle leaves (a vector, or memory a backend lent).
    pub leaves: HostBuffer<Digest>,
    /// Merkle nodes in Winterfell's layout: `nodes.len() == leaves.len()`, `nodes[1]` the root,
    /// `nodes[0]` unused (zero) (a vector, or memory a backend lent). Where the tree stays in the
    /// backend's memory ([`Self::kept_tree`]), `leaves` is empty and `nodes` holds nodes 0 and 1
    /// alone.
    pub nodes: HostBuffer<Digest>,
    /// The polynomials kept in the backend's memory (and not in [`Self::polys`]), when asked for
    /// with [`Keep::polys`] and the backend could keep them.
    pub resident: Option<ResidentPolys>,
    /// The LDE rows kept in the backend's memory, when asked for with [`Keep::rows`] and the
    /// backend could keep them; [`Self::lde`] then holds no rows (its widths stay set).
    pub kept_rows: Option<Arc<dyn KeptRows>>,
    /// The leaves and nodes kept in the backend's memory, when asked for with [`Keep::tree`] and
    /// the backend could keep them.
    pub kept_tree: Option<Arc<dyn KeptTree>>,
}

impl Commitment {
    /// The Merkle root.
    pub fn root(&self) -> Digest {
        self.nodes[1]
    }
}

/// What a commitment leaves in the backend's memory instead of returning it to the host
/// ([`GpuCommitter::commit_keeping`]); by default nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keep {
    /// The polynomials, for the DEEP composition ([`GpuCommitter::evaluate_polys`] and
    /// [`GpuCommitter::combine_polys`] read them there).
    pub polys: bool,
    /// The LDE rows, for a prover that reads only the queried ones ([`KeptRows::read`]): none of
    /// the LDE is copied to the host.
    pub rows: bool,
    /// The Merkle tree, for a prover that reads only the root and the queried paths
    /// ([`KeptTree::read`]): no leaf, and no node but the root, is copied to the host.
    pub tree: bool,
}

/// LDE rows in a backend's memory, read there: only the rows asked for come back. A backend's
/// later steps that read the rows where they are ([`GpuCommitter::evaluate_composition`]) find
/// their own type through `Any`.
pub trait KeptRows: std::any::Any + Send + Sync + fmt::Debug {
    /// The rows at `positions` (each below the LDE's row count), `num_cols` base elements each
    /// (the row width's padding left out), equal to the rows [`GpuCommitter::commit`] returns.
    fn read(&self, positions: &[usize]) -> Result<Vec<Vec<Felt>>>;
}

/// A commitment's Merkle tree in a backend's memory, read there: only the digests asked for come
/// back.
pub trait KeptTree: Send + Sync + fmt::Debug {
    /// Leaves of the tree (the LDE's rows; a power of two, at least 2).
    fn num_leaves(&self) -> usize;

    /// The leaves at `leaves` and the nodes at `nodes` (Winterfell's layout: each index from 1 to
    /// below [`Self::num_leaves`]), equal to those [`GpuCommitter::commit`] returns; an index out
    /// of range is [`GpuError::RowOutOfRange`].
    fn read(&self, leaves: &[usize], nodes: &[usize]) -> Result<(Vec<Digest>, Vec<Digest>)>;
}

// THE TRAIT
// ================================================================================================

/// A backend that computes segment commitments: CPU (the oracle), wgpu, CUDA.
///
/// Implementations must be bit-exact with Winterfell's `DefaultTraceLde` /
/// `DefaultConstraintCommitment`: the shared parity harness in `tests/` checks every one.
pub trait GpuCommitter: Send + Sync {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// A human-readable name of the device(s) doing the work.
    fn device_name(&self) -> String;

    /// Interpolates, extends, hashes and builds the Merkle tree of one segment.
    fn commit(&self, request: &CommitRequest<'_>) -> Result<Commitment>;

    /// [`Self::commit`], leaving in device memory what `keep` says where the backend can and its
    /// memory budget allows: the polynomials ([`Commitment::resident`], [`Commitment::polys`]
    /// then empty), the LDE rows ([`Commitment::kept_rows`], [`Commitment::lde`] then empty) and
    /// the Merkle tree ([`Commitment::kept_tree`], [`Commitment::leaves`] then empty).
    /// What is kept is not copied to the host. Otherwise (and by default) the same as
    /// [`Self::commit`].
    fn commit_keeping(&self, request: &CommitRequest<'_>, keep: Keep) -> Result<Commitment> {
        let _ = keep;
        self.commit(request)
    }

    /// Every resident polynomial at the DEEP composition's two out-of-domain points (see
    /// [`crate::committer::deep`]): for column `c` and point `p`, the value's components at
    /// `(c·2 + p)·ext_degree`.
    ///
    /// A backend that keeps no polynomials returns [`GpuError::Unsupported`]; the prover then
    /// evaluates the host copies.
    fn evaluate_polys(&self, request: &EvaluateRequest<'_>) -> Result<Vec<Felt>> {
        let _ = request;
        Err(GpuError::Unsupported { backend: self.backend(), operation: "DEEP evaluation" })
    }

    /// The linear combination of resident polynomials that the DEEP composition starts from
    /// (see [`crate::committer::deep`]); its coefficients in the extension field, components interleaved.
    ///
    /// A backend that keeps no polynomials returns [`GpuError::Unsupported`]; the prover then
    /// combines the host copies.
    fn combine_polys(&self, request: &CombineRequest<'_>) -> Result<Vec<Felt>> {
        let _ = request;
        Err(GpuError::Unsupported { backend: self.backend(), operation: "DEEP combination" })
    }

    /// Whether [`Self::evaluate_composition`] can serve a proof whose trace this committer
    /// commits to (keeping its rows): the prover then keeps them instead of downloading them.
    fn evaluates_compositions(&self) -> bool {
        false
    }

    /// The composition at every point of the CE domain (see [`crate::committer::composition`]),
    /// reading the trace LDE rows this committer kept, and left in its memory: the constraint
    /// commitment reads it there ([`PolyInput::KeptComposition`]); [`KeptEvaluations::read`]
    /// brings it to the host.
    ///
    /// A backend that keeps no rows, or cannot evaluate the graph, returns
    /// [`GpuError::Unsupported`]; the prover then evaluates on the CPU.
    fn evaluate_composition(
        &self,
        request: &CompositionRequest<'_>,
    ) -> Result<Arc<dyn KeptEvaluations>> {
        let _ = request;
        Err(GpuError::Unsupported { backend: self.backend(), operation: "composition" })
    }

    /// Hashes every row of `lde` into a leaf (the row-hash stage alone).
    fn hash_rows(
        &self,
        lde: &LdeRows,
        row_hashing: RowHashing,
        hash: HashFunction,
    ) -> Result<Vec<Digest>>;

    /// Builds the Merkle nodes over `leaves` (a power of two, at least 2) in Winterfell's layout.
    fn build_tree(&self, leaves: &[Digest], hash: HashFunction) -> Result<Vec<Digest>>;

    /// Commits to the FRI layers of a DEEP composition polynomial (see [`crate::committer::fri`]): evaluates
    /// it over the LDE domain, then commits to and folds every layer, calling `channel` with each
    /// layer's root to draw the layer's folding challenge.
    ///
    /// A backend without FRI kernels returns [`GpuError::Unsupported`]; the prover then runs the
    /// commit phase on the CPU backend.
    fn commit_fri(
        &self,
        request: &FriRequest<'_>,
        channel: &mut FoldingChannel<'_>,
    ) -> Result<FriLayers> {
        let _ = (request, channel);
        Err(GpuError::Unsupported { backend: self.backend(), operation: "FRI layer commitments" })
    }

    /// The first proof-of-work nonce the request's coin accepts (see [`crate::committer::grind`]): the
    /// nonce [`crate::committer::grind::first_nonce_on_host`] finds.
    ///
    /// A backend without grinding kernels returns [`GpuError::Unsupported`]; the prover then
    /// grinds on the host.
    fn grind(&self, request: &GrindRequest) -> Result<u64> {
        let _ = request;
        Err(GpuError::Unsupported { backend: self.backend(), operation: "grinding" })
    }

    /// Device memory this committer holds now, in bytes, where the backend can tell (soak tests
    /// check it returns to its baseline); `None` for the CPU and backends that cannot.
    fn memory_in_use(&self) -> Option<u64> {
        None
    }

    /// The most [`Self::memory_in_use`] reported at the end of any call so far: the peak of a
    /// proof, since everything a proof holds at once (pipeline buffers, polynomials kept for the
    /// DEEP composition, FRI layers kept for the queries) is allocated when a call ends.
    fn peak_memory_in_use(&self) -> Option<u64> {
        None
    }

    /// Device times of the stages of the last [`Self::commit`], one entry per device; empty
    /// where the backend cannot time its stages (the CPU, a device without timers) or before the
    /// first commitment.
    fn last_stage_times(&self) -> Vec<StageTimes> {
        Vec::new()
    }

    /// Holds this committer's devices for the calling thread until the hold drops: its calls
    /// meanwhile, and its reads of what the committer keeps, wait for no other thread's call.
    /// For a burst of short calls, such as a proof's queries, that would otherwise each wait
    /// behind another proof's longer call. Calls from other threads wait for the hold: the
    /// holder must not wait for them. The default holds nothing.
    fn hold_devices(&self) -> DeviceHold<'_> {
        DeviceHold::default()
    }
}
