//! Are `inspect`'s two dumps of one group in the order given? Evidence that AFTER was taken before
//! BEFORE, so that swapped arguments are refused instead of being reported as a counter reset.
//!
//! Two kinds of evidence, each conclusive:
//! * **timestamps**: a series whose sample carries a timestamp in both dumps is older in AFTER;
//! * **`_created`**: a counter, histogram or summary series is lower in AFTER while the `_created`
//!   sample of its family (the same labels without `le`) has the same value in both dumps. One
//!   counter of one process never decreases, and a restart between the dumps would have given it a
//!   new `_created` value, so AFTER is the older dump. vLLM (prometheus_client) exposes `_created`
//!   for every counter and histogram unless `PROMETHEUS_DISABLE_CREATED_SERIES` is set.
//!
//! Without either kind (no timestamps, no `_created` series, as in the corrector's own `/metrics`)
//! a decrease cannot tell swapped dumps from a restart, and `inspect` keeps the note.

use std::time::{Duration, UNIX_EPOCH};

use super::readings::{GroupKey, GroupSeries, SeriesKey, series_text};

/// Evidence that `after` was taken before `before` (one group of each dump), as one sentence
/// naming the series, both lines and both timestamps; `None` when the dumps look in order or the
/// dumps cannot tell.
pub(crate) fn swap_evidence(
    group: &GroupKey,
    before: &GroupSeries,
    after: &GroupSeries,
) -> Option<String> {
    let text = |(name, dims): &SeriesKey| {
        let mut labels = group.clone();
        labels.extend(dims.iter().cloned());
        labels.sort();
        series_text(name, &labels)
    };
    for (key, ra) in &after.series {
        let Some(rb) = before.series.get(key) else {
            continue;
        };
        if let (Some(tb), Some(ta)) = (rb.timestamp_ms, ra.timestamp_ms)
            && ta < tb
        {
            return Some(format!(
                "{} is stamped {} in AFTER (line {}), older than {} in BEFORE (line {})",
                text(key),
                instant(ta),
                ra.line,
                instant(tb),
                rb.line
            ));
        }
    }
    for (key, ra) in &after.series {
        let Some(rb) = before.series.get(key) else {
            continue;
        };
        if !(ra.cumulative && ra.value < rb.value) {
            continue;
        }
        let Some(created) = created_key(key) else {
            continue;
        };
        let (Some(cb), Some(ca)) = (before.series.get(&created), after.series.get(&created)) else {
            continue;
        };
        if ca.value == cb.value {
            let when = created_instant(ca.value);
            return Some(format!(
                "{} fell from {} (BEFORE line {}) to {} (AFTER line {}) while {} = {} is the same \
                 in both (BEFORE line {}, AFTER line {}): the counter was not restarted, so AFTER is \
                 the older dump",
                text(key),
                rb.value,
                rb.line,
                ra.value,
                ra.line,
                text(&created),
                when,
                cb.line,
                ca.line
            ));
        }
    }
    None
}

/// True when some `_created` sample of the group changed between the dumps: a counter was
/// recreated (vLLM restarted), so a decrease is a reset, not swapped dumps.
pub(crate) fn restart_proven(before: &GroupSeries, after: &GroupSeries) -> bool {
    after.series.iter().any(|(key, ra)| {
        key.0.ends_with("_created")
            && before
                .series
                .get(key)
                .is_some_and(|rb| rb.value != ra.value)
    })
}

/// The `_created` series of the family of a cumulative series: `x_total`, `x_bucket{le}`, `x_sum`
/// and `x_count` all have `x_created`, with the same labels but `le`.
fn created_key((name, dims): &SeriesKey) -> Option<SeriesKey> {
    let family = ["_total", "_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))?;
    let dims = dims.iter().filter(|(k, _)| k != "le").cloned().collect();
    Some((format!("{family}_created"), dims))
}

/// A sample timestamp, ms since the epoch, as RFC 3339 with the ms value.
fn instant(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(ms) => format!(
            "{} ({ms} ms)",
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms))
        ),
        Err(_) => format!("{ms} ms"),
    }
}

/// A `_created` value, seconds since the epoch, with its RFC 3339 form when it is one.
fn created_instant(seconds: f64) -> String {
    if seconds.is_finite() && (0.0..1e13).contains(&seconds) {
        // Rounded to the ms: 1750000000.123 is 1750000000.12299990654 as a float.
        let at = UNIX_EPOCH + Duration::from_millis((seconds * 1000.0).round() as u64);
        format!("{seconds} ({})", humantime::format_rfc3339_millis(at))
    } else {
        seconds.to_string()
    }
}
