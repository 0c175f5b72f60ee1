//! The SLO counters on real vLLM (issue 30, "Proof"; docs/GOODPUT.md): every capture's dumps, and
//! the goodput captures' `/metrics` frames every 0.5 s, fed to an engine counting SLO sets whose
//! thresholds are bucket edges.
//!
//! * The per-SLI counts equal the dumps' buckets (after − before, computed here from the text).
//! * The finished requests are the TPOT histogram's increase, which is the benchmark's requests.
//! * The benchmark's own goodput, from its per-request records by `vllm bench serve --goodput`'s
//!   rule (TPOT 0 for n ≤ 1), lies within the bounds, up to the requests the client and vLLM
//!   judge apart (the client measures over HTTP, vLLM inside the server; with stop strings vLLM
//!   counts tokens before the trim): per SLI, the difference between vLLM's good count at the
//!   threshold and the bench's. Those are counted and printed, with the rows of
//!   docs/ACCURACY.md, "SLO counters and goodput on real vLLM".

use engine::slo::{Sli, Slo, SloSet, SloSpec};
use engine::{CounterMetric, DerivedValue, Engine, EngineConfig, Family, IngestReport};
use protocol::{Label, Sample};
use serde_json::Value;

use super::{Dump, RELEASES, TPOT, batches, json, name, read, samples};

const TTFT: &str = "vllm:time_to_first_token_seconds";
const E2E: &str = "vllm:e2e_request_latency_seconds";

/// One SLO of `(sli, seconds)` thresholds, named `name`.
fn slo(name: &str, slis: &[(Sli, f64)]) -> Slo {
    Slo::with_thresholds(name, 0.9, slis)
}

/// The SLO sets, on vLLM's default edges: the goodput captures' own (`--goodput ttft:80 tpot:10
/// e2el:1000`), a looser one, and each SLI alone.
fn spec() -> SloSpec {
    SloSpec {
        slos: vec![
            slo(
                "bench",
                &[(Sli::Ttft, 0.08), (Sli::Tpot, 0.01), (Sli::E2el, 1.0)],
            ),
            slo(
                "loose",
                &[(Sli::Ttft, 0.25), (Sli::Tpot, 0.025), (Sli::E2el, 2.5)],
            ),
            slo("ttft", &[(Sli::Ttft, 0.1)]),
            slo("tpot", &[(Sli::Tpot, 0.01)]),
            slo("e2el", &[(Sli::E2el, 1.0)]),
        ],
    }
}

/// The frames of a batch: the goodput captures' `frames.prom` (`# frame <i> sent_ms=…` before
/// each), else `before.prom` and `after.prom` a minute apart.
fn frames(dir: &std::path::Path) -> Vec<(i64, String)> {
    let path = dir.join("frames.prom");
    if !path.is_file() {
        let t = 1_750_000_000_000;
        return vec![
            (t, read(&dir.join("before.prom"))),
            (t + 60_000, read(&dir.join("after.prom"))),
        ];
    }
    let mut out: Vec<(i64, String)> = Vec::new();
    for line in read(&path).lines() {
        if let Some(rest) = line.strip_prefix("# frame ") {
            let sent = rest
                .split_whitespace()
                .find_map(|w| w.strip_prefix("sent_ms="))
                .and_then(|v| v.parse::<f64>().ok())
                .expect("sent_ms");
            out.push((sent as i64, String::new()));
        } else if let Some((_, text)) = out.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// Feeds one frame's `vllm:*` samples at `ts` (ms) to the engine.
fn feed(engine: &mut Engine, text: &str, ts: i64) {
    let mut report = IngestReport::default();
    for s in samples(text)
        .into_iter()
        .filter(|s| s.name.starts_with("vllm:"))
    {
        let mut labels: Vec<Label<'_>> = vec![Label {
            name: "__name__",
            value: &s.name,
        }];
        labels.extend(s.labels.iter().map(|(n, v)| Label { name: n, value: v }));
        labels.sort_by(|a, b| a.name.cmp(b.name));
        let sample = Sample {
            value: s.value,
            timestamp_ms: ts,
        };
        engine.ingest(&labels, &[sample], ts, &mut report);
    }
    assert_eq!(report.received, report.applied + report.rejected_total());
}

