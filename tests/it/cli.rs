//! The subcommands through the binary: `demo` stops cleanly on SIGTERM, `inspect` prints JSON
//! and names the bad line of a malformed dump, and the service flags still need no subcommand.
//! Fresh-user mistakes get a clear message: zero durations and invalid `rules` names are usage
//! errors from the argument parser (exit status 2), swapped `inspect` dumps an error (exit status
//! 1), `simulate --instant` without `--metrics-file` prints the exposition, a `--storage.path`
//! that cannot hold the state file stops the service at start (exit status 2), and so does an
//! invalid `--config.file` given to `rules`, which prints the SLO rules (`rules corrections` the
//! PromQL corrections). `check-config` refuses a bad file with the service's own message.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::harness::TempDir;
use crate::metrics::Snapshot;

const BIN: &str = env!("CARGO_BIN_EXE_vllm-corrector");

/// Runs the binary to completion: exit code, stdout, stderr.
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/vllm-0.33/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn demo_prints_a_table_then_stops_cleanly_on_sigterm() {
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--web.listen-address",
            "127.0.0.1:0",
            "--refresh",
            "1s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vllm-corrector demo");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen_table = false;
    while !seen_table {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => seen_table = line.contains("quantity=tpot_mean_seconds"),
            Err(e) => {
                let _ = child.kill();
                panic!("no table line within 20 s: {e}");
            }
        }
    }
    // SIGTERM to the child we started, by its PID.
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    let mut last = String::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        last = line;
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status}");
    assert!(
        last.starts_with("# demo stopped after"),
        "last line {last:?}"
    );
}

