//! Header negotiation: which remote-write protocol a `POST` carries, and which exposition format a
//! scrape asks for.

use axum::http::{HeaderMap, HeaderValue, header};

use super::HttpError;
use crate::exposition::Format;

/// The remote-write protocol of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteProtocol {
    /// Remote write 1.0: a snappy-compressed `prometheus.WriteRequest`.
    V1,
    /// Remote write 2.0: a snappy-compressed `io.prometheus.write.v2.Request`.
    V2,
}

/// Chooses the protocol from `Content-Encoding` and `Content-Type` (RW 1.0 spec, "Protocol";
/// RW 2.0 spec, "Content-Type"):
/// * `Content-Encoding` absent or `snappy`; anything else (gzip included) is refused.
/// * `Content-Type` absent, `application/x-protobuf`, or with `proto=prometheus.WriteRequest` → V1.
/// * `application/x-protobuf;proto=io.prometheus.write.v2.Request` → V2.
///
/// # Errors
/// [`HttpError::UnsupportedEncoding`], or [`HttpError::UnsupportedContentType`] for any other
/// type or `proto` (all 415).
pub fn write_protocol(headers: &HeaderMap) -> Result<WriteProtocol, HttpError> {
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
pub fn declares_rw2(headers: &HeaderMap) -> bool {
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
pub fn metrics_format(accept: Option<&HeaderValue>) -> Format {
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
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn rw1_content_types_and_absent_headers_are_v1() {
        for ct in [
            None,
            Some("application/x-protobuf"),
            Some("application/x-protobuf;proto=prometheus.WriteRequest"),
            Some("Application/X-Protobuf; proto=\"prometheus.WriteRequest\""),
        ] {
            let mut pairs = vec![(header::CONTENT_ENCODING, "snappy")];
            if let Some(ct) = ct {
                pairs.push((header::CONTENT_TYPE, ct));
            }
            assert_eq!(
                write_protocol(&headers(&pairs)).unwrap(),
                WriteProtocol::V1,
                "{ct:?}"
            );
        }
        assert_eq!(
            write_protocol(&HeaderMap::new()).unwrap(),
            WriteProtocol::V1
        );
    }

    #[test]
    fn rw2_content_type_is_v2_even_with_a_bad_encoding() {
        for ct in [
            "application/x-protobuf;proto=io.prometheus.write.v2.Request",
            "application/x-protobuf; proto=\"io.prometheus.write.v2.Request\"",
        ] {
            let rw2 = headers(&[(header::CONTENT_TYPE, ct)]);
            assert_eq!(write_protocol(&rw2).unwrap(), WriteProtocol::V2, "{ct}");
            assert!(declares_rw2(&rw2));
        }
        let gzip_rw2 = headers(&[
            (
                header::CONTENT_TYPE,
                "application/x-protobuf;proto=io.prometheus.write.v2.Request",
            ),
            (header::CONTENT_ENCODING, "gzip"),
        ]);
        assert!(write_protocol(&gzip_rw2).is_err());
        assert!(declares_rw2(&gzip_rw2), "refused, but still a 2.0 request");
        assert!(!declares_rw2(&headers(&[(
            header::CONTENT_TYPE,
            "application/x-protobuf"
        )])));
        assert!(!declares_rw2(&HeaderMap::new()));
    }

    #[test]
    fn unknown_proto_and_other_types_are_refused() {
        for ct in [
            "application/x-protobuf;proto=foo.Bar",
            "application/json",
            "text/plain",
        ] {
            let h = headers(&[(header::CONTENT_TYPE, ct)]);
            assert!(
                matches!(
                    write_protocol(&h),
                    Err(HttpError::UnsupportedContentType(_))
                ),
                "{ct}"
            );
        }
    }

    #[test]
    fn only_snappy_encoding_is_accepted() {
        for ce in ["gzip", "snappy, gzip", "identity", "zstd"] {
            let h = headers(&[(header::CONTENT_ENCODING, ce)]);
            assert!(
                matches!(write_protocol(&h), Err(HttpError::UnsupportedEncoding(_))),
                "{ce}"
            );
        }
        assert!(write_protocol(&headers(&[(header::CONTENT_ENCODING, "SNAPPY")])).is_ok());
    }

    #[test]
    fn accept_header_chooses_the_exposition_format() {
        let cases = [
            (None, Format::Text),
            (Some("*/*"), Format::Text),
            (Some("text/plain;version=0.0.4"), Format::Text),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (
                Some(
                    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                ),
                Format::OpenMetrics,
            ),
            (
                Some("text/plain;q=0.9,application/openmetrics-text;q=0.5"),
                Format::Text,
            ),
            (Some("application/openmetrics-text;q=0"), Format::Text),
        ];
        for (accept, want) in cases {
            let value = accept.map(|a| HeaderValue::from_str(a).unwrap());
            assert_eq!(metrics_format(value.as_ref()), want, "{accept:?}");
        }
    }
}
