//! (g) `/metrics` passes `promtool check metrics` (2.42 and 3.5), and its OpenMetrics form
//! carries the same values.

use test_support::promtool::Promtool;
use test_support::tools::{Tool, require};

use crate::expected::{assert_group, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;
use crate::metrics::Snapshot;

#[test]
fn metrics_output_passes_promtool_check_metrics() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let text = corrector.metrics_text();
    assert!(
        text.contains("vllm_corrected_"),
        "corrected families are served\n{text}"
    );
    for tool in [Tool::PROMTOOL_2, Tool::PROMTOOL_3] {
        let Some(promtool) = require(tool).map(Promtool::new) else {
            continue;
        };
        let report = promtool.check_metrics(&text);
        assert!(
            report.success && report.lines().is_empty(),
            "{} found problems:\n{}\n--- served ---\n{text}",
            report.command,
            report.output
        );
    }
}

#[test]
fn openmetrics_output_parses_and_serves_the_same_hand_values() {
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let open_metrics = Snapshot::parse_openmetrics(&corrector.metrics_openmetrics());
    for engine in ["0", "1"] {
        assert_group(
            &open_metrics,
            &group(engine),
            &fixture(Scrape::T2, engine),
            &format!("OpenMetrics engine {engine}"),
        );
    }
}
