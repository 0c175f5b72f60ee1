//! Test builds only: the hand-worked scrapes and the feeding helpers shared by the engine's test
//! files (`*_tests.rs` in this folder), so each feeds the engine the same way. Every sample goes
//! through [`ingest_series`], one `Engine::ingest` call per series.

use super::*;
pub(super) use protocol::{Label, STALE_NAN_BITS, Sample};

/// One raw series: labels (unsorted is fine, sorted here) and a value.
pub(super) type Raw = (Vec<(&'static str, String)>, f64);

pub(super) fn series(
    name: &'static str,
    engine: &str,
    extra: &[(&'static str, &str)],
    value: f64,
) -> Raw {
    let mut labels = vec![
        ("__name__", name.to_string()),
        ("engine", engine.to_string()),
        ("model_name", "m".to_string()),
    ];
    labels.extend(extra.iter().map(|(n, v)| (*n, v.to_string())));
    labels.sort();
    (labels, value)
}

pub(super) fn hist(
    out: &mut Vec<Raw>,
    base: &'static str,
    engine: &str,
    bounds: &[&str],
    cumulative: &[f64],
    sum: f64,
) {
    let (b, s, c): (&'static str, &'static str, &'static str) = match base {
        "itl" => (
            "vllm:inter_token_latency_seconds_bucket",
            "vllm:inter_token_latency_seconds_sum",
            "vllm:inter_token_latency_seconds_count",
        ),
        "old" => (
            "vllm:time_per_output_token_seconds_bucket",
            "vllm:time_per_output_token_seconds_sum",
            "vllm:time_per_output_token_seconds_count",
        ),
        _ => (
            "vllm:request_time_per_output_token_seconds_bucket",
            "vllm:request_time_per_output_token_seconds_sum",
            "vllm:request_time_per_output_token_seconds_count",
        ),
    };
    for (le, v) in bounds.iter().zip(cumulative) {
        out.push(series(b, engine, &[("le", le)], *v));
    }
    out.push(series(s, engine, &[], sum));
    out.push(series(c, engine, &[], *cumulative.last().unwrap()));
}

/// A vLLM 0.33-shaped scrape of engine `e`, scaled by `k` (k = 1 at t1, 2 at t2).
///
/// ITL (bounds 0.025, 0.05, 0.1, +Inf): cumulative 0, 10k, 40k, 40k; Σ 2.4k s.
/// TPOT (bounds 0.01, 0.05, +Inf): cumulative 3k, 9k, 10k; Σ 0.42k. gen_tokens{le="1.0"} = 3k.
/// TTFT count 40k, local prompt tokens 300k, iterations 250k. With spec decoding 40k accepted, so
/// generation tokens = 40k first outputs + 40k ITL outputs + 40k accepted = 120k; without, 80k.
pub(super) fn scrape(e: &str, k: f64, spec: bool) -> Vec<Raw> {
    let mut out = Vec::new();
    hist(
        &mut out,
        "itl",
        e,
        &["0.025", "0.05", "0.1", "+Inf"],
        &[0.0, 10.0 * k, 40.0 * k, 40.0 * k],
        2.4 * k,
    );
    hist(
        &mut out,
        "tpot",
        e,
        &["0.01", "0.05", "+Inf"],
        &[3.0 * k, 9.0 * k, 10.0 * k],
        0.42 * k,
    );
    out.push(series(
        "vllm:request_generation_tokens_bucket",
        e,
        &[("le", "1.0")],
        3.0 * k,
    ));
    out.push(series(
        "vllm:request_generation_tokens_bucket",
        e,
        &[("le", "2.0")],
        5.0 * k,
    ));
    out.push(series(
        "vllm:request_generation_tokens_count",
        e,
        &[],
        10.0 * k,
    ));
    out.push(series(
        "vllm:generation_tokens_total",
        e,
        &[],
        if spec { 120.0 * k } else { 80.0 * k },
    ));
    out.push(series("vllm:generation_tokens_created", e, &[], 1.7e9));
    out.push(series(
        "vllm:time_to_first_token_seconds_count",
        e,
        &[],
        40.0 * k,
    ));
    out.push(series(
        "vllm:prompt_tokens_by_source_total",
        e,
        &[("source", "local_compute")],
        300.0 * k,
    ));
    out.push(series(
        "vllm:prompt_tokens_by_source_total",
        e,
        &[("source", "local_cache_hit")],
        700.0 * k,
    ));
    out.push(series(
        "vllm:iteration_tokens_total_count",
        e,
        &[],
        250.0 * k,
    ));
    out.push(series("vllm:num_requests_running", e, &[], 4.0));
    if spec {
        out.push(series(
            "vllm:spec_decode_num_accepted_tokens_total",
            e,
            &[],
            40.0 * k,
        ));
        out.push(series(
            "vllm:spec_decode_num_drafts_total",
            e,
            &[],
            40.0 * k,
        ));
        // One draft per output, always accepted: 40k drafts reached position 0 (k = 1 draft).
        out.push(series(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            e,
            &[("position", "0")],
            40.0 * k,
        ));
    }
    out
}

/// Ingests one series, its labels as `(name, value)` pairs, with `samples`, received at `now_ms`.
pub(super) fn ingest_series<N: AsRef<str>, V: AsRef<str>>(
    engine: &mut Engine,
    labels: &[(N, V)],
    samples: &[Sample],
    now_ms: i64,
    report: &mut IngestReport,
) {
    let labels: Vec<Label<'_>> = labels
        .iter()
        .map(|(n, v)| Label {
            name: n.as_ref(),
            value: v.as_ref(),
        })
        .collect();
    engine.ingest(&labels, samples, now_ms, report);
}

/// Ingests each raw series with one sample `(value, ts)`, received at `now_ms`.
pub(super) fn feed_at<N: AsRef<str>, V: AsRef<str>>(
    engine: &mut Engine,
    raw: &[(Vec<(N, V)>, f64)],
    ts: i64,
    now_ms: i64,
    report: &mut IngestReport,
) {
    for (labels, value) in raw {
        let sample = Sample {
            value: *value,
            timestamp_ms: ts,
        };
        ingest_series(engine, labels, &[sample], now_ms, report);
    }
}

/// One remote-write request of `raw`, each series with one sample at `ts`, received at `now_ms`,
/// encoded and decoded as the receiver does, and applied.
pub(super) fn write_at(engine: &mut Engine, raw: &[Raw], ts: i64, now_ms: i64) -> Outcome {
    let series: Vec<protocol::encode::SeriesSpec> = raw
        .iter()
        .map(|(labels, value)| {
            let labels = labels
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect();
            let sample = Sample {
                value: *value,
                timestamp_ms: ts,
            };
            (labels, vec![sample])
        })
        .collect();
    let body = protocol::encode::encode_v1(&series, &[]);
    let mut buf = Vec::new();
    protocol::snappy::decompress_into(&body, usize::MAX, &mut buf).expect("snappy");
    let mut request = protocol::Version::V1.decode(&buf).expect("decodes");
    let limits = protocol::labels::LabelLimits::default();
    let policy = IngestPolicy {
        labels: &limits,
        label_epoch: engine.index_epoch(),
        max_future_skew_ms: i64::MAX / 4,
        max_decoded_bytes: usize::MAX,
    };
    let samples = std::cell::Cell::new(request.sample_count());
    engine
        .apply(&mut request, &policy, now_ms, &samples)
        .expect("applied")
}

/// Ingests each `(raw series, timestamp)` with the engine clock at 0.
pub(super) fn feed(engine: &mut Engine, raw: &[(Raw, i64)], report: &mut IngestReport) {
    for ((labels, value), ts) in raw {
        let sample = Sample {
            value: *value,
            timestamp_ms: *ts,
        };
        ingest_series(engine, labels, &[sample], 0, report);
    }
}

/// Every derived value: family, group labels, value.
pub(super) type Outputs = Vec<(Family, Vec<(String, String)>, DerivedValue)>;

pub(super) fn outputs(engine: &Engine) -> Outputs {
    let mut out = Vec::new();
    for family in Family::ALL {
        engine.for_each_derived(family, |labels, value| {
            out.push((family, labels.to_vec(), value.clone()))
        });
    }
    out
}

pub(super) fn two_scrapes() -> Vec<(Raw, i64)> {
    let mut all = Vec::new();
    for (ts, k) in [(1_000, 1.0), (16_000, 2.0)] {
        for e in ["0", "1"] {
            all.extend(scrape(e, k, e == "0").into_iter().map(|r| (r, ts)));
        }
    }
    all
}

pub(super) fn value_of(out: &Outputs, family: Family, engine: &str) -> DerivedValue {
    out.iter()
        .find(|(f, l, _)| *f == family && l.iter().any(|(n, v)| n == "engine" && v == engine))
        .unwrap()
        .2
        .clone()
}

/// The acceptance-corrected histogram of a first interval from 0 to the k = 1 scrape: ITL deltas
/// cumulative 0, 10, 40 at 0.025, 0.05, 0.1; 120 − 40 = 80 tokens for 40 outputs, so w = 2 and
/// bound B holds w × the raw cumulative count at w · B: 2 × 10, 2 × 40, 2 × 40; `+Inf` 80.
pub(super) fn first_interval_at_k1() -> DerivedValue {
    DerivedValue::Histogram {
        buckets: vec![
            (0.025, 20.0),
            (0.05, 80.0),
            (0.1, 80.0),
            (f64::INFINITY, 80.0),
        ],
        sum: 2.4,
        count: 80.0,
    }
}

/// The k = 2 scrape of engine 0 with 50 accepted tokens instead of 80: 10 accepted for 40 drafts
/// since k = 1, an interval acceptance length of 1.25 against 2 before. Generation tokens follow:
/// 120 at t1 + 40 first outputs + 40 ITL outputs + 10 accepted = 210. The interval's 40 outputs
/// all took more than 0.05 s (ITL le="0.05" stays at 10), so its shape differs from the first's.
pub(super) fn t2_with_low_acceptance() -> Vec<Raw> {
    let mut t2 = scrape("0", 2.0, true);
    for (labels, value) in &mut t2 {
        let le = labels
            .iter()
            .find(|(n, _)| *n == "le")
            .map(|(_, v)| v.as_str());
        match (labels[0].1.as_str(), le) {
            (
                "vllm:spec_decode_num_accepted_tokens_total"
                | "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                _,
            ) => *value = 50.0,
            ("vllm:generation_tokens_total", _) => *value = 210.0,
            ("vllm:inter_token_latency_seconds_bucket", Some("0.05")) => *value = 10.0,
            _ => {}
        }
    }
    t2
}

/// The default engine settings without the settling (`settle_scrapes: 0`), for the tests of frame
/// and rule semantics, which check what the first complete frame gives. The settling has its own
/// tests (`settle_tests.rs`), with the default.
pub(super) fn config() -> EngineConfig {
    EngineConfig {
        settle_scrapes: 0,
        slos: test_slos(),
        ..EngineConfig::default()
    }
}

/// The SLOs of [`config`]: the shipped default's, at 0.05 s, a TPOT edge of [`scrape`], so the
/// SLO family counts its SLI exactly and has no note.
pub(super) fn test_slos() -> crate::slo::SloSet {
    let mut spec = crate::slo::SloSpec::shipped_default();
    spec.slos[0].slis[0].threshold_seconds = 0.05;
    crate::slo::SloSet::new(&spec, |_| None)
}

/// The engine's state as the state file holds it (`crates/service/src/storage.rs`): a header line,
/// then one JSON record per group, as written a few groups at a time.
pub(crate) fn to_lines(engine: &Engine) -> String {
    let mut out = serde_json::to_string(&crate::StateHeader::default()).expect("header");
    out.push('\n');
    let mut cursor = crate::StateCursor::default();
    while !cursor.is_done() {
        for record in engine.state_records(&mut cursor, 2) {
            out.push_str(&serde_json::to_string(&record).expect("record"));
            out.push('\n');
        }
    }
    out
}

/// Restores `text` from [`to_lines`] into `engine` at `now_ms` as the service reads the file: the
/// header's version, then each line. Returns the records restored, or the first error.
pub(crate) fn from_lines(
    engine: &mut Engine,
    text: &str,
    now_ms: i64,
) -> Result<usize, crate::StateError> {
    let corrupt = |e: serde_json::Error| crate::StateError::Corrupt(e.to_string());
    let mut lines = text.lines();
    let header: crate::StateHeader =
        serde_json::from_str(lines.next().unwrap_or("")).map_err(corrupt)?;
    header.check()?;
    let mut n = 0;
    for line in lines {
        let record: crate::StateRecord = serde_json::from_str(line).map_err(corrupt)?;
        engine.restore_record(record, now_ms)?;
        n += 1;
    }
    Ok(n)
}
