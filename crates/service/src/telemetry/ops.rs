//! Self-metrics of the operational surface: authentication, TLS handshakes and configuration
//! reloads. Registered by [`super::SelfMetrics::new`] into the same registry as the rest, so they
//! appear on `/metrics` in both formats.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as MetricFamily;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::connections::ConnectionEvent;

/// Why a request was refused by authentication: the `reason` label of
/// `vllm_corrector_auth_failures_total`, pre-registered at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthFailure {
    /// No `Authorization` header while basic auth or bearer tokens are configured. 401.
    MissingCredentials,
    /// An `Authorization` header of an unconfigured scheme, malformed, an unknown user, a wrong
    /// password or an unknown bearer token. 401.
    InvalidCredentials,
    /// A client CA is configured (`client_auth_type: VerifyClientCertIfGiven`) and the connection
    /// presented no verified client certificate. 403.
    MissingClientCertificate,
    /// A basic-auth check refused before bcrypt ran: the client used up its allowance of failed
    /// checks, or no check slot freed in time (`crate::web::throttle`). 503.
    RateLimited,
}

impl AuthFailure {
    /// Every reason, in label order.
    pub(crate) const ALL: [AuthFailure; 4] = [
        AuthFailure::MissingCredentials,
        AuthFailure::InvalidCredentials,
        AuthFailure::MissingClientCertificate,
        AuthFailure::RateLimited,
    ];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuthFailure::MissingCredentials => "missing_credentials",
            AuthFailure::InvalidCredentials => "invalid_credentials",
            AuthFailure::MissingClientCertificate => "missing_client_certificate",
            AuthFailure::RateLimited => "rate_limited",
        }
    }
}

/// Authentication, TLS and reload self-metrics.
#[derive(Debug, Default)]
pub(crate) struct OpsMetrics {
    auth_failures: MetricFamily<[(&'static str, &'static str); 1], Counter>,
    tls_handshake_failures: Counter,
    reload_successful: Gauge,
    reload_success_timestamp: Gauge<f64, AtomicU64>,
    /// Open connections and connections the server closed ([`super::connections`]).
    pub(crate) connections: super::connections::ConnectionMetrics,
    /// State files ignored and failed writes ([`super::storage`]).
    pub(crate) storage: super::storage::StorageMetrics,
}

impl OpsMetrics {
    /// Creates the metrics: every auth failure reason at 0, the last reload marked successful
    /// (the start-up load is the first successful load, as in Prometheus) with timestamp 0 until
    /// [`OpsMetrics::reload_succeeded`] is first called.
    pub(crate) fn new() -> Self {
        let m = OpsMetrics::default();
        for reason in AuthFailure::ALL {
            let _ = m
                .auth_failures
                .get_or_create(&[("reason", reason.as_str())]);
        }
        m.reload_successful.set(1);
        OpsMetrics {
            connections: super::connections::ConnectionMetrics::new(),
            storage: super::storage::StorageMetrics::new(),
            ..m
        }
    }

    /// Registers every metric in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "vllm_corrector_auth_failures",
            "Requests refused by authentication (--web.config.file), by reason",
            self.auth_failures.clone(),
        );
        registry.register(
            "vllm_corrector_tls_handshake_failures",
            "TLS handshakes that failed or timed out (a missing or unverifiable client certificate under RequireAndVerifyClientCert fails here, before any HTTP request)",
            self.tls_handshake_failures.clone(),
        );
        registry.register(
            "vllm_corrector_config_last_reload_successful",
            "Whether the last configuration reload attempt (--config.file and --web.config.file) succeeded: 1 or 0",
            self.reload_successful.clone(),
        );
        registry.register(
            "vllm_corrector_config_last_reload_success_timestamp_seconds",
            "Timestamp of the last successful configuration load (start-up included), seconds since the Unix epoch",
            self.reload_success_timestamp.clone(),
        );
        self.connections.register(registry);
        self.storage.register(registry);
    }

    /// Records a successful (re)load at `unix_seconds`.
    pub(crate) fn reload_succeeded(&self, unix_seconds: f64) {
        self.reload_successful.set(1);
        self.reload_success_timestamp.set(unix_seconds);
    }

    /// Records a failed reload; the success timestamp keeps the last success.
    pub(crate) fn reload_failed(&self) {
        self.reload_successful.set(0);
    }
}

/// A request was refused by authentication.
#[derive(Debug)]
pub(crate) struct AuthRefused<'a> {
    /// Why.
    pub(crate) reason: AuthFailure,
    /// The client's address, when known.
    pub(crate) client: Option<std::net::IpAddr>,
    /// The request path (logged at debug level only).
    pub(crate) path: &'a str,
}

/// A flood of refusals repeats one line: at most one warning per 10 s for rate-limited checks
/// (`suppressed` says how many were logged at debug meanwhile).
static RATE_LIMITED_LOGGED: super::events::LogLimit = super::events::LogLimit::new(1);

/// An event recorded into [`OpsMetrics`]: every one is a `super::InternalEvent` (a blanket impl
/// there), so callers `emit` it like the others.
pub(crate) trait OpsEvent {
    /// Logs the event and updates `ops`.
    fn record(self, ops: &OpsMetrics);
}

impl<T: ConnectionEvent> OpsEvent for T {
    fn record(self, ops: &OpsMetrics) {
        self.record_connection(&ops.connections);
    }
}

impl OpsEvent for AuthRefused<'_> {
    fn record(self, ops: &OpsMetrics) {
        let client = self.client.map(tracing::field::display);
        let warn = self.reason == AuthFailure::RateLimited;
        match warn.then(|| RATE_LIMITED_LOGGED.allow()).flatten() {
            Some(suppressed) => tracing::warn!(
                client,
                suppressed,
                "authentication checks refused: too many failed checks from this client, or no \
                 check slot free within a second (answered 503)"
            ),
            None => tracing::debug!(
                reason = self.reason.as_str(),
                client,
                path = self.path,
                "request refused by authentication"
            ),
        }
        ops.auth_failures
            .get_or_create(&[("reason", self.reason.as_str())])
            .inc();
    }
}

/// A TLS handshake failed or timed out.
#[derive(Debug)]
pub(crate) struct TlsHandshakeFailed {
    /// The client's address.
    pub(crate) peer: std::net::SocketAddr,
    /// What went wrong.
    pub(crate) error: String,
}

impl OpsEvent for TlsHandshakeFailed {
    fn record(self, ops: &OpsMetrics) {
        tracing::debug!(peer = %self.peer, error = %self.error, "TLS handshake failed");
        ops.tls_handshake_failures.inc();
    }
}
