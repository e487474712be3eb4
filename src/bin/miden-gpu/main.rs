//! `miden-gpu`: the Miden VM's `prove` and `verify` commands with the trace and constraint
//! commitments of the STARK prover on a GPU (CUDA or wgpu), through [`miden_gpu::miden`].
//!
//! ```text
//! miden-gpu prove program.masm [-i program.inputs] [-p program.proof] [-o program.outputs]
//!     [--backend auto|cpu|wgpu|cuda] [--hasher rpo|rpx] [--security 96|128]
//!     [-l lib.masl ...] [-e expected-cycles] [-m max-cycles] [-n num-outputs] [--release]
//! miden-gpu prove a.masm b.masm ... [--jobs N] [other options as above but -i, -p, -o]
//! miden-gpu verify --program-hash <hex> --proof program.proof [-i program.inputs]
//!     [-o program.outputs]
//! ```
//!
//! With feature `service`, a prover fleet on NATS JetStream ([`miden_gpu::service`]):
//!
//! ```text
//! miden-gpu serve [--nats URLS] [connection options] [--replicas N] [--backend ...]
//!     [--workers N] [--metrics ADDR] [--max-job-bytes N] [-m max-cycles] [--ack-wait SECS] [--backoff DURATIONS]
//!     [--max-deliver N] [--max-ack-pending N] [--solo-attempts N] [--connect-timeout SECS]
//!     [--name NAME] [--result-ttl DURATION] [--otlp-endpoint URL]
//! miden-gpu submit program.masm [-i ...] [-p ...] [-o ...] [--hasher ...] [-s ...] [-m ...]
//!     [--nats URLS] [connection options] [--submitter NAME] [--no-wait] [--timeout SECS]
//!     [--submit-timeout SECS]
//! miden-gpu fetch <job id> [-p ...] [-o ...] [--nats URLS] [connection options]
//!     [--submitter NAME] [--wait] [--timeout SECS] [--connect-timeout SECS]
//! ```
//!
//! The connection options are the `nats` command line's, each also an environment variable:
//! `--creds FILE`, `--nkey FILE`, `--user NAME --password SECRET`, `--token SECRET`,
//! `--tlscert FILE --tlskey FILE`, `--tlsca FILE` (`NATS_CREDS`, `NATS_NKEY`, `NATS_USER`,
//! `NATS_PASSWORD`, `NATS_TOKEN`, `NATS_CERT`, `NATS_KEY`, `NATS_CA`; `NATS_URL` for `--nats`).
//!
//! Arguments, defaults and files are those of miden-vm 0.20's `miden prove` and `miden verify`
//! (the formats are listed in the `data` module): a proof made here verifies with `miden verify` and the other way round. The
//! differences: the hash function defaults to RPO, `--backend` picks where the commitments run
//! (default `MIDEN_GPU_BACKEND`, else the best device found), a hash function and security level
//! the verifier refuses are refused before proving, and every proof is verified before it is
//! written (atomically). Several programs are proved concurrently on the backend's GPUs
//! (`ProverPool`), each with its default files; one that fails is reported on its own `error:`
//! line and the others are still written. A terminal shows a spinner with the current stage; `RUST_LOG` turns on
//! log lines (by default only this crate's warnings). Exit status: 1 for a failure, 2 for
//! invalid arguments.

miden_gpu::use_jemalloc!();

