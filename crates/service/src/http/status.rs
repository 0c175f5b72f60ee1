//! What the corrector sees, per group: `GET /` (a landing page, as node_exporter and the
//! Prometheus components have), `GET /status` (server-rendered HTML, no script, in the manner of
//! Prometheus' `/targets`) and `GET /api/v1/groups` (JSON in the Prometheus HTTP API's envelope,
//! `{"status":"success","data":[…]}`). All three render one [`engine::GroupSnapshot`] per
//! group from [`engine::Engine::snapshot`], and sit behind the same authentication as
//! `/metrics`. Every label name and value is HTML-escaped ([`escape`]): label values come from
//! remote-write senders.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use engine::{FamilyStatus, GroupSnapshot};

const HTML: &str = "text/html; charset=utf-8";

/// The version line shown on the pages: crate version and git commit (`build.rs`).
pub(crate) fn version_text() -> String {
    format!(
        "{} (commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("VLLM_CORRECTOR_GIT_COMMIT")
    )
}

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by character references: safe in HTML text and
/// in quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page_head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}}\
         .served{{color:#0a0}}.withheld{{color:#b60}}.degraded{{color:#b60}}\
         .incomplete{{color:#c00;font-weight:bold}}.senders{{color:#c00}}\
         code{{font-size:90%}}</style></head><body>\n",
        escape(title)
    );
}

/// `GET /`: version and links.
pub(crate) async fn landing() -> Response {
    let mut out = String::new();
    page_head(&mut out, "vllm-corrector");
    let _ = write!(
        out,
        "<h1>vllm-corrector</h1>\n<p>Version {}</p>\n<ul>\n\
         <li><a href=\"metrics\">/metrics</a>: corrected families and self-metrics</li>\n\
         <li><a href=\"status\">/status</a>: every group (vLLM engine) seen, its families served or withheld, and why</li>\n\
         <li><a href=\"api/v1/groups\">/api/v1/groups</a>: the same, as JSON</li>\n\
         <li><a href=\"docs\">/docs</a>: the README (usage, configuration, self-metrics)</li>\n\
         <li><a href=\"-/healthy\">/-/healthy</a>, <a href=\"-/ready\">/-/ready</a></li>\n\
         </ul>\n<p>Remote write goes to <code>POST /api/v1/write</code>.</p>\n</body></html>\n",
        escape(&version_text())
    );
    ([(header::CONTENT_TYPE, HTML)], out).into_response()
}

/// `GET /docs`: the README this binary was built with, as plain text.
pub(crate) async fn docs() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        include_str!("../../../../README.md"),
    )
        .into_response()
}

/// Every group's snapshot in ascending label order. The engine lock is held for the copy alone
/// (labels are shared, not copied); the sort, like the rendering, runs after it is released.
fn snapshot(state: &AppState) -> Vec<GroupSnapshot> {
    let mut groups = state.lock_engine().snapshot();
    groups.sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
    groups
}

