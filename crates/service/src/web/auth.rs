//! HTTP authentication: basic auth with bcrypt hashes (exporter-toolkit's `basic_auth_users`) and
//! bearer tokens (this project's extension), checked together with the client-certificate policy
//! by `super::WebSettings::authenticate`. The middleware that calls it is
//! `crate::http::auth`.
//!
//! Rules, once anything is configured ([`super::WebSettings::authenticates`]):
//! * every configured scheme must pass: a verified client certificate when a client CA is
//!   configured (403 otherwise), and valid HTTP credentials when users or tokens are configured
//!   (401 with a `WWW-Authenticate` challenge per configured scheme otherwise); with both users
//!   and tokens, either scheme is enough;
//! * `/-/healthy` and `/-/ready` stay open, so kubelet `httpGet` probes (which cannot carry
//!   credentials except in plain text in the pod spec) keep working; they reveal a fixed text;
//! * each refusal is counted in `vllm_corrector_auth_failures_total{reason}`.
//!
//! bcrypt is slow by design (about 70 ms at cost 10), and Prometheus sends every remote-write
//! request with the same credentials. As in the toolkit, a successful check is cached (keyed by a
//! SHA-256 of user, password and hash, never the password itself; cleared by a reload); checks
//! run one at a time on a blocking thread, so failed guesses cost at most one core; an unknown
//! user is checked against a dummy hash of the same cost, so timing does not reveal user names.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

use axum::http::{HeaderValue, StatusCode};
use base64::Engine as _;
use ring::digest::{SHA256, digest};

use super::file::{WebConfigError, WebConfigFile, invalid, read_file};
use crate::telemetry::AuthFailure;

/// Routes open without credentials: the liveness and readiness probes.
pub(crate) const OPEN_PATHS: [&str; 2] = ["/-/healthy", "/-/ready"];

/// Most cached successful basic-auth checks; the cache is cleared when full.
const MAX_CACHED: usize = 1024;

type Digest = [u8; 32];

fn sha256(parts: &[&[u8]]) -> Digest {
    let mut joined = Vec::new();
    for part in parts {
        // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        joined.extend_from_slice(&(part.len() as u64).to_le_bytes());
        joined.extend_from_slice(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, &joined).as_ref());
    out
}

