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
use tracing::{debug, info, warn};

use super::{
    error::ServiceError,
    fleet::QueueDepth,
    gpus::{GpuMonitor, GpuSample},
    result::Outcome,
};
use crate::{committer::GpuCommitter, Backend};

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
///   its backend reports it (`GpuCommitter::memory_in_use`), read at each scrape;
/// - `miden_gpu_committer_info{slot, backend, device}`: 1 for each slot's committer, naming its
///   backend and device (the wgpu adapter, the CUDA GPUs, the CPU);
/// - `miden_gpu_gpu_utilization_percent{gpu, cuda, name}`,
///   `miden_gpu_gpu_temperature_celsius{gpu, cuda, name}`,
///   `miden_gpu_gpu_memory_used_bytes{gpu, cuda, name}`: each of the host's GPUs as NVML reports
///   it at each scrape ([`GpuMonitor`]; `gpu` is NVML's index, `cuda` the CUDA ordinal where
///   known), for a pool on a GPU backend. Where NVML is absent (no NVIDIA driver) these gauges are
///   absent, and the worker's log says why.
pub struct Metrics {
    registry: Registry,
    jobs: IntCounterVec,
    failures: IntCounterVec,
    proof_seconds: Histogram,
    running: IntGauge,
    queue_waiting: IntGauge,
    queue_in_progress: IntGauge,
    device_memory: IntGaugeVec,
    gpu_utilization: IntGaugeVec,
    gpu_temperature: IntGaugeVec,
    gpu_memory_used: IntGaugeVec,
    committers: Vec<Arc<dyn GpuCommitter>>,
    gpus: Option<GpuMonitor>,
}

/// The labels of the per-GPU gauges: NVML's index, the CUDA ordinal (empty where unknown), the
/// GPU's name.
const GPU_LABELS: [&str; 3] = ["gpu", "cuda", "name"];