/// `GET /api/v1/groups`: one object per group, in ascending label order.
pub(crate) async fn groups(State(state): State<AppState>) -> Response {
    let data: Vec<Value> = snapshot(&state).iter().map(group_json).collect();
    let body = json!({"status": "success", "data": data});
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// One family as JSON: `{"state": "served"}`, `{"state": "withheld", "reason": …}` or
/// `{"state": "degraded", "reason": "missing_input"}`, with `"input"` (the missing input series)
/// or `"limit"` (the limit's configuration field) when the status names one.
fn family_json(f: &FamilyStatus) -> Value {
    let mut v = Map::new();
    v.insert("state".into(), f.state().into());
    if let Some(reason) = f.reason() {
        v.insert("reason".into(), reason.into());
    }
    if let Some(input) = f.missing_input {
        v.insert("input".into(), input.into());
    }
    if let Some(limit) = f.limit {
        v.insert("limit".into(), limit.into());
    }
    Value::Object(v)
}

/// One group as JSON: `labels` (object), `families` (by corrected metric name,
/// [`family_json`]), `lastScrapeTimestampMs` (the newest applied sample timestamp: the sender's
/// scrape time, ms, or null), `scrapeIntervalMs` (or null), `inputSeries`, `counterResets`,
/// `incomplete`, `limited` (the limit refusing the group's new series, or null) and
/// `recentRejects` (`duplicate_sample` and `out_of_order` samples of the group over the last one
/// to two minutes: two senders with the same labels, or a resent batch).
pub(crate) fn group_json(g: &GroupSnapshot) -> Value {
    let labels: Map<String, Value> = g
        .labels
        .iter()
        .map(|(n, v)| (n.clone(), Value::String(v.clone())))
        .collect();
    let families: Map<String, Value> = g
        .families
        .iter()
        .map(|f| (f.family.name().to_owned(), family_json(f)))
        .collect();
    json!({
        "labels": labels,
        "families": families,
        "lastScrapeTimestampMs": g.last_sample_ms,
        "scrapeIntervalMs": g.scrape_interval_ms,
        "inputSeries": g.input_series,
        "counterResets": g.counter_resets,
        "incomplete": g.incomplete,
        "limited": g.limited,
        "recentRejects": {
            "duplicate_sample": g.recent_rejects[0],
            "out_of_order": g.recent_rejects[1],
        },
    })
}

/// `GET /status`: a table of the groups, rendered with the wall clock for the lag column.
pub(crate) async fn status(State(state): State<AppState>) -> Response {
    let groups = snapshot(&state);
    let body = render_status(&groups, crate::clock::now_ms());
    ([(header::CONTENT_TYPE, HTML)], body).into_response()
}

/// Seconds as `1.5s`, `2m 3s`.
fn age(ms: i64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m {}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// One family's list item: served; degraded, naming the missing input; or withheld with its
/// reason, naming the missing input or the limit.
fn family_item(out: &mut String, f: &FamilyStatus) {
    let name = f.family.name();
    let detail = match (f.missing_input, f.limit) {
        (Some(input), _) => format!(" (missing <code class=\"input\">{}</code>)", escape(input)),
        (None, Some(limit)) => format!(" (<code class=\"limit\">{}</code>)", escape(limit)),
        (None, None) => String::new(),
    };
    let _ = match (f.withheld, f.degraded) {
        (None, false) => write!(
            out,
            "<li class=\"family served\"><code>{name}</code>: served</li>"
        ),
        (None, true) => write!(
            out,
            "<li class=\"family degraded\"><code>{name}</code>: <span class=\"state\">degraded</span>, \
             one mean weight per scrape interval{detail}</li>"
        ),
        (Some(r), _) => write!(
            out,
            "<li class=\"family withheld\"><code>{name}</code>: withheld, <span class=\"reason\">{}</span>{detail}</li>",
            r.as_str()
        ),
    };
}

/// The state cell of a group: `ok`, or each thing wrong with it: a limit refusing its new
/// series, an incomplete set of series, duplicate or out-of-order samples (two senders?).
fn group_state(g: &GroupSnapshot) -> String {
    let mut parts = Vec::new();
    if let Some(limit) = g.limited {
        parts.push(format!(
            "<span class=\"incomplete\">limited</span>: <code>{}</code> refuses its new series",
            escape(limit)
        ));
    }
    if g.incomplete {
        parts.push(
            "<span class=\"incomplete\">incomplete</span> (series split across instances or filtered)"
                .to_owned(),
        );
    }
    let [duplicates, out_of_order] = g.recent_rejects;
    if duplicates + out_of_order > 0 {
        parts.push(format!(
            "<span class=\"senders\">two senders?</span> {duplicates} duplicate and {out_of_order} \
             out-of-order samples in the last 1–2 min (an HA pair with the same external labels, or \
             a resent batch)"
        ));
    }
    if parts.is_empty() {
        "ok".to_owned()
    } else {
        parts.join("<br>")
    }
}

/// The `/status` page for `groups` at wall clock `now_ms`.
pub(crate) fn render_status(groups: &[GroupSnapshot], now_ms: i64) -> String {
    let mut out = String::with_capacity(1024 + groups.len() * 1024);
    page_head(&mut out, "vllm-corrector status");
    let _ = write!(
        out,
        "<h1>Groups</h1>\n<p>vllm-corrector {}. {} group(s). <a href=\"./\">home</a> · \
         <a href=\"api/v1/groups\">JSON</a></p>\n",
        escape(&version_text()),
        groups.len()
    );
    if groups.is_empty() {
        out.push_str("<p id=\"no-groups\">No group yet: no vllm:* series a rule reads has been received.</p>\n");
    }
    out.push_str(
        "<table id=\"groups\">\n<thead><tr><th>group labels</th><th>families</th><th>last sample</th>\
         <th>scrape interval</th><th>input series</th><th>counter resets</th><th>state</th></tr></thead>\n<tbody>\n",
    );
    for g in groups {
        out.push_str("<tr class=\"group\"><td class=\"labels\">");
        for (n, v) in g.labels.iter() {
            let _ = write!(
                out,
                "<span class=\"label\">{}=&quot;{}&quot;</span><br>",
                escape(n),
                escape(v)
            );
        }
        out.push_str("</td><td><ul>");
        for f in &g.families {
            family_item(&mut out, f);
        }
        out.push_str("</ul></td>");
        match g.last_sample_ms {
            Some(ts) => {
                let _ = write!(
                    out,
                    "<td class=\"lag\" title=\"sample timestamp {ts} ms\">{} ago</td>",
                    age(now_ms.saturating_sub(ts))
                );
            }
            None => out.push_str("<td class=\"lag\">never</td>"),
        }
        match g.scrape_interval_ms {
            Some(ms) => {
                let _ = write!(out, "<td>{}</td>", age(ms));
            }
            None => out.push_str("<td>unknown</td>"),
        }
        let state = group_state(g);
        let _ = writeln!(
            out,
            "<td>{}</td><td>{}</td><td class=\"state\">{state}</td></tr>",
            g.input_series, g.counter_resets
        );
    }
    out.push_str("</tbody></table>\n</body></html>\n");
    out
}
