//! The fifth family, `vllm_corrected_tokens_per_output`, on the real vLLM 0.32 fixtures
//! (`tests/fixtures/real-vllm-0.32.0/<batch>/`): through `inspect` (the library function) its mean
//! must be `(Δ generation_tokens − Δ TTFT count) / Δ ITL count`, computed here from the
//! `raw_deltas` that the capture script wrote into each batch's `truth.json` from the same dumps
//! (nothing of the crate computes the expectation), and it must lie between 1 and 1 + the
//! batch's `num_speculative_tokens`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tools::inspect::{Loaded, inspect, render_table};

fn batches() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-vllm-0.32.0");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.retain(|d| {
        ["before.prom", "after.prom", "truth.json"]
            .iter()
            .all(|f| d.join(f).is_file())
    });
    out.sort();
    assert!(out.len() >= 5, "too few batches under {}", root.display());
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn real_vllm_tokens_per_output_is_tokens_after_each_first_over_itl_outputs() {
    let mut with_outputs = 0;
    for dir in batches() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let truth: Value = serde_json::from_str(&read(&dir.join("truth.json"))).unwrap();
        let raw = &truth["raw_deltas"];
        let f = |k: &str| raw[k].as_f64().unwrap_or_else(|| panic!("{name}: no {k}"));
        let (tokens, outputs) = (f("generation_tokens") - f("ttft_count"), f("itl_count"));
        let reports = inspect(
            &Loaded::from_text("BEFORE", "before.prom", read(&dir.join("before.prom"))),
            &Loaded::from_text("AFTER", "after.prom", read(&dir.join("after.prom"))),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(reports.len(), 1, "{name}: one engine");
        let got = reports[0].get("tokens_per_output_mean");
        if outputs == 0.0 {
            // One-token answers: no output after any first, so nothing to divide by.
            assert_eq!(got, None, "{name}");
            assert_eq!(
                reports[0].null_reasons.get("tokens_per_output_mean"),
                Some(&"no_new_observation"),
                "{name}"
            );
            continue;
        }
        with_outputs += 1;
        let want = tokens / outputs;
        let got = got.unwrap_or_else(|| panic!("{name}: null ({:?})", reports[0].null_reasons));
        assert!(
            (got - want).abs() <= 1e-12 * want,
            "{name}: {got} vs {want}"
        );
        let k = truth["num_speculative_tokens"].as_f64().expect("k");
        assert!((1.0..=1.0 + k).contains(&got), "{name}: {got} with k = {k}");
        let table = render_table("before.prom", "after.prom", &reports);
        assert!(
            table.contains("tokens per output") && table.contains(&format!("{want:.2}")),
            "{name}:\n{table}"
        );
    }
    assert!(with_outputs >= 5, "{with_outputs} batches with ITL outputs");
}
