//! `inspect`'s SLO readings: on the vLLM 0.33 fixtures by hand, on two dumps of the simulator
//! against its per-request records, and on dumps of the corrector's own SLO counters.

use super::*;
use crate::test_records::{Req, count, finished};
use sim::{Profile, SimConfig, Simulator, SpecConfig};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/vllm-0.33/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn loaded(before: String, after: String) -> (Loaded, Loaded) {
    (
        Loaded::from_text("BEFORE", "before.prom", before),
        Loaded::from_text("AFTER", "after.prom", after),
    )
}

fn slo<'r>(reports: &'r [GroupReport], engine: &str, name: &str) -> &'r SloReport {
    reports
        .iter()
        .find(|r| r.labels.get("engine").map(String::as_str) == Some(engine))
        .and_then(|r| r.slos.as_ref()?.iter().find(|s| s.slo == name))
        .unwrap_or_else(|| panic!("no SLO {name} for engine {engine}: {reports:?}"))
}

#[test]
fn fixture_slo_attainment_and_goodput_match_the_hand_computation() {
    let (before, after) = loaded(fixture("t1.prom"), fixture("t2.prom"));
    let reports = inspect(&before, &after).unwrap();
    // The shipped default, canonical TPOT <= 0.1 s for 99 %. Engine 0, t1 -> t2 (lines 79, 261
    // and 277): vLLM's TPOT bucket at 0.1 went 32 -> 59 of _count 32 -> 60, the requests of at
    // most one token 4 -> 7. Canonical events (60 - 7) - (32 - 4) = 25, good (59 - 7) - (32 - 4)
    // = 24: 0.96. Raw (59 - 32) / (60 - 32) = 27 / 28. Goodput: 28 finished, 24 good on TPOT
    // plus the 3 short ones (TPOT 0 passes) = 27 exactly, as TPOT alone is on an edge.
    let e0 = slo(&reports, "0", "default");
    assert_eq!(e0.objective, Some(0.99));
    let tpot = &e0.slis[0];
    assert_eq!(
        (
            tpot.sli,
            tpot.threshold_seconds,
            tpot.events,
            tpot.good_events
        ),
        ("tpot", Some(0.1), Some(25.0), Some(24.0))
    );
    assert_eq!(tpot.attainment, Some(0.96));
    assert_eq!(tpot.raw_attainment, Some(27.0 / 28.0));
    assert_eq!(tpot.not_counted, None);
    assert_eq!(e0.finished_requests, Some(28.0));
    assert_eq!(
        (e0.goodput_lower_requests, e0.goodput_upper_requests),
        (Some(27.0), Some(27.0))
    );
    assert_eq!(e0.goodput_lower_ratio, Some(27.0 / 28.0));
    assert_eq!(e0.naive_goodput_ratio, Some(27.0 / 28.0));
    // Engine 1 (lines 93, 283, 299): bucket 20 -> 40 of _count 20 -> 40, short 2 -> 5: every
    // request good. Events (40 - 5) - (20 - 2) = 17, all good; 20 finished, 20 good.
    let e1 = slo(&reports, "1", "default");
    assert_eq!(e1.slis[0].events, Some(17.0));
    assert_eq!(e1.slis[0].attainment, Some(1.0));
    assert_eq!(e1.goodput_upper_ratio, Some(1.0));
    // The table prints them under the families' table.
    let table = render_table("before.prom", "after.prom", &reports);
    let row = table
        .lines()
        .find(|l| l.starts_with("engine=\"0\"  default  TPOT ≤ 0.1 s"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains("96.43 %") && row.contains("96.00 %") && row.contains("99.00 %"),
        "{row}"
    );
    assert!(table.contains("engine=\"0\"  default  goodput"), "{table}");
}

/// The simulator's vLLM 0.33 server, two engines, speculative decoding, latencies spread over
/// several TTFT, TPOT and E2EL buckets.
fn simulator() -> Simulator {
    Simulator::new(SimConfig {
        profile: Profile::V0_33,
        models: vec!["m".into()],
        engines_per_model: 2,
        arrival_rate: 6.0,
        single_token_fraction: 0.15,
        zero_token_fraction: 0.02,
        spec: Some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.1,
        }),
        step_base_s: 0.03,
        step_per_token_s: 0.0002,
        seed: 7,
        ..SimConfig::default()
    })
    .unwrap()
}

