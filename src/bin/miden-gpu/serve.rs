//! `miden-gpu serve`: a fleet worker. Opens this host's GPUs once (a [`ProverPool`]) and proves
//! the jobs of the fleet's NATS queue until SIGTERM or SIGINT, then finishes the jobs it holds
//! and exits.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use clap::Args;
#[cfg(feature = "otlp")]
use miden_gpu::service::OTLP_ENDPOINT_ENV;
use miden_gpu::{
    miden::Execution,
    service::{
        FailureKind, Fleet, Job, JobFailure, JobProgram, MetricsServer, PreparedJob, ServiceError,
        Worker, WorkerOptions, DEFAULT_MAX_JOB_BYTES, DEFAULT_SOLO_ATTEMPTS,
    },
    Backend, BackendOptions, PoolOptions, ProverPool,
};
use miden_processor::ExecutionOptions;
use tracing::info;
#[cfg(not(feature = "otlp"))]
use tracing::warn;

use crate::{
    connection::ConnectionArgs,
    data::Inputs,
    error::{CliError, FileKind},
    program::LoadedProgram,
};

// ARGUMENTS
// ================================================================================================

/// Prove the jobs of a fleet's NATS queue on this host's GPUs, until stopped (SIGTERM, SIGINT).
#[derive(Debug, Clone, Args)]
pub struct ServeCmd {
    #[command(flatten)]
    connection: ConnectionArgs,

    /// Backend of the commitments: auto, cpu, wgpu or cuda [default: $MIDEN_GPU_BACKEND, else
    /// auto]
    #[arg(short = 'b', long = "backend")]
    backend: Option<Backend>,

    /// Jobs proved at once [default: the pool's, four per GPU]
    #[arg(long = "workers")]
    workers: Option<usize>,

    /// Serve /metrics (Prometheus) and /health over HTTP on this address (host:port)
    #[arg(long = "metrics")]
    metrics: Option<String>,

    /// The largest job taken, in bytes; a larger one gets an error result
    #[arg(long = "max-job-bytes", default_value_t = DEFAULT_MAX_JOB_BYTES)]
    max_job_bytes: usize,

    /// The most cycles one program may take; a job may ask for fewer
    #[arg(short = 'm', long = "max-cycles", default_value_t = ExecutionOptions::MAX_CYCLES)]
    max_cycles: u32,

    /// Which processor executes the jobs: reference (stops a program at --max-cycles as it
    /// runs) or parallel (faster; checks --max-cycles once the program ends: for trusted
    /// submitters only)
    #[arg(long = "execution", default_value_t = Execution::Reference)]
    execution: Execution,

    /// Seconds a job may go without an acknowledgement or progress report at its first
    /// delivery before the server delivers it again; --backoff has the later deliveries' (set
    /// when the fleet's consumer is created)
    #[arg(long = "ack-wait", default_value_t = 30)]
    ack_wait: u64,

    /// The ack waits of a job's later deliveries, comma-separated, the last repeated: 60s,120s
    /// (a bare number is seconds), or `none` for --ack-wait every time. A job whose worker ended
    /// is delivered again once its delivery's ack wait has passed, later each time (set when
    /// the fleet's consumer is created)
    #[arg(long = "backoff", value_name = "DURATIONS", default_value = "60s,120s", value_parser = parse_backoff)]
    backoff: Backoff,

    /// The most deliveries of one job, however they ended, a backstop behind --solo-attempts;
    /// the last one gets an error result (set when the fleet's consumer is created; more than
    /// the --backoff values)
    #[arg(long = "max-deliver", default_value_t = 20, value_parser = clap::value_parser!(i64).range(2..))]
    max_deliver: i64,

    /// The most jobs the fleet's workers hold at once, all together: delivered and not yet
    /// acknowledged (set when the fleet's consumer is created)
    #[arg(long = "max-ack-pending", default_value_t = 1024, value_parser = clap::value_parser!(i64).range(1..))]
    max_ack_pending: i64,

