//! Self-observability: logging setup and the `vllm_corrector_*` self-metrics.
//!
//! Self-metrics use `prometheus-client` 0.26, which encodes both OpenMetrics 1.0.0
//! (`SelfMetrics::encode_openmetrics`) and the Prometheus text format 0.0.4
//! (`SelfMetrics::encode_text`). Following Vector's habit, each happening worth counting is one
//! `InternalEvent` type whose `emit` both logs (tracing) and counts, so the two never disagree.

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as MetricFamily;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use engine::{IngestReport, RejectReason};
use protocol::{MetadataDropReason, MetadataDropped};

pub(crate) mod connections;
pub(crate) mod events;
mod logging;
pub(crate) mod memory;
pub(crate) mod ops;
pub(crate) mod scrape;
pub(crate) mod storage;
pub(crate) use connections::{CloseReason, ConnectionClosed};
pub use logging::{LoggingError, init_logging};
pub(crate) use ops::{AuthFailure, AuthRefused, OpsMetrics, TlsHandshakeFailed};

/// One `name="value"` label.
type Label1 = [(&'static str, &'static str); 1];
/// Two labels.
type Label2 = [(&'static str, &'static str); 2];

/// The labels of `vllm_corrector_http_requests_total`: the route that matched (`other` for none)
/// and the status code.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct HttpLabels {
    handler: std::sync::Arc<str>,
    code: &'static str,
}

impl prometheus_client::encoding::EncodeLabelSet for HttpLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        ("handler", &*self.handler).encode(encoder.encode_label())?;
        ("code", self.code).encode(encoder.encode_label())
    }
}

/// The service's own metrics, all named `vllm_corrector_*`. Cheap to update from any thread
/// (atomics); share it behind an `Arc`.
#[derive(Debug)]
pub(crate) struct SelfMetrics {
    registry: Registry,
    samples_received: Counter,
    samples_applied: Counter,
    samples_rejected: MetricFamily<Label1, Counter>,
    http_requests: MetricFamily<HttpLabels, Counter>,
    requests_limited: MetricFamily<Label1, Counter>,
    metadata_dropped: MetricFamily<Label1, Counter>,
    write_panics: Counter,
    /// Authentication, TLS handshake and reload metrics ([`ops`]).
    pub(crate) ops: OpsMetrics,
}

/// A request-level limit that refuses a request whole (a remote write, or a status page or scrape
/// past the response bounds), as the `limit` label of
/// `vllm_corrector_requests_limited_total`. Series-level limits reject samples instead and are
/// counted in `vllm_corrector_samples_rejected_total{reason}`. What a sender sees at each one is in
/// `docs/RELIABILITY.md`, "Limits".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestLimit {
    /// `limits.max_body_bytes`: the body as sent (413).
    MaxBodyBytes,
    /// `limits.max_decoded_bytes`: the decoded size snappy declares (413).
    MaxDecodedBytes,
    /// `limits.max_series_per_request` (413).
    MaxSeriesPerRequest,
    /// `limits.max_concurrent_requests`: no request slot in time (503).
    MaxConcurrentRequests,
    /// `limits.max_inflight_bytes`: no memory budget in time (503).
    MaxInflightBytes,
    /// `limits.request_body_timeout`: the body did not arrive in time (503).
    RequestBodyTimeout,
    /// The fixed bound on `/status` and `/api/v1/groups` responses served at once (503).
    ConcurrentPages,
    /// The fixed bound on `/metrics` responses served at once (503).
    ConcurrentScrapes,
}

impl RequestLimit {
    /// Every limit, for pre-registering the label values.
    pub(crate) const ALL: [RequestLimit; 8] = [
        RequestLimit::MaxBodyBytes,
        RequestLimit::MaxDecodedBytes,
        RequestLimit::MaxSeriesPerRequest,
        RequestLimit::MaxConcurrentRequests,
        RequestLimit::MaxInflightBytes,
        RequestLimit::RequestBodyTimeout,
        RequestLimit::ConcurrentPages,
        RequestLimit::ConcurrentScrapes,
    ];

