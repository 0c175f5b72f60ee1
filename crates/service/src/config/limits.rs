//! The `limits:` section of `--config.file` ([`LimitsSection`], as written) and the validated
//! receiver [`Limits`] the HTTP layer enforces.

use engine::EngineConfig;
use protocol::labels::LabelLimits;
use serde::Deserialize;

use super::error::{ConfigError, duration_ms, invalid, positive};

/// `limits:` section of the YAML file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// The memory budget of the whole process, bytes: the engine's state (series with their
    /// labels, groups, the series index, removed groups' kept state), the requests in flight
    /// (`max_inflight_bytes`) and a fixed reserve for the rest ([`RESERVED_BYTES`]). Past its state
    /// share, samples of new series are refused (`memory_budget`, 400) while known series keep
    /// flowing (docs/RELIABILITY.md, "The memory budget"). At least `max_inflight_bytes` + 80 MiB.
    /// Like every `*_bytes` field, an integer of bytes or a number with a unit (`384MiB`, `1GB`:
    /// `super::bytes`). Default: `384MiB` (402653184), for the 512 MiB memory limit the
    /// manifests set.
    #[serde(deserialize_with = "super::bytes::deserialize")]
    pub(crate) max_memory_bytes: usize,
    /// Largest accepted remote-write body, in bytes as sent (snappy-compressed). A larger body is
    /// answered 413. At least 1. Default: `8388608` (8 MiB).
    #[serde(deserialize_with = "super::bytes::deserialize")]
    pub(crate) max_body_bytes: usize,
    /// Largest accepted decoded (decompressed) body, in bytes. A body whose snappy header declares
    /// more is answered 413 before any allocation. At least `max_body_bytes`. Default: `8388608`
    /// (8 MiB; Prometheus 2.42 sends at most 2 000 samples, about 0.5 MiB, per request by
    /// default, vmagent blocks of at most 8 MiB, `-remoteWrite.maxBlockSize`).
    #[serde(deserialize_with = "super::bytes::deserialize")]
    pub(crate) max_decoded_bytes: usize,
    /// Remote-write requests processed at once. A request that finds no free slot within a few
    /// seconds is answered 503, which the sender retries with backoff. At least 1. Default: `64`.
    pub(crate) max_concurrent_requests: usize,
    /// Most series (`TimeSeries` messages) in one request. A request with more is answered 413
    /// and none of it is applied (its samples are counted as `too_many_series`). At least 1.
    /// Default: `50000` (Prometheus sends at most `queue_config.max_samples_per_send` series per
    /// request, 500 by default in 2.42).
    pub(crate) max_series_per_request: usize,
    /// Most labels in one series, `__name__` included. A series with more is rejected
    /// (`too_many_labels`, 400; the rest of the request is applied). At least 1. Default: `64`.
    pub(crate) max_labels_per_series: usize,
    /// Longest label name, bytes. A series with a longer one is rejected
    /// (`label_name_too_long`, 400). At least 1. Default: `1024`.
    pub(crate) max_label_name_length: usize,
    /// Longest label value, bytes. A series with a longer one is rejected
    /// (`label_value_too_long`, 400). At least 1. Default: `2048`.
    pub(crate) max_label_value_length: usize,
    /// Most input series held at once (series a rule reads; stale ones until their group
    /// leaves). Samples of a further new series are rejected (`active_series_limit`, 400) while
    /// known series keep flowing. At least 1. Default: `100000` (about 1 300 vLLM engines).
    pub max_active_series: usize,
    /// How far past the receive clock a sample's timestamp may be. A later sample is rejected
    /// (`future_timestamp`, 400; the rest of the request is applied): applied, it would become its
    /// series' newest and make every real sample after it out of order. A duration (humantime
    /// syntax). Default: `10m`.
    pub(crate) max_future_skew: String,
    /// The share of `max_memory_bytes` for the requests being received and decoded at once,
    /// bytes. A request is charged its body's buffer as the bytes arrive (a body that stalls holds
    /// only what it sent); a chunk that finds the budget spent is answered 503 at once. Its whole
    /// body read, it is charged its decoded size and the allowance of its decoded structures
    /// ([`decode_charge`]), waiting a few seconds at most (then 503). So request buffers never
    /// exceed this budget whatever the senders do. At least `max_body_bytes` +
    /// `decode_charge(max_decoded_bytes)`. Default: `100663296` (96 MiB).
    #[serde(deserialize_with = "super::bytes::deserialize")]
    pub(crate) max_inflight_bytes: usize,
    /// Longest time to receive a request body once its headers arrived. A slower body is answered
    /// 503 (the sender retries the batch) and its slot and memory are released, so stalled or slow senders cannot hold the
    /// receiver (or a graceful shutdown). A duration (humantime syntax). Default: `10s`.
    pub(crate) request_body_timeout: String,
    /// Most client connections open at once (TLS connections once their handshake is done). A
    /// further connection is closed as soon as it is accepted and counted in
    /// `vllm_corrector_connections_closed_total{reason="max_connections"}`, so clients that hold
    /// connections open cannot exhaust the process' file descriptors. Keep it below `ulimit -n`.
    /// At least 1. Default: `1024` (a Prometheus opens at most `queue_config.max_shards`
    /// connections, 200 by default in 2.42).
    pub(crate) max_connections: usize,
    /// Longest time a client may take to send a complete request head (request line and headers),
    /// from when the connection opens or its previous request's body was received and the next
    /// head's first byte arrived. A slower connection is closed (`reason="header_read_timeout"`): a
    /// client that sends half a head and stalls holds nothing for long. A duration (humantime
    /// syntax), longer than 0s. Default: `10s`.
    pub(crate) header_read_timeout: String,
    /// Longest time a keep-alive connection may sit idle between requests (after a response,
    /// before the next request's first byte). It is then closed (`reason="idle_timeout"`); the
    /// sender opens a new one for its next request. A duration (humantime syntax), longer than 0s.
    /// Default: `2m`.
    pub(crate) idle_connection_timeout: String,
    /// Longest time to write one response, from when it is ready until its last byte is sent. A
    /// client that reads it slower is disconnected (`reason="response_write_timeout"`), so a
    /// client that stops reading a large `/metrics` page holds its buffers and its response slot
    /// for this long at most. A duration (humantime syntax), longer than 0s. Default: `1m`.
    pub(crate) response_write_timeout: String,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let labels = LabelLimits::default();
        LimitsSection {
            max_memory_bytes: 384 * MIB,
            max_body_bytes: 8 * MIB,
            max_decoded_bytes: 8 * MIB,
            max_concurrent_requests: 64,
            max_series_per_request: 50_000,
            max_labels_per_series: labels.max_labels_per_series,
            max_label_name_length: labels.max_label_name_length,
            max_label_value_length: labels.max_label_value_length,
            max_active_series: EngineConfig::default().max_active_series,
            max_future_skew: "10m".to_owned(),
            max_inflight_bytes: 96 * MIB,
            request_body_timeout: "10s".to_owned(),
            max_connections: 1024,
            header_read_timeout: "10s".to_owned(),
            idle_connection_timeout: "2m".to_owned(),
            response_write_timeout: "1m".to_owned(),
        }
    }
}