/// The SLO counters of the engine's only group: `(metric, slo, sli or bound) → value`.
fn counters(engine: &Engine) -> Counters {
    let mut out = Vec::new();
    engine.for_each_derived(Family::SloCounters, |_, value| {
        let DerivedValue::Counters { rows, values } = value else {
            panic!("{value:?}");
        };
        for (row, v) in rows.iter().zip(values) {
            let label = |n: &str| {
                row.labels
                    .iter()
                    .find(|(k, _)| k == n)
                    .map_or(String::new(), |(_, v)| v.clone())
            };
            let second = match row.metric {
                CounterMetric::GoodputRequests => label("bound"),
                _ => label("sli"),
            };
            out.push((row.metric, label("slo"), second, *v));
        }
    });
    out
}

fn get(c: &Counters, m: CounterMetric, slo: &str, x: &str) -> f64 {
    c.iter()
        .find(|(metric, s, second, _)| *metric == m && s == slo && second == x)
        .map(|e| e.3)
        .unwrap_or_else(|| panic!("no {m:?} {slo} {x}"))
}

/// A dump's cumulative count at `le` of `family`.
fn at(dump: &Dump, family: &str, le: f64) -> f64 {
    dump.buckets(family)
        .iter()
        .find(|(b, _)| *b == le)
        .unwrap_or_else(|| panic!("{family} has no le {le}"))
        .1
}

/// The benchmark's per-request values: `(ttft, tpot, e2el)` in seconds, TPOT as the bench
/// computes it, 0 for n ≤ 1.
fn requests(bench: &Value) -> Vec<(f64, f64, f64)> {
    bench["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k}"));
            let n = f("output_len");
            let tpot = if n > 1.0 {
                (f("latency") - f("ttft")) / (n - 1.0)
            } else {
                0.0
            };
            (f("ttft"), tpot, f("latency"))
        })
        .collect()
}

/// The SLO counters of one capture: at its first frame and at its last.
type Counters = Vec<(CounterMetric, String, String, f64)>;

/// Feeds every frame of `dir` to an engine counting [`spec`]; the counters at the first frame and
/// at the last.
fn run(dir: &std::path::Path) -> (Counters, Counters) {
    let frames = frames(dir);
    let mut engine = Engine::new(EngineConfig {
        settle_scrapes: 0,
        slos: SloSet::new(&spec(), |_| None),
        ..EngineConfig::default()
    });
    let (first_ts, first_text) = &frames[0];
    feed(&mut engine, first_text, *first_ts);
    let first = counters(&engine);
    for (ts, text) in &frames[1..] {
        feed(&mut engine, text, *ts);
    }
    (first, counters(&engine))
}

/// The increase of `f` from `before` to `after`.
fn delta(before: &Dump, after: &Dump, f: impl Fn(&Dump) -> f64) -> f64 {
    f(after) - f(before)
}

fn le1(x: &Dump) -> f64 {
    x.v("vllm:request_generation_tokens_bucket{1}")
}

fn count(x: &Dump, family: &str) -> f64 {
    x.v(&format!("{family}_count"))
}

/// Per SLI of the `bench` SLO, exact: the increase of the SLI rows is the dumps' bucket increase
/// (TPOT less the requests of at most one token, vLLM's zeros).
fn sli_counts_are_the_dumps(name: &str, first: &Counters, last: &Counters, b: &Dump, a: &Dump) {
    use CounterMetric::{SloEvents, SloGoodEvents};
    let rows = |m, sli: &str| get(last, m, "bench", sli) - get(first, m, "bench", sli);
    let d = |f: &dyn Fn(&Dump) -> f64| delta(b, a, f);
    let want = [
        ("ttft", d(&|x| count(x, TTFT)), d(&|x| at(x, TTFT, 0.08))),
        (
            "tpot",
            d(&|x| count(x, TPOT) - le1(x)),
            d(&|x| at(x, TPOT, 0.01) - le1(x)),
        ),
        ("e2el", d(&|x| count(x, E2E)), d(&|x| at(x, E2E, 1.0))),
    ];
    for (sli, events, good) in want {
        assert_eq!(rows(SloEvents, sli), events, "{name} {sli} events");
        assert_eq!(rows(SloGoodEvents, sli), good, "{name} {sli} good events");
    }
}