    /// The `limit` label value: the configuration field's name under `limits:`, or for the fixed
    /// response bounds `concurrent_pages` and `concurrent_scrapes`.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            RequestLimit::MaxBodyBytes => "max_body_bytes",
            RequestLimit::MaxDecodedBytes => "max_decoded_bytes",
            RequestLimit::MaxSeriesPerRequest => "max_series_per_request",
            RequestLimit::MaxConcurrentRequests => "max_concurrent_requests",
            RequestLimit::MaxInflightBytes => "max_inflight_bytes",
            RequestLimit::RequestBodyTimeout => "request_body_timeout",
            RequestLimit::ConcurrentPages => "concurrent_pages",
            RequestLimit::ConcurrentScrapes => "concurrent_scrapes",
        }
    }
}

impl Default for SelfMetrics {
    fn default() -> Self {
        SelfMetrics::new()
    }
}

impl SelfMetrics {
    /// Creates and registers every self-metric. Every `reason` of
    /// `vllm_corrector_samples_rejected_total` ([`RejectReason::ALL`]) and of
    /// `vllm_corrector_metadata_dropped_total` ([`MetadataDropReason::ALL`]) is pre-registered at
    /// 0, so a rate or an alert on them works before the first occurrence. The engine's gauges are
    /// not here: each scrape collects them from a snapshot ([`scrape::ScrapeMetrics`]).
    pub(crate) fn new() -> Self {
        let m = SelfMetrics {
            registry: Registry::default(),
            samples_received: Counter::default(),
            samples_applied: Counter::default(),
            samples_rejected: MetricFamily::default(),
            http_requests: MetricFamily::default(),
            requests_limited: MetricFamily::default(),
            metadata_dropped: MetricFamily::default(),
            write_panics: Counter::default(),
            ops: OpsMetrics::new(),
        };
        for limit in RequestLimit::ALL {
            let _ = m
                .requests_limited
                .get_or_create(&[("limit", limit.as_str())]);
        }
        for reason in RejectReason::ALL {
            let _ = m
                .samples_rejected
                .get_or_create(&[("reason", reason.as_str())]);
        }
        for reason in MetadataDropReason::ALL {
            let _ = m
                .metadata_dropped
                .get_or_create(&[("reason", reason.as_str())]);
        }
        let build_info: MetricFamily<Label2, Gauge> = MetricFamily::default();
        build_info
            .get_or_create(&[("commit", crate::COMMIT), ("version", protocol::VERSION)])
            .set(1);

        let mut m = m;
        m.ops.register(&mut m.registry);
        let r = &mut m.registry;
        // prometheus-client appends `_total` to counter names itself.
        r.register(
            "vllm_corrector_samples_received",
            "Samples received by remote write: float samples, native histograms with custom buckets as the classic samples they stand for, other native histogram samples as one each",
            m.samples_received.clone(),
        );
        r.register(
            "vllm_corrector_samples_applied",
            "Samples applied to series state (staleness markers included)",
            m.samples_applied.clone(),
        );
        r.register(
            "vllm_corrector_samples_rejected",
            "Samples received but not applied, by reason. received = applied + sum of rejected",
            m.samples_rejected.clone(),
        );
        r.register(
            "vllm_corrector_requests_limited",
            "Remote-write requests refused whole by a request-level limit, by limit (the limits.* field)",
            m.requests_limited.clone(),
        );
        r.register(
            "vllm_corrector_metadata_dropped",
            "Remote-write metadata entries dropped, by reason: invalid_utf8 (RW 1.0 family name, help or unit not UTF-8), symbol_ref_out_of_range (RW 2.0 help_ref or unit_ref outside symbols) or too_long (help over 4096 bytes or unit over 256 bytes, not cached). Metadata never fails a request: its samples are still applied",
            m.metadata_dropped.clone(),
        );
        r.register(
            "vllm_corrector_write_panics",
            "Remote-write requests whose processing panicked (a bug: please report it). Each was answered 400 so the sender drops the batch instead of retrying it forever; its samples, when already decoded, are counted as rejected with reason internal_error",
            m.write_panics.clone(),
        );
        r.register(
            "vllm_corrector_http_requests",
            "HTTP responses sent, by handler and status code",
            m.http_requests.clone(),
        );
        // A gauge rather than an OpenMetrics `info`: the text format 0.0.4 has no info type, and a
        // gauge named `*_build_info` reads the same in both formats (as `prometheus_build_info`).
        r.register(
            "vllm_corrector_build_info",
            "Build information: the crate version and the git commit (`git rev-parse --short HEAD`, or unknown outside a git checkout) the landing page shows; the value is always 1",
            build_info,
        );
        m
    }