const MIB: usize = 1024 * 1024;

/// The part of `limits.max_memory_bytes` kept for what is neither engine state nor a request in
/// flight: the executable and thread stacks, connection buffers (up to `limits.max_connections`),
/// `/metrics` and status responses being written (each bounded, docs/RELIABILITY.md, "The memory
/// budget"), the metadata cache and the allocator's slack. 64 MiB; the idle process takes ~10 MiB.
pub(crate) const RESERVED_BYTES: usize = 64 * MIB;

/// The least engine state budget accepted: 16 MiB, about 200 vLLM engines.
const MIN_STATE_BYTES: usize = 16 * MIB;

/// Bytes the decoded structures of a body of `decoded_len` decompressed bytes may take: its
/// series (`crate::ingest::apply::SERIES_BYTES` each) and the labels of the ones decoded. The HTTP layer holds
/// the body, the decompressed body and this much of the in-flight memory budget while the request
/// is received (`crate::http::write`, [`decode_charge`]); a body that would expand past it (tiny series by the
/// million) is refused whole, 413, before the structures are allocated. A vLLM series, new, takes
/// about 500 bytes of structures for 160–240 decompressed bytes in RW 1.0 and about 55 in RW 2.0
/// (its labels are symbol references), so eight times the body with a 64 KiB floor holds the
/// densest real request, a real vLLM's RW 2.0 dump, with room to spare
/// (`tests/it/rw2_equivalence.rs`, `tests/it/real_vllm/rw.rs`).
pub(crate) fn memory_allowance(decoded_len: usize) -> usize {
    decoded_len.saturating_mul(8).saturating_add(64 * 1024)
}