/// Two SLOs from a configuration file, as `--config.file` reads it: `chat` on vLLM's default
/// edges, `edgeless` with a TTFT threshold between the edges 0.25 and 0.5.
fn config() -> (SloSpec, SloSet) {
    let dir = std::env::temp_dir().join(format!("inspect-slos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.yml");
    std::fs::write(
        &path,
        "slos:\n  - name: chat\n    objective: 0.9\n    ttft: 0.25\n    tpot: 0.025\n    e2el: 5\n  \
         - name: edgeless\n    objective: 0.99\n    ttft: 0.3\n    tpot: 0.05\n",
    )
    .unwrap();
    let config = service::config::Config::from_file(&path).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    (config.slos, config.engine.slos)
}

#[test]
fn simulated_dumps_give_exact_sli_counts_and_bounds_around_the_true_goodput() {
    let (spec, set) = config();
    let mut sim = simulator();
    let (from, to) = (20.0, 80.0);
    sim.advance_to(from);
    let before = sim.render_text();
    sim.advance_to(to);
    let after = sim.render_text();
    let (before, after) = loaded(before, after);
    let reports = inspect_with(&before, &after, &spec, &set).unwrap();
    // Run on until every request of the window has finished, and read the records.
    sim.advance_to(to + 120.0);
    let reqs = finished(&sim);
    let inside = |t: f64| from <= t && t < to;
    for engine in ["0", "1"] {
        let mine: Vec<Req> = reqs
            .iter()
            .filter(|r| r.engine == engine)
            .cloned()
            .collect();
        let on =
            |keep: &dyn Fn(&Req) -> bool, good: &dyn Fn(&Req) -> bool| count(&mine, keep, good);
        let chat = slo(&reports, engine, "chat");
        let want = [
            on(&|r| inside(r.first_s), &|r| r.ttft <= 0.25),
            on(&|r| inside(r.finish_s) && r.n > 1, &|r| r.tpot <= 0.025),
            on(&|r| inside(r.finish_s), &|r| r.e2el <= 5.0),
        ];
        for (sli, want) in chat.slis.iter().zip(want) {
            assert!(want.events > 50.0, "engine {engine} {}: {want:?}", sli.sli);
            assert_eq!(
                (sli.events, sli.good_events),
                (Some(want.events), Some(want.good)),
                "engine {engine} {}",
                sli.sli
            );
        }
        // vLLM's TPOT bucket counts the requests of at most one token as good events.
        let raw_tpot = on(&|r| inside(r.finish_s), &|r| r.tpot <= 0.025);
        assert_eq!(
            chat.slis[1].raw_attainment,
            Some(raw_tpot.good / raw_tpot.events)
        );
        assert_eq!(
            chat.slis[0].raw_attainment,
            Some(want[0].good / want[0].events)
        );
        // BEFORE is the engine's baseline: the bounds bracket the requests that finished
        // between the dumps and met all three thresholds.
        let good = on(&|r| inside(r.finish_s), &|r| {
            r.ttft <= 0.25 && r.tpot <= 0.025 && r.e2el <= 5.0
        });
        assert_eq!(chat.finished_requests, Some(good.events));
        let (lower, upper) = (
            chat.goodput_lower_requests.unwrap(),
            chat.goodput_upper_requests.unwrap(),
        );
        assert!(
            lower <= good.good && good.good <= upper,
            "engine {engine}: {lower} <= {} <= {upper}",
            good.good
        );
        assert!(lower < upper, "three SLIs of other requests: a band");
        // The naive reading is the least raw attainment, above the true goodput here.
        let naive = chat.naive_goodput_ratio.unwrap();
        assert!(naive > good.good / good.events, "{naive}");
        // TTFT at 0.3 s is no bucket edge: not counted, and the engine says why; TPOT at 0.05 is
        // counted; the goodput still brackets the truth, from the edges around 0.3.
        let edgeless = slo(&reports, engine, "edgeless");
        assert_eq!(edgeless.slis[0].events, None);
        let why = edgeless.slis[0].not_counted.as_deref().unwrap();
        assert!(
            why.starts_with("not_a_bucket_edge: 0.3 s is not an le of")
                && why.contains("0.25 below, 0.5 above"),
            "{why}"
        );
        assert_eq!(edgeless.slis[0].raw_attainment, None, "no bucket at 0.3");
        let tpot = on(&|r| inside(r.finish_s) && r.n > 1, &|r| r.tpot <= 0.05);
        assert_eq!(edgeless.slis[1].events, Some(tpot.events));
        assert_eq!(edgeless.slis[1].good_events, Some(tpot.good));
        let good = on(&|r| inside(r.finish_s), &|r| {
            r.ttft <= 0.3 && r.tpot <= 0.05
        })
        .good;
        let (lower, upper) = (
            edgeless.goodput_lower_requests.unwrap(),
            edgeless.goodput_upper_requests.unwrap(),
        );
        assert!(
            lower <= good && good <= upper,
            "engine {engine}: {lower} <= {good} <= {upper}"
        );
    }
    // The table names the reason in its row and the engine's whole note under it.
    let table = render_table("before", "after", &reports);
    let row = table
        .lines()
        .find(|l| l.starts_with("engine=\"0\"  edgeless  TTFT ≤ 0.3 s"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.ends_with("not_a_bucket_edge"), "{row}");
    assert!(
        table.contains("\nengine=\"0\" edgeless TTFT: not_a_bucket_edge: 0.3 s is not an le of"),
        "{table}"
    );
}

/// A dump of the corrector's SLO counters for one engine (OpenMetrics).
fn counters_dump(events: f64, good: f64, finished: f64, lower: f64, upper: f64) -> String {
    let g = r#"engine="0",job="vllm",model_name="m""#;
    format!(
        "# TYPE vllm_corrected_slo_events counter\n\
         vllm_corrected_slo_events_total{{{g},slo=\"default\",sli=\"tpot\"}} {events}\n\
         # TYPE vllm_corrected_slo_good_events counter\n\
         vllm_corrected_slo_good_events_total{{{g},slo=\"default\",sli=\"tpot\"}} {good}\n\
         # TYPE vllm_corrected_slo_finished_requests counter\n\
         vllm_corrected_slo_finished_requests_total{{{g},slo=\"default\"}} {finished}\n\
         # TYPE vllm_corrected_goodput_requests counter\n\
         vllm_corrected_goodput_requests_total{{{g},slo=\"default\",bound=\"lower\"}} {lower}\n\
         vllm_corrected_goodput_requests_total{{{g},slo=\"default\",bound=\"upper\"}} {upper}\n\
         # TYPE vllm_corrected_token_weighted_itl_seconds summary\n\
         vllm_corrected_token_weighted_itl_seconds_sum{{{g}}} 1\n\
         vllm_corrected_token_weighted_itl_seconds_count{{{g}}} 10\n\
         # EOF\n"
    )
}

#[test]
fn the_correctors_own_slo_counters_are_read_as_increases() {
    let (before, after) = loaded(
        counters_dump(100.0, 95.0, 120.0, 100.0, 110.0),
        counters_dump(300.0, 280.0, 360.0, 300.0, 330.0),
    );
    let reports = inspect(&before, &after).unwrap();
    assert_eq!(
        reports.len(),
        1,
        "one group: the rows' slo, sli and bound are no group labels"
    );
    let s = slo(&reports, "0", "default");
    // TPOT (280 - 95) / (300 - 100) = 185 / 200; goodput (300 - 100) / (360 - 120) = 200 / 240
    // and (330 - 110) / 240 = 220 / 240. No raw series in the dumps: no raw reading.
    assert_eq!(s.slis[0].attainment, Some(185.0 / 200.0));
    assert_eq!(
        s.slis[0].threshold_seconds,
        Some(0.1),
        "from the shipped default"
    );
    assert_eq!(s.goodput_lower_ratio, Some(200.0 / 240.0));
    assert_eq!(s.goodput_upper_ratio, Some(220.0 / 240.0));
    assert_eq!(s.slis[0].raw_attainment, None);
    assert_eq!(s.naive_goodput_ratio, None);
    // A spec whose SLO has an SLI the dumps do not count says so.
    let mut spec = SloSpec::shipped_default();
    spec.slos[0].slis.insert(
        0,
        engine::slo::SliTarget {
            sli: engine::slo::Sli::Ttft,
            threshold_seconds: 0.5,
            objective: 0.95,
        },
    );
    let set = SloSet::new(&spec, |_| None);
    let reports = inspect_with(&before, &after, &spec, &set).unwrap();
    let s = slo(&reports, "0", "default");
    assert_eq!(s.slis[0].sli, "ttft");
    assert_eq!(s.slis[0].not_counted.as_deref(), Some("not in the dumps"));
    assert_eq!(s.slis[0].objective, Some(0.95));
    assert_eq!(s.slis[1].attainment, Some(185.0 / 200.0));
}
