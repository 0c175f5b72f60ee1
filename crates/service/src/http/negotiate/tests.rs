//! Unit tests of `crates/service/src/http/negotiate.rs`.

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
