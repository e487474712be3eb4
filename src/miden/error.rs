//! The errors of [`super::prove`]: this crate's own, Miden's execution errors, Winterfell's
//! prover errors, and the checks around the proof (options the verifier refuses, a proof that
//! does not verify).

use miden_processor::ExecutionError;
use miden_verifier::VerificationError;
use thiserror::Error;
use winter_prover::ProverError;

use crate::{backend::Backend, error::GpuError};

/// Everything that can go wrong in [`super::prove`].
///
/// `miden_prover::prove` folds prover failures into `ExecutionError::ProverError`; here they are
/// a variant of their own, so a caller can tell a failing program from a failing proof.
#[derive(Debug, Error)]
pub enum ProveError {
    /// The backend could not be created ([`GpuError::BackendUnavailable`], ...).
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// `miden_verifier` does not accept proofs made with these proving options (nothing was
    /// executed or proven).
    #[error("miden_verifier does not accept {hash} proofs with {security}; it accepts {accepted}")]
    UnacceptableOptions {
        /// The hash function asked for (`rpo`, `blake3-256`, ...).
        hash: String,
        /// The security level asked for (`96-bit security`), or `custom proof options`.
        security: String,
        /// The pairs the verifier accepts, e.g. `rpo at 96 or 128 bits, ...`.
        accepted: String,
    },
    /// The program failed to execute (nothing was proven).
    #[error("program execution failed: {0}")]
    Execution(#[source] Box<ExecutionError>),
    /// The STARK prover rejected the execution trace.
    #[error("STARK proof generation failed: {0}")]
    Prover(#[source] ProverError),
    /// The finished proof does not verify (and no CPU fallback was made, or its proof did not
    /// verify either); it was not returned.
    #[error("the proof made on the {backend} backend does not verify: {source}")]
    SelfCheck {
        /// The backend whose proof failed the check.
        backend: Backend,
        /// The verifier's reason.
        #[source]
        source: Box<VerificationError>,
    },
    /// The program, executed again for the CPU fallback, ended with other stack outputs (a host
    /// that does not answer the same way twice).
    #[error("the program's second execution (for the CPU fallback) gave other stack outputs")]
    NondeterministicExecution,
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