/// What a request whose snappy header declares `decoded` bytes is charged once its body is read,
/// bytes: the decompressed buffer and the allowance of its decoded structures
/// ([`memory_allowance`]).
pub(crate) fn decode_charge(decoded: usize) -> usize {
    decoded.saturating_add(memory_allowance(decoded))
}

/// Validated limits of the remote-write receiver (see [`LimitsSection`] for meanings;
/// `limits.max_active_series` lives in [`EngineConfig::max_active_series`], where it is enforced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The whole process' memory budget, bytes.
    pub(crate) max_memory_bytes: usize,
    /// Largest accepted body as sent, bytes.
    pub(crate) max_body_bytes: usize,
    /// Largest accepted decoded body, bytes.
    pub(crate) max_decoded_bytes: usize,
    /// Remote-write requests processed at once.
    pub(crate) max_concurrent_requests: usize,
    /// Most series in one request.
    pub(crate) max_series_per_request: usize,
    /// Per-series label limits (count, name length, value length).
    pub labels: LabelLimits,
    /// How far past the receive clock a sample may be stamped, ms.
    pub(crate) max_future_skew_ms: i64,
    /// Memory budget of request bodies and decode buffers at once, bytes.
    pub(crate) max_inflight_bytes: usize,
    /// Longest time to receive a request body.
    pub(crate) request_body_timeout: std::time::Duration,
    /// Most client connections open at once.
    pub(crate) max_connections: usize,
    /// Longest time to receive a request head.
    pub(crate) header_read_timeout: std::time::Duration,
    /// Longest idle time of a keep-alive connection between requests.
    pub(crate) idle_connection_timeout: std::time::Duration,
    /// Longest time to write one response.
    pub(crate) response_write_timeout: std::time::Duration,
}

impl Limits {
    /// The engine's state budget (`engine::EngineConfig::max_state_bytes`), bytes: what
    /// `max_memory_bytes` leaves after the requests in flight and [`RESERVED_BYTES`].
    pub(crate) fn state_budget(&self) -> usize {
        self.max_memory_bytes
            .saturating_sub(self.max_inflight_bytes)
            .saturating_sub(RESERVED_BYTES)
    }
}

impl Default for Limits {
    fn default() -> Self {
        let d = LimitsSection::default();
        Limits {
            max_memory_bytes: d.max_memory_bytes,
            max_body_bytes: d.max_body_bytes,
            max_decoded_bytes: d.max_decoded_bytes,
            max_concurrent_requests: d.max_concurrent_requests,
            max_series_per_request: d.max_series_per_request,
            labels: LabelLimits::default(),
            max_future_skew_ms: 10 * 60 * 1000,
            max_inflight_bytes: d.max_inflight_bytes,
            request_body_timeout: std::time::Duration::from_secs(10),
            max_connections: d.max_connections,
            header_read_timeout: std::time::Duration::from_secs(10),
            idle_connection_timeout: std::time::Duration::from_secs(120),
            response_write_timeout: std::time::Duration::from_secs(60),
        }
    }
}

