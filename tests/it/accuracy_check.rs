//! Accuracy suite: the assertions. Every expected value comes from the simulator's per-request
//! ground truth (`GET /truth`, computed from request and batch records, never from counters), or
//! from plain PromQL evaluated by the same Prometheus; the corrected values come from Prometheus's
//! query API. The reference formulas are `docs/METRICS.md`, "The corrected families".
//!
//! Window increases are the difference of cumulative values at two frames (exact, unlike
//! `increase()`, which extrapolates to the window's edges).

use serde_json::Value;

use crate::accuracy_frames::{
    ACCEPTANCE, CANONICAL, Frame, GroupKey, ITERATION, RAW_ITERATION_SUM, TOKEN_WEIGHTED,
};
use tools::promql_rules::{RulesOptions, render};

use crate::accuracy_promql::{Labels, PromApi, time_param};
use crate::accuracy_sim::SimServer;

/// Relative tolerance of sums and means (the "within 1e-9").
pub(crate) const REL: f64 = 1e-9;

/// Prefix under which the suite's Prometheus records the shipped rules, so that their series and
/// the corrector's coexist (and stay outside the `vllm:.*` remote-write relabelling).
pub(crate) const RULES_PREFIX: &str = "vllm_promql_";

/// The shipped plain-PromQL recording rules (`vllm-corrector rules`, `promql_rules::render`),
/// recorded under [`RULES_PREFIX`] every second.
pub(crate) fn shipped_rules_yaml() -> String {
    render(&RulesOptions {
        name_prefix: RULES_PREFIX.to_string(),
        interval: Some("1s".to_string()),
        ..RulesOptions::default()
    })
}

#[derive(serde::Deserialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(serde::Deserialize)]
struct RuleGroup {
    rules: Vec<Rule>,
}

#[derive(serde::Deserialize)]
struct Rule {
    record: String,
    expr: String,
}

/// `(recorded name, PromQL)` of every rule of [`shipped_rules_yaml`], read back as YAML.
pub(crate) fn shipped_rules() -> Vec<(String, String)> {
    let file: RuleFile =
        serde_saphyr::from_str(&shipped_rules_yaml()).expect("the shipped rules parse as YAML");
    file.groups
        .into_iter()
        .flat_map(|g| g.rules)
        .map(|r| (r.record, r.expr))
        .collect()
}

/// What the simulator behind a group exposes, hence which assertions apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exposes {
    /// vLLM ≥ 0.23 (profile 0.33): raw `iteration_tokens_total_sum` already counts local compute.
    pub local_iteration_sum: bool,
    /// Speculative decoding runs, with some decode steps without drafts.
    pub spec_decoding: bool,
}

/// True when `a` and `b` agree within `rel` of the larger magnitude (both 0 agree).
pub(crate) fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs())
}

fn f(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for part in path.split('.') {
        cur = &cur[part];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("truth has no number at {path}: {v}"))
}

/// The truth of `key`'s group in a `WindowTruth` document.
fn group_truth<'a>(truth: &'a Value, key: &GroupKey) -> &'a Value {
    truth["groups"]
        .as_array()
        .and_then(|groups| {
            groups.iter().find(|g| {
                g["model_name"] == key.model_name.as_str() && g["engine"] == key.engine.as_str()
            })
        })
        .unwrap_or_else(|| panic!("truth has no group {key:?}: {truth}"))
}

/// Collects failures instead of stopping at the first, so one run reports everything.
#[derive(Debug, Default)]
pub(crate) struct Failures(pub Vec<String>);

impl Failures {
    /// Records `what` when `ok` is false.
    pub(crate) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
}

