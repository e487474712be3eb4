//! The errors of the command line: one variant per thing a user can get wrong, each with a message
//! that names the file or value at fault.

use std::{error::Error as StdError, fmt, io, path::PathBuf};

use miden_assembly::diagnostics::{reporting::PrintDiagnostic, Report};
use miden_gpu::{miden::ProveError, pool::PoolError, GpuError};
use miden_processor::ExecutionError;
use thiserror::Error;
use winter_prover::ProverError;

// FILE KINDS
// ================================================================================================

/// The files the command line reads and writes, for error messages.
#[derive(Debug, Clone, Copy)]
pub enum FileKind {
    /// A `.masm` program or a `.masp` package.
    Program,
    /// A `.masl` library.
    Library,
    /// The JSON inputs file.
    Inputs,
    /// The JSON outputs file.
    Outputs,
    /// The binary proof file.
    Proof,
    /// A NATS user's credentials file (`.creds`).
    #[cfg(feature = "service")]
    Credentials,
    /// A file holding an NKey seed.
    #[cfg(feature = "service")]
    NKey,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Program => "program",
            Self::Library => "library",
            Self::Inputs => "inputs",
            Self::Outputs => "outputs",
            Self::Proof => "proof",
            #[cfg(feature = "service")]
            Self::Credentials => "credentials",
            #[cfg(feature = "service")]
            Self::NKey => "NKey seed",
        })
    }
}

// CLI ERROR
// ================================================================================================

