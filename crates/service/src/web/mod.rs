//! `--web.config.file`: TLS, client certificates and HTTP authentication, in the Prometheus
//! exporter-toolkit web configuration format (`docs/web-configuration.md` of
//! prometheus/exporter-toolkit), plus this project's bearer-token extension.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt            # or cert: <PEM text>
//!   key_file: server.key             # or key: <PEM text>
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: ca.crt           # or client_ca: <PEM text>
//!   min_version: TLS12               # TLS12 (default) or TLS13
//!   max_version: TLS13
//! http_server_config:
//!   headers:
//!     X-Content-Type-Options: nosniff
//! basic_auth_users:                  # user: bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//!   prometheus: $2y$10$...
//! # vllm-corrector extension (exporter-toolkit has no bearer tokens):
//! bearer_tokens: [ <token> ]
//! bearer_token_files: [ /etc/vllm-corrector/token ]
//! ```
//!
//! Relative file names are resolved against the directory of the web configuration file, as the
//! toolkit does. Once any authentication is configured, every request except the probes
//! `/-/healthy` and `/-/ready` must pass each configured scheme ([`auth`]); `docs/RELIABILITY.md`
//! explains the choice. What the toolkit supports and this service refuses is listed on
//! [`WebConfigFile`]: a refused field is an error, never silently ignored.

pub mod auth;
pub mod conn;
pub mod tls;

#[cfg(test)]
pub(crate) mod settings_tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde::de::IgnoredAny;

pub use auth::HttpAuth;

/// A string that is never printed by `Debug` (passwords, tokens, private keys).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// The web configuration file as written. Unknown fields are an error, as in the toolkit.
///
/// Fields of the toolkit format that this service refuses with an error naming them (rather than
/// ignoring a security setting): `tls_server_config.client_allowed_sans`, `cipher_suites`,
/// `curve_preferences`, `client_auth_type` `RequestClientCert`/`RequireAnyClientCert` (they accept
/// unverified certificates, so they authenticate nobody), `min_version` `TLS10`/`TLS11` (rustls
/// speaks TLS 1.2 and 1.3 only) and `rate_limit`. `http_server_config.http2` is accepted: the
/// service speaks HTTP/1.1 only, which every remote-write sender uses.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfigFile {
    /// TLS server settings; absent (or without `cert`/`cert_file`) means plain HTTP.
    pub tls_server_config: Option<TlsServerConfig>,
    /// HTTP server settings.
    pub http_server_config: Option<HttpServerConfig>,
    /// User name → bcrypt hash of the password (`$2a$`, `$2b$`, `$2x$` or `$2y$`).
    pub basic_auth_users: BTreeMap<String, Secret>,
    /// Extension: accepted `Authorization: Bearer <token>` tokens.
    pub bearer_tokens: Vec<Secret>,
    /// Extension: files each holding one accepted bearer token (surrounding whitespace trimmed,
    /// as Prometheus' `credentials_file`).
    pub bearer_token_files: Vec<PathBuf>,
    /// The toolkit's rate limiter: refused.
    pub rate_limit: Option<IgnoredAny>,
}

/// `tls_server_config:` (exporter-toolkit names).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsServerConfig {
    /// Server certificate chain, PEM text (instead of `cert_file`).
    pub cert: Option<String>,
    /// Server private key, PEM text (instead of `key_file`).
    pub key: Option<Secret>,
    /// Client CA certificates, PEM text (instead of `client_ca_file`).
    pub client_ca: Option<String>,
    /// Server certificate chain file, PEM, leaf first.
    pub cert_file: Option<PathBuf>,
    /// Server private key file, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// `NoClientCert` (default), `VerifyClientCertIfGiven` or `RequireAndVerifyClientCert`.
    pub client_auth_type: Option<String>,
    /// Client CA certificates file, PEM.
    pub client_ca_file: Option<PathBuf>,
    /// Refused (not supported).
    pub client_allowed_sans: Option<IgnoredAny>,
    /// `TLS12` (default) or `TLS13`.
    pub min_version: Option<String>,
    /// `TLS12` or `TLS13` (default).
    pub max_version: Option<String>,
    /// Refused (not supported): rustls' TLS 1.2 suites are all AEAD with forward secrecy.
    pub cipher_suites: Option<IgnoredAny>,
    /// Whether the server's suite order wins (default true, as in the toolkit).
    pub prefer_server_cipher_suites: Option<bool>,
    /// Refused (not supported).
    pub curve_preferences: Option<IgnoredAny>,
}

/// `http_server_config:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpServerConfig {
    /// Accepted and without effect: the service speaks HTTP/1.1 only.
    pub http2: Option<bool>,
    /// Response headers added to every answer; only the toolkit's five names are accepted.
    pub headers: BTreeMap<String, String>,
}

/// How client certificates are treated (`client_auth_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientCertPolicy {
    /// No client certificate is requested.
    #[default]
    None,
    /// Requested and verified when sent; a connection without one is accepted, but every
    /// request on it except the probes is refused (403).
    VerifyIfGiven,
    /// Required and verified during the handshake.
    RequireAndVerify,
}