/// Asserts `family` of `key` over the window between its frames `a` and `b` against the truth of
/// `[s(a), s(b))`.
pub(crate) fn check_window(
    family: &str,
    sim: &SimServer,
    key: &GroupKey,
    exposes: Exposes,
    a: &Frame,
    b: &Frame,
    out: &mut Failures,
) {
    let truth = sim.truth(a.snapshot_s, b.snapshot_s);
    let g = group_truth(&truth, key);
    let at = format!(
        "{key:?} {family} window [{}, {}) s (scrapes {} → {} ms)",
        a.snapshot_s, b.snapshot_s, a.source_ms, b.source_ms
    );
    let d = |suffix: &str| {
        let k = format!("{family}{suffix}");
        b.corrected(&k) - a.corrected(&k)
    };
    let it = &g["iterations"];
    match family {
        CANONICAL => canonical(&at, &g["requests"]["canonical_tpot"], a, b, out),
        TOKEN_WEIGHTED => {
            // docs/METRICS.md, "Token-weighted ITL": count = generation tokens − first outputs
            // (exact), sum = Σ ITL.
            let (sum, count) = (d("_sum"), d("_count"));
            let itl_sum = f(it, "itl_sum_seconds");
            let want_count = f(it, "generation_tokens") - f(it, "first_outputs");
            out.check(count == want_count, || {
                format!("{at}: count {count}, truth generation − first outputs = {want_count}")
            });
            out.check(close(sum, itl_sum, REL), || {
                format!("{at}: sum {sum}, truth {itl_sum}")
            });
            if count > 0.0 {
                // Server truth per token. "Exact up to 0-token first outputs": with some in the
                // window the corrector's token count is smaller by exactly their number.
                let zero = f(it, "zero_token_first_outputs");
                let want = if zero == 0.0 {
                    f(it, "token_weighted_itl_seconds")
                } else {
                    itl_sum / (f(it, "tokens_after_first") - zero)
                };
                out.check(close(sum / count, want, REL), || {
                    format!(
                        "{at}: mean {}, truth {want} ({zero} 0-token first outputs)",
                        sum / count
                    )
                });
            }
        }
        ACCEPTANCE => {
            // docs/METRICS.md, "Acceptance-corrected ITL": exact sum = Σ ITL; count = the tokens
            // emitted after each request's first (generation − first outputs, as token-weighted),
            // not ITL samples + accepted drafts:
            // the simulator, as vLLM, counts drafts accepted beyond a request's last token.
            let (sum, count) = (d("_sum"), d("_count"));
            let itl_sum = f(it, "itl_sum_seconds");
            let want_count = f(it, "generation_tokens") - f(it, "first_outputs");
            out.check(count == want_count, || {
                format!("{at}: count {count}, truth generation − first outputs = {want_count}")
            });
            out.check(close(sum, itl_sum, REL), || {
                format!("{at}: sum {sum}, truth {itl_sum}")
            });
            if count > 0.0 {
                let zero = f(it, "zero_token_first_outputs");
                let want = itl_sum / (f(it, "tokens_after_first") - zero);
                out.check(close(sum / count, want, REL), || {
                    format!(
                        "{at}: mean {}, truth {want} ({zero} 0-token first outputs)",
                        sum / count
                    )
                });
            }
            // A valid histogram at both ends: +Inf = _count exactly, buckets monotone in le.
            for frame in [a, b] {
                let inf = frame.corrected(&format!("{ACCEPTANCE}_bucket{{+Inf}}"));
                let total = frame.corrected(&format!("{ACCEPTANCE}_count"));
                out.check(inf == total, || {
                    format!(
                        "{at}: +Inf bucket {inf} is not the count {total} at {} ms",
                        frame.source_ms
                    )
                });
                let buckets: Vec<f64> = bucket_keys(frame, ACCEPTANCE)
                    .iter()
                    .map(|(_, k)| frame.corrected(k))
                    .collect();
                out.check(buckets.windows(2).all(|w| w[0] <= w[1]), || {
                    format!(
                        "{at}: buckets not monotone at {} ms: {buckets:?}",
                        frame.source_ms
                    )
                });
            }
        }
        ITERATION => {
            // docs/METRICS.md, "Local-compute iteration tokens": exact on every profile with
            // prompts by source.
            let (sum, count) = (d("_sum"), d("_count"));
            let want_count = f(it, "iterations");
            out.check(count == want_count, || {
                format!("{at}: count {count}, truth {want_count}")
            });
            let want = f(it, "iteration_tokens_local_sum");
            out.check(sum == want, || {
                format!("{at}: local-compute sum {sum}, truth {want}")
            });
            let raw = b.raw(RAW_ITERATION_SUM) - a.raw(RAW_ITERATION_SUM);
            if exposes.local_iteration_sum {
                out.check(sum == raw, || {
                    format!("{at}: on 0.33 the sum {sum} must equal the raw _sum increase {raw}")
                });
            } else {
                // ≤ 0.22 the raw sum also credits cached and transferred prompt tokens (the
                // inflation the family removes); the truth says by how much.
                let all = f(it, "iteration_tokens_all_sum");
                out.check(raw == all, || {
                    format!("{at}: raw 0.22 sum increase {raw}, truth (all prompt tokens) {all}")
                });
            }
        }
        other => panic!("no window check for {other}"),
    }
}

