//! The `/metrics` page: the corrected families, then `vllm_corrector_family_info` (one series per
//! group and family, `super::info`), then `vllm_corrector_group_recent_rejected_samples` (groups
//! with recent duplicate or out-of-order samples, `super::senders`), then the self-metrics, in one
//! format, cut into chunks. The
//! page owns its cursor and pulls from the engine; `crate::http::metrics` only streams its chunks.
//!
//! A response keeps nothing of the engine while it is read. When it starts it takes the order of
//! the groups (their labels sorted after the engine lock is released, then only a
//! [`engine::GroupRef`] of 8 bytes kept per group). Each chunk of about
//! `CHUNK_BYTES` then takes the engine lock for as long as it copies a window of
//! groups (pointers to their labels and outputs, about one chunk's worth) and formats them after
//! releasing it. A group that leaves meanwhile is skipped, and its labels and outputs are freed at
//! once, whatever the client's pace: a slow reader of a large page under churn pins at most one
//! window (docs/RELIABILITY.md, "Responses"). A group's lines of one family are copied at one
//! instant, so its buckets, `_sum` and `_count` agree; different families and groups may be
//! copied a few milliseconds apart, as different targets' scrapes are. At most
//! `crate::http::renders::MAX_CONCURRENT_RENDERS` scrapes are served at once.

use std::sync::Arc;

use bytes::Bytes;

use super::render::{RenderCursor, Stop};
use super::{Format, info, senders};
use crate::core::Core;
use crate::live::LiveCell;
use crate::telemetry::memory::MemoryUse;
use crate::telemetry::scrape::ScrapeMetrics;
use engine::{EngineStats, GroupLabels, GroupOutputs, GroupRef, GroupSnapshot};

/// The size a chunk of a page is cut at, bytes (it may pass it by one group's lines).
pub(crate) const CHUNK_BYTES: usize = 64 * 1024;

/// The most groups one window copies under the engine lock, whatever their size: bounds the hold
/// when many groups withhold the family being written (they cost a lookup and render nothing).
const MAX_WINDOW_GROUPS: usize = 1024;

/// What a `vllm_corrector_family_info` series adds to its group's labels in the estimate of a
/// window, per family: the name and the `family`, `state`, `reason` and `detail` labels.
const INFO_LINE_BYTES: usize = 160;

/// A `/metrics` body being written: the groups' order, taken when it starts, and where the
/// rendering stopped. Holds the order (8 bytes per group), a group's escaped labels (the scratch
/// of `info::render_group`) and, while a chunk is made, one window of groups.
#[derive(Debug)]
pub struct Page {
    core: Arc<Core>,
    /// The reloadable settings, for the memory budgets the self-metrics show.
    live: Arc<LiveCell>,
    format: Format,
    /// Every group present when the response started, in ascending label order.
    order: Vec<GroupRef>,
    /// Where the corrected families stopped.
    cursor: RenderCursor,
    /// The next group (index into `order`) whose `vllm_corrector_family_info` is written, once
    /// the corrected families are written (`None` before).
    info: Option<usize>,
    /// Whether the `# HELP`/`# TYPE` lines of `vllm_corrector_family_info` are written.
    info_header: bool,
    /// The next group whose recent rejects are written, once the family info is written
    /// (`None` before).
    senders: Option<usize>,
    /// Whether the `# HELP`/`# TYPE` lines of the recent rejects are written.
    senders_header: bool,
    /// A group's escaped labels, reused from group to group ([`info::render_group`]).
    block: String,
    /// The labels of a window entry for a group that withholds the family or left: shared, so it
    /// costs no allocation per entry.
    none: GroupLabels,
    /// Set once the self-metrics are written: the end.
    done: bool,
}

impl Page {
    /// Takes the order of the groups: the engine lock is held while every group's
    /// [`GroupRef`] and a pointer to its labels are copied ([`engine::Engine::group_refs`]); they
    /// are sorted after it is released, then only the refs are kept.
    pub(crate) fn new(core: Arc<Core>, live: Arc<LiveCell>, format: Format) -> Page {
        let mut groups = core.engine().group_refs();
        groups.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        Page {
            core,
            live,
            format,
            order: groups.into_iter().map(|(group, _)| group).collect(),
            cursor: RenderCursor::default(),
            info: None,
            info_header: false,
            senders: None,
            senders_header: false,
            block: String::new(),
            none: GroupLabels::from([]),
            done: false,
        }
    }

    /// The groups at `order[offset..]` with their current output of the family being written
    /// (an entry without a value where a group withholds it or left), until their lines are
    /// estimated at `room` bytes ([`estimate`]) or [`MAX_WINDOW_GROUPS`] are taken: one hold of
    /// the engine lock.
    fn outputs_window(&self, offset: usize, room: usize) -> Vec<GroupOutputs> {
        let Some(family) = self.cursor.family() else {
            return Vec::new();
        };
        let engine = self.core.engine();
        let mut window = Vec::new();
        let mut bytes = 0;
        for &group in self.order.iter().skip(offset).take(MAX_WINDOW_GROUPS) {
            let mut entry = GroupOutputs {
                labels: GroupLabels::clone(&self.none),
                values: Default::default(),
            };
            if let Some((labels, value)) = engine.output_of(group, family) {
                bytes += estimate(&labels, value.lines());
                entry.labels = labels;
                entry.values[family.index()] = Some(value);
            }
            window.push(entry);
            if bytes >= room {
                break;
            }
        }
        window
    }

