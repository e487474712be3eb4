//! A worker's metrics ([`Metrics`], Prometheus) and the HTTP endpoint that serves them with a
//! health check ([`MetricsServer`]: `/metrics`, `/health`).

use std::{
    net::SocketAddr,
    sync::Arc,
    thread::{self, JoinHandle},
    time::Duration,
};

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use tiny_http::{Header, Response, Server};
use tracing::warn;

use super::{error::ServiceError, fleet::QueueDepth, result::Outcome};
use crate::committer::GpuCommitter;

/// The upper bounds of the proof latency histogram's buckets, in seconds.
const LATENCY_BUCKETS: [f64; 12] =
    [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0];

// METRICS
// ================================================================================================

/// A worker's counters and gauges, rendered in Prometheus' text format:
///
/// - `miden_gpu_jobs_total{outcome}`: jobs filed as `proved` or `failed`, and `duplicate`
///   deliveries of jobs whose result another delivery filed (found before or after the proof);
/// - `miden_gpu_job_failures_total{kind}`: failed jobs by [`super::FailureKind`];
/// - `miden_gpu_proof_seconds`: histogram of the time from a job's start on the pool to its
///   proof (or failure), execution and self-check included;
/// - `miden_gpu_jobs_running`: jobs being proved by this worker;
/// - `miden_gpu_queue_waiting`, `miden_gpu_queue_in_progress`: the fleet's queue, read every
///   few seconds ([`super::Fleet::queue_depth`]);
/// - `miden_gpu_device_memory_bytes{slot, device}`: device memory each committer holds, where
///   its backend reports it (`GpuCommitter::memory_in_use`), read at each scrape.
pub struct Metrics {
    registry: Registry,
    jobs: IntCounterVec,
    failures: IntCounterVec,
    proof_seconds: Histogram,
    running: IntGauge,
    queue_waiting: IntGauge,
    queue_in_progress: IntGauge,
    device_memory: IntGaugeVec,
    committers: Vec<Arc<dyn GpuCommitter>>,
}

impl Metrics {
    /// The metrics of a worker whose pool has `committers` (one per slot).
    ///
    /// # Errors
    /// [`ServiceError::Metrics`] if a metric cannot be registered.
    pub fn new(committers: Vec<Arc<dyn GpuCommitter>>) -> Result<Self, ServiceError> {
        let failed = |e: prometheus::Error| ServiceError::Metrics {
            address: "the registry".into(),
            message: e.to_string(),
        };
        let registry = Registry::new();
        let counter = |name: &str, help: &str, label: &str| {
            let metric = IntCounterVec::new(Opts::new(name, help), &[label]).map_err(failed)?;
            registry.register(Box::new(metric.clone())).map_err(failed)?;
            Ok::<_, ServiceError>(metric)
        };
        let jobs = counter("miden_gpu_jobs_total", "Jobs filed, by outcome", "outcome")?;
        let failures = counter("miden_gpu_job_failures_total", "Failed jobs, by kind", "kind")?;
        let gauge = |name: &str, help: &str| {
            let metric = IntGauge::new(name, help).map_err(failed)?;
            registry.register(Box::new(metric.clone())).map_err(failed)?;
            Ok::<_, ServiceError>(metric)
        };
        let running = gauge("miden_gpu_jobs_running", "Jobs this worker is proving")?;
        let queue_waiting = gauge("miden_gpu_queue_waiting", "Jobs no worker holds")?;
        let queue_in_progress = gauge("miden_gpu_queue_in_progress", "Jobs workers hold")?;
        let proof_seconds = Histogram::with_opts(
            HistogramOpts::new("miden_gpu_proof_seconds", "Time to prove one job")
                .buckets(LATENCY_BUCKETS.to_vec()),
        )
        .map_err(failed)?;
        registry.register(Box::new(proof_seconds.clone())).map_err(failed)?;
        let device_memory = IntGaugeVec::new(
            Opts::new("miden_gpu_device_memory_bytes", "Device memory each committer holds"),
            &["slot", "device"],
        )
        .map_err(failed)?;
        registry.register(Box::new(device_memory.clone())).map_err(failed)?;
        Ok(Self {
            registry,
            jobs,
            failures,
            proof_seconds,
            running,
            queue_waiting,
            queue_in_progress,
            device_memory,
            committers,
        })
    }