/// Validates the `limits:` section.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the field.
pub(super) fn validate_limits(section: &LimitsSection) -> Result<Limits, ConfigError> {
    // (0 is refused below, with the message every zero limit gets.)
    if section.max_decoded_bytes != 0 && section.max_decoded_bytes < section.max_body_bytes {
        return Err(invalid(
            "limits.max_decoded_bytes",
            format!(
                "{} is below limits.max_body_bytes ({}): a snappy body decodes to at least about \
                 its own size, so bodies the body limit admits would all be refused (413)",
                section.max_decoded_bytes, section.max_body_bytes
            ),
        ));
    }
    let largest_request = section
        .max_body_bytes
        .saturating_add(decode_charge(section.max_decoded_bytes));
    if section.max_inflight_bytes < largest_request {
        return Err(invalid(
            "limits.max_inflight_bytes",
            format!(
                "{} is below {largest_request}, what the largest accepted request is charged \
                 (limits.max_body_bytes + 9 × limits.max_decoded_bytes + 64 KiB): it could never \
                 be admitted",
                section.max_inflight_bytes
            ),
        ));
    }
    let least_memory = section
        .max_inflight_bytes
        .saturating_add(RESERVED_BYTES + MIN_STATE_BYTES);
    if section.max_memory_bytes < least_memory {
        return Err(invalid(
            "limits.max_memory_bytes",
            format!(
                "{} is below {least_memory}: limits.max_inflight_bytes, the 64 MiB reserve and \
                 16 MiB of engine state at least",
                section.max_memory_bytes
            ),
        ));
    }
    let body_timeout_ms =
        duration_ms("limits.request_body_timeout", &section.request_body_timeout)?.1;
    if body_timeout_ms <= 0 {
        return Err(invalid(
            "limits.request_body_timeout",
            "must be longer than 0s",
        ));
    }
    let timeout = |field: &'static str, text: &str| -> Result<std::time::Duration, ConfigError> {
        let (d, ms) = duration_ms(field, text)?;
        if ms <= 0 {
            return Err(invalid(field, "must be longer than 0s"));
        }
        Ok(d)
    };
    Ok(Limits {
        max_connections: positive("limits.max_connections", section.max_connections)?,
        header_read_timeout: timeout("limits.header_read_timeout", &section.header_read_timeout)?,
        idle_connection_timeout: timeout(
            "limits.idle_connection_timeout",
            &section.idle_connection_timeout,
        )?,
        response_write_timeout: timeout(
            "limits.response_write_timeout",
            &section.response_write_timeout,
        )?,
        max_body_bytes: positive("limits.max_body_bytes", section.max_body_bytes)?,
        max_decoded_bytes: positive("limits.max_decoded_bytes", section.max_decoded_bytes)?,
        max_concurrent_requests: positive(
            "limits.max_concurrent_requests",
            section.max_concurrent_requests,
        )?,
        max_series_per_request: positive(
            "limits.max_series_per_request",
            section.max_series_per_request,
        )?,
        labels: LabelLimits {
            max_labels_per_series: positive(
                "limits.max_labels_per_series",
                section.max_labels_per_series,
            )?,
            max_label_name_length: positive(
                "limits.max_label_name_length",
                section.max_label_name_length,
            )?,
            max_label_value_length: positive(
                "limits.max_label_value_length",
                section.max_label_value_length,
            )?,
        },
        max_future_skew_ms: duration_ms("limits.max_future_skew", &section.max_future_skew)?.1,
        max_inflight_bytes: section.max_inflight_bytes,
        max_memory_bytes: section.max_memory_bytes,
        request_body_timeout: std::time::Duration::from_millis(body_timeout_ms as u64),
    })
}