    /// The snapshots of the groups at `order[from..]` that are still present, each with its index
    /// in `order`, until their `vllm_corrector_family_info` lines are estimated at `room` bytes or
    /// [`MAX_WINDOW_GROUPS`] are looked at (then the index of the next one to look at is past the
    /// last returned): one hold of the engine lock.
    fn statuses_window(&self, from: usize, room: usize) -> (Vec<(usize, GroupSnapshot)>, usize) {
        let engine = self.core.engine();
        let mut window = Vec::new();
        let mut bytes = 0;
        let mut next = from;
        for &group in self.order.iter().skip(from).take(MAX_WINDOW_GROUPS) {
            if let Some(snapshot) = engine.snapshot_of(group) {
                let lines = snapshot.families.len();
                bytes += estimate(&snapshot.labels, lines) + INFO_LINE_BYTES * lines;
                window.push((next, snapshot));
            }
            next += 1;
            if bytes >= room {
                break;
            }
        }
        (window, next)
    }

    /// The labels and recent rejects of the groups at `order[from..]` that are present and have
    /// some, until their lines are estimated at `room` bytes or [`MAX_WINDOW_GROUPS`] are looked
    /// at, and the index of the next group to look at: one hold of the engine lock.
    fn rejects_window(&self, from: usize, room: usize) -> (Vec<(GroupLabels, [u64; 2])>, usize) {
        let engine = self.core.engine();
        let mut window = Vec::new();
        let mut bytes = 0;
        let mut next = from;
        for &group in self.order.iter().skip(from).take(MAX_WINDOW_GROUPS) {
            next += 1;
            if let Some((labels, rejects)) = engine.recent_rejects_of(group)
                && rejects != [0; 2]
            {
                bytes += estimate(&labels, 2);
                window.push((labels, rejects));
                if bytes >= room {
                    break;
                }
            }
        }
        (window, next)
    }

    /// Appends the corrected families to `out` until it holds [`CHUNK_BYTES`]; true once they are
    /// all written.
    fn write_families(&mut self, out: &mut String) -> bool {
        let mut window = Vec::new();
        let mut offset = 0;
        loop {
            match self.cursor.write_window(
                out,
                &window,
                offset,
                self.order.len(),
                self.format,
                CHUNK_BYTES,
            ) {
                Stop::Done => return true,
                Stop::Full => return false,
                Stop::NeedGroups => {
                    offset = self.cursor.next_group();
                    window = self.outputs_window(offset, CHUNK_BYTES.saturating_sub(out.len()));
                }
            }
        }
    }

    /// The engine's self-metric counts and the memory budget's parts, now: one hold of the
    /// engine lock (one pass over the groups and their series, [`engine::Engine::stats`]).
    fn engine_gauges(&self) -> (EngineStats, usize, MemoryUse) {
        let live = self.live.get();
        let (inflight, inflight_budget) = live.inflight_bytes();
        let total_budget = live.limits.max_memory_bytes;
        let engine = self.core.engine();
        let stats = engine.stats();
        let memory = MemoryUse {
            state: stats.memory,
            retired_groups: stats.retired_groups,
            retired_dropped: stats.retired_dropped,
            inflight,
            state_budget: engine.config().max_state_bytes,
            inflight_budget,
            total_budget,
        };
        (stats, engine.metadata_families(), memory)
    }
}

/// About how many bytes `lines` lines of a group with `labels` take: the labels (names, values,
/// quotes and separators) plus 80 bytes for the metric name, `le` and value, per line. Sizes a
/// window; the chunk's real length is what bounds it.
fn estimate(labels: &[(String, String)], lines: usize) -> usize {
    let labels: usize = labels.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    (labels + 80) * lines
}

impl Page {
    /// The next chunk of about `CHUNK_BYTES`, or `None` after the self-metrics (and `# EOF` in
    /// OpenMetrics) were written.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = String::with_capacity(CHUNK_BYTES + 4 * 1024);
        let mut next = match self.info {
            Some(next) => next,
            None => {
                if !self.write_families(&mut out) {
                    return Some(Bytes::from(out));
                }
                0
            }
        };
        while next < self.order.len() {
            if out.len() >= CHUNK_BYTES {
                self.info = Some(next);
                return Some(Bytes::from(out));
            }
            let (window, after) = self.statuses_window(next, CHUNK_BYTES - out.len());
            next = after;
            for (at, group) in &window {
                if out.len() >= CHUNK_BYTES {
                    // The rest of the window is looked up again for the next chunk.
                    next = *at;
                    break;
                }
                if !self.info_header {
                    info::render_header(&mut out, self.format);
                    self.info_header = true;
                }
                let notes = group.slo_notes.as_deref().unwrap_or_default();
                info::render_group(
                    &mut out,
                    &mut self.block,
                    &group.labels,
                    &group.families,
                    &group.unread,
                    notes,
                );
            }
        }
        self.info = Some(self.order.len());
        let mut next = self.senders.unwrap_or(0);
        while next < self.order.len() {
            if out.len() >= CHUNK_BYTES {
                self.senders = Some(next);
                return Some(Bytes::from(out));
            }
            let (window, after) = self.rejects_window(next, CHUNK_BYTES - out.len());
            next = after;
            for (labels, rejects) in &window {
                if !self.senders_header {
                    senders::render_header(&mut out, self.format);
                    self.senders_header = true;
                }
                senders::render_group(&mut out, labels, *rejects);
            }
        }
        self.senders = Some(next);
        let (stats, metadata_families, memory) = self.engine_gauges();
        let metrics = &self.core.metrics;
        let scrape = ScrapeMetrics::collect(&stats, metadata_families, &memory);
        // Writing into a String cannot fail.
        let _ = match self.format {
            Format::OpenMetrics => metrics
                .encode_openmetrics(&mut out)
                .and_then(|()| scrape.encode_openmetrics(&mut out)),
            Format::Text => metrics
                .encode_text(&mut out)
                .and_then(|()| scrape.encode_text(&mut out)),
        };
        if self.format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        self.done = true;
        Some(Bytes::from(out))
    }
}
