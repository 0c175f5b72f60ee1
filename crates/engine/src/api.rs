//! Public types of the engine: reasons, reports, families and derived values.

use super::reasons::{RejectReason, RemovalReason, WithheldReason};
pub use super::rules::FAMILIES;
use super::rules::{REGISTRY, Spec};
pub use super::values::{CounterMetric, CounterRow, DerivedValue, FamilyKind};

/// Per-request sample accounting. `received == applied + rejected.iter().sum()` always holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// Samples received (float samples plus native histogram samples).
    pub received: u64,
    /// Samples applied to series state (stale markers included).
    pub applied: u64,
    /// Rejected samples, indexed by [`RejectReason::index`].
    pub rejected: [u64; RejectReason::ALL.len()],
}

impl IngestReport {
    /// Counts `n` samples as received and rejected for `reason`.
    pub fn reject(&mut self, reason: RejectReason, n: u64) {
        self.received += n;
        self.rejected[reason.index()] += n;
    }

    /// Counts `n` samples as received and applied.
    pub fn apply(&mut self, n: u64) {
        self.received += n;
        self.applied += n;
    }

    /// Total rejected samples, all reasons.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().sum()
    }

    /// Adds another report into this one.
    pub fn merge(&mut self, other: &IngestReport) {
        self.received += other.received;
        self.applied += other.applied;
        for (a, b) in self.rejected.iter_mut().zip(other.rejected.iter()) {
            *a += *b;
        }
    }
}

/// A corrected family: its position in the rule registry (`crates/engine/src/rules/mod.rs`, `REGISTRY`;
/// `docs/ENGINE.md`, "The rule registry"), which is also the exposition order and the index into
/// per-family arrays. What the family is (name, help, type) comes from its rule's spec; how the
/// tools show it is theirs (`crates/tools/src/presentation.rs`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Family(u8);

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Byte-wise string equality usable in constants.
const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// Names for the five families that code and tests single out, in the case of enum variants. A
// family needs no such name: code iterates [`Family::ALL`], and a test finds it with
// [`Family::named`].
#[allow(non_upper_case_globals)]
impl Family {
    /// `vllm_corrected_request_time_per_output_token_seconds`: canonical TPOT histogram, seconds.
    pub const CanonicalTpot: Family =
        Family::named("vllm_corrected_request_time_per_output_token_seconds");
    /// `vllm_corrected_token_weighted_itl_seconds`: `_sum` in seconds, `_count` in tokens.
    pub const TokenWeightedItl: Family = Family::named("vllm_corrected_token_weighted_itl_seconds");
    /// `vllm_corrected_acceptance_corrected_itl_seconds`: histogram, seconds per token.
    pub const AcceptanceCorrectedItl: Family =
        Family::named("vllm_corrected_acceptance_corrected_itl_seconds");
    /// `vllm_corrected_iteration_tokens_local_compute`: `_sum` in tokens, `_count` in iterations.
    pub const IterationTokensLocalCompute: Family =
        Family::named("vllm_corrected_iteration_tokens_local_compute");
    /// `vllm_corrected_slo`: the SLO counters (`vllm_corrected_slo_*_total`,
    /// `vllm_corrected_goodput_requests_total`), in requests (tokens for ITL per token).
    pub const SloCounters: Family = Family::named("vllm_corrected_slo");
}

impl Family {
    /// Every family, in registry (exposition) order.
    pub const ALL: [Family; FAMILIES] = {
        let mut all = [Family(0); FAMILIES];
        let mut i = 0;
        while i < FAMILIES {
            all[i] = Family(i as u8);
            i += 1;
        }
        all
    };

    /// The family exposed as `name`. In a constant, a name no rule has does not compile, so a
    /// table keyed by family (the tools' presentation) cannot name an unregistered one.
    ///
    /// # Panics
    /// When no registered rule has that name.
    pub const fn named(name: &str) -> Family {
        match Family::by_name(name) {
            Some(f) => f,
            None => panic!("no registered rule has this family name"),
        }
    }

    /// The family exposed as `name`, if a registered rule has it.
    pub(crate) const fn by_name(name: &str) -> Option<Family> {
        let mut i = 0;
        while i < FAMILIES {
            if same_str(REGISTRY[i].name, name) {
                return Some(Family(i as u8));
            }
            i += 1;
        }
        None
    }

