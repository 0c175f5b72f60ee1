//! Unit tests of `crates/service/src/http/write.rs`.

use super::*;

#[test]
fn a_multiline_panic_message_is_quoted_on_one_bounded_line() {
    let assert_eq_message = "assertion `left == right` failed\n  left: 1\n right: 2";
    assert_eq!(
        one_line(assert_eq_message),
        "assertion `left == right` failed / left: 1 / right: 2"
    );
    // 300 two-byte characters = 600 bytes: cut at the last boundary within 512 bytes (256
    // characters), then the ellipsis.
    let long = "é".repeat(300);
    let quoted = one_line(&long);
    assert_eq!(quoted, format!("{}…", "é".repeat(256)));
    assert_eq!(panic_message(&"static str"), "static str");
    assert_eq!(panic_message(&String::from("owned")), "owned");
    assert_eq!(
        panic_message(&42_u32),
        "a panic payload that is not a string"
    );
}

use axum::http::StatusCode;
use protocol::encode::{self, SeriesSpec};

use crate::http::PanicAt;
use crate::http::panic_tests::{T, V1, assert_counters, scrape, send, state, tokens};

/// One RW 1.0 write of `series` through the router: its status and how many times it took the
/// engine lock.
async fn holds_of(state: &AppState, series: &[SeriesSpec]) -> (StatusCode, usize) {
    let before = state.engine_holds();
    let (status, _, text) = send(state, V1, encode::encode_v1(series, &[])).await;
    assert!(status.is_success() || !text.is_empty(), "{status}");
    (status, state.engine_holds() - before)
}

#[tokio::test]
async fn a_write_of_known_series_takes_the_engine_lock_once_and_one_with_a_new_series_twice() {
    let state = state();
    let first = [tokens("0", &[(1.0, T)]), tokens("1", &[(1.0, T)])];
    // Nothing known yet: the look-up, the labels decoded outside the lock, then the apply.
    assert_eq!(holds_of(&state, &first).await, (StatusCode::NO_CONTENT, 2));
    // The same label bytes a scrape later: every series known, applied in the look-up's hold.
    let t1 = T + 15_000;
    let known = [tokens("0", &[(2.0, t1)]), tokens("1", &[(3.0, t1)])];
    assert_eq!(holds_of(&state, &known).await, (StatusCode::NO_CONTENT, 1));
    // One known and one new series: two holds again.
    let t2 = T + 30_000;
    let mixed = [tokens("1", &[(4.0, t2)]), tokens("2", &[(1.0, t2)])];
    assert_eq!(holds_of(&state, &mixed).await, (StatusCode::NO_CONTENT, 2));
    // Whatever the number of holds, every sample was applied: 2 + 2 + 2.
    assert_counters(
        &scrape(&state).await,
        &[
            ("vllm_corrector_samples_received_total", 6.0),
            ("vllm_corrector_samples_applied_total", 6.0),
            ("vllm_corrector_active_series", 3.0),
        ],
    );
}

#[tokio::test]
async fn a_panic_while_known_series_are_applied_in_one_hold_counts_their_samples() {
    let state = state();
    assert_eq!(
        holds_of(&state, &[tokens("0", &[(1.0, T)])]).await,
        (StatusCode::NO_CONTENT, 2)
    );
    state.panic_next_write_at(PanicAt::UnderEngineLock);
    // Known (one sample, as senders send a scrape), so applied in one hold; its sample was
    // decoded before the panic.
    let known = [tokens("0", &[(2.0, T + 15_000)])];
    assert_eq!(holds_of(&state, &known).await, (StatusCode::BAD_REQUEST, 1));
    assert_counters(
        &scrape(&state).await,
        &[
            ("vllm_corrector_samples_received_total", 2.0),
            ("vllm_corrector_samples_applied_total", 1.0),
            (
                "vllm_corrector_samples_rejected_total{reason=\"internal_error\"}",
                1.0,
            ),
        ],
    );
}