/// `r`'s value of `sli`: `(ttft, tpot, e2el)`.
fn value(r: &(f64, f64, f64), sli: Sli) -> f64 {
    match sli {
        Sli::Ttft => r.0,
        Sli::Tpot => r.1,
        _ => r.2,
    }
}

/// vLLM's requests good on `sli` at threshold `t`: the raw bucket's increase (vLLM's TPOT is 0
/// for n ≤ 1, as the bench's).
fn server_good(b: &Dump, a: &Dump, sli: Sli, t: f64) -> f64 {
    let family = match sli {
        Sli::Ttft => TTFT,
        Sli::Tpot => TPOT,
        _ => E2E,
    };
    delta(b, a, |x| at(x, family, t))
}

/// Checks every SLO's bounds against the bench's goodput; one table row per SLO.
fn bounds_hold(
    name: &str,
    last: &Counters,
    b: &Dump,
    a: &Dump,
    reqs: &[(f64, f64, f64)],
) -> Vec<String> {
    use CounterMetric::{GoodputRequests, SloFinishedRequests};
    let finished = delta(b, a, |x| count(x, TPOT));
    let mut rows = Vec::new();
    for s in spec().slos {
        let meets = |r: &&(f64, f64, f64), sli: Option<Sli>| {
            s.slis
                .iter()
                .filter(|t| sli.is_none_or(|x| x == t.sli))
                .all(|t| value(r, t.sli) <= t.threshold_seconds)
        };
        let good = reqs.iter().filter(|r| meets(r, None)).count() as f64;
        // The client measures over HTTP and vLLM inside the server, so a request can meet a
        // threshold at one and not at the other: per SLI, the requests vLLM counts good beyond
        // the bench's (which may be good in vLLM though bad at the client), and the reverse. The
        // bench's goodput is within the bounds up to those.
        let (mut near_bad, mut near_good) = (0.0, 0.0);
        for t in &s.slis {
            let client = reqs.iter().filter(|r| meets(r, Some(t.sli))).count() as f64;
            let diff = server_good(b, a, t.sli, t.threshold_seconds) - client;
            near_bad += diff.max(0.0);
            near_good += (-diff).max(0.0);
        }
        let slo = s.name.as_str();
        let lower = get(last, GoodputRequests, slo, "lower");
        let upper = get(last, GoodputRequests, slo, "upper");
        assert_eq!(
            get(last, SloFinishedRequests, slo, ""),
            finished,
            "{name} {slo}"
        );
        assert!(
            lower <= good + near_bad && good - near_good <= upper,
            "{name} {slo}: {lower} <= {good} (+{near_bad}) ; {good} (-{near_good}) <= {upper}"
        );
        rows.push(format!(
            "| {name} | {slo} | {finished} | {good} | {lower} | {upper} | {near_bad} / {near_good} |"
        ));
    }
    rows
}

#[test]
fn real_vllm_slo_counts_are_exact_and_the_benchs_goodput_lies_within_the_bounds() {
    let mut rows = Vec::new();
    for release in RELEASES {
        for dir in batches(release) {
            let name = name(release, &dir);
            let (first, last) = run(&dir);
            let (b, a) = (
                Dump::of(&read(&dir.join("before.prom"))),
                Dump::of(&read(&dir.join("after.prom"))),
            );
            sli_counts_are_the_dumps(&name, &first, &last, &b, &a);
            let reqs = requests(&json(&dir.join("bench.json")));
            let finished = delta(&b, &a, |x| count(x, TPOT));
            assert_eq!(
                finished,
                reqs.len() as f64,
                "{name}: every request finished once"
            );
            rows.extend(bounds_hold(&name, &last, &b, &a, &reqs));
        }
    }
    println!(
        "| capture | SLO | finished | bench goodput | lower | upper | judged apart by client and vLLM (good in vLLM / at the client) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