use std::{
    io::{self, IsTerminal},
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use miden_gpu::timing::SpanTimes;
use tracing_subscriber::{
    filter::filter_fn, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer,
};

#[cfg(feature = "service")]
mod connection;
mod data;
mod error;
#[cfg(feature = "service")]
mod fetch;
mod paths;
mod program;
mod progress;
mod prove;
mod report;
#[cfg(feature = "service")]
mod serve;
#[cfg(feature = "service")]
mod submit;
mod untrusted;
mod verify;

use progress::Progress;
use prove::ProveCmd;
use verify::VerifyCmd;

// COMMAND LINE
// ================================================================================================

/// Prove and verify Miden VM programs with the STARK commitments on a GPU.
#[derive(Debug, Parser)]
#[command(name = "miden-gpu", version, rename_all = "kebab-case")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prove Miden programs, with the commitments on a GPU
    Prove(ProveCmd),
    /// Verify a proof of a Miden program
    Verify(VerifyCmd),
    /// Prove the jobs of a fleet's NATS queue on this host's GPUs, until stopped
    #[cfg(feature = "service")]
    Serve(serve::ServeCmd),
    /// Put a proof job on a fleet's NATS queue and write its proof when it is done
    #[cfg(feature = "service")]
    Submit(submit::SubmitCmd),
    /// Write the proof of a job submitted earlier
    #[cfg(feature = "service")]
    Fetch(fetch::FetchCmd),
}

// MAIN
// ================================================================================================

fn main() -> ExitCode {
    #[cfg(feature = "wgpu")]
    miden_gpu::wgpu::prepare_headless_vulkan();
    let cli = Cli::parse();
    // kept to the end: dropping it sends the last spans
    let telemetry = match cli.command.telemetry() {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(error.exit_status());
        },
    };
    let progress = Progress::new();
    let times = SpanTimes::new();
    init_tracing(&progress, &times, cli.command.default_log(), telemetry.as_ref());

    let result = match &cli.command {
        Command::Prove(command) => command.execute(&progress, &times),
        Command::Verify(command) => command.execute(&progress),
        #[cfg(feature = "service")]
        Command::Serve(command) => command.execute(),
        #[cfg(feature = "service")]
        Command::Submit(command) => command.execute(&progress),
        #[cfg(feature = "service")]
        Command::Fetch(command) => command.execute(),
    };
    progress.finish();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(error.exit_status())
        },
    }
}

/// A worker's span export (feature `otlp`); none otherwise.
#[cfg(feature = "service")]
use serve::Telemetry;

/// Without feature `service` there is no span export.
#[cfg(not(feature = "service"))]
enum Telemetry {}

impl Command {
    /// The span export the command asks for (`serve --otlp-endpoint`), if any.
    fn telemetry(&self) -> Result<Option<Telemetry>, error::CliError> {
        match self {
            #[cfg(feature = "service")]
            Self::Serve(command) => command.telemetry(),
            _ => Ok(None),
        }
    }

    /// The log lines shown when `RUST_LOG` is not set: this crate's warnings (such as a fallback
    /// to the CPU) but for the pool's failed jobs, which have their own `error:` lines; for a
    /// long-running worker, its jobs too.
    fn default_log(&self) -> &'static str {
        match self {
            #[cfg(feature = "service")]
            Self::Serve(_) => "miden_gpu=info",
            _ => "miden_gpu=warn,miden_gpu::pool=error",
        }
    }
}

/// Log lines as `RUST_LOG` asks (default: `default_log`), written around the spinner; the
/// spinner's proof steps and the stage times see every span and no event; `telemetry` (feature
/// `otlp`) exports the crate's spans.
fn init_tracing(
    progress: &Progress,
    times: &SpanTimes,
    default_log: &str,
    telemetry: Option<&Telemetry>,
) {
    let log_filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_log));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(progress.clone())
        .with_ansi(io::stderr().is_terminal())
        .with_filter(log_filter);
    let spans = || filter_fn(|metadata| metadata.is_span());
    let registry = tracing_subscriber::registry()
        .with(log)
        .with(progress.proof_steps().with_filter(spans()))
        .with(times.clone().with_filter(spans()));
    #[cfg(feature = "otlp")]
    let registry = registry.with(telemetry.map(|export| export.layer()));
    #[cfg(not(feature = "otlp"))]
    let _ = telemetry;
    registry.init();
    #[cfg(feature = "otlp")]
    if let Some(export) = telemetry {
        tracing::info!(endpoint = export.endpoint(), "exporting spans over OTLP/HTTP");
    }
}