    /// The registry entry: what the family is (name, help, kind, inputs) and how it is evaluated.
    pub(crate) fn spec(self) -> &'static Spec {
        &REGISTRY[self.index()]
    }

    /// The exposed family name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The family's `# HELP` text.
    pub fn help(self) -> &'static str {
        self.spec().help
    }

    /// Histogram or sum/count.
    pub fn kind(self) -> FamilyKind {
        self.spec().kind
    }

    /// The reasons this family can be withheld for: [`WithheldReason`]'s common ones (a
    /// missing input, an incomplete frame, settling, a limit) and its rule's own
    /// (`no_le_1_bound`, `inconsistent_inputs`), in [`WithheldReason::ALL`] order. The
    /// `(family, reason)` pairs of `vllm_corrector_groups_withheld` are these, never others.
    pub fn withheld_reasons(self) -> Vec<WithheldReason> {
        let own = self.spec().withholds;
        WithheldReason::ALL
            .into_iter()
            .filter(|r| WithheldReason::COMMON.contains(r) || own.contains(r))
            .collect()
    }

    /// True when the family's bucket counts are estimates that may be fractional (token-weighted
    /// shares of outputs: the acceptance-corrected ITL buckets), false when every count is a
    /// difference or sum of vLLM's integer counters. OpenMetrics 1.0 requires integer histogram
    /// bucket values, so such a family is not exposed as a histogram there (docs/METRICS.md,
    /// "OpenMetrics and fractional buckets").
    pub fn fractional_buckets(self) -> bool {
        self.spec().fractional_buckets
    }

    /// Index into per-family arrays (`[_; FAMILIES]`).
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Engine settings. Built by the service's config.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// A group with no sample for this long (receive wall clock, ms) is dropped. Default 10 min.
    pub idle_timeout_ms: i64,
    /// Frames (distinct timestamps) kept per group while waiting for every input. Default 16.
    pub max_pending_frames: usize,
    /// Most input series (those a rule reads) held at once, stale ones included until their group
    /// leaves. Samples of a further new series are rejected (`active_series_limit`), so a
    /// cardinality flood cannot grow memory without bound. Default 100 000.
    pub max_active_series: usize,
    /// A group with no new sample for this many of its own observed scrape intervals leaves
    /// before the idle timeout (its acceptance-corrected state is retired as for a stale group).
    /// 0 disables it. Default 3.
    pub missed_scrapes: u32,
    /// The missed-scrapes removal never happens sooner than this after the group's last new
    /// sample (ms): remote write batches a healthy group's samples for up to
    /// `queue_config.batch_send_deadline` (5 s by default) and retries with backoff. Default 30 s.
    pub missed_scrapes_min_wait_ms: i64,
    /// After a series new to a group arrives (not one that went stale and came back),
    /// no family of the group is evaluated until this many newer scrapes (new newest frames) have
    /// begun without another new one: the first frames after a corrector restart or of a new target
    /// can hold only some of a histogram's buckets, since remote write shards by series and a
    /// failed shard resends later (docs/ENGINE.md, "Settling"). What was served before stays
    /// served. 0 evaluates the first complete frame. Default 2.
    pub settle_scrapes: u32,
    /// The engine's state budget, bytes: groups with their labels, series and frames, the series
    /// index, and what removed groups keep for their return (at most a quarter of it), as
    /// accounted (docs/RELIABILITY.md, "The memory budget"). A new series that would take the state
    /// past it is refused (`memory_budget`) once the retired states and the groups that feed no
    /// family have made what room they can; known series keep flowing. Default 256 MiB.
    pub max_state_bytes: usize,
    /// The prefix of the input series' names: `vllm:` as vLLM names them, or what a platform
    /// renames them to (`kserve_vllm:`, KServe's LLMInferenceService monitors). A series is read
    /// when its name is this prefix followed by the rest of a [`crate::READ_NAMES`] name after
    /// `vllm:`; the corrected families keep their own names. Non-empty, a valid metric-name
    /// start (the service's config checks it). Default [`crate::DEFAULT_METRIC_PREFIX`].
    pub metric_prefix: String,
    /// Label names removed from every input series before it is grouped, so the corrected
    /// series never carry them: a sender's external labels (`region`, the Operator's
    /// `prometheus` and `prometheus_replica`), which the raw series in the sender's own TSDB lack,
    /// so a PromQL join of raw and corrected series matches. Series that differ only in a
    /// dropped label fall into one group (their samples collide as duplicates). Neither a rule
    /// dimension (`le`, `source`, …) nor `__name__`. Default none.
    pub drop_labels: Vec<String>,
    /// The SLOs whose counters the engine serves per group (the `vllm_corrected_slo_*` and
    /// `vllm_corrected_goodput_requests_total` family, docs/SLO.md). Their TTFT and E2EL inputs
    /// are read only when some SLO has a threshold for them. Default the shipped SLO
    /// ([`crate::slo::SloSpec::shipped_default`]), as the service's without a `slos:` section.
    pub slos: crate::slo::SloSet,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            idle_timeout_ms: 10 * 60 * 1000,
            max_pending_frames: 16,
            max_active_series: 100_000,
            missed_scrapes: 3,
            missed_scrapes_min_wait_ms: 30_000,
            settle_scrapes: 2,
            max_state_bytes: 256 * 1024 * 1024,
            metric_prefix: crate::DEFAULT_METRIC_PREFIX.to_owned(),
            drop_labels: Vec::new(),
            slos: crate::slo::SloSet::new(&crate::slo::SloSpec::shipped_default(), |_| None),
        }
    }
}

