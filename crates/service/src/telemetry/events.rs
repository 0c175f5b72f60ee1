//! The engine's group events as log lines ([`EventLog::log`]), each with the group's labels in a
//! `group` field (`{instance="…", …}`): at info, a group's first complete scrape, a family
//! withheld or served again, a group removed (stale, idle or missed scrapes) and an input counter
//! reset; at warn, a group incomplete over more than one scrape (naming each histogram that
//! arrives in a form the rules do not read, else blaming a split or a filter), a group whose new series a
//! limit refuses (naming the limit), an SLI of an SLO the group cannot count (a threshold
//! between bucket edges, naming the edges around it; an input the keep rule drops), and a group
//! two senders write with the same labels. A withheld family names the input it lacks
//! (`input=`) or the limit (`limit=`). The engine reports each event
//! once (`engine::Engine::take_events`); this side rate-limits them, since a flapping
//! target could otherwise log on every request: at most [`EVENTS_PER_WINDOW`] lines per kind per
//! [`WINDOW_MS`], then one line saying how many were suppressed.

use std::sync::Mutex;

use engine::{EngineEvent, Family, FamilyStatus};

/// Log lines per event kind per window before the rest are counted and suppressed.
pub(crate) const EVENTS_PER_WINDOW: u32 = 100;
/// The rate-limit window, ms.
pub(crate) const WINDOW_MS: i64 = 60_000;

const KINDS: [&str; 9] = [
    "first_complete_scrape",
    "family_withheld",
    "family_served",
    "group_removed",
    "counter_reset",
    "group_incomplete",
    "group_limited",
    "slo_notes",
    "two_senders",
];

fn kind(event: &EngineEvent) -> usize {
    match event {
        EngineEvent::FirstCompleteScrape { .. } => 0,
        EngineEvent::FamilyWithheld { .. } => 1,
        EngineEvent::FamilyServed { .. } => 2,
        EngineEvent::GroupRemoved { .. } => 3,
        EngineEvent::CounterReset { .. } => 4,
        EngineEvent::GroupIncomplete { .. } => 5,
        EngineEvent::GroupLimited { .. } => 6,
        EngineEvent::SloNotes { .. } => 7,
        EngineEvent::TwoSenders { .. } => 8,
    }
}

#[derive(Debug, Default)]
struct Window {
    start_ms: i64,
    logged: [u32; KINDS.len()],
    suppressed: [u64; KINDS.len()],
}

/// The rate limiter of engine event logs, shared by the write handler and the idle sweep.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    window: Mutex<Window>,
}

