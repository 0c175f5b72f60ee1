//! Every release's dumps through remote write into the service: per release one corrector, every
//! batch its own target (`instance`), BEFORE then AFTER; each family read back from `/metrics` and
//! compared with its formula applied to the AFTER dump by hand; a family the release cannot
//! support is absent and counted in `vllm_corrector_groups_withheld` with its reason; each target
//! looks like its release on `/api/v1/groups`.

use super::{
    Dump, ITL, LOCAL, RELEASES, TPOT, acceptance_parts, batches, close, json, name, points, read,
};
use crate::harness::Corrector;

const LOCAL_FAMILY: &str = "vllm_corrected_iteration_tokens_local_compute";

#[test]
fn real_vllm_dumps_through_remote_write_serve_each_family_by_its_formula() {
    let [t1, t2, _] = crate::fixture::scrape_times();
    for release in RELEASES {
        let dirs = batches(release);
        let instance = |i: usize| format!("real-vllm-{i}:8000");
        let corrector = Corrector::start_unsettled();
        for (ts, file) in [(t1, "before.prom"), (t2, "after.prom")] {
            let all: Vec<_> = dirs
                .iter()
                .enumerate()
                .flat_map(|(i, dir)| points(&read(&dir.join(file)), ts, &instance(i)))
                .collect();
            corrector.write(&all);
        }
        let snapshot = corrector.snapshot();
        for (i, dir) in dirs.iter().enumerate() {
            let name = name(release, dir);
            let (b, a) = (
                Dump::of(&read(&dir.join("before.prom"))),
                Dump::of(&read(&dir.join("after.prom"))),
            );
            let k = json(&dir.join("batch.json"))["num_speculative_tokens"]
                .as_f64()
                .expect("k");
            let group: Vec<(String, String)> = {
                let p = points(&read(&dir.join("after.prom")), t2, &instance(i));
                let first = p
                    .iter()
                    .find(|p| p.label("__name__") == Some("vllm:generation_tokens_total"))
                    .expect("tokens");
                first
                    .labels
                    .iter()
                    .filter(|(n, _)| n != "__name__")
                    .cloned()
                    .collect()
            };
            // Canonical TPOT at AFTER: every bucket and the count minus le="1", the sum as is.
            let le1 = a.v(&format!("vllm:request_generation_tokens_bucket{{{}}}", 1.0));
            let tpot = snapshot
                .histogram(
                    "vllm_corrected_request_time_per_output_token_seconds",
                    &group,
                )
                .unwrap_or_else(|| panic!("{name}: canonical TPOT"));
            let want: Vec<(f64, f64)> = a
                .buckets(TPOT)
                .iter()
                .map(|(le, c)| (*le, c - le1))
                .collect();
            assert_eq!(tpot.buckets, want, "{name}");
            assert_eq!(
                (tpot.sum, tpot.count),
                (
                    a.v(&format!("{TPOT}_sum")),
                    a.v(&format!("{TPOT}_count")) - le1
                ),
                "{name}"
            );
            // Token-weighted ITL and tokens per output at AFTER: one ITL name only.
            let tw = snapshot
                .sum_count("vllm_corrected_token_weighted_itl_seconds", &group)
                .expect("token-weighted");
            assert_eq!(tw, (a.v(&format!("{ITL}_sum")), a.tokens()), "{name}");
            let per_output = snapshot
                .sum_count("vllm_corrected_tokens_per_output", &group)
                .expect("tokens per output");
            assert_eq!(
                per_output,
                (a.tokens(), a.v(&format!("{ITL}_count"))),
                "{name}"
            );
            // Local-compute iteration tokens at AFTER, or withheld without the by-source counter.
            if release.by_source {
                let local = snapshot.sum_count(LOCAL_FAMILY, &group).expect("local");
                let want = (
                    a.v(LOCAL) + a.v("vllm:generation_tokens_total"),
                    a.v("vllm:iteration_tokens_total_count"),
                );
                assert_eq!(local, want, "{name}");
            } else {
                assert!(!snapshot.has(LOCAL_FAMILY, &group), "{name}: local compute");
            }
            // Acceptance-corrected at AFTER: intervals 0 → BEFORE and BEFORE → AFTER; +Inf = _count =
            // the tokens after the first, exactly; every bucket at most the next.
            let acc = snapshot
                .histogram("vllm_corrected_acceptance_corrected_itl_seconds", &group)
                .expect("acceptance-corrected");
            assert_eq!(
                (acc.sum, acc.count),
                (a.v(&format!("{ITL}_sum")), a.tokens()),
                "{name}"
            );
            assert_eq!(
                acc.buckets.last().map(|b| b.1),
                Some(acc.count),
                "{name}: +Inf is the count"
            );
            assert!(
                acc.buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "{name}: {:?}",
                acc.buckets
            );
            let first = acceptance_parts(None, &b);
            let second = acceptance_parts(Some(&b), &a);
            let raw = a.buckets(ITL);
            for (i, (le, got)) in acc
                .buckets
                .iter()
                .filter(|(le, _)| le.is_finite())
                .enumerate()
            {
                let want = (first[i] + second[i]).min(acc.count);
                assert!(close(*got, want, 1e-9), "{name}: le {le}: {got} vs {want}");
                if k == 0.0 && a.tokens() == a.v(&format!("{ITL}_count")) {
                    // No drafts: every output holds one token, the family is the raw histogram.
                    assert!(close(*got, raw[i].1, 1e-9), "{name}: le {le}: {got} vs raw");
                }
            }
        }
        // Every batch of a release without the by-source counter withholds local compute.
        let withheld = snapshot.value(
            "vllm_corrector_groups_withheld",
            &[("family", LOCAL_FAMILY), ("reason", "missing_input")],
        );
        let want = if release.by_source {
            0.0
        } else {
            dirs.len() as f64
        };
        assert_eq!(withheld, Some(want), "{}: withheld groups", release.version);
        // The release each target looks like, from its series alone: 0.14 shows the old ITL
        // name only with --show-hidden-metrics-for-version (server h0), which 0.11-0.14 expose
        // and 0.12-0.15 do not; the by-source counter arrived in 0.16.
        let groups: serde_json::Value = serde_json::from_str(
            &corrector
                .client()
                .get(corrector.url("/api/v1/groups?limit=1000"))
                .send()
                .and_then(|r| r.text())
                .expect("groups API"),
        )
        .expect("JSON");
        for (i, dir) in dirs.iter().enumerate() {
            let name = name(release, dir);
            let want = match release.version {
                "0.14.0" if name.ends_with("_h0") => "0.11–0.14",
                "0.14.0" => "0.12–0.15",
                _ => "0.16 and later",
            };
            let group = groups["data"]
                .as_array()
                .expect("data")
                .iter()
                .find(|g| g["labels"]["instance"] == instance(i).as_str())
                .unwrap_or_else(|| panic!("{name}: no group"));
            assert_eq!(group["looksLike"], want, "{name}");
        }
    }
}
