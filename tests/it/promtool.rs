//! (g) `/metrics` passes `promtool check metrics`, and its OpenMetrics form carries the same values.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::expected::{assert_group, fixture};
use crate::fixture::{Scrape, group, scrape_times};
use crate::harness::Corrector;
use crate::metrics::Snapshot;

/// The path of `tool` on `PATH`; `None` means skip loudly, except under CI where it is a failure.
pub(crate) fn require_tool(tool: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is not installed, and CI is set: run scripts/test.sh"
        );
        eprintln!(
            "\n!!!!!!!! SKIPPED: `{tool}` is not installed; scripts/test.sh installs it. !!!!!!!!\n"
        );
    }
    found
}

#[test]
fn metrics_output_passes_promtool_check_metrics() {
    let Some(promtool) = require_tool("promtool") else {
        return;
    };
    let [t1, t2, _] = scrape_times();
    let corrector = Corrector::start_unsettled();
    corrector.write(&Scrape::T1.points(t1));
    corrector.write(&Scrape::T2.points(t2));
    let text = corrector.metrics_text();
    assert!(
        text.contains("vllm_corrected_"),
        "corrected families are served\n{text}"
    );

    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- served ---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