/// The validated web configuration: what the listener and the auth middleware use.
#[derive(Debug, Default)]
pub struct WebSettings {
    /// The rustls server configuration when TLS is on.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Client certificate policy.
    pub client_certs: ClientCertPolicy,
    /// Basic auth users and bearer tokens.
    pub auth: HttpAuth,
    /// Headers added to every response.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Why the web configuration was refused. Each message names the file and field at fault.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// A file could not be read.
    #[error("{what} {path}: cannot read: {source}")]
    Read {
        /// What the file is (`--web.config.file`, `tls_server_config.cert_file`, …).
        what: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Malformed YAML, an unknown field or a wrong type.
    #[error("--web.config.file {path}: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with the location.
        message: String,
    },
    /// A value is refused.
    #[error("--web.config.file: {field}: {message}")]
    Invalid {
        /// The field, e.g. `tls_server_config.client_auth_type`.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> WebConfigError {
    WebConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// The toolkit's configurable response headers.
const HEADER_NAMES: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

impl WebConfigFile {
    /// Parses the YAML text of a web configuration file; an empty document is an empty config.
    ///
    /// # Errors
    /// [`WebConfigError::Yaml`]; `path` is only used in the message.
    pub fn from_yaml(text: &str, path: &Path) -> Result<WebConfigFile, WebConfigError> {
        if text.trim().is_empty() {
            return Ok(WebConfigFile::default());
        }
        serde_saphyr::from_str(text).map_err(|e| WebConfigError::Yaml {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }
}

/// Reads a file named by the configuration, resolving a relative `path` against `dir`.
pub(crate) fn read_file(what: &str, dir: &Path, path: &Path) -> Result<Vec<u8>, WebConfigError> {
    let full = dir.join(path);
    std::fs::read(&full).map_err(|source| WebConfigError::Read {
        what: what.to_owned(),
        path: full,
        source,
    })
}

impl WebSettings {
    /// Reads and validates `--web.config.file`; `None` gives plain HTTP without authentication.
    ///
    /// # Errors
    /// Any [`WebConfigError`]: unreadable or malformed file, a refused field, unreadable or
    /// invalid PEM, a malformed bcrypt hash, an empty bearer token.
    pub fn load(path: Option<&Path>) -> Result<WebSettings, WebConfigError> {
        let Some(path) = path else {
            return Ok(WebSettings::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
            what: "--web.config.file".to_owned(),
            path: path.to_owned(),
            source,
        })?;
        let file = WebConfigFile::from_yaml(&text, path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        WebSettings::from_file(&file, dir)
    }

    /// Validates a parsed file; relative file names are resolved against `dir`.
    ///
    /// # Errors
    /// As [`WebSettings::load`], after parsing.
    pub fn from_file(file: &WebConfigFile, dir: &Path) -> Result<WebSettings, WebConfigError> {
        if file.rate_limit.is_some() {
            return Err(invalid("rate_limit", "not supported by vllm-corrector"));
        }
        let (tls, client_certs) = match &file.tls_server_config {
            Some(section) => tls::server_config(section, dir)?,
            None => (None, ClientCertPolicy::None),
        };
        let auth = HttpAuth::from_file(file, dir)?;
        let headers = match &file.http_server_config {
            Some(http) => response_headers(&http.headers)?,
            None => Vec::new(),
        };
        Ok(WebSettings {
            tls,
            client_certs,
            auth,
            headers,
        })
    }

    /// Whether any request must authenticate (HTTP credentials or a client certificate).
    pub fn authenticates(&self) -> bool {
        self.auth.is_configured() || self.client_certs != ClientCertPolicy::None
    }
}

/// Validates `http_server_config.headers` as the toolkit does: only its five names, blank means
/// unset, `X-Frame-Options` is `deny` or `sameorigin`, `X-Content-Type-Options` is `nosniff`.
fn response_headers(
    headers: &BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, WebConfigError> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let field = format!("http_server_config.headers.{name}");
        let Some(known) = HEADER_NAMES.iter().find(|h| h.eq_ignore_ascii_case(name)) else {
            return Err(invalid(
                field,
                format!(
                    "cannot be configured; accepted: {}",
                    HEADER_NAMES.join(", ")
                ),
            ));
        };
        if value.trim().is_empty() {
            continue;
        }
        let allowed: &[&str] = match *known {
            "X-Frame-Options" => &["deny", "sameorigin"],
            "X-Content-Type-Options" => &["nosniff"],
            _ => &[],
        };
        if !allowed.is_empty() && !allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
            return Err(invalid(
                field,
                format!("{value:?} is not one of {}", allowed.join(", ")),
            ));
        }
        let value = HeaderValue::from_str(value)
            .map_err(|e| invalid(field, format!("{value:?} is not a header value: {e}")))?;
        // `from_bytes` lowercases; the five names are valid tokens.
        let name = HeaderName::from_bytes(known.as_bytes())
            .map_err(|e| invalid(format!("http_server_config.headers.{known}"), e.to_string()))?;
        out.push((name, value));
    }
    Ok(out)
}
