//! The errors of [`super::prove`]: this crate's own, Miden's execution errors, Winterfell's
//! prover errors.

use miden_processor::ExecutionError;
use thiserror::Error;
use winter_prover::ProverError;

use crate::error::GpuError;

/// Everything that can go wrong in [`super::prove`].
///
/// `miden_prover::prove` folds prover failures into `ExecutionError::ProverError`; here they are
/// a variant of their own, so a caller can tell a failing program from a failing proof.
#[derive(Debug, Error)]
pub enum ProveError {
    /// The backend could not be created ([`GpuError::BackendUnavailable`], ...).
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The program failed to execute (nothing was proven).
    #[error("program execution failed: {0}")]
    Execution(#[source] Box<ExecutionError>),
    /// The STARK prover rejected the execution trace.
    #[error("STARK proof generation failed: {0}")]
    Prover(#[source] ProverError),
}

impl From<ExecutionError> for ProveError {
    fn from(error: ExecutionError) -> Self {
        Self::Execution(Box::new(error))
    }
}

impl From<ProverError> for ProveError {
    fn from(error: ProverError) -> Self {
        Self::Prover(error)
    }
}