    /// A job started on the pool.
    pub(crate) fn started(&self) {
        self.running.inc();
    }

    /// A job left the pool after `elapsed`.
    pub(crate) fn proved_in(&self, elapsed: Duration) {
        self.running.dec();
        self.proof_seconds.observe(elapsed.as_secs_f64());
    }

    /// A job's result was filed.
    pub(crate) fn finished(&self, outcome: &Outcome) {
        match outcome {
            Outcome::Proved(_) => self.jobs.with_label_values(&["proved"]).inc(),
            Outcome::Failed(failure) => {
                self.jobs.with_label_values(&["failed"]).inc();
                self.failures.with_label_values(&[&failure.kind.to_string()]).inc();
            },
        }
    }

    /// A delivery of a job whose result another delivery filed.
    pub(crate) fn duplicate(&self) {
        self.jobs.with_label_values(&["duplicate"]).inc();
    }

    /// The fleet's queue, as last read.
    pub(crate) fn queue_depth(&self, depth: QueueDepth) {
        self.queue_waiting.set(depth.waiting.try_into().unwrap_or(i64::MAX));
        self.queue_in_progress.set(depth.in_progress.try_into().unwrap_or(i64::MAX));
    }

    /// Every metric in Prometheus' text format, the device memory read now.
    pub fn render(&self) -> String {
        for (slot, committer) in self.committers.iter().enumerate() {
            if let Some(bytes) = committer.memory_in_use() {
                self.device_memory
                    .with_label_values(&[&slot.to_string(), &committer.device_name()])
                    .set(bytes.try_into().unwrap_or(i64::MAX));
            }
        }
        let mut text = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut text) {
            warn!(%error, "cannot encode the metrics");
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}

// HTTP ENDPOINT
// ================================================================================================

/// An HTTP server on its own thread: `GET /metrics` ([`Metrics::render`]) and `GET /health`
/// (200 while the worker is connected to the NATS server, 503 otherwise). Stopped when dropped.
pub struct MetricsServer {
    server: Arc<Server>,
    address: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `metrics` on `address` (`host:port`; port 0 for any free port); `healthy` says
    /// whether the worker is healthy.
    ///
    /// # Errors
    /// [`ServiceError::Metrics`] if the address cannot be bound.
    pub fn start(
        address: &str,
        metrics: Arc<Metrics>,
        healthy: impl Fn() -> bool + Send + 'static,
    ) -> Result<Self, ServiceError> {
        let failed = |message: String| ServiceError::Metrics { address: address.into(), message };
        let server = Arc::new(Server::http(address).map_err(|e| failed(e.to_string()))?);
        let bound =
            server.server_addr().to_ip().ok_or_else(|| failed("not an IP address".into()))?;
        let content_type = Header::from_bytes("Content-Type", TextEncoder::new().format_type())
            .map_err(|()| failed("invalid content type".into()))?;
        let serving = server.clone();
        let thread = thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for request in serving.incoming_requests() {
                    let response = match request.url() {
                        "/metrics" => Response::from_string(metrics.render())
                            .with_header(content_type.clone()),
                        "/health" if healthy() => Response::from_string("ok\n"),
                        "/health" => {
                            Response::from_string("not connected to NATS\n").with_status_code(503)
                        },
                        _ => Response::from_string("not found\n").with_status_code(404),
                    };
                    if let Err(error) = request.respond(response) {
                        warn!(%error, "cannot answer a metrics request");
                    }
                }
            })
            .map_err(|e| failed(e.to_string()))?;
        Ok(Self { server, address: bound, thread: Some(thread) })
    }

    /// The address served (with the port chosen, for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
