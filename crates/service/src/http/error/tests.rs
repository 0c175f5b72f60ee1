//! Unit tests of `crates/service/src/http/error.rs`.

use super::*;

#[test]
fn each_protocol_error_has_its_status() {
    let too_large = ProtocolError::DecodedTooLarge {
        declared: 10,
        cap: 5,
    };
    assert_eq!(
        HttpError::from(IngestError::from(too_large)).status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        HttpError::from(IngestError::from(ProtocolError::Snappy("x".into()))).status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        HttpError::from(IngestError::from(ProtocolError::Protobuf("x".into()))).status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        HttpError::from(IngestError::from(ProtocolError::SymbolsStartNotEmpty(
            "x".into()
        )))
        .status(),
        StatusCode::BAD_REQUEST
    );
}

#[test]
fn a_panic_is_a_non_retryable_400_that_asks_to_be_reported() {
    let error = HttpError::Ingest(crate::ingest::IngestError::Panicked(
        "index out of bounds".into(),
    ));
    assert_eq!(error.status(), StatusCode::BAD_REQUEST);
    let text = error.to_string();
    assert!(text.starts_with("internal error: "), "{text}");
    assert!(text.contains("(index out of bounds)"), "{text}");
    assert!(text.contains("please report it"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
}

#[test]
fn authentication_refusals_keep_the_status_their_layer_chose_and_send_every_challenge() {
    use axum::http::HeaderValue;

    let forbidden = HttpError::from(AuthError::ClientCertificateRequired);
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        forbidden.to_string(),
        "a verified TLS client certificate is required"
    );
    let challenges = vec![
        HeaderValue::from_static("Basic realm=\"vllm-corrector\", charset=\"UTF-8\""),
        HeaderValue::from_static("Bearer realm=\"vllm-corrector\""),
    ];
    for (reason, text) in [
        (
            crate::telemetry::AuthFailure::MissingCredentials,
            "credentials required",
        ),
        (
            crate::telemetry::AuthFailure::InvalidCredentials,
            "invalid credentials",
        ),
    ] {
        let error = HttpError::from(AuthError::Unauthenticated {
            reason,
            challenges: challenges.clone(),
        });
        assert_eq!(error.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(error.to_string(), text);
        assert_eq!(error.limit(), None);
        let response = error.into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let sent: Vec<_> = response
            .headers()
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .collect();
        assert_eq!(sent, challenges.iter().collect::<Vec<_>>());
    }
    // A 403 carries no challenge: no credentials could fix it.
    let response = forbidden.into_response();
    assert!(response.headers().get(header::WWW_AUTHENTICATE).is_none());
}

#[test]
fn reload_failures_are_500_and_a_missing_reloader_is_404() {
    let toggle = HttpError::from(ReloadError::TlsToggle("on"));
    assert_eq!(toggle.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        toggle.to_string(),
        "--web.config.file: turning TLS on needs a restart"
    );
    assert_eq!(
        HttpError::ReloadPanicked("boom".into()).status(),
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(HttpError::ReloadUnavailable.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        HttpError::ReloadUnavailable.to_string(),
        "reload is not available in this mode"
    );
}
