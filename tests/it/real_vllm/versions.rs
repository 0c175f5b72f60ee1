//! What differs between the real releases, on their fixtures:
//!
//! * vLLM 0.14 run with `--show-hidden-metrics-for-version=0.13` (server `h0`) exposes the ITL
//!   samples under both names, identical; without the flag (`d0`) only the new one. The corrector
//!   counts them once: both names, the new name alone and the old name alone give the same
//!   corrected families.
//! * `vllm:iteration_tokens_total` observes every credited prompt token up to 0.22 and only the
//!   locally computed ones from 0.23. On 0.22 the raw histogram is inflated by the prefix-cache
//!   hits (`prefix_d3`) and by the prompt tokens a KV connector brought (`*_kv`, the
//!   DecodeBenchConnector server), while local-compute iteration tokens are
//!   (Δ local_compute + Δ generation) / Δ iterations.

use tools::inspect::{Loaded, inspect};

use super::{
    Dump, ITL, IterationTokens, LOCAL, OLD_ITL, RELEASES, batches, name, points, read, root,
};
use crate::harness::Corrector;
use crate::rw::Point;

fn release(version: &str) -> &'static super::Release {
    RELEASES
        .iter()
        .find(|r| r.version == version)
        .unwrap_or_else(|| panic!("no release {version}"))
}

/// The batch directories of `version` whose name ends with `_<server>`.
fn of_server(version: &str, server: &str) -> Vec<std::path::PathBuf> {
    let suffix = format!("_{server}");
    let out: Vec<_> = batches(release(version))
        .into_iter()
        .filter(|d| d.file_name().unwrap().to_string_lossy().ends_with(&suffix))
        .collect();
    assert!(out.len() >= 4, "{version}: {} {server} batches", out.len());
    out
}

#[test]
fn real_vllm_0_14_exposes_both_itl_names_only_with_the_hidden_metrics_flag() {
    for dir in of_server("0.14.0", "h0") {
        let a = Dump::of(&read(&dir.join("after.prom")));
        let (new, old) = (a.buckets(ITL), a.buckets(OLD_ITL));
        assert!(new.len() > 10, "{}", dir.display());
        assert_eq!(new, old, "{}: identical buckets", dir.display());
        for part in ["_sum", "_count"] {
            assert_eq!(
                a.v(&format!("{ITL}{part}")),
                a.v(&format!("{OLD_ITL}{part}")),
                "{}",
                dir.display()
            );
        }
    }
    for dir in of_server("0.14.0", "d0") {
        let a = Dump::of(&read(&dir.join("after.prom")));
        assert!(a.has(&format!("{ITL}_count")), "{}", dir.display());
        assert!(!a.has_family(OLD_ITL), "{}: old name", dir.display());
    }
}

/// `points` without the series of the ITL family `drop`.
fn without(points: Vec<Point>, drop: &str) -> Vec<Point> {
    points
        .into_iter()
        .filter(|p| !p.label("__name__").is_some_and(|n| n.starts_with(drop)))
        .collect()
}

#[test]
fn real_vllm_0_14_with_both_itl_names_counts_itl_once() {
    let [t1, t2, _] = crate::fixture::scrape_times();
    let families = [
        "vllm_corrected_token_weighted_itl_seconds",
        "vllm_corrected_acceptance_corrected_itl_seconds",
        "vllm_corrected_tokens_per_output",
    ];
    let corrector = Corrector::start_unsettled();
    let dirs = of_server("0.14.0", "h0");
    // Per batch three targets: both names, the new name alone, the old name alone.
    let variants = |dir: &std::path::Path, i: usize, file: &str, ts: i64| {
        let text = read(&dir.join(file));
        [
            points(&text, ts, &format!("both-{i}:8000")),
            without(points(&text, ts, &format!("new-{i}:8000")), OLD_ITL),
            without(points(&text, ts, &format!("old-{i}:8000")), ITL),
        ]
        .concat()
    };
    for (ts, file) in [(t1, "before.prom"), (t2, "after.prom")] {
        let all: Vec<Point> = dirs
            .iter()
            .enumerate()
            .flat_map(|(i, dir)| variants(dir, i, file, ts))
            .collect();
        corrector.write(&all);
    }
    let snapshot = corrector.snapshot();
    for (i, dir) in dirs.iter().enumerate() {
        let a = Dump::of(&read(&dir.join("after.prom")));
        let lines = |instance: String| -> Vec<String> {
            let group = crate::fixture::group_at("tiny-llama", "0", &instance);
            let mut out: Vec<String> = families
                .iter()
                .flat_map(|f| snapshot.group_samples(f, &group))
                .map(|s| format!("{} {:?} {}", s.name, s.label("le"), s.value))
                .collect();
            out.sort();
            out
        };
        let both = lines(format!("both-{i}:8000"));
        assert!(both.len() > 20, "{}: {both:?}", dir.display());
        assert_eq!(both, lines(format!("new-{i}:8000")), "{}", dir.display());
        assert_eq!(both, lines(format!("old-{i}:8000")), "{}", dir.display());
        // Counted once: Σ ITL of one name, and one output per ITL sample of one name.
        let group = crate::fixture::group_at("tiny-llama", "0", &format!("both-{i}:8000"));
        let tw = snapshot
            .sum_count("vllm_corrected_token_weighted_itl_seconds", &group)
            .expect("token-weighted");
        assert_eq!(tw, (a.v(&format!("{ITL}_sum")), a.tokens()));
        let per_output = snapshot
            .sum_count("vllm_corrected_tokens_per_output", &group)
            .expect("tokens per output");
        assert_eq!(per_output.1, a.v(&format!("{ITL}_count")));
    }
}

