//! Accuracy suite: which simulator snapshot each corrected value in Prometheus stands for.
//!
//! The chain stores two kinds of samples in Prometheus:
//! * the raw vLLM series and `vllm_sim_snapshot_time_seconds`, at the sender's scrape timestamp
//!   `T` of the simulator (Prometheus's own scrape, or vmagent's through remote write); the gauge
//!   at `T` is the exact simulator instant `s(T)` of that scrape;
//! * the corrected families, at the timestamp `T'` of Prometheus's later scrape of the corrector,
//!   which serves, per family, the newest frame whose inputs were complete, without timestamps.
//!
//! The engine evaluates each family as soon as that family's own inputs of a frame are complete,
//! so one corrector scrape can show two families of a group at different frames. Each family's
//! sample at `T'` is therefore mapped to its frame `T` separately, by a value that
//! `docs/METRICS.md`, "The corrected families", says the family passes through unchanged from one
//! raw series ([`IDENTIFIERS`]). A corrected
//! value that equals no raw scrape's value is itself a failure; a value shared by several scrapes
//! (nothing happened between them) is ambiguous and skipped. The truth of a window between two
//! frames is then `GET /truth?from=s(Ta)&to=s(Tb)`: exactly the batches the increase covers.

use std::collections::{BTreeMap, BTreeSet};

use crate::accuracy_promql::{PromApi, RangeSeries, quote};

/// One corrector group as the suite names it: the simulator target and vLLM's labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct GroupKey {
    /// The simulator's `instance` label (its `host:port`).
    pub instance: String,
    /// vLLM's `model_name`.
    pub model_name: String,
    /// vLLM's `engine` (data-parallel rank).
    pub engine: String,
}

impl GroupKey {
    fn of(series: &RangeSeries) -> GroupKey {
        GroupKey {
            instance: series.label("instance").to_string(),
            model_name: series.label("model_name").to_string(),
            engine: series.label("engine").to_string(),
        }
    }

    /// A PromQL label matcher list selecting this group: `instance="…",model_name="…",engine="…"`.
    pub(crate) fn matchers(&self) -> String {
        format!(
            "instance={},model_name={},engine={}",
            quote(&self.instance),
            quote(&self.model_name),
            quote(&self.engine)
        )
    }
}

/// A span of wall-clock time, Unix ms, during which nothing in the chain changed.
#[derive(Debug, Clone)]
pub(crate) struct Phase {
    /// Name used in failure messages.
    pub name: String,
    /// Start (exclusive), Unix ms: after the previous fault was complete.
    pub from_ms: i64,
}

/// One source scrape of a group, as the corrector served it back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    /// The sender's scrape timestamp of the simulator, Unix ms (the frame's timestamp).
    pub source_ms: i64,
    /// Timestamp of the first corrector scrape that served this frame, Unix ms.
    pub corrector_ms: i64,
    /// `vllm_sim_snapshot_time_seconds` at `source_ms`: the simulator instant, Unix seconds.
    pub snapshot_s: f64,
    /// Corrected values at `corrector_ms`: key `name` or `name{le}` (le as printed).
    pub corrected: BTreeMap<String, f64>,
    /// Raw values at `source_ms` of [`RAW_SERIES`], by name.
    pub raw: BTreeMap<String, f64>,
}

impl Frame {
    /// The corrected value `key` (`name` or `name{le}`); panics naming it when absent.
    pub(crate) fn corrected(&self, key: &str) -> f64 {
        *self
            .corrected
            .get(key)
            .unwrap_or_else(|| panic!("frame at {} ms serves no {key}", self.source_ms))
    }

    /// The raw value of `name` at the frame's scrape; panics naming it when absent.
    pub(crate) fn raw(&self, name: &str) -> f64 {
        *self
            .raw
            .get(name)
            .unwrap_or_else(|| panic!("scrape at {} ms has no {name}", self.source_ms))
    }
}

/// Canonical TPOT family.
pub(crate) const CANONICAL: &str = "vllm_corrected_request_time_per_output_token_seconds";
/// Token-weighted ITL family.
pub(crate) const TOKEN_WEIGHTED: &str = "vllm_corrected_token_weighted_itl_seconds";
/// Acceptance-corrected ITL family.
pub(crate) const ACCEPTANCE: &str = "vllm_corrected_acceptance_corrected_itl_seconds";
/// Local-compute iteration tokens family.
pub(crate) const ITERATION: &str = "vllm_corrected_iteration_tokens_local_compute";

/// vLLM's ITL sum (seconds).
pub(crate) const RAW_ITL_SUM: &str = "vllm:inter_token_latency_seconds_sum";
/// vLLM's per-request TPOT sum (seconds).
pub(crate) const RAW_TPOT_SUM: &str = "vllm:request_time_per_output_token_seconds_sum";
/// vLLM's iteration-tokens sum (tokens).
pub(crate) const RAW_ITERATION_SUM: &str = "vllm:iteration_tokens_total_sum";
/// vLLM's iteration count.
pub(crate) const RAW_ITERATION_COUNT: &str = "vllm:iteration_tokens_total_count";
/// Raw per-group series fetched with every frame.
pub(crate) const RAW_SERIES: [&str; 4] = [
    RAW_ITL_SUM,
    RAW_TPOT_SUM,
    RAW_ITERATION_SUM,
    RAW_ITERATION_COUNT,
];

