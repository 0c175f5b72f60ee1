//! Per-target answers (issue 24, items 2 and 6), through real remote write into the binary:
//! `vllm_corrector_family_info` names each target's families, their state and why; a limit that
//! refuses a target's series is reported as the limit, not as sharding; a second sender of the
//! same series (an HA pair) shows on `/status` and in the API; acceptance-corrected buckets
//! without the per-position series are served degraded and say so.

use serde_json::Value;

use crate::fixture::{INSTANCE, JOB, MODEL, Scrape, scrape_times};
use crate::harness::Corrector;
use crate::rw::Point;

const TPOT: &str = "vllm_corrected_request_time_per_output_token_seconds";
const WEIGHTED: &str = "vllm_corrected_token_weighted_itl_seconds";
const ACCEPTANCE: &str = "vllm_corrected_acceptance_corrected_itl_seconds";
const LOCAL: &str = "vllm_corrected_iteration_tokens_local_compute";
const PER_OUTPUT: &str = "vllm_corrected_tokens_per_output";
const FAMILIES: [&str; 5] = [TPOT, WEIGHTED, ACCEPTANCE, LOCAL, PER_OUTPUT];
const PER_POS: &str = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
const TTFT: &str = "vllm:time_to_first_token_seconds_count";

/// The points of `scrape` at `ts` for fixture engine `engine` only, without series `drop`.
fn engine_points(scrape: Scrape, ts: i64, engine: &str, drop: Option<&str>) -> Vec<Point> {
    scrape
        .points(ts)
        .into_iter()
        .filter(|p| p.label("engine") == Some(engine) && p.label("__name__") != drop)
        .collect()
}

/// `GET path` on the corrector, as text.
fn get(corrector: &Corrector, path: &str) -> String {
    reqwest::blocking::get(format!("{}{path}", corrector.base))
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.text())
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// The group of fixture engine `engine` in `/api/v1/groups`.
fn api_group(corrector: &Corrector, engine: &str) -> Value {
    let v: Value = serde_json::from_str(&get(corrector, "/api/v1/groups")).unwrap();
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["labels"]["engine"] == engine)
        .unwrap_or_else(|| panic!("no group of engine {engine} in {v}"))
        .clone()
}

/// The `vllm_corrector_family_info` value with exactly the fixture group of `engine` and `own`.
fn info(snapshot: &crate::metrics::Snapshot, engine: &str, own: &[(&str, &str)]) -> Option<f64> {
    let mut labels = vec![
        ("engine", engine),
        ("instance", INSTANCE),
        ("job", JOB),
        ("model_name", MODEL),
    ];
    labels.extend_from_slice(own);
    snapshot.value("vllm_corrector_family_info", &labels)
}

fn info_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("vllm_corrector_family_info{"))
        .count()
}