#[test]
fn real_vllm_iteration_tokens_are_inflated_by_cache_hits_and_kv_transfers_up_to_0_22() {
    let (mut hits, mut transfers) = (0, 0);
    for release in RELEASES {
        for dir in batches(release) {
            let name = name(release, &dir);
            let (before, after) = (
                read(&dir.join("before.prom")),
                read(&dir.join("after.prom")),
            );
            let (b, a) = (Dump::of(&before), Dump::of(&after));
            let d = |key: &str| a.v(key) - b.v(key);
            let (raw_sum, iterations) = (
                d("vllm:iteration_tokens_total_sum"),
                d("vllm:iteration_tokens_total_count"),
            );
            let (prompt, generated) = (
                d("vllm:prompt_tokens_total"),
                d("vllm:generation_tokens_total"),
            );
            if !release.by_source {
                // 0.14: every prompt token, and nothing to tell cached ones from computed ones.
                assert_eq!(raw_sum, prompt + generated, "{name}");
                continue;
            }
            let source = |s: &str| d(&format!("vllm:prompt_tokens_by_source_total{{source={s}}}"));
            let (local, hit, external) = (
                source("local_compute"),
                source("local_cache_hit"),
                source("external_kv_transfer"),
            );
            assert_eq!(prompt, local + hit + external, "{name}: by source");
            let credited = match release.iteration_tokens {
                IterationTokens::AllPrompt => prompt,
                IterationTokens::LocalOnly => local,
            };
            assert_eq!(
                raw_sum,
                credited + generated,
                "{name}: raw iteration tokens"
            );
            let reports = inspect(
                &Loaded::from_text("BEFORE", "before.prom", before),
                &Loaded::from_text("AFTER", "after.prom", after),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let corrected = reports[0]
                .get("local_compute_iteration_tokens_mean")
                .unwrap_or_else(|| panic!("{name}: {:?}", reports[0].null_reasons));
            let want = (d(LOCAL) + generated) / iterations;
            assert!(super::close(corrected, want, 1e-12), "{name}: {corrected}");
            let raw = raw_sum / iterations;
            if release.iteration_tokens == IterationTokens::AllPrompt {
                // The raw mean exceeds the local one by exactly the cached and transferred tokens.
                assert!(
                    super::close(raw - corrected, (hit + external) / iterations, 1e-9),
                    "{name}: raw {raw}, local {corrected}"
                );
                hits += usize::from(hit > 0.0 && raw > corrected);
                transfers += usize::from(external > 0.0 && raw > corrected);
            } else {
                assert!(super::close(raw, corrected, 1e-12), "{name}");
            }
        }
    }
    // 0.22: prefix_d3 (and its window) hit the prefix cache; the DecodeBenchConnector batches
    // bring their prompts by KV transfer.
    assert!(hits >= 2, "{hits} inflated batches with cache hits");
    assert!(
        transfers >= 4,
        "{transfers} inflated batches with KV transfers"
    );
    assert!(root(release("0.22.0")).join("prefix_d3").is_dir());
}