impl Metrics {
    /// The metrics of a worker whose pool has `committers` (one per slot); where they run on a
    /// GPU backend, the host's GPUs are read through NVML ([`GpuMonitor::open`]) if it is there.
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
        let labelled = |name: &str, help: &str, labels: &[&str]| {
            let metric = IntGaugeVec::new(Opts::new(name, help), labels).map_err(failed)?;
            registry.register(Box::new(metric.clone())).map_err(failed)?;
            Ok::<_, ServiceError>(metric)
        };
        let info = labelled(
            "miden_gpu_committer_info",
            "The committer of each slot: its backend and device (always 1)",
            &["slot", "backend", "device"],
        )?;
        for (slot, committer) in committers.iter().enumerate() {
            let backend = committer.backend().to_string();
            info.with_label_values(&[&slot.to_string(), &backend, &committer.device_name()]).set(1);
        }
        let gpu_utilization = labelled(
            "miden_gpu_gpu_utilization_percent",
            "Percent of the last sample period in which a kernel ran on the GPU (NVML)",
            &GPU_LABELS,
        )?;
        let gpu_temperature = labelled(
            "miden_gpu_gpu_temperature_celsius",
            "The GPU's temperature in degrees Celsius (NVML)",
            &GPU_LABELS,
        )?;
        let gpu_memory_used = labelled(
            "miden_gpu_gpu_memory_used_bytes",
            "Device memory allocated on the GPU by every process, in bytes (NVML)",
            &GPU_LABELS,
        )?;
        let gpus = match committers.iter().any(|c| c.backend() != Backend::Cpu) {
            true => match GpuMonitor::open() {
                Ok(monitor) => {
                    info!(?monitor, "GPU utilization and temperature metrics through NVML");
                    Some(monitor)
                },
                Err(reason) => {
                    info!("no GPU utilization or temperature metrics: {reason}");
                    None
                },
            },
            false => {
                debug!("no GPU utilization or temperature metrics: the pool runs on the CPU");
                None
            },
        };
        Ok(Self {
            registry,
            jobs,
            failures,
            proof_seconds,
            running,
            queue_waiting,
            queue_in_progress,
            device_memory,
            gpu_utilization,
            gpu_temperature,
            gpu_memory_used,
            committers,
            gpus,
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

    /// The per-GPU gauges from `samples` (those of before removed: a GPU or reading that is
    /// gone has no gauge).
    pub(crate) fn record_gpus(&self, samples: &[GpuSample]) {
        let gauges = [&self.gpu_utilization, &self.gpu_temperature, &self.gpu_memory_used];
        for gauge in gauges {
            gauge.reset();
        }
        for sample in samples {
            let cuda = sample.cuda_ordinal.map(|ordinal| ordinal.to_string()).unwrap_or_default();
            let labels = [sample.index.to_string(), cuda, sample.name.clone()];
            let labels = [labels[0].as_str(), labels[1].as_str(), labels[2].as_str()];
            let values = [
                sample.utilization_percent.map(u64::from),
                sample.temperature_celsius.map(u64::from),
                sample.memory_used_bytes,
            ];
            for (gauge, value) in gauges.into_iter().zip(values) {
                if let Some(value) = value {
                    gauge.with_label_values(&labels).set(value.try_into().unwrap_or(i64::MAX));
                }
            }
        }
    }

    /// Every metric in Prometheus' text format, the device memory and the GPUs read now.
    pub fn render(&self) -> String {
        if let Some(monitor) = &self.gpus {
            self.record_gpus(&monitor.sample());
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuCommitter;

    /// Checks that `text` is Prometheus' text format: comments (`# HELP`, `# TYPE`) and samples
    /// `name{label="value",...} number`.
    fn check_exposition(text: &str) {
        for line in text.lines().filter(|line| !line.is_empty()) {
            if let Some(comment) = line.strip_prefix("# ") {
                assert!(comment.starts_with("HELP ") || comment.starts_with("TYPE "), "{line}");
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
            assert!(value.parse::<f64>().is_ok() || value == "+Inf", "value of `{line}`");
            let name = series.split('{').next().unwrap_or_default();
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
            assert!(!name.is_empty() && name.chars().all(valid), "metric name of `{line}`");
            if let Some(labels) = series.strip_prefix(name).filter(|rest| !rest.is_empty()) {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "labels of `{line}`");
            }
        }
    }

    fn sample(index: u32, utilization: Option<u32>, memory: Option<u64>) -> GpuSample {
        GpuSample {
            index,
            cuda_ordinal: (index == 0).then_some(1),
            name: "Fake GPU".into(),
            utilization_percent: utilization,
            temperature_celsius: Some(64),
            memory_used_bytes: memory,
        }
    }

    /// A pool on the CPU opens no NVML: valid text without a per-GPU gauge, the committer named.
    #[test]
    fn without_gpus_the_text_is_valid_and_has_no_gpu_gauges() {
        let committer: Arc<dyn GpuCommitter> = Arc::new(CpuCommitter::new());
        let metrics = Metrics::new(vec![committer]).expect("metrics");
        assert!(metrics.gpus.is_none(), "NVML opened for a CPU pool");
        let text = metrics.render();
        check_exposition(&text);
        assert!(!text.contains("miden_gpu_gpu_"), "{text}");
        assert!(text.contains("miden_gpu_committer_info{backend=\"cpu\",device=\"CPU ("), "{text}");
        assert!(text.contains("# HELP miden_gpu_jobs_running "), "{text}");
    }

    /// Samples fed in become gauges with their HELP lines; a reading that is absent has no
    /// gauge, and a later sample without a GPU removes its gauges.
    #[test]
    fn gpu_samples_become_gauges() {
        let metrics = Metrics::new(Vec::new()).expect("metrics");
        metrics.record_gpus(&[sample(0, Some(87), None), sample(1, None, Some(3 << 30))]);
        let text = metrics.render();
        check_exposition(&text);
        for help in [
            "# HELP miden_gpu_gpu_utilization_percent ",
            "# HELP miden_gpu_gpu_temperature_celsius ",
            "# HELP miden_gpu_gpu_memory_used_bytes ",
            "# TYPE miden_gpu_gpu_utilization_percent gauge",
        ] {
            assert!(text.contains(help), "no `{help}` in:\n{text}");
        }
        for series in [
            "miden_gpu_gpu_utilization_percent{cuda=\"1\",gpu=\"0\",name=\"Fake GPU\"} 87",
            "miden_gpu_gpu_temperature_celsius{cuda=\"1\",gpu=\"0\",name=\"Fake GPU\"} 64",
            "miden_gpu_gpu_temperature_celsius{cuda=\"\",gpu=\"1\",name=\"Fake GPU\"} 64",
            "miden_gpu_gpu_memory_used_bytes{cuda=\"\",gpu=\"1\",name=\"Fake GPU\"} 3221225472",
        ] {
            assert!(text.lines().any(|line| line == series), "no `{series}` in:\n{text}");
        }
        assert!(!text.contains("utilization_percent{cuda=\"\",gpu=\"1\""), "{text}");
        assert!(!text.contains("memory_used_bytes{cuda=\"1\",gpu=\"0\""), "{text}");

        metrics.record_gpus(&[sample(1, Some(5), None)]);
        let text = metrics.render();
        check_exposition(&text);
        assert!(!text.contains("gpu=\"0\""), "{text}");
        assert!(text.contains("utilization_percent{cuda=\"\",gpu=\"1\",name=\"Fake GPU\"} 5"));
    }

    /// On a host without NVML the monitor is absent with a reason; where NVML is present it
    /// lists at least one GPU, each read without a panic.
    #[test]
    fn the_monitor_opens_or_says_why() {
        match GpuMonitor::open() {
            Ok(monitor) => {
                let samples = monitor.sample();
                assert!(!samples.is_empty());
                let metrics = Metrics::new(Vec::new()).expect("metrics");
                metrics.record_gpus(&samples);
                check_exposition(&metrics.render());
            },
            Err(reason) => assert!(reason.contains("NVML"), "{reason}"),
        }
    }
}
