//! The web configuration file as written (`--web.config.file`, exporter-toolkit format plus the
//! bearer-token extension), its errors and the helpers that read the files it names. The layer
//! below [`super::auth`], [`super::tls`] and [`super::WebSettings`], which validate it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;

/// A string that is never printed by `Debug` (passwords, tokens, private keys).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct Secret(pub String);

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
pub(crate) struct WebConfigFile {
    /// TLS server settings; absent (or without `cert`/`cert_file`) means plain HTTP.
    pub(crate) tls_server_config: Option<TlsServerConfig>,
    /// HTTP server settings.
    pub(crate) http_server_config: Option<HttpServerConfig>,
    /// User name → bcrypt hash of the password (`$2a$`, `$2b$`, `$2x$` or `$2y$`).
    pub(crate) basic_auth_users: BTreeMap<String, Secret>,
    /// Extension: accepted `Authorization: Bearer <token>` tokens.
    pub(crate) bearer_tokens: Vec<Secret>,
    /// Extension: files each holding one accepted bearer token (surrounding whitespace trimmed,
    /// as Prometheus' `credentials_file`).
    pub(crate) bearer_token_files: Vec<PathBuf>,
    /// The toolkit's rate limiter: refused.
    pub(crate) rate_limit: Option<IgnoredAny>,
}

/// `tls_server_config:` (exporter-toolkit names).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct TlsServerConfig {
    /// Server certificate chain, PEM text (instead of `cert_file`).
    pub(crate) cert: Option<String>,
    /// Server private key, PEM text (instead of `key_file`).
    pub key: Option<Secret>,
    /// Client CA certificates, PEM text (instead of `client_ca_file`).
    pub(crate) client_ca: Option<String>,
    /// Server certificate chain file, PEM, leaf first.
    pub(crate) cert_file: Option<PathBuf>,
    /// Server private key file, PEM (PKCS#8, PKCS#1 or SEC1).
    pub(crate) key_file: Option<PathBuf>,
    /// `NoClientCert` (default), `VerifyClientCertIfGiven` or `RequireAndVerifyClientCert`.
    pub(crate) client_auth_type: Option<String>,
    /// Client CA certificates file, PEM.
    pub(crate) client_ca_file: Option<PathBuf>,
    /// Refused (not supported).
    pub(crate) client_allowed_sans: Option<IgnoredAny>,
    /// `TLS12` (default) or `TLS13`.
    pub(crate) min_version: Option<String>,
    /// `TLS12` or `TLS13` (default).
    pub(crate) max_version: Option<String>,
    /// Refused (not supported): rustls' TLS 1.2 suites are all AEAD with forward secrecy.
    pub(crate) cipher_suites: Option<IgnoredAny>,
    /// Whether the server's suite order wins (default true, as in the toolkit).
    pub(crate) prefer_server_cipher_suites: Option<bool>,
    /// Refused (not supported).
    pub(crate) curve_preferences: Option<IgnoredAny>,
}

/// `http_server_config:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct HttpServerConfig {
    /// Accepted and without effect: the service speaks HTTP/1.1 only.
    pub(crate) http2: Option<bool>,
    /// Response headers added to every answer; only the toolkit's five names are accepted.
    pub(crate) headers: BTreeMap<String, String>,
}

/// How client certificates are treated (`client_auth_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ClientCertPolicy {
    /// No client certificate is requested.
    #[default]
    None,
    /// Requested and verified when sent; a connection without one is accepted, but every
    /// request on it except the probes is refused (403).
    VerifyIfGiven,
    /// Required and verified during the handshake.
    RequireAndVerify,
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

impl WebConfigFile {
    /// Parses the YAML text of a web configuration file; an empty document is an empty config.
    ///
    /// # Errors
    /// [`WebConfigError::Yaml`]; `path` is only used in the message.
    pub(crate) fn from_yaml(text: &str, path: &Path) -> Result<WebConfigFile, WebConfigError> {
        if text.trim().is_empty() {
            return Ok(WebConfigFile::default());
        }
        serde_saphyr::from_str(text).map_err(|e| WebConfigError::Yaml {
            path: path.to_owned(),
            message: crate::config::yaml_message(&e, |_| None),
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