/// `(family, its series, the raw series it equals)`, each from its heading under
/// `docs/METRICS.md`, "The corrected families": canonical `_sum` = TPOT `_sum`; token-weighted and
/// acceptance-corrected `_sum` = ITL `_sum`; local-compute `_count` = `iteration_tokens_total_count`.
pub(crate) const IDENTIFIERS: [(&str, &str, &str); 4] = [
    (CANONICAL, "_sum", RAW_TPOT_SUM),
    (TOKEN_WEIGHTED, "_sum", RAW_ITL_SUM),
    (ACCEPTANCE, "_sum", RAW_ITL_SUM),
    (ITERATION, "_count", RAW_ITERATION_COUNT),
];

/// A regex matching every name of [`RAW_SERIES`] and the base name of the histogram each is part
/// of (`vllm:inter_token_latency_seconds(_sum)?|…`).
fn raw_names_regex() -> String {
    RAW_SERIES
        .iter()
        .map(|name| {
            let base = name
                .strip_suffix("_sum")
                .or_else(|| name.strip_suffix("_count"))
                .expect("every raw series is a histogram's _sum or _count");
            format!("{base}|{name}")
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Frames per family (keyed by family name), ascending, one per distinct source scrape.
pub(crate) type FamilyFrames = BTreeMap<&'static str, Vec<Frame>>;

/// How far before a phase raw scrapes are fetched, so that a corrected sample early in the phase
/// that still shows an older frame is recognised rather than reported as unmatched.
const LOOKBACK_MS: i64 = 30_000;

fn series_key(series: &RangeSeries) -> String {
    let name = series.label("__name__");
    match series.labels.get("le") {
        Some(le) => format!("{name}{{{le}}}"),
        None => name.to_string(),
    }
}

/// Every frame of every family of every group of simulator `instance` whose scrape `T` and
/// corrector scrape `T'` both fall in `(phase.from_ms, now_ms]`.
///
/// Errors (each is an accuracy failure, the message says which): a corrected identifying value in
/// the phase that equals no raw scrape's value; one frame served with different values at two
/// corrector scrapes; a corrector scrape serving an older frame than a previous one.
pub(crate) fn collect(
    api: &PromApi,
    instance: &str,
    phase: &Phase,
    now_ms: i64,
) -> Result<BTreeMap<GroupKey, FamilyFrames>, String> {
    let range = now_ms - phase.from_ms + LOOKBACK_MS;
    let inst = quote(instance);
    let snapshots: BTreeMap<i64, f64> = api
        .matrix(
            &format!("vllm_sim_snapshot_time_seconds{{instance={inst}}}"),
            range,
            now_ms,
        )?
        .into_iter()
        .flat_map(|s| s.samples)
        .collect();
    // Classic series, or (under NHCB) the native histogram each `_sum`/`_count` is part of, which
    // `PromApi::matrix` splits into those two.
    let raw = api.matrix(
        &format!(
            "{{__name__=~{},instance={inst}}}",
            quote(&raw_names_regex())
        ),
        range,
        now_ms,
    )?;
    let corrected = api.matrix(
        &format!("{{__name__=~\"vllm_corrected_.*\",instance={inst}}}"),
        range,
        now_ms,
    )?;
    let by_group = |all: &[RangeSeries]| {
        let mut out: BTreeMap<GroupKey, Series> = BTreeMap::new();
        for s in all {
            out.entry(GroupKey::of(s))
                .or_default()
                .insert(series_key(s), s.samples.iter().copied().collect());
        }
        out
    };
    let (raw, corrected) = (by_group(&raw), by_group(&corrected));
    let mut out = BTreeMap::new();
    for (key, series) in &corrected {
        let raw = raw
            .get(key)
            .ok_or_else(|| format!("{key:?}: corrected series but no raw series"))?;
        let mut families = FamilyFrames::new();
        for ident in IDENTIFIERS {
            let frames = family_frames(key, ident, series, raw, &snapshots, phase, now_ms)?;
            families.insert(ident.0, frames);
        }
        out.insert(key.clone(), families);
    }
    Ok(out)
}

/// Samples per series key (`name` or `name{le}`): `timestamp ms → value`.
type Series = BTreeMap<String, BTreeMap<i64, f64>>;

fn family_frames(
    key: &GroupKey,
    (family, suffix, raw_name): (&'static str, &str, &str),
    corrected: &Series,
    raw: &Series,
    snapshots: &BTreeMap<i64, f64>,
    phase: &Phase,
    now_ms: i64,
) -> Result<Vec<Frame>, String> {
    let ident = format!("{family}{suffix}");
    let Some(served) = corrected.get(&ident) else {
        return Ok(Vec::new());
    };
    if now_ms <= phase.from_ms {
        return Ok(Vec::new());
    }
    let raw_ident = raw
        .get(raw_name)
        .ok_or_else(|| format!("{key:?}: no {raw_name}"))?;
    let newest_raw = raw_ident.keys().next_back().copied().unwrap_or(i64::MIN);
    let mut by_value: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for (&t, &v) in raw_ident {
        by_value.entry(v.to_bits()).or_default().push(t);
    }

    let mut frames: Vec<Frame> = Vec::new();
    for (&t_corr, &v) in served.range(phase.from_ms + 1..=now_ms) {
        let Some(candidates) = by_value.get(&v.to_bits()) else {
            return Err(format!(
                "{key:?}: the corrected {ident} {v} served at {t_corr} ms equals no scraped \
                 {raw_name} (it must pass the raw value through)"
            ));
        };
        // Several scrapes with one value: ambiguous, skip. The newest raw scrape may still get a
        // twin (with vmagent the raw copy travels separately), so it never counts as unique.
        let &[t] = candidates.as_slice() else {
            continue;
        };
        if t <= phase.from_ms || t > t_corr || t == newest_raw {
            continue;
        }
        let Some(&snapshot_s) = snapshots.get(&t) else {
            continue;
        };
        let values: BTreeMap<String, f64> = corrected
            .iter()
            .filter(|(k, _)| k.starts_with(family))
            .filter_map(|(k, samples)| samples.get(&t_corr).map(|v| (k.clone(), *v)))
            .collect();
        let raw_values: BTreeMap<String, f64> = raw
            .iter()
            .filter_map(|(k, samples)| samples.get(&t).map(|v| (k.clone(), *v)))
            .collect();
        if let Some(last) = frames.last() {
            if t < last.source_ms {
                return Err(format!(
                    "{key:?}: {family}: the corrector served the frame of {t} ms at {t_corr} ms, \
                     after serving the newer frame of {} ms at {} ms",
                    last.source_ms, last.corrector_ms
                ));
            }
            if t == last.source_ms {
                if values != last.corrected {
                    return Err(format!(
                        "{key:?}: {family}: frame {t} ms served differently at {} ms and \
                         {t_corr} ms:\n{:?}\n{values:?}",
                        last.corrector_ms, last.corrected
                    ));
                }
                continue;
            }
        }
        frames.push(Frame {
            source_ms: t,
            corrector_ms: t_corr,
            snapshot_s,
            corrected: values,
            raw: raw_values,
        });
    }
    Ok(frames)
}

/// The groups with at least one frame of some family.
pub(crate) fn groups_of(frames: &BTreeMap<GroupKey, FamilyFrames>) -> BTreeSet<GroupKey> {
    frames
        .iter()
        .filter(|(_, f)| f.values().any(|v| !v.is_empty()))
        .map(|(k, _)| k.clone())
        .collect()
}

#[test]
fn frames_are_identified_per_family_by_the_passed_through_value() {
    // Raw ITL sums at scrapes 1000, 2000, 3000, 4000 ms: 1.5, 2.5, 2.5, 3.5 (no decode between
    // 2000 and 3000). The corrector served the token-weighted sum 1.5 at 1500 ms and 2.5 at
    // 3500 ms: the first is the frame of 1000 ms, the second is ambiguous and skipped.
    let key = GroupKey {
        instance: "sim:1".into(),
        model_name: "m".into(),
        engine: "0".into(),
    };
    let ident = IDENTIFIERS[1];
    let raw = Series::from([(
        RAW_ITL_SUM.to_string(),
        BTreeMap::from([(1000, 1.5), (2000, 2.5), (3000, 2.5), (4000, 3.5)]),
    )]);
    let corrected = Series::from([
        (
            format!("{TOKEN_WEIGHTED}_sum"),
            BTreeMap::from([(1500, 1.5), (3500, 2.5)]),
        ),
        (
            format!("{TOKEN_WEIGHTED}_count"),
            BTreeMap::from([(1500, 10.0), (3500, 20.0)]),
        ),
        // Another family's series is not part of this family's frame.
        (format!("{ITERATION}_count"), BTreeMap::from([(1500, 7.0)])),
    ]);
    let snapshots = BTreeMap::from([
        (1000, 100.25),
        (2000, 101.25),
        (3000, 102.25),
        (4000, 103.25),
    ]);
    let phase = Phase {
        name: "test".into(),
        from_ms: 0,
    };
    let frames = family_frames(&key, ident, &corrected, &raw, &snapshots, &phase, 5000).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].source_ms, 1000);
    assert_eq!(frames[0].corrector_ms, 1500);
    assert_eq!(frames[0].snapshot_s, 100.25);
    assert_eq!(
        frames[0].corrected(&format!("{TOKEN_WEIGHTED}_count")),
        10.0
    );
    assert_eq!(frames[0].corrected.len(), 2);

    // A corrected sum that no scrape had is a failure, not a skip.
    let bad = Series::from([(
        format!("{TOKEN_WEIGHTED}_sum"),
        BTreeMap::from([(1500, 1.75)]),
    )]);
    assert!(family_frames(&key, ident, &bad, &raw, &snapshots, &phase, 5000).is_err());
}
