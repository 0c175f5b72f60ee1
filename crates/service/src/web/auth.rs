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
//! SHA-256 of user, password and hash, never the password itself; cleared by a reload). So is a
//! failed one ([`MAX_REJECTED`] keys, the least recently seen dropped first): the outcome of a key
//! never changes until a reload, so a wrong password repeated costs no bcrypt. Requests with the
//! same credentials while they are being checked wait for that one check. Any other check runs on
//! a blocking thread within its client's allowance and one of a few slots (`super::throttle`), or
//! is refused at once with [`AuthFailure::RateLimited`] (503): a flood of wrong passwords cannot
//! queue a valid credential out. An unknown user is checked against a dummy hash of the same
//! cost, so timing does not reveal user names.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::http::{HeaderValue, StatusCode};
use base64::Engine as _;
use ring::digest::{SHA256, digest};

use super::file::{WebConfigError, WebConfigFile, invalid, read_file};
use super::throttle::{Recent, Throttle};
use crate::telemetry::AuthFailure;

/// Routes open without credentials: the liveness and readiness probes.
pub(crate) const OPEN_PATHS: [&str; 2] = ["/-/healthy", "/-/ready"];

/// Most cached successful basic-auth checks; the cache is cleared when full.
const MAX_CACHED: usize = 1024;

/// Most failed basic-auth checks remembered (32-byte keys: at most about 300 KiB).
pub(crate) const MAX_REJECTED: usize = 4096;

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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Configured HTTP credentials. `Debug` prints counts only.
pub(crate) struct HttpAuth {
    /// User → bcrypt hash.
    users: BTreeMap<String, String>,
    /// Hash checked for an unknown user, of the users' highest cost.
    dummy_hash: Option<String>,
    /// SHA-256 of each accepted bearer token.
    tokens: Vec<Digest>,
    /// Successful basic-auth checks, keyed by [`sha256`] of (user, password, hash).
    verified: Mutex<HashSet<Digest>>,
    /// Failed basic-auth checks, same keys.
    rejected: Mutex<Recent<Digest, ()>>,
    /// Checks running, by key: a request with the same credentials waits for the running one.
    checking: Mutex<HashMap<Digest, Arc<tokio::sync::OnceCell<bool>>>>,
    /// Per-client allowance and slots of bcrypt checks.
    throttle: Arc<Throttle>,
}

impl Default for HttpAuth {
    fn default() -> Self {
        HttpAuth {
            users: BTreeMap::new(),
            dummy_hash: None,
            tokens: Vec::new(),
            verified: Mutex::default(),
            rejected: Mutex::new(Recent::new(MAX_REJECTED)),
            checking: Mutex::default(),
            throttle: Arc::new(Throttle::per_core()),
        }
    }
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

    /// Checks an `Authorization` header from `client` (the peer's address) against the
    /// configured users and tokens.
    ///
    /// # Errors
    /// [`AuthFailure::MissingCredentials`] without a header; [`AuthFailure::RateLimited`] when a
    /// basic-auth check would need bcrypt and `client` has no allowance left or no slot freed
    /// within `super::throttle::MAX_SLOT_WAIT`; else [`AuthFailure::InvalidCredentials`] for
    /// anything but a configured scheme with valid credentials.
    pub(crate) async fn check(
        &self,
        client: Option<IpAddr>,
        authorization: Option<&HeaderValue>,
    ) -> Result<(), AuthFailure> {
        let value = authorization.ok_or(AuthFailure::MissingCredentials)?;
        let text = value
            .to_str()
            .map_err(|_| AuthFailure::InvalidCredentials)?;
        let (scheme, credentials) = text.trim().split_once(' ').unwrap_or((text, ""));
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("basic") && !self.users.is_empty() {
            return self.check_basic(client, credentials).await;
        }
        let ok = scheme.eq_ignore_ascii_case("bearer") && !self.tokens.is_empty() && {
            let presented = sha256(&[credentials.as_bytes()]);
            // Compare against every token, so timing does not say which one matched.
            self.tokens
                .iter()
                .fold(false, |found, t| same_digest(t, &presented) | found)
        };
        if ok {
            Ok(())
        } else {
            Err(AuthFailure::InvalidCredentials)
        }
    }

