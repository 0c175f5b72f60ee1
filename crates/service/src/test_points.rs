//! Fail points of the ingest path, for unit tests only: a panic injected once at a named point,
//! and how often a point was passed. The product code holds only `fail::fail_point!(name)` lines
//! compiled under `#[cfg(test)]` (`crates/service/src/ingest.rs`); the `fail` crate's registry
//! calls back here.
//!
//! Both the arming and the counts are per thread: unit tests run in parallel, each on its own
//! thread, and a request sent through the router by a `#[tokio::test]` (a current-thread runtime)
//! is ingested on the test's thread when its body is small (`crate::http::write`), so a test
//! sees only its own requests.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Once;

/// Before the body is decompressed: the samples are unknown.
pub(crate) const BEFORE_DECODE: &str = "ingest::before_decode";
/// Right after the engine lock is taken (once per request that gets that far).
pub(crate) const ENGINE_LOCKED: &str = "ingest::engine_locked";
/// Holding the engine lock, after every series was looked up and its labels checked: the lock is
/// poisoned by a panic here, and the decoded samples are known.
pub(crate) const UNDER_LOCK: &str = "ingest::under_lock";

const POINTS: [&str; 3] = [BEFORE_DECODE, ENGINE_LOCKED, UNDER_LOCK];

thread_local! {
    static ARMED: Cell<Option<&'static str>> = const { Cell::new(None) };
    static HITS: RefCell<HashMap<&'static str, usize>> = RefCell::new(HashMap::new());
}

/// Registers the callbacks of every point, once per process.
fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for point in POINTS {
            fail::cfg_callback(point, move || {
                HITS.with_borrow_mut(|h| *h.entry(point).or_default() += 1);
                if ARMED.with(|a| a.get() == Some(point)) {
                    ARMED.with(|a| a.set(None));
                    panic!("injected test panic at {point}");
                }
            })
            .expect("a valid fail point");
        }
    });
}

/// The next request this thread ingests panics at `point`, once.
pub(crate) fn panic_once_at(point: &'static str) {
    register();
    ARMED.with(|a| a.set(Some(point)));
}

/// How many times this thread passed `point`.
pub(crate) fn hits(point: &'static str) -> usize {
    register();
    HITS.with_borrow(|h| h.get(point).copied().unwrap_or(0))
}