/// Everything that makes `miden-gpu` exit with a failure.
#[derive(Debug, Error)]
pub enum CliError {
    /// A file could not be read.
    #[error("cannot read {kind} file `{}`: {source}", path.display())]
    Read {
        /// What the file is.
        kind: FileKind,
        /// Where it was looked for.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {kind} file `{}`: {source}", path.display())]
    Write {
        /// What the file is.
        kind: FileKind,
        /// Where it was to be written.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// A file was read but its content is not what its format asks for.
    #[error("invalid {kind} file `{}`: {message}", path.display())]
    Invalid {
        /// What the file is.
        kind: FileKind,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The program did not assemble; the message is the assembler's rendered diagnostic.
    #[error("failed to assemble `{}`:\n{report}", path.display())]
    Assembly {
        /// The program file.
        path: PathBuf,
        /// The rendered diagnostic, with the offending source lines.
        report: String,
    },
    /// The `--program-hash` argument is not a 32-byte hex digest.
    #[error("invalid program hash `{hash}`: {reason}")]
    ProgramHash {
        /// The argument as given.
        hash: String,
        /// Why it is not a digest.
        reason: String,
    },
    /// The execution options (cycle limits) are inconsistent.
    #[error("invalid execution options: {0}")]
    Options(String),
    /// The hash function and security level make proofs `miden_verifier` refuses
    /// ([`ProveError::UnacceptableOptions`], naming the pairs it accepts).
    #[error("invalid --hasher and --security: {0}")]
    ProofOptions(String),
    /// Two of the files a command reads or writes are the same file (one would overwrite the
    /// other).
    #[error("the {first} file and the {second} file are the same file `{}`", path.display())]
    SameFile {
        /// The file written.
        first: FileKind,
        /// The file it would overwrite or also be.
        second: FileKind,
        /// The path given for it.
        path: PathBuf,
    },
    /// Two programs would write the same file (their default proof or outputs paths collide).
    #[error("the programs `{}` and `{}` would both write `{}`", first.display(), second.display(), path.display())]
    SharedOutput {
        /// The file both would write.
        path: PathBuf,
        /// The program given first.
        first: PathBuf,
        /// The program given later.
        second: PathBuf,
    },
    /// Arguments that do not go together.
    #[error("invalid arguments: {0}")]
    Usage(String),
    /// The backend could not be created (an explicit backend that is unavailable here).
    #[error(transparent)]
    Backend(#[from] GpuError),
    /// The program failed to execute; the message is the processor's rendered diagnostic.
    #[error("program execution failed:\n{0}")]
    Execution(String),
    /// The STARK prover rejected the execution trace.
    #[error("proof generation failed: {0}")]
    Proving(#[from] ProverError),
    /// The proof does not verify against the program hash, inputs and outputs.
    #[error("proof verification failed: {0}")]
    Verification(String),
    /// A proof job of the pool failed in a way none of the other variants names (a panic, a
    /// host memory estimate beyond the pool's limit).
    #[error(transparent)]
    Pool(PoolError),
    /// Some of several programs failed (each reported on its own line); the others were
    /// proved and written.
    #[error("{failed} of {total} programs failed; the others were proved and written")]
    Failed {
        /// The programs that failed.
        failed: usize,
        /// The programs given.
        total: usize,
    },
    /// The fleet's server or metrics endpoint failed.
    #[cfg(feature = "service")]
    #[error(transparent)]
    Service(#[from] miden_gpu::service::ServiceError),
    /// The fleet filed an error result for the job.
    #[cfg(feature = "service")]
    #[error("job {id} failed: {failure}")]
    Job {
        /// The job's id.
        id: String,
        /// Its error result.
        failure: miden_gpu::service::JobFailure,
    },
    /// The fleet has no result for the job: not yet, or no longer (the results bucket's
    /// maximum age, `serve --result-ttl`).
    #[cfg(feature = "service")]
    #[error(
        "job {0} has no result: not yet (fetch --wait waits for it), or no longer (results \
         expire after the fleet's result TTL, serve --result-ttl)"
    )]
    NoResult(String),
    /// The proof just made did not pass its self-check (nor did the CPU fallback's, if one was
    /// made); nothing was written.
    #[error("{0}; no proof was written")]
    SelfCheck(String),
}

impl CliError {
    /// The process exit status of this error: 2 for invalid arguments (as clap's own errors),
    /// 1 for every other failure.
    pub fn exit_status(&self) -> u8 {
        match self {
            Self::Options(_)
            | Self::ProofOptions(_)
            | Self::SameFile { .. }
            | Self::SharedOutput { .. }
            | Self::Usage(_) => 2,
            _ => 1,
        }
    }

    /// A [`CliError::Invalid`] for `kind` file `path`.
    pub fn invalid(kind: FileKind, path: impl Into<PathBuf>, message: impl fmt::Display) -> Self {
        Self::Invalid { kind, path: path.into(), message: message.to_string() }
    }

    /// A [`CliError::Assembly`] with the assembler's diagnostic rendered.
    pub fn assembly(path: impl Into<PathBuf>, report: &Report) -> Self {
        Self::Assembly { path: path.into(), report: render(report) }
    }

    /// A [`CliError::Execution`] with the processor's diagnostic rendered.
    pub fn execution(error: ExecutionError) -> Self {
        Self::Execution(render(&Report::new(error)))
    }

    /// A [`CliError::Verification`] with the verifier's whole chain of causes.
    pub fn verification(error: &dyn StdError) -> Self {
        Self::Verification(causes(error))
    }
}

impl From<ProveError> for CliError {
    fn from(error: ProveError) -> Self {
        match error {
            ProveError::Gpu(error) => Self::Backend(error),
            ProveError::Execution(error) => Self::execution(*error),
            ProveError::Prover(error) => Self::Proving(error),
            ProveError::UnacceptableOptions { .. } => Self::ProofOptions(error.to_string()),
            ProveError::SelfCheck { .. } | ProveError::NondeterministicExecution => {
                Self::SelfCheck(causes(&error))
            },
        }
    }
}

impl From<PoolError> for CliError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Backend(error) => Self::Backend(error),
            PoolError::Prover(error) => Self::Proving(error),
            PoolError::Miden(error) => error.into(),
            other => Self::Pool(other),
        }
    }
}

// HELPERS
// ================================================================================================

/// A miette diagnostic as text: the message, its labels over the source, its help.
fn render(report: &Report) -> String {
    PrintDiagnostic::new_without_color(report).to_string().trim_end().to_string()
}

/// An error's message followed by those of its sources, `: `-separated; a source whose message
/// its parent already includes is skipped.
fn causes(error: &dyn StdError) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    message
}
