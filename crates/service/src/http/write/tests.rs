//! Unit tests of `crates/service/src/http/write.rs`: the engine lock per write, and a panic under it.

use super::*;

use axum::http::StatusCode;
use protocol::encode::{self, SeriesSpec};

use crate::http::panic_tests::{T, V1, assert_counters, scrape, send, state, tokens};
use crate::test_points::{self, ENGINE_LOCKED, UNDER_LOCK};

/// One RW 1.0 write of `series` through the router: its status and how many times it took the
/// engine lock.
async fn holds_of(state: &AppState, series: &[SeriesSpec]) -> (StatusCode, usize) {
    let before = test_points::hits(ENGINE_LOCKED);
    let (status, _, text) = send(state, V1, encode::encode_v1(series, &[])).await;
    assert!(status.is_success() || !text.is_empty(), "{status}");
    (status, test_points::hits(ENGINE_LOCKED) - before)
}

#[tokio::test]
async fn every_write_takes_the_engine_lock_once_whether_its_series_are_new_known_or_both() {
    let state = state();
    let first = [tokens("0", &[(1.0, T)]), tokens("1", &[(1.0, T)])];
    // Nothing known yet: looked up, labels decoded and checked, applied, in one hold.
    assert_eq!(holds_of(&state, &first).await, (StatusCode::NO_CONTENT, 1));
    // The same label bytes a scrape later: every series known.
    let t1 = T + 15_000;
    let known = [tokens("0", &[(2.0, t1)]), tokens("1", &[(3.0, t1)])];
    assert_eq!(holds_of(&state, &known).await, (StatusCode::NO_CONTENT, 1));
    // One known and one new series.
    let t2 = T + 30_000;
    let mixed = [tokens("1", &[(4.0, t2)]), tokens("2", &[(1.0, t2)])];
    assert_eq!(holds_of(&state, &mixed).await, (StatusCode::NO_CONTENT, 1));
    // Every sample was applied: 2 + 2 + 2.
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
async fn a_panic_while_known_series_are_applied_counts_their_samples() {
    let state = state();
    assert_eq!(
        holds_of(&state, &[tokens("0", &[(1.0, T)])]).await,
        (StatusCode::NO_CONTENT, 1)
    );
    test_points::panic_once_at(UNDER_LOCK);
    // Known (one sample, as senders send a scrape); its sample was decoded before the panic.
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