#[test]
fn family_info_names_each_target_the_missing_input_and_degraded_acceptance() {
    // Engine "0" runs speculative decoding without its per-position series (a cardinality trim);
    // engine "1" lacks the TTFT count, which three families subtract.
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    for (scrape, ts) in [(Scrape::T1, t1), (Scrape::T2, t2)] {
        let mut points = engine_points(scrape, ts, "0", Some(PER_POS));
        points.extend(engine_points(scrape, ts, "1", Some(TTFT)));
        corrector.write(&points);
    }
    let snapshot = corrector.snapshot();
    assert_eq!(info_lines(&snapshot.text), 12, "2 groups x 6 families");
    let served = [("state", "served")];
    // The SLO counters of the shipped SLO (TPOT only) read neither missing series.
    for family in [TPOT, WEIGHTED, LOCAL, PER_OUTPUT, "vllm_corrected_slo"] {
        let own = [("family", family), served[0]];
        assert_eq!(
            info(&snapshot, "0", &own),
            Some(1.0),
            "{family}\n{}",
            snapshot.text
        );
    }
    let degraded = [
        ("family", ACCEPTANCE),
        ("state", "degraded"),
        ("reason", "missing_input"),
        ("detail", PER_POS),
    ];
    assert_eq!(
        info(&snapshot, "0", &degraded),
        Some(1.0),
        "{}",
        snapshot.text
    );
    for family in [WEIGHTED, ACCEPTANCE, PER_OUTPUT] {
        let own = [
            ("family", family),
            ("state", "withheld"),
            ("reason", "missing_input"),
            ("detail", TTFT),
        ];
        assert_eq!(
            info(&snapshot, "1", &own),
            Some(1.0),
            "{family}\n{}",
            snapshot.text
        );
    }
    for family in [TPOT, LOCAL, "vllm_corrected_slo"] {
        let own = [("family", family), served[0]];
        assert_eq!(
            info(&snapshot, "1", &own),
            Some(1.0),
            "{family}\n{}",
            snapshot.text
        );
    }
    // The API and the status page say the same.
    let g0 = api_group(&corrector, "0");
    assert_eq!(
        g0["families"][ACCEPTANCE],
        serde_json::json!({"state": "degraded", "reason": "missing_input", "input": PER_POS})
    );
    let g1 = api_group(&corrector, "1");
    assert_eq!(
        g1["families"][WEIGHTED],
        serde_json::json!({"state": "withheld", "reason": "missing_input", "input": TTFT})
    );
    let status = get(&corrector, "/status");
    assert!(
        status.contains(&format!(
            "<code>{ACCEPTANCE}</code>: <span class=\"state\">degraded</span>"
        )),
        "{status}"
    );
    assert!(
        status.contains(&format!("missing <code class=\"input\">{TTFT}</code>")),
        "{status}"
    );
    // The log names the missing input too.
    let log = corrector.log_text();
    assert!(
        log.contains(&format!("{WEIGHTED}:missing_input({TTFT})")),
        "{log}"
    );
}

#[test]
fn a_target_refused_by_max_active_series_is_withheld_for_the_limit_not_for_sharding() {
    let [t1, t2, t3] = scrape_times();
    let corrector = Corrector::start_with_config(Some(crate::harness::UNSETTLED));
    corrector.write(&engine_points(Scrape::T1, t1, "0", None));
    let held = corrector
        .snapshot()
        .value("vllm_corrector_active_series", &[])
        .unwrap();
    // Room for engine "0" and one series of engine "1": none of engine "1"'s families can be
    // planned from one series, and each of its later new series is refused.
    corrector.reload_config(&format!(
        "{}limits:\n  max_active_series: {}\n",
        crate::harness::UNSETTLED,
        held + 1.0
    ));
    for (scrape, ts) in [(Scrape::T1, t1), (Scrape::T2, t2), (Scrape::T2, t3)] {
        let status = corrector.post(&engine_points(scrape, ts, "1", None));
        assert_eq!(status, 400, "the refused series are answered 400");
    }
    corrector.write(&engine_points(Scrape::T2, t2, "0", None));
    let snapshot = corrector.snapshot();
    for family in FAMILIES {
        let limited = [
            ("family", family),
            ("state", "withheld"),
            ("reason", "limit"),
            ("detail", "limits.max_active_series"),
        ];
        assert_eq!(
            info(&snapshot, "1", &limited),
            Some(1.0),
            "{family}\n{}",
            snapshot.text
        );
        let withheld = snapshot.value(
            "vllm_corrector_groups_withheld",
            &[("family", family), ("reason", "limit")],
        );
        assert_eq!(withheld, Some(1.0), "{family}");
    }
    assert_eq!(
        snapshot.value("vllm_corrector_groups_incomplete", &[]),
        Some(0.0),
        "a limit, not a sharding problem"
    );
    assert_eq!(
        api_group(&corrector, "1")["limited"],
        "limits.max_active_series"
    );
    let status = get(&corrector, "/status");
    assert!(
        status.contains("<code>limits.max_active_series</code> refuses its new series"),
        "{status}"
    );
    let log = corrector.log_text();
    let warning = log
        .lines()
        .find(|l| l.contains("a limit refuses its new series"))
        .unwrap_or_else(|| panic!("no limit warning\n{log}"));
    assert!(
        warning.contains("limit=limits.max_active_series"),
        "{warning}"
    );
    assert!(warning.contains("engine=\\\"1\\\""), "{warning}");
    assert!(
        !log.contains("shard by target, never by series"),
        "no sharding warning\n{log}"
    );
}