/// Guards against a vacuous pass: over a phase's whole window the truth shows that the raw
/// series would mislead, so each correction is really exercised. Canonical TPOT: requests with
/// n ≤ 1 finished (raw `_count` counts them). Spec decoding: drafts were accepted, and some decode
/// outputs had no drafts (so `mean_itl / AL` is not exact). 0.22: prompt tokens were cached or
/// transferred (raw iteration `_sum` is inflated).
pub(crate) fn check_exercised(
    family: &str,
    sim: &SimServer,
    key: &GroupKey,
    exposes: Exposes,
    a: &Frame,
    b: &Frame,
    out: &mut Failures,
) {
    let truth = sim.truth(a.snapshot_s, b.snapshot_s);
    let g = group_truth(&truth, key);
    let at = format!(
        "{key:?} {family} whole window [{}, {}) s",
        a.snapshot_s, b.snapshot_s
    );
    let it = &g["iterations"];
    match family {
        CANONICAL => {
            let (raw, canonical) = (
                f(&g["requests"], "raw_tpot_count"),
                f(&g["requests"]["canonical_tpot"], "count"),
            );
            out.check(raw > canonical, || {
                format!("{at}: no request with n ≤ 1 finished (raw {raw}, canonical {canonical})")
            });
        }
        TOKEN_WEIGHTED | ACCEPTANCE if exposes.spec_decoding => {
            let (accepted, drafts, outputs) = (
                f(it, "accepted_tokens"),
                f(it, "drafts"),
                f(it, "itl_count"),
            );
            out.check(accepted > 0.0 && drafts < outputs, || {
                format!("{at}: {accepted} accepted drafts, {drafts} drafts over {outputs} decode outputs")
            });
            // Some drafts were accepted beyond a request's last token, so a count of ITL samples
            // + accepted drafts (the old formula) would fail the window checks.
            let emitted = f(it, "tokens_after_first");
            out.check(outputs + accepted > emitted, || {
                format!("{at}: no output was cut ({outputs} outputs + {accepted} accepted = {emitted} emitted)")
            });
        }
        ITERATION if !exposes.local_iteration_sum => {
            let (all, local) = (
                f(it, "iteration_tokens_all_sum"),
                f(it, "iteration_tokens_local_sum"),
            );
            out.check(all > local, || {
                format!("{at}: no cached or transferred prompt token (all {all}, local {local})")
            });
        }
        _ => {}
    }
}

/// Canonical TPOT (docs/METRICS.md, "Canonical TPOT"): the count and every cumulative bucket
/// exact, sum and mean within 1e-9.
fn canonical(at: &str, tpot: &Value, a: &Frame, b: &Frame, out: &mut Failures) {
    let d = |k: &str| b.corrected(k) - a.corrected(k);
    let count = f(tpot, "count");
    let got = d(&format!("{CANONICAL}_count"));
    out.check(got == count, || format!("{at}: count {got}, truth {count}"));
    let truth_buckets: Vec<(f64, f64)> = tpot["buckets"]
        .as_array()
        .expect("truth buckets")
        .iter()
        .map(|bucket| {
            let le = bucket["le"].as_str().expect("le string");
            (
                parse_le(le),
                bucket["count"].as_f64().expect("bucket count"),
            )
        })
        .collect();
    let served = bucket_keys(b, CANONICAL);
    let served_les: Vec<f64> = served.iter().map(|(le, _)| *le).collect();
    let truth_les: Vec<f64> = truth_buckets.iter().map(|(le, _)| *le).collect();
    out.check(served_les == truth_les, || {
        format!("{at}: bounds {served_les:?}, vLLM's {truth_les:?}")
    });
    for ((le, want), (_, k)) in truth_buckets.iter().zip(&served) {
        let got = d(k);
        out.check(got == *want, || {
            format!("{at}: bucket le={le} increased {got}, truth {want}")
        });
    }
    let sum = d(&format!("{CANONICAL}_sum"));
    let want_sum = f(tpot, "sum_seconds");
    out.check(close(sum, want_sum, REL), || {
        format!("{at}: sum {sum}, truth {want_sum}")
    });
    if count > 0.0 && got > 0.0 {
        let mean = f(tpot, "mean_seconds");
        out.check(close(sum / got, mean, REL), || {
            format!("{at}: mean {}, truth {mean}", sum / got)
        });
    }
}

