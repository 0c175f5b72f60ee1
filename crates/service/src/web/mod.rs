//! `--web.config.file`: TLS, client certificates and HTTP authentication, in the Prometheus
//! exporter-toolkit web configuration format
//! (<https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>), plus
//! this project's bearer-token extension.
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
//! `/-/healthy` and `/-/ready` must pass each configured scheme (`auth`); `docs/SECURITY.md`
//! explains the choice. What the toolkit supports and this service refuses is listed on
//! `WebConfigFile`: a refused field is an error, never silently ignored.

pub(crate) mod auth;
pub(crate) mod conn;
pub(crate) mod file;
pub(crate) mod throttle;
pub(crate) mod tls;

#[cfg(test)]
pub(crate) mod settings_tests;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};

use auth::AuthError;
pub(crate) use auth::HttpAuth;
use file::invalid;
pub(crate) use file::{ClientCertPolicy, WebConfigError, WebConfigFile};

/// The validated web configuration: what the listener and the auth middleware use.
#[derive(Debug, Default)]
pub struct WebSettings {
    /// The rustls server configuration when TLS is on.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Client certificate policy.
    pub(crate) client_certs: ClientCertPolicy,
    /// Basic auth users and bearer tokens.
    pub(crate) auth: HttpAuth,
    /// Headers added to every response.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

/// The toolkit's configurable response headers.
const HEADER_NAMES: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

impl WebSettings {
    /// Whether TLS is on and whether any authentication (client certificates, basic auth,
    /// bearer tokens) is configured, in words, for `vllm-corrector check-config`.
    pub fn summary(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!(
            "TLS {}, client certificates {:?}, basic auth or bearer tokens {}",
            on(self.tls.is_some()),
            self.client_certs,
            on(self.auth.is_configured())
        )
    }

    /// Checks one request against every configured scheme (see `auth`'s module doc): the
    /// client-certificate policy first, then the HTTP credentials in `authorization`.
    /// `verified_client_certificate` says whether the connection's TLS handshake verified a client
    /// certificate, `client` is the peer's address ([`tls::Peer`]; failed checks are limited per
    /// client). Probes are not this function's business: the caller skips it for
    /// [`auth::OPEN_PATHS`].
    ///
    /// # Errors
    /// [`AuthError::ClientCertificateRequired`], [`AuthError::RateLimited`] or
    /// [`AuthError::Unauthenticated`].
    pub(crate) async fn authenticate(
        &self,
        client: Option<IpAddr>,
        verified_client_certificate: bool,
        authorization: Option<&HeaderValue>,
    ) -> Result<(), AuthError> {
        if self.client_certs != ClientCertPolicy::None && !verified_client_certificate {
            return Err(AuthError::ClientCertificateRequired);
        }
        if !self.auth.is_configured() {
            return Ok(());
        }
        match self.auth.check(client, authorization).await {
            Ok(()) => Ok(()),
            Err(crate::telemetry::AuthFailure::RateLimited) => Err(AuthError::RateLimited),
            Err(reason) => Err(AuthError::Unauthenticated {
                reason,
                challenges: self.auth.challenges(),
            }),
        }
    }

    /// Reads and validates `--web.config.file`; `None` gives plain HTTP without authentication.
    ///
    /// # Errors
    /// Any `WebConfigError`: unreadable or malformed file, a refused field, unreadable or
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
    pub(crate) fn from_file(
        file: &WebConfigFile,
        dir: &Path,
    ) -> Result<WebSettings, WebConfigError> {
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
    pub(crate) fn authenticates(&self) -> bool {
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