    /// Adds one request's sample accounting to the received, applied and rejected counters.
    pub(crate) fn record_ingest(&self, report: &IngestReport) {
        self.samples_received.inc_by(report.received);
        self.samples_applied.inc_by(report.applied);
        for reason in RejectReason::ALL {
            let n = report.rejected[reason.index()];
            if n > 0 {
                self.samples_rejected
                    .get_or_create(&[("reason", reason.as_str())])
                    .inc_by(n);
            }
        }
    }

    /// Counts one request refused by the request-level limit `limit`.
    pub(crate) fn record_limited(&self, limit: RequestLimit) {
        self.requests_limited
            .get_or_create(&[("limit", limit.as_str())])
            .inc();
    }

    /// Adds one request's dropped metadata entries to `vllm_corrector_metadata_dropped_total`.
    pub(crate) fn record_metadata_dropped(&self, dropped: &MetadataDropped) {
        for reason in MetadataDropReason::ALL {
            let n = dropped.get(reason);
            if n > 0 {
                self.metadata_dropped
                    .get_or_create(&[("reason", reason.as_str())])
                    .inc_by(u64::from(n));
            }
        }
    }

    /// Counts one HTTP response. `handler` is the route that matched, such as `/api/v1/write`, or
    /// `other`.
    pub(crate) fn record_http(&self, handler: std::sync::Arc<str>, status: axum::http::StatusCode) {
        let code = status_label(status);
        self.http_requests
            .get_or_create(&HttpLabels { handler, code })
            .inc();
    }

    /// Appends the self-metrics in OpenMetrics 1.0.0 text, **without** the final `# EOF` (the
    /// caller appends it after every family).
    ///
    /// # Errors
    /// Only the `fmt::Error` of the writer.
    pub(crate) fn encode_openmetrics(&self, out: &mut String) -> std::fmt::Result {
        text::encode_registry(out, &self.registry)
    }

    /// Appends the self-metrics in the Prometheus text format 0.0.4.
    ///
    /// # Errors
    /// Only the `fmt::Error` of the writer.
    pub(crate) fn encode_text(&self, out: &mut String) -> std::fmt::Result {
        prometheus_text::encode(out, &self.registry)
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The status code as a `'static` label value, for the codes this service sends.
fn status_label(status: axum::http::StatusCode) -> &'static str {
    match status.as_u16() {
        200 => "200",
        204 => "204",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        413 => "413",
        415 => "415",
        500 => "500",
        503 => "503",
        c if c < 200 => "1xx",
        c if c < 300 => "2xx",
        c if c < 400 => "3xx",
        c if c < 500 => "4xx",
        _ => "5xx",
    }
}

/// A happening that is both logged and counted. `emit` does both.
pub(crate) trait InternalEvent {
    /// Logs the event and updates the self-metrics.
    fn emit(self, metrics: &SelfMetrics);
}

/// The operational events (authentication, TLS, connections) record into their own metrics
/// ([`ops::OpsEvent`]), which know nothing of [`SelfMetrics`], so `ops` and `connections` do not
/// import this module back.
impl<T: ops::OpsEvent> InternalEvent for T {
    fn emit(self, metrics: &SelfMetrics) {
        self.record(&metrics.ops);
    }
}

/// A remote-write request's samples were accounted for (applied or rejected).
#[derive(Debug)]
pub(crate) struct SamplesIngested<'a> {
    /// The request's accounting.
    pub report: &'a IngestReport,
}

impl InternalEvent for SamplesIngested<'_> {
    fn emit(self, metrics: &SelfMetrics) {
        let r = self.report;
        tracing::debug!(
            received = r.received,
            applied = r.applied,
            rejected = r.rejected_total(),
            "samples ingested"
        );
        metrics.record_ingest(r);
    }
}

