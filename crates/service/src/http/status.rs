//! What the corrector sees, per group: `GET /` (a landing page, as node_exporter and the
//! Prometheus components have), `GET /status` (server-rendered HTML, no script, in the manner of
//! Prometheus' `/targets`) and `GET /api/v1/groups` (JSON in the Prometheus HTTP API's envelope,
//! `{"status":"success","data":[…],"total":N,"next":…}`). Both group pages list one page of
//! groups in label order ([`super::page`]: at most 200 by default, 1000 by `?limit=`, and
//! [`page::PAGE_BYTES`]), one [`engine::GroupSnapshot`] per group from
//! [`engine::Engine::snapshot_page`], holding a render slot ([`super::renders`]) until written, and
//! sit behind the same authentication as `/metrics`. Every label name and value is HTML-escaped
//! ([`escape`]), values after the PromQL escapes: label values come from remote-write senders.

use std::collections::HashSet;
use std::fmt::Write as _;

use axum::extract::{RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::page::{self, PageFill, PageQuery};
use super::renders::{PageChunks, RenderKind, Slot};
use super::{AppState, HttpError};
use crate::exposition::render::escape_label_value;
use engine::{FamilyStatus, GroupFilter, GroupSnapshot, GroupsPage};

const HTML: &str = "text/html; charset=utf-8";

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
         .served{{color:#0a0}}.withheld{{color:#b60}}.incomplete{{color:#c00;font-weight:bold}}\
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
        escape(&crate::VERSION)
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

/// One page of groups for `query`, from [`engine::Engine::snapshot_page`]: the engine lock is held
/// for one pass over the groups and the copy of at most `query.limit` snapshots (labels shared,
/// not copied); the rendering runs after it is released. `match[]` selectors run outside the lock,
/// over the labels of every group (shared, taken under it first), so a request with many regexes
/// over long label values never holds up a remote write.
fn snapshot_page(state: &AppState, query: &PageQuery) -> GroupsPage {
    let (after, limit) = (query.after.as_deref(), query.limit);
    if !query.filter.matches_labels() {
        return state
            .lock_engine()
            .snapshot_page_where(after, limit, &query.filter);
    }
    let groups = state.lock_engine().group_refs();
    // Held until the page is taken: no label set listed here is freed, so no other group's
    // can take its address.
    let listed: HashSet<usize> = groups
        .iter()
        .filter(|(_, labels)| query.filter.labels(labels))
        .map(|(_, labels)| labels.as_ptr() as usize)
        .collect();
    let page = state.lock_engine().snapshot_page_where(
        after,
        limit,
        &Matched {
            filter: &query.filter,
            listed: &listed,
        },
    );
    drop(groups);
    page
}

/// A filter whose `match[]` selectors were run already: a group is listed when its labels (by
/// address, shared with the engine) were.
struct Matched<'a> {
    filter: &'a page::filter::Filter,
    listed: &'a HashSet<usize>,
}

impl GroupFilter for Matched<'_> {
    fn labels(&self, labels: &[(String, String)]) -> bool {
        self.listed.contains(&(labels.as_ptr() as usize))
    }
    fn reads_families(&self) -> bool {
        self.filter.reads_families()
    }
    fn families(&self, families: &[FamilyStatus], notes: &[engine::slo::SliNote]) -> bool {
        self.filter.families(families, notes)
    }
}

/// A rendered page as the response, holding its render slot until written.
fn page_response(content_type: &'static str, page: String, slot: Slot) -> Response {
    (
        [(header::CONTENT_TYPE, content_type)],
        slot.body(PageChunks::new(page)),
    )
        .into_response()
}

/// The query of a page request, a render slot for it, and its page of groups.
///
/// # Errors
/// [`HttpError::BadPageQuery`], [`HttpError::TooManyPages`].
async fn page_of(
    state: &AppState,
    query: Option<&str>,
) -> Result<(PageQuery, Slot, GroupsPage), HttpError> {
    let query = PageQuery::parse(query)?;
    let slot = state.renders.acquire(RenderKind::Page).await?;
    let page = snapshot_page(state, &query);
    Ok((query, slot, page))
}

/// `GET /api/v1/groups[?limit=N&after=CURSOR&match[]=…&state=…&reason=…&family=…]`: one object
/// per group the filters list ([`super::page::filter`]), in ascending label order, one page at a
/// time ([`super::page`]): `{"status":"success","data":[…],"total":N,"next":C}`, `total` the
/// number of groups listed on all pages, `next` the `after` of the next page or `null` on the
/// last. Errors: [`HttpError::BadPageQuery`], [`HttpError::TooManyPages`].
pub(crate) async fn groups(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, HttpError> {
    let (query, slot, page) = page_of(&state, query.as_deref()).await?;
    Ok(page_response(
        "application/json",
        render_groups_json(&page, &query),
        slot,
    ))
}

/// The JSON page of `page`, within [`page::PAGE_BYTES`] ([`PageFill`]).
pub(crate) fn render_groups_json(page: &GroupsPage, query: &PageQuery) -> String {
    let total = page.matched;
    // `],"total":N,"next":` and `}`; the next cursor is counted per group.
    let tail = 32 + total.to_string().len();
    let mut fill = PageFill::new("{\"status\":\"success\",\"data\":[".to_owned(), tail);
    let mut item = String::new();
    let mut last = None;
    for g in &page.groups {
        item.clear();
        if fill.shown > 0 {
            item.push(',');
        }
        item.push_str(&group_json(g).to_string());
        // The quoted cursor, should this group be the last.
        let link = 2 + query.next_query(&g.labels).len();
        if !fill.try_add(&item, link) {
            break;
        }
        last = Some(&g.labels);
    }
    let shown = fill.shown;
    let mut out = fill.out;
    let _ = write!(out, "],\"total\":{total},\"next\":");
    match last.filter(|_| shown < page.remaining) {
        Some(labels) => {
            let _ = write!(out, "\"{}\"}}", page::encode_cursor(labels));
        }
        None => out.push_str("null}"),
    }
    out
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
/// `incomplete`, `unread` (the histograms of an incomplete group that arrive in a form the rules
/// do not read: `histogram`, `arrivesAs`), `limited` (the limit refusing the group's new series,
/// or null), `looksLike`
/// (the vLLM releases its series set looks like, `engine::GroupSnapshot::looks_like`, or null),
/// `recentRejects` (`duplicate_sample` and `out_of_order` samples of the group over the last one
/// to two minutes: two senders with the same labels, or a resent batch) and `sloNotes` (each SLI
/// of an SLO the group does not count: `slo`, `sli`, `reason`, `detail`).
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
        "looksLike": g.looks_like,
        "unread": g.unread.iter().map(|u| json!({
            "histogram": u.histogram,
            "arrivesAs": u.form.as_str(),
        })).collect::<Vec<_>>(),
        "recentRejects": {
            "duplicate_sample": g.recent_rejects[0],
            "out_of_order": g.recent_rejects[1],
        },
        "sloNotes": g.slo_notes.iter().flat_map(|n| n.iter()).map(|n| json!({
            "slo": n.slo,
            "sli": n.sli.name(),
            "reason": n.reason.as_str(),
            "detail": n.detail,
        })).collect::<Vec<_>>(),
    })
}