/// Most series one input of a group may have: the buckets of one histogram (its `+Inf` included),
/// the positions of the accepted-per-position counter. vLLM's histograms have at most a few dozen
/// bounds. A series past it is refused ([`RejectReason::TooManyBuckets`]): evaluating a frame costs
/// work that grows faster than the bucket count, under the engine lock (docs/SCRAPES.md, "A huge
/// histogram").
pub const MAX_SERIES_PER_INPUT: usize = 1024;

/// Counts for self-metrics, taken under the engine lock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    /// Input series currently tracked (series a rule reads).
    pub active_series: usize,
    /// Groups currently tracked.
    pub groups: usize,
    /// `(family, reason, groups)`: how many groups currently withhold each family, and why.
    pub withheld: Vec<(Family, WithheldReason, usize)>,
    /// Frames dropped before every input arrived, since start.
    pub frames_dropped: u64,
    /// Groups removed since start, by [`RemovalReason::index`]
    /// (`vllm_corrector_groups_removed_total{reason}`; [`EngineStats::groups_removed`]).
    pub groups_removed: [u64; RemovalReason::ALL.len()],
    /// Counter resets seen in any input, since start.
    pub counter_resets: u64,
    /// Evaluations whose output was held at the value last served because the computed value
    /// came out lower with no input reset (`vllm_corrector_output_holds_total{family}`), since
    /// start, by [`Family::index`].
    pub output_holds: [u64; FAMILIES],
    /// Evaluations at which an input of the family was lower than at the family's previous
    /// evaluation (a counter reset), or the family's input series changed, so the output
    /// restarted instead of being held, since start, by [`Family::index`]. Not exported; the
    /// engine fuzz target checks outputs against it.
    pub output_resets: [u64; FAMILIES],
    /// Newest sample timestamp applied so far (ms since the epoch), for the scrape-lag alarm.
    pub newest_sample_ms: Option<i64>,
    /// Groups whose set of input series cannot come from any vLLM version (for example a
    /// histogram without `_count`, or ITL without generation tokens) and stayed so over more than
    /// one later scrape: one target's series are split across instances or filtered.
    pub groups_incomplete: usize,
    /// Bytes of state held, as accounted against [`EngineConfig::max_state_bytes`]
    /// ([`crate::Engine::state_bytes`]), by part.
    pub memory: MemoryParts,
    /// Removed groups whose state is kept for their return.
    pub retired_groups: usize,
    /// Retired states dropped since start, `[expired, memory_budget]`: expired by sample time
    /// (`engine.idle_timeout` behind the newest sample), or evicted, oldest samples first, to keep
    /// the state budget. A group whose state was dropped restarts its outputs when it returns
    /// (docs/ENGINE.md, "Groups that leave and come back").
    pub retired_dropped: [u64; 2],
    /// `(slo, groups)`: per SLO of the configuration, in file order, the groups its `match:`
    /// covers (`vllm_corrector_slo_groups{slo}`): 0 while groups are tracked means it covers none.
    pub slo_groups: Vec<(String, usize)>,
}

impl EngineStats {
    /// Groups removed for `reason` since start.
    pub fn groups_removed(&self, reason: RemovalReason) -> u64 {
        self.groups_removed[reason.index()]
    }
}

/// The engine's accounted state bytes by part (`vllm_corrector_memory_bytes{part}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryParts {
    /// Live groups: their slots, labels, series, frames, plans, outputs and holds.
    pub groups: usize,
    /// The series index.
    pub index: usize,
    /// What removed groups keep for their return.
    pub retired: usize,
}
