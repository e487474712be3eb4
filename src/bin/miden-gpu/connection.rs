//! The connection options of `serve`, `submit` and `fetch`: the NATS servers, the credentials
//! and TLS of the `nats` command line (same names, same environment variables), and the
//! replicas of the streams a client creates. Secret files are read here; the library gets the
//! values ([`FleetSecurity`]).

use std::path::{Path, PathBuf};

use clap::Args;
use miden_gpu::service::{
    ClientCertificate, FleetAuth, FleetOptions, FleetSecurity, FleetTls, Secret,
};

use crate::{
    data::read_file,
    error::{CliError, FileKind},
};

/// The NATS server of `serve`, `submit` and `fetch` when `--nats` is not given.
pub const DEFAULT_NATS: &str = "nats://127.0.0.1:4222";

/// How `serve`, `submit` and `fetch` reach the fleet's NATS servers.
#[derive(Debug, Clone, Args)]
pub struct ConnectionArgs {
    /// The NATS servers (with JetStream) of the fleet, comma-separated for failover;
    /// `tls://host:port` asks for TLS
    #[arg(long = "nats", env = "NATS_URL", value_name = "URLS", default_value = DEFAULT_NATS)]
    pub nats: String,

    /// A user's credentials file (.creds: its JWT and NKey seed)
    #[arg(long = "creds", env = "NATS_CREDS", value_name = "FILE", group = "auth")]
    creds: Option<PathBuf>,

    /// A file holding an NKey user's seed
    #[arg(long = "nkey", env = "NATS_NKEY", value_name = "FILE", group = "auth")]
    nkey: Option<PathBuf>,

    /// A user name, with --password
    #[arg(long = "user", env = "NATS_USER", group = "auth", requires = "password")]
    user: Option<String>,

    /// The password of --user
    #[arg(
        long = "password",
        env = "NATS_PASSWORD",
        hide_env_values = true,
        requires = "user",
        value_parser = parse_secret
    )]
    password: Option<Secret>,

    /// An authentication token
    #[arg(
        long = "token",
        env = "NATS_TOKEN",
        hide_env_values = true,
        group = "auth",
        value_parser = parse_secret
    )]
    token: Option<Secret>,

    /// The client's TLS certificate (PEM), with --tlskey
    #[arg(long = "tlscert", env = "NATS_CERT", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The key of --tlscert (PEM)
    #[arg(long = "tlskey", env = "NATS_KEY", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// The certificate authorities (PEM) trusted for the servers' certificates, beside the
    /// system's
    #[arg(long = "tlsca", env = "NATS_CA", value_name = "FILE")]
    tls_ca: Option<PathBuf>,

    /// The replicas of the job stream and the buckets where this client creates them (up to
    /// the cluster's servers); an existing stream with another number is refused [default: one
    /// per server of the cluster, at most 3, and existing streams as they are]
    #[arg(long = "replicas", env = "MIDEN_GPU_REPLICAS", value_parser = clap::value_parser!(u8).range(1..=5))]
    replicas: Option<u8>,
}

/// A secret argument, kept from `Debug` output.
fn parse_secret(text: &str) -> Result<Secret, String> {
    Ok(Secret::new(text))
}

impl ConnectionArgs {
    /// The fleet's options with these servers, credentials (secret files read here) and TLS.
    ///
    /// # Errors
    /// [`CliError::Read`] or [`CliError::Invalid`] for a credentials or NKey file.
    pub fn fleet_options(&self) -> Result<FleetOptions, CliError> {
        let auth = if let Some(path) = &self.creds {
            FleetAuth::Credentials(read_secret(FileKind::Credentials, path)?)
        } else if let Some(path) = &self.nkey {
            FleetAuth::NKey(read_secret(FileKind::NKey, path)?)
        } else if let (Some(user), Some(password)) = (&self.user, &self.password) {
            FleetAuth::UserPassword { user: user.clone(), password: password.clone() }
        } else if let Some(token) = &self.token {
            FleetAuth::Token(token.clone())
        } else {
            FleetAuth::None
        };
        let client_certificate = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                Some(ClientCertificate { cert: cert.clone(), key: key.clone() })
            },
            _ => None,
        };
        let tls = FleetTls {
            required: self.tls_ca.is_some() || client_certificate.is_some(),
            ca: self.tls_ca.clone(),
            client_certificate,
        };
        Ok(FleetOptions {
            security: FleetSecurity { auth, tls },
            replicas: self.replicas.map(usize::from),
            ..FleetOptions::new(&self.nats)
        })
    }
}

/// The trimmed text of the secret file `path` (its contents never shown in an error).
fn read_secret(kind: FileKind, path: &Path) -> Result<Secret, CliError> {
    let bytes = read_file(kind, path)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError::invalid(kind, path, "not UTF-8 text"))?
        .trim()
        .to_string();
    match text.is_empty() {
        true => Err(CliError::invalid(kind, path, "empty")),
        false => Ok(Secret::new(text)),
    }
}
