//! The service's wall clock. The engine never reads a clock (its callers pass `now_ms`, so its
//! tests are deterministic, `docs/ENGINE.md`); the service reads this one clock wherever it needs
//! "now": the receive time of a write request (idle timeout), the idle sweep, the `/status` lag
//! column, the reload timestamp and the state loaded at start.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall clock, milliseconds since the Unix epoch; 0 for a clock set before 1970, `i64::MAX` past
/// the year 292 million.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