/// A remote-write request was refused whole by a request-level limit.
#[derive(Debug)]
pub(crate) struct RequestLimited {
    /// The limit.
    pub(crate) limit: RequestLimit,
}

impl InternalEvent for RequestLimited {
    fn emit(self, metrics: &SelfMetrics) {
        tracing::debug!(
            limit = self.limit.as_str(),
            "remote-write request refused by a limit"
        );
        metrics.record_limited(self.limit);
    }
}

/// The decoder dropped some metadata entries of a remote-write request (the request itself goes
/// on: metadata never fails a request). Logged at warn level: a sender sends malformed metadata.
#[derive(Debug)]
pub(crate) struct MetadataEntriesDropped {
    /// The request's dropped entries, by reason ([`protocol::WriteRequestRef::metadata_dropped`]).
    pub(crate) dropped: MetadataDropped,
    /// `"1.0"` or `"2.0"`: the remote-write version of the request.
    pub(crate) protocol: &'static str,
}

/// Malformed metadata can come with every request: at most 10 warn lines per 10 s.
static METADATA_DROPS_LOGGED: events::LogLimit = events::LogLimit::new(10);

impl InternalEvent for MetadataEntriesDropped {
    fn emit(self, metrics: &SelfMetrics) {
        let d = &self.dropped;
        let Some(suppressed) = METADATA_DROPS_LOGGED.allow() else {
            tracing::debug!(
                protocol = self.protocol,
                "remote-write metadata dropped (log rate limit reached)"
            );
            metrics.record_metadata_dropped(d);
            return;
        };
        tracing::warn!(
            suppressed,
            protocol = self.protocol,
            invalid_utf8 = d.get(MetadataDropReason::InvalidUtf8),
            symbol_ref_out_of_range = d.get(MetadataDropReason::SymbolRefOutOfRange),
            too_long = d.get(MetadataDropReason::TooLong),
            "remote-write metadata dropped (samples still applied)"
        );
        metrics.record_metadata_dropped(d);
    }
}

/// Processing a remote-write request panicked: a bug. Logged at error level with the panic
/// message; counted in `vllm_corrector_write_panics_total` and, when the request had been decoded,
/// its samples in `vllm_corrector_samples_rejected_total{reason="internal_error"}`.
#[derive(Debug)]
pub(crate) struct WritePanicked<'a> {
    /// The panic message (its payload when a string, else a placeholder). The request's samples,
    /// once decoded, are counted `internal_error` by the ingest's guard.
    pub(crate) message: &'a str,
}

impl InternalEvent for WritePanicked<'_> {
    fn emit(self, metrics: &SelfMetrics) {
        tracing::error!(
            panic = self.message,
            "remote write processing panicked: this is a bug, please report it; answered 400 so \
             the sender drops this batch instead of retrying it forever"
        );
        metrics.write_panics.inc();
    }
}

/// An HTTP response was sent.
#[derive(Debug)]
pub(crate) struct HttpResponded {
    /// The route that matched, e.g. `/api/v1/write`, or `other`.
    pub(crate) handler: std::sync::Arc<str>,
    /// Status sent.
    pub(crate) status: axum::http::StatusCode,
}

impl InternalEvent for HttpResponded {
    fn emit(self, metrics: &SelfMetrics) {
        tracing::trace!(
            handler = &*self.handler,
            code = self.status.as_u16(),
            "http response"
        );
        metrics.record_http(self.handler, self.status);
    }
}

/// The periodic idle sweep ran. The removal count itself is mirrored from the engine's stats.
#[derive(Debug)]
pub(crate) struct IdleSweep {
    /// Groups removed by this sweep.
    pub(crate) removed: usize,
}

impl InternalEvent for IdleSweep {
    fn emit(self, _metrics: &SelfMetrics) {
        if self.removed > 0 {
            tracing::info!(removed = self.removed, "idle groups removed");
        } else {
            tracing::trace!("idle sweep removed nothing");
        }
    }
}

#[cfg(test)]
mod tests;
