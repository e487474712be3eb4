//! The typed errors of the public API.

use std::time::Duration;

use thiserror::Error;

use crate::backend::Backend;

mod device;
mod request;

pub use device::{DeviceFailure, DeviceStatus, LossCause};
pub use request::{DeepError, EvaluationError, FriError, GrindError};

/// Everything that can go wrong when committing on a backend or building a GPU prover.
///
/// Bad input is always answered with one of these, never a panic: the messages say what was
/// received and what would have been accepted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GpuError {
    /// The number of trace rows is not a power of two (or is smaller than 2).
    #[error("trace length must be a power of two and at least 2, but was {0}")]
    TraceLengthNotPowerOfTwo(usize),
    /// The number of leaves of a Merkle tree is not a power of two (or is smaller than 2).
    #[error("a Merkle tree needs a power of two of leaves and at least 2, but had {0}")]
    LeafCountNotPowerOfTwo(usize),
    /// An LDE handed over as rows does not have whole rows that hold its columns.
    #[error(
        "an LDE of {elements} elements in rows of {row_width} for {num_cols} columns; the rows \
         must be at least as wide as the columns and divide the elements"
    )]
    LdeRowLayout {
        /// Base elements of the LDE.
        elements: usize,
        /// Base elements per row.
        row_width: usize,
        /// Columns each row holds.
        num_cols: usize,
    },
    /// A segment with no columns was given.
    #[error("a trace segment must have at least one column, but had zero")]
    ZeroColumns,
    /// Columns of one segment do not all have the same length.
    #[error("column {column} has {actual} rows, but column 0 has {expected}")]
    ColumnLengthMismatch {
        /// Index of the first column whose length differs.
        column: usize,
        /// Length of column 0.
        expected: usize,
        /// Length of the offending column.
        actual: usize,
    },
    /// The blowup factor is not a power of two, or is smaller than 2.
    #[error("blowup factor must be a power of two and at least 2, but was {0}")]
    InvalidBlowup(usize),
    /// The LDE domain would exceed the two-adicity of the Goldilocks field (2^32).
    #[error("LDE domain of 2^{0} rows exceeds the field's two-adic subgroup of 2^32 rows")]
    DomainTooLarge(u32),
    /// The auxiliary segment does not have as many rows as the main segment.
    #[error("auxiliary segment has {aux} rows, but the main segment has {main}; they must match")]
    AuxRowMismatch {
        /// Rows of the main segment.
        main: usize,
        /// Rows of the auxiliary segment.
        aux: usize,
    },
    /// The composition-polynomial input does not fit the requested column split.
    #[error("composition evaluations of length {evaluations} cannot be split into {columns} columns of {column_len} coefficients")]
    InvalidComposition {
        /// Number of evaluations over the constraint-evaluation domain.
        evaluations: usize,
        /// Requested number of composition columns.
        columns: usize,
        /// Requested length of each column (the trace length).
        column_len: usize,
    },
    /// A partition size of zero was requested.
    #[error("partition size must be at least 1 base element")]
    InvalidPartition,
    /// The hash function is not known, or the backend has no kernels for it.
    #[error(
        "hash function `{0}` is not supported; expected rpo, rpx, poseidon2, blake3-192 or blake3-256"
    )]
    UnsupportedHasher(String),
    /// A backend's kernels for this hash function cannot hash rows this wide.
    #[error("{hash} kernels hash rows of at most {max} base elements, but a row has {num_cols}")]
    RowTooWide {
        /// The hash function.
        hash: String,
        /// Base elements per row requested.
        num_cols: usize,
        /// The widest row the kernels take.
        max: usize,
    },
    /// The backend named in a request or in `MIDEN_GPU_BACKEND` is not a known name.
    #[error("unknown backend `{0}`; expected one of: auto, cpu, wgpu, cuda")]
    UnknownBackend(String),
    /// A backend was asked for explicitly but cannot be used here.
    #[error("backend `{backend}` is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend that was requested.
        backend: Backend,
        /// Why it cannot be used (feature not compiled in, no adapter, no driver, ...).
        reason: String,
    },
    /// The device list in `MIDEN_GPU_DEVICES` or a builder option is malformed or names a
    /// device that does not exist.
    #[error("invalid device list `{list}`: {reason}")]
    InvalidDeviceList {
        /// The list as given.
        list: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The commitment does not fit in host or device memory.
    #[error(
        "out of {memory} memory: the commitment needs {needed} bytes, {available} are available"
    )]
    OutOfMemory {
        /// `"host"` or `"device"`.
        memory: &'static str,
        /// Bytes the commitment needs.
        needed: u64,
        /// Bytes the backend may use.
        available: u64,
    },
    /// A FRI request is malformed (folding factor, layer count, component count or length).
    #[error("invalid FRI request: {0}")]
    InvalidFri(FriError),
    /// A DEEP combination request is malformed (segments, degrees or coefficient count).
    #[error("invalid DEEP combination request: {0}")]
    InvalidDeep(DeepError),
    /// A constraint evaluation request is malformed (domain, segments, or a graph that is not
    /// a composition).
    #[error("invalid constraint evaluation request: {0}")]
    InvalidEvaluation(EvaluationError),
    /// A proof-of-work search cannot end: a grinding factor above 64, or no nonce accepted
    /// below [`crate::committer::grind::MAX_NONCE`].
    #[error("invalid grinding request: {0}")]
    InvalidGrinding(GrindError),
    /// A read of LDE rows kept on the device asked for a row past the LDE.
    #[error("row {row} read from an LDE of {rows} rows")]
    RowOutOfRange {
        /// The row asked for.
        row: usize,
        /// Rows of the LDE.
        rows: usize,
    },
    /// A batch opening of a Merkle tree was asked for no leaf, a leaf twice or a leaf past the
    /// tree (winter-crypto's `MerkleTreeError`, as it words it).
    #[error("invalid Merkle opening: {0}")]
    InvalidOpening(String),
    /// The backend does not implement this operation; the caller computes it on the CPU.
    #[error("{backend} does not implement {operation}")]
    Unsupported {
        /// The backend asked.
        backend: Backend,
        /// What it was asked to do.
        operation: &'static str,
    },
    /// The device or its driver failed while committing (allocation, launch, device loss).
    #[error("{backend} device failure: {failure}")]
    Device {
        /// The backend whose device failed.
        backend: Backend,
        /// The failed call and what it reported.
        failure: DeviceFailure,
    },
    /// The device can no longer be used: the driver reported an error after which its context is
    /// unusable (an illegal address, a failed launch, an uncorrectable ECC error), the device was
    /// lost, or a wait on it exceeded its deadline. The committer records it and refuses every
    /// later call at once with this error; make a new committer (for CUDA, a new process) to
    /// use the device again.
    #[error("{backend} device lost: {cause}; this committer refuses further work")]
    DeviceLost {
        /// The backend whose device was lost.
        backend: Backend,
        /// The failed call that lost it, or the earlier loss a call was refused for.
        cause: LossCause,
    },
    /// A wait on the device exceeded its deadline (`wait_timeout` in the backend's options): the
    /// device did not finish the work it was given. The device counts as lost afterwards.
    #[error(
        "{backend}: {operation} did not complete within its deadline of {deadline:?} (waited \
         {waited:?}); the device is treated as lost"
    )]
    Timeout {
        /// The backend whose device did not answer.
        backend: Backend,
        /// What was waited for.
        operation: &'static str,
        /// How long the wait lasted.
        waited: Duration,
        /// The deadline it exceeded.
        deadline: Duration,
    },
    /// A count computed from a request's dimensions (a launch's blocks, a kernel's element
    /// count or offset) does not fit the 32 bits a kernel launch takes.
    #[error("{what} is {value}, more than a kernel launch's 32-bit limit of {}", u32::MAX)]
    DimensionOverflow {
        /// What was being counted.
        what: &'static str,
        /// The count.
        value: u64,
    },
    /// A size computed from a request's dimensions (elements of an LDE, of a polynomial set)
    /// does not fit in a `usize`.
    #[error("{what}: {count} x {size} elements overflow the address space")]
    SizeOverflow {
        /// What was being sized.
        what: &'static str,
        /// The number of items (rows, columns).
        count: usize,
        /// Elements per item.
        size: usize,
    },
    /// A proof made by [`crate::GpuProver`] failed its own verification: the backend returned
    /// wrong data without reporting an error, or the trace does not satisfy the AIR.
    #[error(
        "the proof made on {backend} does not verify ({reason}): the backend returned wrong data \
         without an error, or the trace does not satisfy the AIR"
    )]
    SelfCheckFailed {
        /// The backend the proof was made on.
        backend: Backend,
        /// What the verifier reported.
        reason: String,
    },
}