    /// A job delivered again is proved alone; after this many such attempts, each ended with
    /// its worker (killed, out of memory), the next delivery gets an error result instead
    #[arg(long = "solo-attempts", default_value_t = DEFAULT_SOLO_ATTEMPTS)]
    solo_attempts: u32,

    /// Seconds to keep trying to reach the NATS server at the start
    #[arg(long = "connect-timeout", default_value_t = 60)]
    connect_timeout: u64,

    /// The worker's name in results and logs [default: miden-gpu-<process id>]
    #[arg(long = "name")]
    name: Option<String>,

    /// How long the fleet keeps a result: 90s, 30m, 24h, 7d (0: for ever); changes the results
    /// bucket, whose default (7d) is set when it is created [default: the bucket's]
    #[arg(long = "result-ttl", value_name = "DURATION", value_parser = parse_duration)]
    result_ttl: Option<Duration>,

    /// Send the tracing spans (one per job, with the proof's stages) to this OpenTelemetry
    /// collector over OTLP/HTTP, e.g. http://collector:4318 [default:
    /// $OTEL_EXPORTER_OTLP_ENDPOINT if set]; needs a build with feature `otlp`
    #[arg(long = "otlp-endpoint", value_name = "URL")]
    otlp_endpoint: Option<String>,
}

/// The ack waits of the later deliveries (`--backoff`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff(Vec<Duration>);

/// `none`, or comma-separated durations ([`parse_duration`]), none of them zero.
fn parse_backoff(text: &str) -> Result<Backoff, String> {
    if text.trim() == "none" {
        return Ok(Backoff(Vec::new()));
    }
    let waits = text.split(',').map(parse_duration).collect::<Result<Vec<_>, _>>()?;
    match waits.iter().any(Duration::is_zero) {
        true => Err(format!("`{text}`: an ack wait must be longer than zero")),
        false => Ok(Backoff(waits)),
    }
}

/// A duration such as `90s`, `30m`, `24h` or `7d` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("`{text}` is not a duration"))?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{text}`: the unit must be s, m, h or d")),
    };
    number
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is too long"))
}

/// The span export of `serve` ([`miden_gpu::service::OtlpExport`], feature `otlp`).
#[cfg(feature = "otlp")]
pub type Telemetry = miden_gpu::service::OtlpExport;

/// Without feature `otlp` there is no span export.
#[cfg(not(feature = "otlp"))]
pub enum Telemetry {}

// SERVE
// ================================================================================================

impl ServeCmd {
    /// Opens the pool, connects to the fleet and serves jobs until SIGTERM or SIGINT.
    pub fn execute(&self) -> Result<(), CliError> {
        let mut backend = BackendOptions::from_env()?;
        if let Some(name) = self.backend {
            backend.backend = name;
        }
        let pool =
            ProverPool::new(&PoolOptions { workers: self.workers, ..PoolOptions::new(backend) })
                .map_err(ServiceError::from)?;
        let name = self.worker_name();
        #[cfg(not(feature = "otlp"))]
        if let Some(variable) =
            OTLP_ENDPOINT_ENV.iter().find(|name| std::env::var_os(name).is_some())
        {
            warn!(
                "{variable} is set, but this miden-gpu has no feature `otlp`: no span is exported"
            );
        }
        let mut fleet = self.connection.fleet_options()?;
        fleet.ack_wait = Duration::from_secs(self.ack_wait);
        fleet.backoff = self.backoff.0.clone();
        fleet.max_deliver = self.max_deliver;
        fleet.max_ack_pending = self.max_ack_pending;
        fleet.connect_timeout = Duration::from_secs(self.connect_timeout);
        if let Some(ttl) = self.result_ttl {
            fleet.result_ttl = ttl;
        }
        let options = WorkerOptions {
            max_job_bytes: self.max_job_bytes,
            max_cycles: self.max_cycles,
            execution: self.execution,
            solo_attempts: self.solo_attempts,
            ..WorkerOptions::new(&name)
        };

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(ServiceError::Runtime)?;
        runtime.block_on(async {
            let fleet = Arc::new(Fleet::connect(&fleet, &name).await?);
            if let Some(ttl) = self.result_ttl {
                fleet.set_result_ttl(ttl).await?;
            }
            let worker = Worker::new(fleet.clone(), pool, options, prepare)?;
            let _metrics = match &self.metrics {
                Some(address) => {
                    let server =
                        MetricsServer::start(address, worker.metrics().clone(), move || {
                            fleet.is_connected()
                        })?;
                    info!(address = %server.address(), "serving /metrics and /health");
                    Some(server)
                },
                None => None,
            };
            worker.run(stop_signal()).await
        })?;
        Ok(())
    }
}

