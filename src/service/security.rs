//! How a fleet's client proves who it is to the NATS servers and keeps its traffic private:
//! [`FleetSecurity`], the `nats` command line's connection options as values (the library reads
//! no environment variable and no secret file of its own), and the server list of a
//! [`super::FleetOptions::url`].

use std::{fmt, path::PathBuf};

use async_nats::{ConnectOptions, ServerAddr};

use super::error::ServiceError;

// SECRETS
// ================================================================================================

/// A secret: a password, a token, an NKey seed or the contents of a `.creds` file. Its `Debug`
/// shows `<redacted>`, and it has no `Display`: it never reaches a log line or an error.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the client's connection only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

// OPTIONS
// ================================================================================================

/// How the client authenticates to the server (the `nats` command line's `--creds`, `--nkey`,
/// `--user`/`--password` and `--token`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FleetAuth {
    /// No credentials (or those of the URL, `nats://user:password@host`).
    #[default]
    None,
    /// A user of decentralized authentication: the contents of its `.creds` file (its JWT and
    /// NKey seed).
    Credentials(Secret),
    /// An NKey user: its seed (`SU...`).
    NKey(Secret),
    /// A user and password.
    UserPassword {
        /// The user's name.
        user: String,
        /// The password.
        password: Secret,
    },
    /// An authentication token.
    Token(Secret),
}

/// The TLS of the connection (the `nats` command line's `--tlscert`, `--tlskey` and `--tlsca`;
/// a `tls://` URL asks for TLS too). A server that requires TLS gets it without any of these,
/// its certificate checked against the system's roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetTls {
    /// Refuse a server that does not offer TLS.
    pub required: bool,
    /// A PEM file of the certificate authorities trusted for the server's certificate, beside
    /// the system's.
    pub ca: Option<PathBuf>,
    /// The client's certificate and key (PEM files), for a server that verifies its clients.
    pub client_certificate: Option<ClientCertificate>,
}

/// A client certificate and its key, both PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    /// The certificate (chain).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// How a fleet's client connects: its credentials and its TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetSecurity {
    /// The credentials.
    pub auth: FleetAuth,
    /// The TLS settings.
    pub tls: FleetTls,
}

impl FleetSecurity {
    /// Whether the connection must be encrypted (asked for, or a client certificate given).
    pub fn requires_tls(&self) -> bool {
        self.tls.required || self.tls.client_certificate.is_some()
    }

    /// `options` with these credentials and TLS settings.
    ///
    /// # Errors
    /// [`ServiceError::Credentials`] for `.creds` contents the client cannot read.
    pub(crate) fn apply(&self, options: ConnectOptions) -> Result<ConnectOptions, ServiceError> {
        let mut options = match &self.auth {
            FleetAuth::None => options,
            FleetAuth::Credentials(creds) => options
                .credentials(creds.expose())
                .map_err(|e| ServiceError::Credentials { message: e.to_string() })?,
            FleetAuth::NKey(seed) => options.nkey(seed.expose().to_string()),
            FleetAuth::UserPassword { user, password } => {
                options.user_and_password(user.clone(), password.expose().to_string())
            },
            FleetAuth::Token(token) => options.token(token.expose().to_string()),
        };
        if let Some(ca) = &self.tls.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some(ClientCertificate { cert, key }) = &self.tls.client_certificate {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(options.require_tls(self.requires_tls()))
    }
}

// SERVERS
// ================================================================================================

/// The servers of `urls` (comma-separated: the client fails over between them).
///
/// # Errors
/// [`ServiceError::ServerUrl`] for an empty list or a URL the client cannot parse.
pub(crate) fn server_addresses(urls: &str) -> Result<Vec<ServerAddr>, ServiceError> {
    let addresses = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| {
            url.parse::<ServerAddr>().map_err(|e| ServiceError::ServerUrl {
                url: redact_url(url),
                message: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    match addresses.is_empty() {
        true => Err(ServiceError::ServerUrl { url: String::new(), message: "no server".into() }),
        false => Ok(addresses),
    }
}

/// The servers of `urls` as errors and logs name them: `scheme://host:port`, comma-separated,
/// without the user and password a URL may hold.
pub(crate) fn server_names(urls: &str) -> String {
    let names: Vec<String> = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| match url.parse::<ServerAddr>() {
            Ok(address) => format!("{}://{}:{}", address.scheme(), address.host(), address.port()),
            Err(_) => redact_url(url),
        })
        .collect();
    names.join(",")
}

/// `url` without what comes before an `@` of its authority (a user and password).
fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => format!("<redacted>@{}", &rest[at + 1..]),
        None => rest.to_string(),
    };
    match scheme.is_empty() {
        true => rest,
        false => format!("{scheme}://{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_not_shown() {
        let security = FleetSecurity {
            auth: FleetAuth::UserPassword {
                user: "alice".into(),
                password: Secret::new("hunter2"),
            },
            tls: FleetTls::default(),
        };
        let shown = format!("{security:?}");
        assert!(shown.contains("alice") && !shown.contains("hunter2"), "{shown}");
        assert!(!format!("{:?}", FleetAuth::Token(Secret::new("s3cret"))).contains("s3cret"));
    }

    #[test]
    fn server_names_hold_no_password() {
        let urls = "nats://alice:hunter2@a:4222, tls://b:4443,c";
        assert_eq!(server_names(urls), "nats://a:4222,tls://b:4443,nats://c:4222");
        assert_eq!(redact_url("nats://alice:hunter2@a:4222"), "nats://<redacted>@a:4222");
        assert_eq!(server_addresses(urls).map(|a| a.len()).ok(), Some(3));
        assert!(matches!(server_addresses(" , "), Err(ServiceError::ServerUrl { .. })));
        let error = server_addresses("http://alice:hunter2@a").err().map(|e| e.to_string());
        assert!(error.is_some_and(|e| !e.contains("hunter2")));
    }
}