/// `{name="value", …}` with the values quoted as in the exposition format (unescaped text): a
/// group's labels in log lines and on `/status`.
pub(crate) fn label_set(labels: &[(String, String)]) -> String {
    let inner: Vec<String> = labels.iter().map(|(n, v)| format!("{n}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

fn families(list: &[Family]) -> String {
    list.iter().map(|f| f.name()).collect::<Vec<_>>().join(",")
}

/// `family:reason`, with `(detail)` when the status names the missing input or the limit.
fn withheld(list: &[FamilyStatus]) -> String {
    list.iter()
        .map(|f| {
            let reason = f.reason().unwrap_or("served");
            match f.detail() {
                Some(detail) => format!("{}:{reason}({detail})", f.family.name()),
                None => format!("{}:{reason}", f.family.name()),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl EventLog {
    /// Logs `events` at wall clock `now_ms` (ms), within the rate limit.
    pub(crate) fn log(&self, events: Vec<EngineEvent>, now_ms: i64) {
        if events.is_empty() {
            self.flush(now_ms);
            return;
        }
        let mut window = self
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        roll(&mut window, now_ms);
        for event in events {
            let k = kind(&event);
            if window.logged[k] >= EVENTS_PER_WINDOW {
                window.suppressed[k] += 1;
                continue;
            }
            window.logged[k] += 1;
            emit(&event);
        }
    }

    /// Reports the suppressed counts of a window that has ended (called by the idle sweep).
    pub(crate) fn flush(&self, now_ms: i64) {
        let mut window = self
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        roll(&mut window, now_ms);
    }
}

fn roll(window: &mut Window, now_ms: i64) {
    if now_ms.saturating_sub(window.start_ms) < WINDOW_MS {
        return;
    }
    for (k, n) in window.suppressed.iter().enumerate() {
        if *n > 0 {
            tracing::warn!(kind = %KINDS[k], suppressed = *n, window_seconds = WINDOW_MS / 1000, "group event logs suppressed by the rate limit");
        }
    }
    *window = Window {
        start_ms: now_ms,
        ..Window::default()
    };
}

fn emit(event: &EngineEvent) {
    match event {
        EngineEvent::FirstCompleteScrape {
            labels,
            served,
            withheld: held,
        } => tracing::info!(
            group = %label_set(labels),
            served = %families(served),
            withheld = %withheld(held),
            "group: first complete scrape"
        ),
        EngineEvent::FamilyWithheld { labels, status } => {
            let (group, family) = (label_set(labels), status.family.name());
            let reason = status.reason().unwrap_or("incomplete");
            match (status.missing_input, status.limit) {
                (Some(input), _) => {
                    tracing::info!(group = %group, family = %family, reason = %reason, input = %input, "group: family withheld")
                }
                (None, Some(limit)) => {
                    tracing::info!(group = %group, family = %family, reason = %reason, limit = %limit, "group: family withheld")
                }
                (None, None) => {
                    tracing::info!(group = %group, family = %family, reason = %reason, "group: family withheld")
                }
            }
        }
        EngineEvent::FamilyServed { labels, family } => {
            tracing::info!(group = %label_set(labels), family = %family.name(), "group: family served again")
        }
        EngineEvent::GroupRemoved { labels, reason } => {
            tracing::info!(group = %label_set(labels), reason = %reason.as_str(), "group removed from /metrics")
        }
        EngineEvent::CounterReset { labels } => {
            tracing::info!(group = %label_set(labels), "group: input counter reset (vLLM restarted)")
        }
        EngineEvent::GroupIncomplete { labels, unread } if !unread.is_empty() => {
            for u in unread {
                tracing::warn!(
                    group = %label_set(labels),
                    histogram = %u.histogram,
                    arrives_as = %u.form.as_str(),
                    "group incomplete for more than one scrape: {} {}",
                    u.histogram,
                    u.form.words()
                );
            }
        }
        EngineEvent::GroupIncomplete { labels, .. } => tracing::warn!(
            group = %label_set(labels),
            "group incomplete for more than one scrape: its series are split across instances \
             (shard by target, never by series) or filtered by relabelling"
        ),
        EngineEvent::SloNotes { labels, notes } => {
            for note in notes.iter() {
                tracing::warn!(
                    group = %label_set(labels),
                    slo = %note.slo,
                    sli = %note.sli.name(),
                    reason = %note.reason.as_str(),
                    detail = %note.detail,
                    "group: an SLI of the SLO is not counted"
                );
            }
        }
        EngineEvent::GroupLimited { labels, limit } => tracing::warn!(
            group = %label_set(labels),
            limit = %limit,
            "group incomplete: a limit refuses its new series (raise the limit, or add \
             instances and shard by target); its families lacking them are withheld, reason=limit"
        ),
        EngineEvent::TwoSenders {
            labels,
            recent_rejects: [duplicates, out_of_order],
        } => tracing::warn!(
            group = %label_set(labels),
            duplicate_samples = *duplicates,
            out_of_order_samples = *out_of_order,
            "group written by two senders with the same labels: its samples are refused as \
             duplicates or out of order minute after minute (an HA pair of Prometheus servers \
             with the same external labels writing one corrector: give each replica its own \
             corrector, the sidecar form, or its own external label)"
        ),
    }
}

/// A per-call-site limit for log lines that can repeat on every request (a sender whose every
/// batch is refused, malformed metadata in every request): at most `per_window` lines per
/// 10 s window; the lines beyond it are counted and the next allowed line reports how many.
#[derive(Debug)]
pub(crate) struct LogLimit {
    per_window: u32,
    state: Mutex<(Option<std::time::Instant>, u32, u64)>,
}

impl LogLimit {
    /// A limit of `per_window` lines per 10 s.
    pub(crate) const fn new(per_window: u32) -> LogLimit {
        LogLimit {
            per_window,
            state: Mutex::new((None, 0, 0)),
        }
    }

    /// `Some(suppressed)` when a line may be logged now (`suppressed`: lines held back since the
    /// previous allowed one), `None` when this one is over the limit (log it at debug instead).
    pub(crate) fn allow(&self) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (start, logged, suppressed) = &mut *state;
        if start.is_none_or(|s| now.duration_since(s) >= std::time::Duration::from_secs(10)) {
            (*start, *logged) = (Some(now), 0);
        }
        if *logged >= self.per_window {
            *suppressed += 1;
            return None;
        }
        *logged += 1;
        Some(std::mem::take(suppressed))
    }
}

#[cfg(test)]
mod tests;