#[test]
fn inspect_json_through_the_binary() {
    let out = Command::new(BIN)
        .args([
            "inspect",
            &fixture("t1.prom"),
            &fixture("t2.prom"),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // EXPECTED.md, engine 0, t1 → t2: (1.5 − 0.8) / ((60 − 7) − (32 − 4)) = 0.7 / 25 = 0.028 s.
    let e0 = &json[0];
    assert_eq!(e0["labels"]["engine"], "0");
    let tpot = e0["canonical_tpot_mean_seconds"].as_f64().unwrap();
    assert!((tpot - 0.028).abs() < 1e-15, "{tpot}");
}

#[test]
fn inspect_names_the_missing_file_and_exits_1() {
    let out = Command::new(BIN)
        .args(["inspect", "/nonexistent/before.prom", &fixture("t2.prom")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("vllm-corrector: BEFORE /nonexistent/before.prom: cannot read:"),
        "{err}"
    );
}

#[test]
fn inspect_refuses_standard_input_for_both_dumps() {
    // It used to read stdin as BEFORE, find it empty as AFTER, and print a table of dashes.
    let out = Command::new(BIN)
        .args(["inspect", "-", "-"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AFTER -: standard input is already BEFORE"),
        "{err}"
    );
}

#[test]
fn service_flags_and_a_subcommand_cannot_be_mixed() {
    let out = Command::new(BIN)
        .args(["--web.listen-address", "127.0.0.1:0", "demo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}

#[test]
fn inspect_refuses_one_url_read_twice_at_once() {
    let out = Command::new(BIN)
        .args([
            "inspect",
            "http://127.0.0.1:9/metrics",
            "http://127.0.0.1:9/metrics",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pass --wait 30s"), "{err}");
}

#[test]
fn rules_corrections_prints_the_shipped_recording_rules() {
    // deploy/rules/ holds the default output (a unit test keeps it equal to promql_rules::render);
    // the subcommand must print exactly that, and a prefix flag must reach every recorded name.
    let out = Command::new(BIN)
        .args(["rules", "corrections"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/rules/vllm-corrected.promql.rules.yml"
    ))
    .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), shipped);
    let out = Command::new(BIN)
        .args(["rules", "corrections", "--rules.name-prefix", "vllm_pq_"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("record: vllm_pq_token_weighted_itl_seconds_sum"),
        "{text}"
    );
    assert!(!text.contains("record: vllm_corrected_"), "{text}");
}

#[test]
fn inspect_refuses_swapped_dumps_naming_both_and_the_evidence() {
    let (before, after) = (fixture("t2.prom"), fixture("t1.prom"));
    let (code, out, err) = run(&["inspect", &before, &after]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    // t1 and t2 come from one vLLM process: engine 0's e2e `+Inf` bucket is 32 in t1 and 60 in
    // t2 (line 328 of each), and its `_created` is 1.750000000123e+09 in both (line 357).
    let want = format!("vllm-corrector: BEFORE {before} and AFTER {after} are swapped: ");
    assert!(err.starts_with(&want), "{err}");
    assert!(
        err.contains("fell from 60 (BEFORE line 328) to 32 (AFTER line 328)")
            && err.contains("= 1750000000.123 (2025-06-15T15:06:40.123Z) is the same in both")
            && err.trim_end().ends_with("pass the earlier dump first"),
        "{err}"
    );
}

#[test]
fn rules_refuses_an_empty_group_name_a_vllm_prefix_and_a_zero_interval() {
    for (flag, value, message) in [
        (
            "--rules.group-name",
            "",
            "the rule group name must not be empty",
        ),
        ("--rules.name-prefix", "vllm:", "vLLM's own namespace"),
        (
            "--rules.name-prefix",
            "vllm:corrected_",
            "vLLM's own namespace",
        ),
        (
            "--rules.name-prefix",
            "vllm-x_",
            "not a valid metric name prefix",
        ),
        ("--rules.interval", "0s", "is zero"),
    ] {
        let (code, out, err) = run(&["rules", "corrections", flag, value]);
        assert_eq!(code, Some(2), "{flag} {value:?}: {err}");
        assert!(out.is_empty(), "{flag} {value:?} printed rules: {out}");
        assert!(
            err.contains(&format!("for '{flag} <")) && err.contains(message),
            "{flag} {value:?}: {err}"
        );
    }
}

#[test]
fn rules_prints_the_shipped_slo_rules_without_a_config_file() {
    // deploy/alerts/ holds the output for the shipped default (a unit test keeps it so); the
    // binary must print exactly that, in both forms.
    for (args, file) in [
        (&["rules"][..], "slo.rules.yml"),
        (
            &["rules", "--format", "prometheusrule"][..],
            "slo-prometheusrule.yaml",
        ),
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        let shipped = std::fs::read_to_string(format!(
            "{}/deploy/alerts/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert_eq!(out, shipped, "{args:?}");
    }
}

#[test]
fn rules_reads_the_slos_of_the_config_file_and_refuses_an_invalid_one_with_status_2() {
    let dir = TempDir::new("rules-config");
    let good = dir.path().join("good.yml");
    std::fs::write(
        &good,
        "slos:\n  - name: chat\n    objective: 0.995\n    window: 7d\n    ttft: 0.5\n",
    )
    .unwrap();
    let (code, out, err) = run(&["rules", "--config.file", good.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    // 7 d scales the 1h/5m pair to 14m and 1m (5m * 7/30 = 1.17 -> 1m).
    assert!(
        out.contains("vllm_slo_chat:sli_error:ratio_rate14m{sli=\"ttft\"} > (14.4 * (1 - 0.995))"),
        "{out}"
    );
    assert!(!out.contains("vllm_slo_default"), "{out}");
    let bad = dir.path().join("bad.yml");
    std::fs::write(
        &bad,
        "slos:\n  - name: chat\n    objective: 99\n    tpot: 0.05\n",
    )
    .unwrap();
    let (code, out, err) = run(&["rules", "--config.file", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim_end(),
        format!(
            "vllm-corrector: --config.file {}: slos[0].objective: 99 is not a fraction in (0, 1) \
             such as 0.99 (99 %)",
            bad.display()
        )
    );
    // The SLO flags and the corrections subcommand do not mix.
    let (code, _, err) = run(&["rules", "--format", "sloth", "corrections"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn demo_refuses_zero_durations_in_the_argument_parser() {
    // `--duration 2s` bounds the run should a zero ever be accepted again.
    for flag in ["--refresh", "--window", "--scrape-interval"] {
        let (code, out, err) = run(&[
            "demo",
            "--web.listen-address",
            "127.0.0.1:0",
            "--duration",
            "2s",
            flag,
            "0s",
        ]);
        assert_eq!(code, Some(2), "{flag}: {err}");
        assert!(out.is_empty(), "{flag}: {out}");
        assert!(
            err.contains(&format!("invalid value '0s' for '{flag} <"))
                && err.contains("must be longer than 0s"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn simulate_instant_prints_the_exposition_unless_a_metrics_file_is_given() {
    let dir = TempDir::new("simulate-instant");
    let file = dir.path().join("metrics.txt");
    let args = ["simulate", "--instant", "--duration", "30s", "--seed", "7"];
    let (code, printed, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    let mut with_file = args.to_vec();
    with_file.extend(["--metrics-file", file.to_str().unwrap()]);
    let (code, out, err) = run(&with_file);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.is_empty(),
        "with --metrics-file stdout stays empty: {out}"
    );
    // The same seed and duration: stdout is byte for byte what --metrics-file holds.
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(printed, written);
    let snapshot = Snapshot::parse_text(&printed);
    let tokens = snapshot
        .value(
            "vllm:generation_tokens_total",
            &[("engine", "0"), ("model_name", "sim-model")],
        )
        .expect("the generation-token counter");
    assert!(tokens > 0.0, "{tokens}");
}

#[test]
fn simulate_usage_errors_come_from_the_argument_parser() {
    let (code, _, err) = run(&["simulate", "--instant"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--duration <DURATION>"), "{err}");
    let (code, _, err) = run(&[
        "simulate",
        "--remote-write.interval",
        "0s",
        "--duration",
        "1s",
        "--web.listen-address",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("invalid value '0s' for '--remote-write.interval <")
            && err.contains("must be longer than 0s"),
        "{err}"
    );
}

#[test]
fn version_works_on_every_subcommand_and_names_the_git_commit() {
    // build.rs: `git rev-parse --short HEAD`, or "unknown" outside a git checkout.
    let (_, top, _) = run(&["--version"]);
    let commit = top
        .trim()
        .strip_prefix("vllm-corrector 0.1.0 (commit ")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{top:?}"))
        .to_owned();
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit:?}"
    );
    for sub in ["demo", "inspect", "rules", "simulate", "relabel"] {
        let (code, out, err) = run(&[sub, "--version"]);
        assert_eq!(code, Some(0), "{sub} --version: {err}");
        assert_eq!(
            out.trim(),
            format!("vllm-corrector-{sub} 0.1.0 (commit {commit})"),
            "{sub}"
        );
    }
}

#[test]
fn relabel_prints_the_shipped_keep_rule() {
    let (code, out, err) = run(&["relabel"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/prometheus/relabel.yml"
        ))
        .unwrap()
    );
    let (code, operator, _) = run(&["relabel", "--operator"]);
    assert_eq!(code, Some(0));
    assert!(
        operator.contains("- sourceLabels: [__name__, le, source]"),
        "{operator}"
    );
}

/// Starts the service with `args` on a free loopback port and waits up to 10 s for it to exit:
/// its exit code and stderr, or `None` (and the process killed) when it was still running.
fn service_exit(args: &[&str]) -> Option<(Option<i32>, String)> {
    let listen = format!(
        "--web.listen-address=127.0.0.1:{}",
        crate::harness::free_port()
    );
    let mut child = Command::new(BIN)
        .arg(listen)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vllm-corrector");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            return Some((status.code(), stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn an_unusable_storage_path_exits_with_status_2_at_start_naming_it() {
    let dir = TempDir::new("storage-flag");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let under_file = file.join("state");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("storage:\n  path: {}\n", file.display())).unwrap();
    let cases = [
        (
            format!("--storage.path={}", file.display()),
            "--storage.path",
            file.clone(),
        ),
        (
            format!("--storage.path={}", under_file.display()),
            "--storage.path",
            under_file.clone(),
        ),
        // Exists, but no file can be created in it, even by root.
        (
            "--storage.path=/proc/self".to_owned(),
            "--storage.path",
            "/proc/self".into(),
        ),
        (
            format!("--config.file={}", config.display()),
            "storage.path",
            file.clone(),
        ),
    ];
    for (arg, field, path) in cases {
        let Some((code, stderr)) = service_exit(&[&arg]) else {
            panic!("{arg}: still serving after 10 s");
        };
        assert_eq!(code, Some(2), "{arg}: {stderr}");
        let want = format!(
            "vllm-corrector: {field} {}: cannot keep the state file there: ",
            path.display()
        );
        assert!(stderr.starts_with(&want), "{arg}: {stderr}");
    }
    // A directory that does not exist yet is created, and the service starts.
    let fresh = dir.path().join("new").join("state");
    assert_eq!(
        service_exit(&[&format!("--storage.path={}", fresh.display())]),
        None,
        "a creatable --storage.path must start the service"
    );
    assert!(fresh.is_dir());
}

#[test]
fn check_config_accepts_the_shipped_files_and_refuses_a_bad_one_as_the_service_does() {
    let shipped = format!(
        "{}/deploy/kubernetes/base/config.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = TempDir::new("check-config");
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "bearer_tokens: [\"a-token-of-some-length\"]\n").unwrap();
    let (code, out, err) = run(&[
        "check-config",
        "--config.file",
        &shipped,
        "--web.config.file",
        web.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&format!(
            "{shipped}: valid configuration file (input.metric_prefix \"vllm:\""
        )),
        "{out}"
    );
    assert!(
        out.contains("web.yml: valid web configuration file (TLS off, client certificates None, basic auth or bearer tokens on)"),
        "{out}"
    );
    // Without a file there is nothing to check: a usage error.
    let (code, _, err) = run(&["check-config"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--config.file"), "{err}");
    // A bad file: status 2 and, word for word, what the service prints before it exits 2.
    let bad = dir.path().join("bad.yml");
    std::fs::write(&bad, "engine:\n  max_pending_frames: 0\n").unwrap();
    let bad_web = dir.path().join("bad-web.yml");
    std::fs::write(
        &bad_web,
        "tls_server_config:\n  cert_file: /nonexistent.pem\n",
    )
    .unwrap();
    for (flag, path) in [("--config.file", &bad), ("--web.config.file", &bad_web)] {
        let (code, out, err) = run(&["check-config", flag, path.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{flag}: {err}");
        assert!(out.is_empty(), "{out}");
        let Some((service_code, service_err)) =
            service_exit(&[&format!("{flag}={}", path.display())])
        else {
            panic!("{flag}: the service started with a file check-config refused");
        };
        assert_eq!(service_code, Some(2), "{service_err}");
        assert_eq!(err, service_err, "{flag}");
        assert!(err.starts_with("vllm-corrector: "), "{err}");
    }
    assert!(
        run(&["check-config", "--config.file", bad.to_str().unwrap()])
            .2
            .contains("engine.max_pending_frames: 0 is outside 1..=1024"),
    );
    // A valid spec whose fast page cannot fire (14.4 × 10 % > 1): accepted, with a warning.
    let silent = dir.path().join("silent.yml");
    std::fs::write(
        &silent,
        "slos:\n  - name: chat\n    objective: 0.9\n    tpot: 0.05\n",
    )
    .unwrap();
    let (code, out, err) = run(&["check-config", "--config.file", silent.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("silent.yml: warning: SLO chat: tpot at 90 %: 1 of its alerts can never fire"),
        "{out}"
    );
    assert!(
        !run(&["check-config", "--config.file", &shipped])
            .1
            .contains("warning")
    );
    // Milliseconds where seconds are meant, and a threshold off vLLM's edges: both files are
    // valid, and both check-config and rules (on standard error, beside the rules) say so.
    let ms = dir.path().join("ms.yml");
    std::fs::write(
        &ms,
        "slos:\n  - name: chat\n    objective: 0.99\n    ttft: 0.4\n    tpot: 50\n",
    )
    .unwrap();
    let path = ms.to_str().unwrap();
    let edge = "SLO chat: ttft 0.4 s is not one of vLLM's default bucket edges (nearest: 0.25 \
                below, 0.5 above)";
    let unit =
        "SLO chat: tpot 50 s looks like milliseconds: thresholds are seconds (0.05 for 50 ms).";
    let (code, out, err) = run(&["check-config", "--config.file", path]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("ms.yml: warning: {edge}")), "{out}");
    assert!(out.contains(&format!("ms.yml: warning: {unit}")), "{out}");
    let (code, rules, err) = run(&["rules", "--config.file", path]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("vllm-corrector rules: warning: {edge}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("vllm-corrector rules: warning: {unit}")),
        "{err}"
    );
    assert!(
        rules.contains("#   WARNING: SLO chat: tpot 50 s looks like milliseconds"),
        "{rules}"
    );
    assert!(
        !rules.contains("vllm-corrector rules: warning"),
        "stdout holds the rules only"
    );
}