/// `GET /status[?limit=N&after=CURSOR]`: a table of one page of groups ([`super::page`]),
/// rendered with the wall clock for the lag column. Errors: [`HttpError::BadPageQuery`],
/// [`HttpError::TooManyPages`].
pub(crate) async fn status(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, HttpError> {
    let (query, slot, page) = page_of(&state, query.as_deref()).await?;
    let body = render_status(&page, &query, crate::clock::now_ms());
    Ok(page_response(HTML, body, slot))
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
/// series, an incomplete set of series (naming each histogram that arrives in a form the rules do
/// not read, else blaming a split or a filter), SLIs an SLO leaves out, duplicate or out-of-order
/// samples (two senders?).
fn group_state(g: &GroupSnapshot) -> String {
    let mut parts = Vec::new();
    if let Some(limit) = g.limited {
        parts.push(format!(
            "<span class=\"incomplete\">limited</span>: <code>{}</code> refuses its new series",
            escape(limit)
        ));
    }
    if g.incomplete && g.unread.is_empty() {
        parts.push(
            "<span class=\"incomplete\">incomplete</span> (series split across instances or filtered)"
                .to_owned(),
        );
    }
    for u in &g.unread {
        parts.push(format!(
            "<span class=\"incomplete\">incomplete</span>: <code class=\"histogram\">{}</code> {} \
             (<code class=\"arrives-as\">{}</code>)",
            escape(u.histogram),
            escape(u.form.words()),
            u.form.as_str()
        ));
    }
    if let Some(notes) = g.slo_notes.as_deref().filter(|n| !n.is_empty()) {
        let slis: Vec<String> = notes
            .iter()
            .map(|n| format!("{} {} ({})", escape(&n.slo), n.sli, n.reason.as_str()))
            .collect();
        parts.push(format!(
            "<span class=\"slo-notes\">SLIs not counted</span>: {} (below)",
            slis.join(", ")
        ));
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

/// The `/status` page of `page` (requested with `query`) at wall clock `now_ms`, within
/// [`page::PAGE_BYTES`] ([`PageFill`]). The first page starts with the summary over all groups.
pub(crate) fn render_status(page: &GroupsPage, query: &PageQuery, now_ms: i64) -> String {
    let summary = &page.summary;
    let mut head = String::with_capacity(4096);
    page_head(&mut head, "vllm-corrector status");
    let _ = write!(
        head,
        "<h1>Groups</h1>\n<p>vllm-corrector {}. <a href=\"./\">home</a> · \
         <a href=\"api/v1/groups\">JSON</a></p>\n",
        escape(&crate::VERSION),
    );
    if query.after.is_none() {
        let _ = writeln!(
            head,
            "<p id=\"summary\">{} group(s): <span class=\"served\">{}</span> serving at least one \
             family, {} serving none, <span class=\"incomplete\">{}</span> incomplete.</p>",
            summary.groups,
            summary.serving,
            summary.groups - summary.serving,
            summary.incomplete,
        );
    }
    if summary.groups == 0 {
        head.push_str("<p id=\"no-groups\">No group yet: no vllm:* series a rule reads has been received.</p>\n");
    }
    if !query.filter.query.is_empty() {
        let _ = writeln!(
            head,
            "<p id=\"filter\">{} of {} group(s) match <code>{}</code>. \
             <a href=\"status?limit={}\">all groups</a></p>",
            page.matched,
            summary.groups,
            escape(query.filter.query.trim_end_matches('&')),
            query.limit
        );
    }
    // The position of this page's first group among the groups listed.
    let first = page.matched - page.remaining + 1;
    let _ = write!(
        head,
        "<p id=\"page\">From group {first} of {} in label order.</p>\n\
         <table id=\"groups\">\n<thead><tr><th>group labels</th><th>families</th><th>last sample</th>\
         <th>scrape interval</th><th>input series</th><th>counter resets</th><th>looks like vLLM</th>\
         <th>state</th></tr></thead>\n<tbody>\n",
        page.matched
    );
    let mut fill = PageFill::new(head, 256);
    let mut row = String::new();
    let mut last = None;
    for g in &page.groups {
        row.clear();
        group_row(&mut row, g, now_ms);
        // `<p><a id="next-page" href="status?…">next page</a></p>`, `&` written `&amp;`.
        let link = 64 + query.next_query(&g.labels).len();
        if !fill.try_add(&row, link) {
            break;
        }
        last = Some(&g.labels);
    }
    let shown = fill.shown;
    let mut out = fill.out;
    let _ = write!(
        out,
        "</tbody></table>\n<p class=\"pages\">Groups {first}–{} of {}. ",
        first + shown - 1,
        page.matched
    );
    if query.after.is_some() {
        let _ = write!(
            out,
            "<a id=\"first-page\" href=\"status?{}\">first page</a> ",
            query.first_query().replace('&', "&amp;")
        );
    }
    match last.filter(|_| shown < page.remaining) {
        Some(labels) => {
            let _ = write!(
                out,
                "<a id=\"next-page\" href=\"status?{}\">next page</a>",
                query.next_query(labels).replace('&', "&amp;")
            );
        }
        None => out.push_str("last page"),
    }
    out.push_str("</p>\n</body></html>\n");
    out
}

/// Appends one group's table row to `out`. Label values are shown as PromQL and the exposition
/// formats write them (`\\`, `\"`, `\n` escaped), then HTML-escaped, so a quote or a newline in a
/// value is unambiguous.
fn group_row(out: &mut String, g: &GroupSnapshot, now_ms: i64) {
    out.push_str("<tr class=\"group\"><td class=\"labels\">");
    let mut value = String::new();
    for (n, v) in g.labels.iter() {
        value.clear();
        escape_label_value(&mut value, v);
        let _ = write!(
            out,
            "<span class=\"label\">{}=&quot;{}&quot;</span><br>",
            escape(n),
            escape(&value)
        );
    }
    out.push_str("</td><td><ul>");
    for f in &g.families {
        family_item(out, f);
    }
    for n in g.slo_notes.iter().flat_map(|n| n.iter()) {
        let _ = write!(
            out,
            "<li class=\"sli withheld\">SLO <code>{}</code>, SLI <code>{}</code>: not counted, \
             <span class=\"reason\">{}</span> ({})</li>",
            escape(&n.slo),
            n.sli.name(),
            n.reason.as_str(),
            escape(&n.detail)
        );
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
        "<td>{}</td><td>{}</td><td class=\"looks-like\">{}</td><td class=\"state\">{state}</td></tr>",
        g.input_series,
        g.counter_resets,
        g.looks_like.unwrap_or("none")
    );
}
