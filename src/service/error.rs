//! The typed errors of the fleet: the NATS server, the formats, the metrics endpoint.

use thiserror::Error;

use crate::pool::PoolError;

/// Everything that can go wrong in [`super::Fleet`], [`super::Worker`], [`super::MetricsServer`]
/// and the span export, apart from a job's own failure (which is its result).
#[derive(Debug, Error)]
pub enum ServiceError {
    /// The NATS server could not be reached or refused a request; `action` says what was being
    /// done.
    #[error("NATS: cannot {action}: {message}")]
    Nats {
        /// What was being done (`connect to nats://...`, `publish job <id>`, ...).
        action: String,
        /// The client's error.
        message: String,
    },
    /// A server refused the connection, or it could not be secured: trying again would not
    /// help.
    #[error("NATS: {server} refused the connection: {cause}")]
    Refused {
        /// The servers tried (`scheme://host:port`, without credentials).
        server: String,
        /// Why.
        cause: RefusalCause,
    },
    /// The server denied the client a subject its permissions do not allow.
    #[error("NATS: {server} denied the client: {message}")]
    PermissionDenied {
        /// The servers tried (`scheme://host:port`, without credentials).
        server: String,
        /// The server's error (the subject and what was denied).
        message: String,
    },
    /// A server URL of [`super::FleetOptions::url`] cannot be parsed.
    #[error("NATS: bad server URL `{url}`: {message}")]
    ServerUrl {
        /// The URL, without its credentials.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// [`super::FleetOptions::submitter`] is not a valid name.
    #[error("invalid submitter: {0}")]
    Submitter(String),
    /// The contents of a `.creds` file could not be read ([`super::FleetAuth::Credentials`]).
    #[error("NATS: unreadable credentials: {message}")]
    Credentials {
        /// What is wrong with them.
        message: String,
    },
    /// A stream of the fleet exists with settings other than those asked for; nothing was
    /// changed.
    #[error(
        "NATS: the stream {stream} exists with {setting} {existing}, not {wanted}; nothing was \
         changed (change or delete it with the nats command line)"
    )]
    StreamSettings {
        /// The stream.
        stream: String,
        /// The setting that differs.
        setting: &'static str,
        /// The stream's value.
        existing: String,
        /// The value asked for.
        wanted: String,
    },
    /// A job or result could not be serialized.
    #[error("cannot encode a message: {0}")]
    Encode(#[source] serde_json::Error),
    /// A value of the results bucket is not a result this build reads.
    #[error("the result of job {id} is malformed: {message}")]
    MalformedResult {
        /// The job's id.
        id: String,
        /// What is wrong with it.
        message: String,
    },
    /// A job could not be put on the queue within the time allowed (the server away, or not
    /// confirming it).
    #[error("job {id} was not queued within {seconds} s: {message}")]
    NotQueued {
        /// The job's id.
        id: String,
        /// The seconds allowed.
        seconds: u64,
        /// The last error.
        message: String,
    },
    /// No result came within the time allowed.
    #[error("no result for job {id} after {seconds} s")]
    TimedOut {
        /// The job's id.
        id: String,
        /// The seconds waited.
        seconds: u64,
    },
    /// The worker's prover pool could not start.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The async runtime of a worker or client could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The metrics endpoint could not start.
    #[error("cannot serve metrics on {address}: {message}")]
    Metrics {
        /// The address asked for.
        address: String,
        /// Why it failed.
        message: String,
    },
    /// The export of tracing spans (feature `otlp`) could not start or send.
    #[error("OTLP span export: {message}")]
    Telemetry {
        /// What went wrong.
        message: String,
    },
}

/// Why a server refused a connection ([`ServiceError::Refused`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RefusalCause {
    /// The server refused the credentials: none given, wrong, or not of a user it knows.
    #[error("authorization violation (missing or wrong credentials)")]
    Authorization,
    /// The client could not sign the server's challenge with its NKey or `.creds` seed.
    #[error("authentication failed: {0}")]
    Authentication(String),
    /// The TLS handshake failed: a certificate not trusted, expired or not for this host, or
    /// TLS asked for and not offered.
    #[error("TLS: {0}")]
    Tls(String),
}

impl ServiceError {
    /// A [`ServiceError::Nats`] for `action`, from the client's error.
    pub(crate) fn nats(action: impl Into<String>, error: impl std::fmt::Display) -> Self {
        Self::Nats { action: action.into(), message: error.to_string() }
    }
}
