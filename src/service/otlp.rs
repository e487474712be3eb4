//! [`OtlpExport`] (feature `otlp`): the crate's tracing spans sent to an OpenTelemetry collector
//! over OTLP/HTTP with protobuf bodies (`tracing-opentelemetry`, `opentelemetry-otlp`): a
//! worker's `service.job` span per job, with the pool's `pool.job` span and the prover's stages
//! inside it, and the events logged in them.
//!
//! Spans are batched and sent from the exporter's own thread (every few seconds, and when the
//! export is dropped), so proving never waits for the collector; a collector that is away costs
//! the spans of that batch, and a warning from the exporter.

use std::time::Duration;

use opentelemetry::{trace::TracerProvider as _, KeyValue};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::{
    trace::{SdkTracer, SdkTracerProvider},
    Resource,
};
use tracing::{Level, Subscriber};
use tracing_subscriber::{filter::Targets, registry::LookupSpan, Layer};

use super::error::ServiceError;

/// The path of the trace export under a collector's base URL.
const TRACES_PATH: &str = "/v1/traces";

/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long dropping the export waits for the last spans to be sent.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The environment variables that name a collector when no URL is given.
pub const OTLP_ENDPOINT_ENV: [&str; 2] =
    ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// An OTLP span export: a tracer provider with a batching exporter. Its [`Self::layer`] goes
/// into the process's tracing subscriber; dropping it sends the spans not yet sent (waiting up
/// to 5 s) and stops the exporter's thread.
pub struct OtlpExport {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    endpoint: String,
}

impl OtlpExport {
    /// An export to the collector at `endpoint`, a base URL such as `http://collector:4318` to
    /// which `/v1/traces` is appended (a URL already ending in `/v1/traces` is taken as it is),
    /// or, without one, the standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole
    /// URL), `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL), else `http://localhost:4318`. The spans
    /// carry `service.name` = `service_name` and `service.instance.id` = `instance` (a worker's
    /// name). Plain `http://` only: this build has no TLS.
    ///
    /// Must be called outside an async runtime (the HTTP client is a blocking one, with a
    /// runtime of its own).
    ///
    /// # Errors
    /// [`ServiceError::Telemetry`] for an endpoint that is not a URL or an exporter that cannot
    /// start.
    pub fn new(
        endpoint: Option<&str>,
        service_name: &str,
        instance: &str,
    ) -> Result<Self, ServiceError> {
        let failed = |message: String| ServiceError::Telemetry { message };
        let mut builder = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(EXPORT_TIMEOUT);
        let endpoint = match endpoint {
            Some(url) => {
                let url = traces_url(url);
                builder = builder.with_endpoint(url.clone());
                url
            },
            None => OTLP_ENDPOINT_ENV
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
                .unwrap_or_else(|| "http://localhost:4318".into()),
        };
        let exporter = builder
            .build()
            .map_err(|e| failed(format!("cannot export spans to {endpoint}: {e}")))?;
        let resource = Resource::builder()
            .with_service_name(service_name.to_string())
            .with_attribute(KeyValue::new("service.instance.id", instance.to_string()))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("miden-gpu");
        Ok(Self { provider, tracer, endpoint })
    }

    /// The URL the spans go to (as given, or as read from the environment).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The layer that hands the crate's spans (`miden_gpu` targets, `INFO` and above) and the
    /// events in them to the exporter.
    pub fn layer<S>(&self) -> impl Layer<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_filter(Targets::new().with_target("miden_gpu", Level::INFO))
    }

    /// Sends the spans ended so far now, waiting for the collector's answer.
    ///
    /// # Errors
    /// [`ServiceError::Telemetry`] when the export fails.
    pub fn flush(&self) -> Result<(), ServiceError> {
        self.provider
            .force_flush()
            .map_err(|e| ServiceError::Telemetry { message: format!("cannot send spans: {e}") })
    }
}

impl Drop for OtlpExport {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            eprintln!("warning: the last spans were not exported: {error}");
        }
    }
}

/// `url` with the trace path appended, unless it ends with it already.
fn traces_url(url: &str) -> String {
    let url = url.trim_end_matches('/');
    match url.ends_with(TRACES_PATH) {
        true => url.to_string(),
        false => format!("{url}{TRACES_PATH}"),
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead, BufReader, Read, Write},
        net::TcpListener,
        sync::mpsc,
        thread,
    };

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn the_trace_path_is_appended_once() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c/otel"), "http://c/otel/v1/traces");
    }

    /// One HTTP request: its request line and body.
    fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, Vec<u8>)> {
        let mut reader = BufReader::new(stream.try_clone().ok()?);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let mut length = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).ok()?;
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().ok()?;
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        let response = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                        content-length: 0\r\nconnection: close\r\n\r\n";
        stream.write_all(response.as_bytes()).ok()?;
        Some((line.trim().to_string(), body))
    }

    /// A span of the crate's target reaches a collector (a listener on loopback) when the
    /// export is flushed; a span of another target does not.
    #[test]
    fn a_span_reaches_the_collector() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("its address").port();
        let (requests, received) = mpsc::channel();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                if let Some(request) = read_request(&mut stream) {
                    let _ = requests.send(request);
                }
            }
        });

        let export = OtlpExport::new(Some(&format!("http://127.0.0.1:{port}")), "otlp-test", "one")
            .expect("an exporter");
        assert_eq!(export.endpoint(), format!("http://127.0.0.1:{port}/v1/traces"));
        let subscriber = tracing_subscriber::registry().with(export.layer());
        tracing::subscriber::with_default(subscriber, || {
            let span =
                tracing::info_span!(target: "miden_gpu::service", "service.job", id = "job-42");
            span.in_scope(|| tracing::info!(target: "miden_gpu::service", "proving"));
            tracing::info_span!(target: "elsewhere", "not.exported").in_scope(|| {});
        });
        export.flush().expect("the spans are sent");

        let (line, body) =
            received.recv_timeout(Duration::from_secs(20)).expect("an export request");
        assert_eq!(line, "POST /v1/traces HTTP/1.1");
        let has = |text: &str| body.windows(text.len()).any(|window| window == text.as_bytes());
        assert!(has("service.job") && has("job-42") && has("otlp-test"), "{body:?}");
        assert!(!has("not.exported"));
    }
}
