//! Unit tests of `src/http/error.rs`.

use super::*;

#[test]
fn each_protocol_error_has_its_status() {
    let too_large = ProtocolError::DecodedTooLarge {
        declared: 10,
        cap: 5,
    };
    assert_eq!(
        HttpError::from(too_large).status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        HttpError::from(ProtocolError::Snappy("x".into())).status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        HttpError::from(ProtocolError::Protobuf("x".into())).status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        HttpError::from(ProtocolError::SymbolsStartNotEmpty("x".into())).status(),
        StatusCode::BAD_REQUEST
    );
}

#[test]
fn a_panic_is_a_non_retryable_400_that_asks_to_be_reported() {
    let error = HttpError::Panicked("index out of bounds".into());
    assert_eq!(error.status(), StatusCode::BAD_REQUEST);
    let text = error.to_string();
    assert!(text.starts_with("internal error: "), "{text}");
    assert!(text.contains("(index out of bounds)"), "{text}");
    assert!(text.contains("please report it"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
}
