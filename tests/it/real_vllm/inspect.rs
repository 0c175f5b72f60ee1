//! Every release's fixtures through `inspect` (the library function): exact counts against the
//! benchmark's records, every family equal to its formula applied to the dumps by hand, the
//! benchmark's means within the measured client/server gap, and the rows of `docs/ACCURACY.md`.

use serde_json::Value;
use tools::inspect::{Loaded, inspect, render_table};

use super::{
    Dump, ITL, LOCAL, RELEASES, Release, TPOT, batches, close, json, name, read, uses_stop_strings,
};

/// The benchmark's counts of one batch: (requests with n > 1, tokens after each first, ITL
/// samples), from its per-request records.
fn bench_counts(bench: &Value) -> (f64, f64, f64) {
    let ok: Vec<&Value> = bench["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .filter(|r| r.get("error").is_none())
        .collect();
    let n = |r: &Value| r["output_len"].as_f64().expect("output_len");
    let n_gt_1 = ok.iter().filter(|r| n(r) > 1.0).count() as f64;
    let after_first = ok.iter().map(|r| (n(r) - 1.0).max(0.0)).sum();
    let itl = ok
        .iter()
        .map(|r| r["itl_count"].as_f64().expect("itl_count"))
        .sum();
    (n_gt_1, after_first, itl)
}

/// The requests of a batch that finished with more than one token.
fn long_requests(bench: &Value) -> Vec<&Value> {
    let ok = bench["requests"].as_array().expect("requests").iter();
    ok.filter(|r| r.get("error").is_none() && r["output_len"].as_f64() > Some(1.0))
        .collect()
}

/// How far canonical TPOT may be from the benchmark's mean TPOT once the measured client/server gap
/// is accounted for. The benchmark times each request on the client (from sending it to each
/// streamed chunk, after detokenizing and HTTP), vLLM on the engine. Their decode times differ by
/// D = Σ `request_decode_time` (server, from the dumps) − Σ (latency − TTFT) (client, from the
/// benchmark's records) over the batch; spread evenly over its N requests, that shifts the mean
/// TPOT by (D / N) · mean 1/(n − 1). The 2 % bound is on what is left after that shift (the spread
/// of the per-request offsets; `docs/ACCURACY.md` gives the measured figures). The per-token mean
/// needs no model: Σ ITL equals Σ decode time on the server, so it differs from the client's by
/// exactly D / Σ decode.
const CLIENT_SERVER_GAP: f64 = 0.02;

/// `"raw % / corrected %"` against `truth`, as `docs/ACCURACY.md` prints its cells.
fn cell(raw: Option<f64>, corrected: Option<f64>, truth: Option<f64>) -> String {
    let e = |x: Option<f64>| match (x, truth) {
        (Some(x), Some(t)) => format!("{:+.2} %", (x - t) / t * 100.0),
        _ => "—".to_string(),
    };
    format!("{} / {}", e(raw), e(corrected))
}

/// Also prints the real-vLLM rows of `docs/ACCURACY.md` (with `-- --nocapture`): per release and
/// batch, raw and corrected TPOT mean against the benchmark's mean TPOT, raw ITL mean and the
/// corrected per-token mean against the client's per-token time (Σ (latency − TTFT) / tokens after
/// the first), and vLLM's raw iteration tokens per iteration against the local-compute ones.
#[test]
fn real_vllm_counts_are_exact_and_families_follow_their_formulas_through_inspect() {
    for release in RELEASES {
        println!("\nvLLM {}", release.version);
        println!(
            "| batch | requests (n ≤ 1) | tokens after first, client (server) | TPOT mean | ITL per token, mean | iteration tokens, raw / local | decode-time gap | client chunk gap / vLLM output gap |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for dir in batches(release) {
            check_batch(release, &dir);
        }
    }
}

fn check_batch(release: &Release, dir: &std::path::Path) {
    let name = name(release, dir);
    let (before_text, after_text) = (
        read(&dir.join("before.prom")),
        read(&dir.join("after.prom")),
    );
    let (b, a) = (Dump::of(&before_text), Dump::of(&after_text));
    let d = |key: &str| a.v(key) - b.v(key);
    let bench = json(&dir.join("bench.json"));
    let batch = json(&dir.join("batch.json"));
    let k = batch["num_speculative_tokens"].as_f64().expect("k");
    let (n_gt_1, after_first, itl_samples) = bench_counts(&bench);
    // Exact counts, from the dumps by hand against the benchmark's records.
    let gen_le1 = format!("vllm:request_generation_tokens_bucket{{{}}}", 1.0);
    let canonical_count = d(&format!("{TPOT}_count")) - d(&gen_le1);
    assert_eq!(canonical_count, n_gt_1, "{name}: canonical TPOT count");
    // One ITL sample per engine output after the first; the client sees one per streamed chunk,
    // and the API server may put two outputs in one chunk.
    let itl_count = d(&format!("{ITL}_count"));
    assert!(
        itl_count >= itl_samples,
        "{name}: {itl_count} ITL samples, the client saw {itl_samples} chunks"
    );
    let server_tokens = a.tokens() - b.tokens();
    let stop = uses_stop_strings(dir);
    if stop {
        // At most the rest of the step past the stop string: up to k drafts per request, none
        // without drafts (the token that completed the string is counted on both sides).
        let by_stop = d("vllm:request_success_total{finished_reason=stop}");
        let extra = server_tokens - after_first;
        assert!(
            (0.0..=k * by_stop).contains(&extra),
            "{name}: {extra} tokens past stop strings, {by_stop} stopped"
        );
    } else {
        assert_eq!(server_tokens, after_first, "{name}: tokens after the first");
    }

    let reports = inspect(
        &Loaded::from_text("BEFORE", "before.prom", before_text.clone()),
        &Loaded::from_text("AFTER", "after.prom", after_text.clone()),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(reports.len(), 1, "{name}: one engine");
    let r = &reports[0];
    let mean = |s: f64, c: f64| (c > 0.0).then(|| s / c);
    let want_tpot = mean(d(&format!("{TPOT}_sum")), canonical_count);
    let want_itl = mean(d(&format!("{ITL}_sum")), server_tokens);
    let check = |got: Option<f64>, want: Option<f64>, what: &str| match (got, want) {
        (Some(g), Some(w)) => assert!(close(g, w, 1e-12), "{name} {what}: {g} vs {w}"),
        (g, w) => assert_eq!(
            g.is_some(),
            w.is_some(),
            "{name} {what}: {g:?} vs {w:?} ({:?})",
            r.null_reasons
        ),
    };
    check(
        r.get("canonical_tpot_mean_seconds"),
        want_tpot,
        "canonical TPOT",
    );
    check(
        r.get("token_weighted_itl_seconds"),
        want_itl,
        "token-weighted ITL",
    );
    check(
        r.get("acceptance_corrected_itl_seconds"),
        want_itl,
        "acceptance-corrected ITL",
    );
    check(
        r.get("tokens_per_output_mean"),
        mean(server_tokens, itl_count),
        "tokens per output",
    );
    if release.by_source {
        let want_local = mean(
            d(LOCAL) + d("vllm:generation_tokens_total"),
            d("vllm:iteration_tokens_total_count"),
        );
        check(
            r.get("local_compute_iteration_tokens_mean"),
            want_local,
            "local-compute iteration tokens",
        );
    } else {
        // No by-source prompt counter before vLLM 0.16: withheld, with that reason.
        assert!(!a.has_family("vllm:prompt_tokens_by_source"), "{name}");
        assert_eq!(r.get("local_compute_iteration_tokens_mean"), None, "{name}");
        assert_eq!(
            r.null_reasons.get("local_compute_iteration_tokens_mean"),
            Some(&"missing_input"),
            "{name}"
        );
    }
    let raw_iteration = mean(
        d("vllm:iteration_tokens_total_sum"),
        d("vllm:iteration_tokens_total_count"),
    );
    check(
        r.get("raw_tpot_mean_seconds"),
        mean(d(&format!("{TPOT}_sum")), d(&format!("{TPOT}_count"))),
        "raw TPOT",
    );
    check(
        r.get("raw_itl_mean_seconds"),
        mean(d(&format!("{ITL}_sum")), itl_count),
        "raw ITL",
    );
    // Tokens per output: 1 to 1 + k; exactly 1 without drafts (every output holds one token).
    if let Some(got) = r.get("tokens_per_output_mean") {
        assert!((1.0..=1.0 + k).contains(&got), "{name}: {got} with k = {k}");
        if k == 0.0 {
            assert_eq!(got, 1.0, "{name}: no drafts, one token per output");
        }
        let table = render_table("before.prom", "after.prom", &reports);
        assert!(
            table.contains("tokens per output") && table.contains(&format!("{got:.2}")),
            "{name}:\n{table}"
        );
    } else {
        // One-token answers: no output after any first, so nothing to divide by.
        assert_eq!(itl_count, 0.0, "{name}");
        assert_eq!(
            r.null_reasons.get("tokens_per_output_mean"),
            Some(&"no_new_observation"),
            "{name}"
        );
    }

    let long = long_requests(&bench);
    let f = |r: &Value, k: &str| r[k].as_f64().expect("a number");
    let client_gap = mean(
        long.iter().map(|r| f(r, "itl_sum")).sum(),
        long.iter().map(|r| f(r, "itl_count")).sum(),
    );
    let server_gap = mean(d(&format!("{ITL}_sum")), itl_count);
    let streamed = match (client_gap, server_gap) {
        (Some(c), Some(s)) => Some(c / s),
        _ => None,
    };
    let client_decode: f64 = long.iter().map(|r| f(r, "latency") - f(r, "ttft")).sum();
    let server_decode = d("vllm:request_decode_time_seconds_sum");
    let t = json(&dir.join("truth.json"));
    println!(
        "| {} | {} ({}) | {after_first} ({server_tokens}) | {} | {} | {} | {} | {} |",
        dir.file_name().unwrap().to_string_lossy(),
        t["requests"],
        t["requests_n_le_1"],
        cell(
            r.get("raw_tpot_mean_seconds"),
            r.get("canonical_tpot_mean_seconds"),
            t["bench_mean_tpot_s"].as_f64()
        ),
        cell(
            r.get("raw_itl_mean_seconds"),
            r.get("acceptance_corrected_itl_seconds"),
            t["client_token_weighted_itl_s"].as_f64()
        ),
        match (raw_iteration, r.get("local_compute_iteration_tokens_mean")) {
            (Some(raw), Some(local)) => format!(
                "{raw:.2} / {local:.2} ({:+.2} %)",
                (raw / local - 1.0) * 100.0
            ),
            (Some(raw), None) => format!(
                "{raw:.2} / withheld ({})",
                r.null_reasons
                    .get("local_compute_iteration_tokens_mean")
                    .unwrap_or(&"?")
            ),
            _ => "—".to_string(),
        },
        if client_decode > 0.0 {
            format!("{:+.2} %", (server_decode / client_decode - 1.0) * 100.0)
        } else {
            "—".to_string()
        },
        streamed.map_or("—".to_string(), |x| format!("{:.0} %", x * 100.0))
    );

    // The benchmark's means, within the measured client/server gap (CLIENT_SERVER_GAP).
    assert!(
        close(d(&format!("{ITL}_sum")), server_decode, 1e-9),
        "{name}: Σ ITL is Σ decode time"
    );
    let gap = server_decode - client_decode;
    let window = batch["parts"].is_array();
    let several_runs = bench.get("runs").is_some();
    if stop {
        // vLLM divides by tokens the client never got: on a stop-string batch its TPOT is the
        // lower. A window mixing it with other batches has no such direction: not compared.
        if let (Some(got), Some(bench), false, true) = (
            want_tpot,
            t["bench_mean_tpot_s"].as_f64(),
            window,
            release.clock_checked,
        ) {
            assert!(got < bench, "{name}: canonical TPOT {got} vs bench {bench}");
        }
    } else if let Some(got) = want_tpot {
        let bench = t["bench_mean_tpot_s"].as_f64().expect("a bench TPOT");
        let n = long.len() as f64;
        let shift = gap / n
            * long
                .iter()
                .map(|r| 1.0 / (f(r, "output_len") - 1.0))
                .sum::<f64>()
            / n;
        let want = bench + shift;
        println!(
            "{name}: canonical TPOT {got:.6} s, bench {bench:.6} s, bench + measured gap {want:.6} s ({:+.2} %)",
            (got / want - 1.0) * 100.0
        );
        // The even spread of the gap over requests models one client streaming one kind of
        // request. A batch of several bench runs at once (`runs` in bench.json: the goodput
        // batches, greedy requests with multi-token chunks beside sampled ones) has per-request
        // offsets of different kinds: there the shifted mean misses by 5 % (goodput_d0) while the
        // unshifted one is within 0.3 %, so it is printed, not asserted.
        assert!(
            !release.clock_checked
                || several_runs
                || (got - want).abs() <= CLIENT_SERVER_GAP * want,
            "{name}: canonical TPOT {got} vs bench {bench} + gap {shift}"
        );
        let client = t["client_token_weighted_itl_s"]
            .as_f64()
            .expect("client per-token ITL");
        let per_token = want_itl.expect("tokens after the first");
        assert!(
            close(per_token / client, server_decode / client_decode, 1e-9),
            "{name}: per-token ITL {per_token} vs client {client}"
        );
    }
}