impl GpuError {
    /// [`GpuError::Device`] of `backend` for `call`, refused by `condition` (a check this crate
    /// makes, not a status a driver reported).
    pub(crate) fn internal(
        backend: Backend,
        call: &'static str,
        condition: impl Into<String>,
    ) -> Self {
        let status = DeviceStatus::Internal(condition.into());
        Self::Device { backend, failure: DeviceFailure::new(call, status) }
    }

    /// This error, naming the kernel or operation `operation` its failed call served, if it is
    /// a device failure or loss; any other error unchanged.
    #[cfg(feature = "cuda")]
    pub(crate) fn serving(self, operation: &str) -> Self {
        match self {
            Self::Device { backend, failure } => {
                Self::Device { backend, failure: failure.serving(operation) }
            },
            Self::DeviceLost { backend, cause: LossCause::Failure(failure) } => {
                Self::DeviceLost { backend, cause: LossCause::Failure(failure.serving(operation)) }
            },
            other => other,
        }
    }
}

/// `value` as a 32-bit launch dimension or kernel scalar; [`GpuError::DimensionOverflow`] naming
/// `what` if it does not fit.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn to_u32<T>(value: T, what: &'static str) -> Result<u32>
where
    T: TryInto<u32> + TryInto<u64> + Copy,
{
    value.try_into().map_err(|_| GpuError::DimensionOverflow {
        what,
        value: TryInto::<u64>::try_into(value).unwrap_or(u64::MAX),
    })
}

/// The result type of this crate.
pub type Result<T> = core::result::Result<T, GpuError>;