impl ServeCmd {
    /// The worker's name: `--name`, else `miden-gpu-<process id>`.
    fn worker_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| format!("miden-gpu-{}", std::process::id()))
    }

    /// The span export `--otlp-endpoint` or the OTLP environment variables ask for, if any.
    ///
    /// # Errors
    /// [`CliError::Usage`] for `--otlp-endpoint` without feature `otlp`; the exporter's error.
    pub fn telemetry(&self) -> Result<Option<Telemetry>, CliError> {
        #[cfg(feature = "otlp")]
        {
            let from_env = OTLP_ENDPOINT_ENV
                .iter()
                .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
            if self.otlp_endpoint.is_none() && !from_env {
                return Ok(None);
            }
            let endpoint = self.otlp_endpoint.as_deref();
            let export = Telemetry::new(endpoint, "miden-gpu", &self.worker_name())?;
            Ok(Some(export))
        }
        #[cfg(not(feature = "otlp"))]
        match &self.otlp_endpoint {
            Some(_) => Err(CliError::Usage(
                "--otlp-endpoint needs a miden-gpu built with feature `otlp` \
                 (cargo install --path . --features miden,service,otlp)"
                    .into(),
            )),
            None => Ok(None),
        }
    }
}

/// The variables that name an OTLP collector (those `OtlpExport` reads).
#[cfg(not(feature = "otlp"))]
const OTLP_ENDPOINT_ENV: [&str; 2] =
    ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// Completes on SIGTERM or SIGINT (Ctrl-C).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = terminate.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

// JOBS
// ================================================================================================

/// A job's program, host and inputs, loaded as `miden-gpu prove` loads its files (the job's id
/// names them in errors: `job-<id>.masm`, `job-<id>.inputs`).
fn prepare(job: &Job) -> Result<PreparedJob, JobFailure> {
    let name = PathBuf::from(format!("job-{}", job.id));
    let loaded = load_job_program(&job.program, &name).map_err(failure)?;
    let inputs =
        Inputs::from_json(job.inputs.clone().unwrap_or_default(), &name.with_extension("inputs"))
            .map_err(failure)?;
    let (stack_inputs, advice_inputs) =
        (inputs.stack_inputs().map_err(failure)?, inputs.advice_inputs().map_err(failure)?);
    let host = loaded.host().map_err(failure)?;
    Ok(PreparedJob { program: loaded.program, stack_inputs, advice_inputs, host })
}

/// A job's program (named `name`, with its extension, in errors), assembled against the core
/// library or read from its package.
pub fn load_job_program(program: &JobProgram, name: &Path) -> Result<LoadedProgram, CliError> {
    match program {
        JobProgram::Masm(source) => {
            LoadedProgram::from_masm(&name.with_extension("masm"), source.clone(), Vec::new())
        },
        JobProgram::Masp(bytes) => LoadedProgram::from_package(&name.with_extension("masp"), bytes),
    }
}

/// A job's failure for an error of the command line's loading code.
fn failure(error: CliError) -> JobFailure {
    let kind = match &error {
        CliError::Invalid { kind: FileKind::Inputs, .. } => FailureKind::Inputs,
        CliError::Execution(_) => FailureKind::Execution,
        _ => FailureKind::Program,
    };
    JobFailure::new(kind, error.to_string())
}