#[test]
fn an_ha_pair_writing_the_same_series_shows_on_status_and_in_the_api() {
    // Two Prometheus servers with the same external labels: each scrape arrives twice, and the
    // slower one's copy of an older scrape arrives after the newer one.
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let before = api_group(&corrector, "0");
    assert_eq!(
        before["recentRejects"],
        serde_json::json!({"duplicate_sample": 0, "out_of_order": 0})
    );
    assert!(get(&corrector, "/status").contains("<td class=\"state\">ok</td>"));
    corrector.write(&Scrape::T2.points(t2));
    corrector.write(&Scrape::T1.points(t1));
    // Every series a rule reads is rejected once as a duplicate and once as out of order.
    for engine in ["0", "1"] {
        let g = api_group(&corrector, engine);
        let n = g["inputSeries"].as_u64().unwrap();
        assert!(n > 0);
        assert_eq!(
            g["recentRejects"],
            serde_json::json!({"duplicate_sample": n, "out_of_order": n}),
            "engine {engine}"
        );
    }
    let status = get(&corrector, "/status");
    assert_eq!(
        status
            .matches("<span class=\"senders\">two senders?</span>")
            .count(),
        2,
        "{status}"
    );
}

/// The instances' engines that `/api/v1/groups?<query>` lists.
fn api_engines(corrector: &Corrector, query: &str) -> Vec<String> {
    let v: Value =
        serde_json::from_str(&get(corrector, &format!("/api/v1/groups?{query}"))).unwrap();
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["labels"]["engine"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_groups_api_filters_find_an_sli_whose_threshold_is_not_a_bucket_edge() {
    // vLLM's TPOT edges are 0.05 and 0.075: a 70 ms threshold lies between them. Engine "0"'s SLO
    // counts TPOT at 50 ms exactly, engine "1"'s leaves TPOT out with a note.
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_with_config(Some(
        "engine:\n  settle_scrapes: 0\nslos:\n  \
         - {name: exact, objective: 0.99, tpot: 0.05, match: {engine: \"0\"}}\n  \
         - {name: between, objective: 0.99, tpot: 0.07, match: {engine: \"1\"}}\n",
    ));
    for (scrape, ts) in [(Scrape::T1, t1), (Scrape::T2, t2)] {
        let mut points = engine_points(scrape, ts, "0", None);
        points.extend(engine_points(scrape, ts, "1", None));
        corrector.write(&points);
    }
    let snapshot = corrector.snapshot();
    let own = [
        ("family", "vllm_corrected_slo"),
        ("state", "withheld"),
        ("reason", "not_a_bucket_edge"),
        ("slo", "between"),
        ("sli", "tpot"),
    ];
    let with_note = snapshot
        .text
        .lines()
        .filter(|l| l.starts_with("vllm_corrector_family_info{") && l.contains("not_a_bucket_edge"))
        .collect::<Vec<_>>();
    assert_eq!(with_note.len(), 1, "{}", snapshot.text);
    assert!(
        own.iter()
            .all(|(k, v)| with_note[0].contains(&format!("{k}=\"{v}\""))),
        "{}",
        with_note[0]
    );
    assert!(with_note[0].contains("engine=\"1\""), "{}", with_note[0]);
    assert_eq!(api_engines(&corrector, "reason=not_a_bucket_edge"), ["1"]);
    assert_eq!(api_engines(&corrector, "state=withheld"), ["1"]);
    assert_eq!(
        api_engines(&corrector, "family=vllm_corrected_slo&state=withheld"),
        ["1"]
    );
    assert_eq!(
        api_engines(&corrector, "reason=missing_input"),
        Vec::<String>::new()
    );
    assert_eq!(
        api_engines(&corrector, "family=vllm_corrected_slo&state=served"),
        ["0", "1"]
    );
    // /status says so in the group's state cell, not "ok".
    let status = get(&corrector, "/status?match[]=%7Bengine%3D%221%22%7D");
    assert!(
        status.contains(
            "<span class=\"slo-notes\">SLIs not counted</span>: between tpot (not_a_bucket_edge)"
        ),
        "{status}"
    );
    let status = get(&corrector, "/status?match[]=%7Bengine%3D%220%22%7D");
    assert!(!status.contains("SLIs not counted"), "{status}");
}
