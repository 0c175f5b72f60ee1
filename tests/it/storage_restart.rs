//! `--storage.path` on the binary (`docs/RELIABILITY.md`, "State across restarts"): SIGTERM writes
//! the acceptance-corrected state, a restart reads it, and the next scrape gives the same
//! `/metrics` values as a corrector that never stopped. Every corrector here evaluates its first
//! complete scrape (`engine.settle_scrapes: 0`, docs/ENGINE.md, "Settling"): the restart is
//! stopped two scrapes after the start, and the test reads the first scrape after it.

use crate::fixture::{Scrape, scrape_times};
use crate::harness::{Corrector, TempDir, UNSETTLED};
use crate::rw::Point;

/// The scrape after T2, 15 s later: T2 plus an interval with no accepted drafts, `D` = 600 outputs
/// of one token each, all faster than the first ITL bound (ITL `_count`, every `_bucket` and
/// `generation_tokens_total` + 600, ITL `_sum` + 0.6 s; everything else as at T2). The fixture's
/// T1 → T2 interval has the acceptance of T2's cumulative counts, so a continuation that kept it
/// (T2 × 1.5, say) gives a corrector without the state the same buckets up to rounding: this one
/// does not.
fn after_t2(t2: i64) -> Vec<Point> {
    const D: f64 = 600.0;
    Scrape::T2
        .points(t2 + 15_000)
        .into_iter()
        .map(|p| {
            let add = match p.labels[0].1.as_str() {
                "vllm:inter_token_latency_seconds_bucket"
                | "vllm:inter_token_latency_seconds_count"
                | "vllm:generation_tokens_total" => D,
                "vllm:inter_token_latency_seconds_sum" => D * 0.001,
                _ => 0.0,
            };
            Point {
                value: p.value + add,
                ..p
            }
        })
        .collect()
}

/// The largest relative difference between two equally long lists of `/metrics` lines' values.
fn largest_relative_difference(a: &[String], b: &[String]) -> f64 {
    assert_eq!(a.len(), b.len(), "{a:?}\n{b:?}");
    let value = |l: &String| -> f64 { l.rsplit_once(' ').unwrap().1.parse().unwrap() };
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let (x, y) = (value(x), value(y));
            (x - y).abs() / x.abs().max(y.abs()).max(1.0)
        })
        .fold(0.0, f64::max)
}

/// The acceptance-corrected family's lines of `/metrics`.
fn acceptance_lines(corrector: &Corrector) -> Vec<String> {
    let text = corrector.metrics_text();
    text.lines()
        .filter(|l| l.starts_with("vllm_corrected_acceptance_corrected_itl_seconds"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn acceptance_buckets_continue_across_a_sigterm_restart_with_storage_path() {
    let [t1, t2, _] = scrape_times();
    let uninterrupted = Corrector::start_unsettled();
    for points in [Scrape::T1.points(t1), Scrape::T2.points(t2), after_t2(t2)] {
        uninterrupted.write(&points);
    }
    let want = acceptance_lines(&uninterrupted);
    assert!(want.len() > 10, "{want:?}");

    let dir = TempDir::new("storage");
    let yaml = format!("{UNSETTLED}storage:\n  path: {}\n", dir.path().display());
    let mut first = Corrector::start_with_config(Some(&yaml));
    first.write(&Scrape::T1.points(t1));
    first.write(&Scrape::T2.points(t2));
    let (status, _) = first.terminate();
    assert!(status.success(), "{status:?}\n{}", first.log_text());
    let file = dir.path().join("acceptance-state.json");
    let document = std::fs::read_to_string(&file).expect("state written on SIGTERM");
    let header = format!("{{\"version\":{}}}\n", engine::STATE_FORMAT_VERSION);
    assert!(document.starts_with(&header), "{document}");
    assert_eq!(
        document.lines().count(),
        3,
        "the header and a line per engine: {document}"
    );

    let second = Corrector::start_with_config(Some(&yaml));
    assert!(
        second.log_text().contains("state restored"),
        "{}",
        second.log_text()
    );
    second.write(&after_t2(t2));
    let restored = acceptance_lines(&second);
    // Every bucket, `_sum` and `_count` of both engines, exactly.
    assert_eq!(restored, want);

    // Without the state, the restart re-seeds from vLLM's cumulative counts: other buckets.
    let forgetful = Corrector::start_unsettled();
    forgetful.write(&after_t2(t2));
    let apart = largest_relative_difference(&acceptance_lines(&forgetful), &restored);
    assert!(apart > 1e-3, "the restored state was used: {apart}");

    // A corrupt file is ignored with a warning and counted; the service starts afresh.
    std::fs::write(&file, "{\"version\":1,\"groups\":[{").unwrap();
    let third = Corrector::start_with_config(Some(&yaml));
    assert!(
        third.log_text().contains("state file ignored"),
        "{}",
        third.log_text()
    );
    let text = third.metrics_text();
    assert!(
        text.lines()
            .any(|l| l == "vllm_corrector_state_loads_ignored_total{reason=\"corrupt\"} 1"),
        "{text}"
    );
}
