//! Self-metrics of client connections: how many are open, and how many the server closed itself
//! (the connection cap, the header-read timeout, the keep-alive idle timeout), from
//! [`crate::web::conn`]. Registered by [`super::OpsMetrics::register`].

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as MetricFamily;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Why the server closed a connection: the `reason` label of
/// `vllm_corrector_connections_closed_total`, each pre-registered at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// `limits.max_connections` connections were already open: closed as soon as accepted.
    MaxConnections,
    /// No complete request head within `limits.header_read_timeout`.
    HeaderReadTimeout,
    /// Idle between requests for `limits.idle_connection_timeout`.
    IdleTimeout,
    /// A response not written within `limits.response_write_timeout` (a client that reads
    /// slowly or not at all).
    ResponseWriteTimeout,
}

impl CloseReason {
    /// Every reason, in label order.
    pub(crate) const ALL: [CloseReason; 4] = [
        CloseReason::MaxConnections,
        CloseReason::HeaderReadTimeout,
        CloseReason::IdleTimeout,
        CloseReason::ResponseWriteTimeout,
    ];

    /// The label value (the `limits.*` field that closed it).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CloseReason::MaxConnections => "max_connections",
            CloseReason::HeaderReadTimeout => "header_read_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::ResponseWriteTimeout => "response_write_timeout",
        }
    }
}

/// Connection self-metrics.
#[derive(Debug, Default)]
pub(crate) struct ConnectionMetrics {
    closed: MetricFamily<[(&'static str, &'static str); 1], Counter>,
    open: Gauge,
}

impl ConnectionMetrics {
    /// Creates the metrics with every close reason at 0.
    pub(crate) fn new() -> Self {
        let m = ConnectionMetrics::default();
        for reason in CloseReason::ALL {
            let _ = m.closed.get_or_create(&[("reason", reason.as_str())]);
        }
        m
    }

    /// Registers both metrics in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "vllm_corrector_connections_closed",
            "Client connections the server closed itself, by reason: max_connections (refused at accept, limits.max_connections open), header_read_timeout (no complete request head within limits.header_read_timeout), idle_timeout (keep-alive connection idle for limits.idle_connection_timeout), response_write_timeout (a response not read by the client within limits.response_write_timeout)",
            self.closed.clone(),
        );
        registry.register(
            "vllm_corrector_connections_open",
            "Client connections open (TLS connections once their handshake is done)",
            self.open.clone(),
        );
    }

    /// Counts a connection opened (`+1`) or finished (`-1`).
    pub(crate) fn open_changed(&self, delta: i64) {
        self.open.inc_by(delta);
    }
}

/// The server closed a connection itself.
#[derive(Debug)]
pub(crate) struct ConnectionClosed {
    /// The client's address.
    pub(crate) peer: std::net::SocketAddr,
    /// Why.
    pub(crate) reason: CloseReason,
}

/// An event recorded into [`ConnectionMetrics`] (then into `super::ops::OpsEvent` and
/// `super::InternalEvent` by blanket impls, so callers `emit` it like the others).
pub(crate) trait ConnectionEvent {
    /// Logs the event and updates `connections`.
    fn record_connection(self, connections: &ConnectionMetrics);
}

impl ConnectionEvent for ConnectionClosed {
    fn record_connection(self, connections: &ConnectionMetrics) {
        tracing::debug!(peer = %self.peer, reason = self.reason.as_str(), "connection closed by the server");
        connections
            .closed
            .get_or_create(&[("reason", self.reason.as_str())])
            .inc();
    }
}