/// The truth's canonical TPOT request count of `key` over `[from_s, to_s)`.
pub(crate) fn canonical_requests(sim: &SimServer, key: &GroupKey, from_s: f64, to_s: f64) -> f64 {
    f(
        &group_truth(&sim.truth(from_s, to_s), key)["requests"]["canonical_tpot"],
        "count",
    )
}

/// `le` as vLLM prints it (`0.01`, `1.0`, `+Inf`) as a float.
pub(crate) fn parse_le(le: &str) -> f64 {
    protocol::float::parse_le(le).unwrap_or_else(|| panic!("le {le:?} is not a bound"))
}

/// `(le, key)` of every `_bucket` of `family` the frame serves, ascending.
fn bucket_keys(frame: &Frame, family: &str) -> Vec<(f64, String)> {
    let prefix = format!("{family}_bucket{{");
    let mut out: Vec<(f64, String)> = frame
        .corrected
        .keys()
        .filter_map(|k| {
            let le = k.strip_prefix(&prefix)?.strip_suffix('}')?;
            Some((parse_le(le), k.clone()))
        })
        .collect();
    out.sort_by(|x, y| x.0.total_cmp(&y.0));
    out
}

/// Index of the bucket holding `x` among ascending `bounds` (the first bound ≥ `x`).
pub(crate) fn bucket_index(bounds: &[f64], x: f64) -> usize {
    bounds.iter().position(|&b| x <= b).unwrap_or(bounds.len())
}

/// `histogram_quantile(0.5 | 0.99)` of the canonical TPOT increase between `a` and `b`, evaluated
/// by Prometheus with `@` on the corrector scrapes, lands within one bucket of the true median and
/// p99 (numpy, linear interpolation) of the window's requests.
pub(crate) fn check_quantiles(
    api: &PromApi,
    sim: &SimServer,
    key: &GroupKey,
    a: &Frame,
    b: &Frame,
    out: &mut Failures,
) {
    let truth = sim.truth(a.snapshot_s, b.snapshot_s);
    let tpot = &group_truth(&truth, key)["requests"]["canonical_tpot"];
    let bounds: Vec<f64> = bucket_keys(b, CANONICAL)
        .iter()
        .map(|(le, _)| *le)
        .collect();
    let selector = format!("{CANONICAL}_bucket{{{}}}", key.matchers());
    for (q, field) in [(0.5, "median_seconds"), (0.99, "p99_seconds")] {
        let expr = format!(
            "histogram_quantile({q}, {selector} @ {} - {selector} @ {})",
            time_param(b.corrector_ms),
            time_param(a.corrector_ms)
        );
        let want = f(tpot, field);
        match api.vector(&expr, b.corrector_ms) {
            Ok(v) if v.len() == 1 => {
                let got = v[0].1;
                let (gi, wi) = (bucket_index(&bounds, got), bucket_index(&bounds, want));
                out.check(gi.abs_diff(wi) <= 1, || {
                    format!("{key:?}: {expr} = {got} (bucket {gi}), true {field} {want} (bucket {wi}), bounds {bounds:?}")
                });
            }
            Ok(v) => out.0.push(format!("{key:?}: {expr} returned {v:?}")),
            Err(e) => out.0.push(e),
        }
    }
}

/// The value(s) of `expr` at `at_ms` for `key`'s group: `(le, value)`, `le` as a float for
/// bucket series. Errors: the query fails or returns nothing for the group.
fn group_values(
    api: &PromApi,
    expr: &str,
    at_ms: i64,
    key: &GroupKey,
) -> Result<Vec<(Option<f64>, f64)>, String> {
    let hits: Vec<(Option<f64>, f64)> = api
        .vector(expr, at_ms)?
        .into_iter()
        .filter(|(l, _): &(Labels, f64)| {
            l.get("instance") == Some(&key.instance)
                && l.get("model_name") == Some(&key.model_name)
                && l.get("engine") == Some(&key.engine)
        })
        .map(|(l, v)| (l.get("le").map(|le| parse_le(le)), v))
        .collect();
    if hits.is_empty() {
        return Err(format!("{expr:?} at {at_ms} ms has nothing for {key:?}"));
    }
    Ok(hits)
}

