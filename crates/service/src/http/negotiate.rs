//! Header negotiation: which remote-write protocol a `POST` carries, and which exposition format a
//! scrape asks for.

use axum::http::{HeaderMap, HeaderValue, header};

use super::HttpError;
use crate::exposition::Format;

/// The remote-write protocol of a request body (snappy-compressed in both).
pub(crate) use protocol::Version as WriteProtocol;

/// Chooses the protocol from `Content-Encoding` and `Content-Type` (RW 1.0 spec, "Protocol";
/// RW 2.0 spec, "Content-Type"):
/// * `Content-Encoding` absent or `snappy`; anything else (gzip included) is refused.
/// * `Content-Type` absent, `application/x-protobuf`, or with `proto=prometheus.WriteRequest` → V1.
/// * `application/x-protobuf;proto=io.prometheus.write.v2.Request` → V2.
///
/// # Errors
/// [`HttpError::UnsupportedEncoding`], or [`HttpError::UnsupportedContentType`] for any other
/// type or `proto` (all 415).
pub(crate) fn write_protocol(headers: &HeaderMap) -> Result<WriteProtocol, HttpError> {
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let text = value.to_str().unwrap_or("<non-ASCII>");
        if !text.trim().eq_ignore_ascii_case("snappy") {
            return Err(HttpError::UnsupportedEncoding(text.to_owned()));
        }
    }
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(WriteProtocol::V1);
    };
    let text = value
        .to_str()
        .map_err(|_| HttpError::UnsupportedContentType("<non-ASCII>".to_owned()))?;
    protocol_of(text).ok_or_else(|| HttpError::UnsupportedContentType(text.to_owned()))
}

/// True when `Content-Type` names RW 2.0, whatever else is wrong with the request: such a request
/// is answered with the `X-Prometheus-Remote-Write-*-Written` headers even when it is refused
/// (RW 2.0 spec: a 2.0 sender reads a response without them as a 1.0-only receiver's).
pub(crate) fn declares_rw2(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(protocol_of)
        == Some(WriteProtocol::V2)
}

/// The protocol a `Content-Type` value names, or `None` for anything else.
fn protocol_of(content_type: &str) -> Option<WriteProtocol> {
    let mut parts = content_type.split(';');
    let media_type = parts.next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/x-protobuf") {
        return None;
    }
    for param in parts {
        let Some((name, value)) = param.split_once('=') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("proto") {
            continue;
        }
        return match value.trim().trim_matches('"') {
            "prometheus.WriteRequest" => Some(WriteProtocol::V1),
            "io.prometheus.write.v2.Request" => Some(WriteProtocol::V2),
            _ => None,
        };
    }
    Some(WriteProtocol::V1)
}

/// Chooses the `/metrics` format from `Accept`: OpenMetrics when `application/openmetrics-text`
/// is accepted (q > 0) at least as much as `text/plain`; otherwise the text format 0.0.4, which
/// is also the answer to no `Accept` at all or `*/*`. Prometheus 2.42 sends
/// `application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,*/*;q=0.1` and so
/// gets OpenMetrics.
pub(crate) fn metrics_format(accept: Option<&HeaderValue>) -> Format {
    let Some(text) = accept.and_then(|v| v.to_str().ok()) else {
        return Format::Text;
    };
    let mut openmetrics_q: f32 = 0.0;
    let mut text_q: f32 = 0.0;
    for entry in text.split(',') {
        let mut parts = entry.split(';');
        let media_type = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .and_then(|(_, v)| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match media_type.as_str() {
            "application/openmetrics-text" => openmetrics_q = openmetrics_q.max(q),
            "text/plain" => text_q = text_q.max(q),
            _ => {}
        }
    }
    if openmetrics_q > 0.0 && openmetrics_q >= text_q {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

#[cfg(test)]
mod tests;