/// Equality of two digests in time independent of where they differ.
fn same_digest(a: &Digest, b: &Digest) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Configured HTTP credentials. `Debug` prints counts only.
#[derive(Default)]
pub(crate) struct HttpAuth {
    /// User → bcrypt hash.
    users: BTreeMap<String, String>,
    /// Hash checked for an unknown user, of the users' highest cost.
    dummy_hash: Option<String>,
    /// SHA-256 of each accepted bearer token.
    tokens: Vec<Digest>,
    /// Successful basic-auth checks, keyed by [`sha256`] of (user, password, hash).
    verified: Mutex<HashSet<Digest>>,
    /// Serialises bcrypt computations.
    bcrypt_gate: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAuth")
            .field("users", &self.users.len())
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl HttpAuth {
    /// Validates `basic_auth_users`, `bearer_tokens` and `bearer_token_files` (relative to `dir`).
    ///
    /// # Errors
    /// [`WebConfigError::Invalid`] for an empty user name or one containing `:` (basic auth
    /// splits at the first colon, so it could never match), a hash that is not bcrypt, an empty
    /// token or one with whitespace inside; [`WebConfigError::Read`] for an unreadable token file.
    pub(crate) fn from_file(file: &WebConfigFile, dir: &Path) -> Result<HttpAuth, WebConfigError> {
        let mut users = BTreeMap::new();
        let mut max_cost = 0;
        for (user, hash) in &file.basic_auth_users {
            let field = format!("basic_auth_users.{user}");
            if user.is_empty() || user.contains(':') {
                return Err(invalid(
                    field,
                    "a user name must be non-empty and contain no ':'",
                ));
            }
            let parts = bcrypt::HashParts::from_str(&hash.0)
                .map_err(|e| invalid(&field, format!("not a bcrypt hash ($2y$10$…): {e}")))?;
            max_cost = max_cost.max(parts.get_cost());
            users.insert(user.clone(), hash.0.clone());
        }
        let dummy_hash = if users.is_empty() {
            None
        } else {
            let hash = bcrypt::hash_with_salt(b"", max_cost, [0; 16])
                .map_err(|e| invalid("basic_auth_users", e.to_string()))?;
            Some(hash.to_string())
        };
        let mut tokens = Vec::new();
        for (i, token) in file.bearer_tokens.iter().enumerate() {
            tokens.push(token_digest(&format!("bearer_tokens[{i}]"), &token.0)?);
        }
        for path in &file.bearer_token_files {
            let bytes = read_file("bearer_token_files", dir, path)?;
            let field = format!("bearer_token_files {}", dir.join(path).display());
            let text = String::from_utf8(bytes).map_err(|_| invalid(&field, "is not UTF-8"))?;
            tokens.push(token_digest(&field, &text)?);
        }
        Ok(HttpAuth {
            users,
            dummy_hash,
            tokens,
            ..HttpAuth::default()
        })
    }

    /// Whether users or tokens are configured (then every protected request needs them).
    pub(crate) fn is_configured(&self) -> bool {
        !self.users.is_empty() || !self.tokens.is_empty()
    }

    /// The `WWW-Authenticate` challenges of the configured schemes.
    pub(crate) fn challenges(&self) -> Vec<HeaderValue> {
        let mut out = Vec::new();
        if !self.users.is_empty() {
            out.push(HeaderValue::from_static(
                "Basic realm=\"vllm-corrector\", charset=\"UTF-8\"",
            ));
        }
        if !self.tokens.is_empty() {
            out.push(HeaderValue::from_static("Bearer realm=\"vllm-corrector\""));
        }
        out
    }

    /// Checks an `Authorization` header against the configured users and tokens.
    ///
    /// # Errors
    /// [`AuthFailure::MissingCredentials`] without a header, else
    /// [`AuthFailure::InvalidCredentials`] for anything but a configured scheme with valid
    /// credentials.
    pub(crate) async fn check(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<(), AuthFailure> {
        let value = authorization.ok_or(AuthFailure::MissingCredentials)?;
        let text = value
            .to_str()
            .map_err(|_| AuthFailure::InvalidCredentials)?;
        let (scheme, credentials) = text.trim().split_once(' ').unwrap_or((text, ""));
        let credentials = credentials.trim();
        let ok = if scheme.eq_ignore_ascii_case("basic") && !self.users.is_empty() {
            self.check_basic(credentials).await
        } else if scheme.eq_ignore_ascii_case("bearer") && !self.tokens.is_empty() {
            let presented = sha256(&[credentials.as_bytes()]);
            // Compare against every token, so timing does not say which one matched.
            self.tokens
                .iter()
                .fold(false, |found, t| same_digest(t, &presented) | found)
        } else {
            false
        };
        if ok {
            Ok(())
        } else {
            Err(AuthFailure::InvalidCredentials)
        }
    }

    async fn check_basic(&self, credentials: &str) -> bool {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials) else {
            return false;
        };
        let Ok(decoded) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = decoded.split_once(':') else {
            return false;
        };
        let (known, hash) = match (self.users.get(user), &self.dummy_hash) {
            (Some(hash), _) => (true, hash.clone()),
            (None, Some(dummy)) => (false, dummy.clone()),
            (None, None) => return false,
        };
        let key = sha256(&[user.as_bytes(), password.as_bytes(), hash.as_bytes()]);
        if known && self.cached(&key) {
            return true;
        }
        let _one_at_a_time = self.bcrypt_gate.lock().await;
        let password = password.to_owned();
        let matched = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .is_ok_and(|r| r.unwrap_or(false));
        if known && matched {
            let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.len() >= MAX_CACHED {
                verified.clear();
            }
            verified.insert(key);
        }
        known && matched
    }

    fn cached(&self, key: &Digest) -> bool {
        self.verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }
}

fn token_digest(field: &str, token: &str) -> Result<Digest, WebConfigError> {
    let token = token.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(invalid(
            field,
            "a bearer token must be non-empty and contain no whitespace",
        ));
    }
    Ok(sha256(&[token.as_bytes()]))
}

/// Why authentication refused a request: one variant per status. The status is chosen here, by
/// this layer ([`AuthError::status`]); the HTTP layer turns the error into a response in one
/// place (`crate::http::HttpError`).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum AuthError {
    /// A client CA is configured and the connection presented no verified client certificate.
    /// 403: credentials in a header cannot fix what the TLS handshake decided.
    #[error("a verified TLS client certificate is required")]
    ClientCertificateRequired,
    /// Missing or invalid HTTP credentials. 401, with one `WWW-Authenticate` challenge per
    /// configured scheme ([`HttpAuth::challenges`]).
    #[error("{}", if *.reason == AuthFailure::MissingCredentials { "credentials required" } else { "invalid credentials" })]
    Unauthenticated {
        /// [`AuthFailure::MissingCredentials`] or [`AuthFailure::InvalidCredentials`].
        reason: AuthFailure,
        /// The challenges to send back.
        challenges: Vec<HeaderValue>,
    },
}

impl AuthError {
    /// The status code of this refusal: 403 or 401.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            AuthError::ClientCertificateRequired => StatusCode::FORBIDDEN,
            AuthError::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
        }
    }

    /// The `reason` label of `vllm_corrector_auth_failures_total`.
    pub(crate) fn reason(&self) -> AuthFailure {
        match self {
            AuthError::ClientCertificateRequired => AuthFailure::MissingClientCertificate,
            AuthError::Unauthenticated { reason, .. } => *reason,
        }
    }
}