/// The shipped recording rules of `family`, evaluated by the same Prometheus at the two frames'
/// scrape instants, agree with the corrected family: every recorded count and bucket equals the
/// corrected one exactly and every sum within 1e-9, at both ends; the window means of canonical
/// TPOT (`tpot_sum / (tpot_count − gen_tokens_bucket{le="1.0"})`) and token-weighted ITL agree
/// within 1e-9; and Prometheus really records each rule's series for the group.
pub(crate) fn check_plain_promql(
    api: &PromApi,
    rules: &[(String, String)],
    family: &str,
    key: &GroupKey,
    a: &Frame,
    b: &Frame,
    out: &mut Failures,
) {
    let at = format!(
        "{key:?} {family} vs the shipped PromQL rules, scrapes {} → {} ms",
        a.source_ms, b.source_ms
    );
    let prefix = format!(
        "{RULES_PREFIX}{}",
        family
            .strip_prefix("vllm_corrected_")
            .expect("a corrected family")
    );
    let mut window = [[0.0; 2]; 2]; // [sum, count] at [a, b] per the rules
    let mut checked = 0;
    for (record, expr) in rules {
        let Some(part) = record.strip_prefix(&prefix) else {
            continue;
        };
        checked += 1;
        for (end, frame) in [a, b].into_iter().enumerate() {
            let values = match group_values(api, expr, frame.source_ms, key) {
                Ok(v) => v,
                Err(e) => {
                    out.0.push(format!("{at}: {record}: {e}"));
                    continue;
                }
            };
            for (le, plain) in values {
                let corrected = match le {
                    None => frame.corrected(&format!("{family}{part}")),
                    Some(le) => match bucket_keys(frame, family).iter().find(|(x, _)| *x == le) {
                        Some((_, k)) => frame.corrected(k),
                        None => {
                            out.0
                                .push(format!("{at}: {record}{{le={le}}} has no corrected bucket"));
                            continue;
                        }
                    },
                };
                let agree = if part == "_sum" {
                    close(plain, corrected, REL)
                } else {
                    plain == corrected
                };
                out.check(agree, || {
                    format!(
                        "{at}: {record}{{le={le:?}}} = {plain} at {} ms, corrected {corrected}",
                        frame.source_ms
                    )
                });
                match part {
                    "_sum" => window[end][0] = plain,
                    "_count" => window[end][1] = plain,
                    _ => {}
                }
            }
        }
        if let Err(e) = group_values(api, record, b.corrector_ms, key) {
            out.0
                .push(format!("{at}: Prometheus records no {record}: {e}"));
        }
    }
    out.check(checked >= 2, || {
        format!("{at}: the shipped rules have no {prefix}_sum/_count")
    });
    if family == CANONICAL || family == TOKEN_WEIGHTED {
        let plain = (window[1][0] - window[0][0]) / (window[1][1] - window[0][1]);
        let c = |f: &Frame, suffix: &str| f.corrected(&format!("{family}{suffix}"));
        let corrected = (c(b, "_sum") - c(a, "_sum")) / (c(b, "_count") - c(a, "_count"));
        out.check(close(plain, corrected, REL), || {
            format!("{at}: window mean {plain} by the rules, corrected {corrected}")
        });
    }
}

#[test]
fn bucket_index_and_closeness_follow_their_definitions() {
    // Bounds 0.01, 0.025, +Inf: 0.01 is in bucket 0 (le is inclusive), 0.02 in 1, 5 in 2.
    let bounds = [0.01, 0.025, f64::INFINITY];
    assert_eq!(bucket_index(&bounds, 0.01), 0);
    assert_eq!(bucket_index(&bounds, 0.02), 1);
    assert_eq!(bucket_index(&bounds, 5.0), 2);
    // 1 and 1 + 1e-10 differ by 1e-10 relative (inside 1e-9); 1 and 1.000002 do not.
    assert!(close(1.0, 1.0 + 1e-10, REL));
    assert!(!close(1.0, 1.000_002, REL));
    assert!(close(0.0, 0.0, REL));
}
