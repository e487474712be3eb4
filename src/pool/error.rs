//! The typed errors of a [`super::ProverPool`]: starting it, and each job's own failure.

use thiserror::Error;
use winter_prover::ProverError;

use crate::error::GpuError;

/// Everything that can go wrong in a [`super::ProverPool`]: an option out of range or a backend
/// that cannot start (from [`super::ProverPool::new`]), or one job's failure (from
/// [`super::JobHandle::wait`]). A job's error is its own: the other jobs and the pool go on.
#[derive(Debug, Error)]
pub enum PoolError {
    /// A [`super::PoolOptions`] value is out of range.
    #[error("pool option `{option}` must be {expected}, but was {value}")]
    InvalidOption {
        /// The option's field name.
        option: &'static str,
        /// The value given.
        value: usize,
        /// The values accepted.
        expected: &'static str,
    },
    /// A committer could not be created, or a job's backend call failed.
    #[error(transparent)]
    Backend(#[from] GpuError),
    /// The operating system refused to start a worker thread.
    #[error("could not start a pool worker thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// Winterfell's prover rejected a job's trace.
    #[error("STARK proof generation failed: {0}")]
    Prover(#[from] ProverError),
    /// A Miden job failed to execute or to prove.
    #[cfg(feature = "miden")]
    #[error(transparent)]
    Miden(#[from] crate::miden::ProveError),
    /// A job's estimated host memory is more than the pool's whole host budget
    /// ([`super::PoolOptions::host_memory_limit`]): it could not run even alone.
    #[error(
        "job {job} needs an estimated {needed} bytes of host memory, more than the pool's limit of {limit} bytes"
    )]
    OutOfMemory {
        /// The job's id.
        job: u64,
        /// Its estimated host memory, in bytes.
        needed: u64,
        /// The pool's host memory limit, in bytes.
        limit: u64,
    },
    /// A job panicked (a prover without CPU fallback panics with a backend's typed error, since
    /// Winterfell's prover methods cannot return one); the message is the panic's.
    #[error("job {job} panicked: {message}")]
    Panicked {
        /// The job's id ([`super::JobHandle::id`]).
        job: u64,
        /// The panic message, or a placeholder when the payload is not a string.
        message: String,
    },
    /// A job closure's own error, of a type this enum does not name.
    #[error("job failed: {0}")]
    Failed(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The job's worker thread ended without sending its result (a panic outside the job, such
    /// as in dropping a panic payload).
    #[error("job {job} ended without a result: its worker thread stopped")]
    WorkerLost {
        /// The job's id.
        job: u64,
    },
}