    async fn check_basic(
        &self,
        client: Option<IpAddr>,
        credentials: &str,
    ) -> Result<(), AuthFailure> {
        const INVALID: AuthFailure = AuthFailure::InvalidCredentials;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(credentials)
            .map_err(|_| INVALID)?;
        let decoded = String::from_utf8(decoded).map_err(|_| INVALID)?;
        let (user, password) = decoded.split_once(':').ok_or(INVALID)?;
        let (known, hash) = match (self.users.get(user), &self.dummy_hash) {
            (Some(hash), _) => (true, hash.clone()),
            (None, Some(dummy)) => (false, dummy.clone()),
            (None, None) => return Err(INVALID),
        };
        let key = sha256(&[user.as_bytes(), password.as_bytes(), hash.as_bytes()]);
        if known && lock(&self.verified).contains(&key) {
            return Ok(());
        }
        if lock(&self.rejected).get_mut(&key).is_some() {
            return Err(INVALID);
        }
        let running = Running::join(self, key);
        let accepted = running
            .cell
            .get_or_try_init(|| self.verify(client, key, known, password.to_owned(), hash))
            .await?;
        if *accepted { Ok(()) } else { Err(INVALID) }
    }

    /// Runs bcrypt for `key` within `client`'s allowance and a slot, and remembers the outcome:
    /// whether the credentials are accepted.
    async fn verify(
        &self,
        client: Option<IpAddr>,
        key: Digest,
        known: bool,
        password: String,
        hash: String,
    ) -> Result<bool, AuthFailure> {
        let mut admitted = self
            .throttle
            .admit(client)
            .ok_or(AuthFailure::RateLimited)?;
        let Some(slot) = self.throttle.slot().await else {
            admitted.give_back();
            return Err(AuthFailure::RateLimited);
        };
        // The slot and the admission go with the computation: a request dropped meanwhile (its
        // client gone) keeps both until bcrypt is done, so the bounds hold.
        let computed = tokio::task::spawn_blocking(move || {
            // bcrypt first: an unknown user costs a check too.
            let matched = bcrypt::verify(password, &hash).unwrap_or(false);
            let accepted = known && matched;
            if accepted {
                admitted.give_back();
            }
            drop((admitted, slot));
            accepted
        })
        .await;
        let Ok(accepted) = computed else {
            // bcrypt panicked: refuse, and remember nothing.
            return Ok(false);
        };
        if accepted {
            let mut verified = lock(&self.verified);
            if verified.len() >= MAX_CACHED {
                verified.clear();
            }
            verified.insert(key);
        } else {
            lock(&self.rejected).get_or_insert_with(key, || ());
        }
        Ok(accepted)
    }
}

/// A request's share in the running check of its key (`HttpAuth::checking`): the entry is removed
/// when the check is decided (the caches answer from then on) or its last waiter is gone, so the
/// map holds only checks some request still waits for.
struct Running<'a> {
    auth: &'a HttpAuth,
    key: Digest,
    cell: Arc<tokio::sync::OnceCell<bool>>,
}

impl<'a> Running<'a> {
    fn join(auth: &'a HttpAuth, key: Digest) -> Self {
        let cell = lock(&auth.checking).entry(key).or_default().clone();
        Running { auth, key, cell }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut checking = lock(&self.auth.checking);
        // Clones are taken under this lock, so the count is exact: 2 is the map's and ours.
        let ours = checking
            .get(&self.key)
            .is_some_and(|cell| Arc::ptr_eq(cell, &self.cell));
        if ours && (self.cell.initialized() || Arc::strong_count(&self.cell) == 2) {
            checking.remove(&self.key);
        }
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
    /// A basic-auth check refused before bcrypt ran (`super::throttle`): the client used up its
    /// allowance of failed checks, or no check slot freed in time. 503 with `Retry-After`: a
    /// sender retries the batch (a 401 would make it drop the batch), and the wait is short.
    #[error("too many authentication checks; retry later")]
    RateLimited,
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
    /// The status code of this refusal: 403, 503 or 401.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            AuthError::ClientCertificateRequired => StatusCode::FORBIDDEN,
            AuthError::RateLimited => StatusCode::SERVICE_UNAVAILABLE,
            AuthError::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
        }
    }

    /// The `reason` label of `vllm_corrector_auth_failures_total`.
    pub(crate) fn reason(&self) -> AuthFailure {
        match self {
            AuthError::ClientCertificateRequired => AuthFailure::MissingClientCertificate,
            AuthError::RateLimited => AuthFailure::RateLimited,
            AuthError::Unauthenticated { reason, .. } => *reason,
        }
    }
}

#[cfg(test)]
mod tests;
