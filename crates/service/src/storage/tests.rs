//! Tests of `storage.rs`.

use super::*;

/// A fresh directory under the system temp dir, removed by the caller.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vllm-corrector-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn failures(metrics: &SelfMetrics) -> String {
    let mut text = String::new();
    metrics.encode_text(&mut text).expect("encode");
    text.lines()
        .find(|l| l.starts_with("vllm_corrector_state_write_failures_total "))
        .unwrap_or("no such line")
        .to_owned()
}

#[tokio::test]
async fn save_says_whether_the_state_file_was_written() {
    // The shutdown log says "state written" only when `save` returns true (run.rs): a path
    // under a regular file cannot be a directory, so that write fails, is counted, and says so.
    let dir = scratch_dir("save");
    let core = Arc::new(crate::core::Core::new(Engine::new(
        engine::EngineConfig::default(),
    )));
    let metrics = &core.metrics;
    assert!(save(dir.clone(), core.clone()).await);
    assert!(state_file(&dir).is_file());
    assert_eq!(
        failures(metrics),
        "vllm_corrector_state_write_failures_total 0"
    );

    let not_a_dir = dir.join("plain-file");
    std::fs::write(&not_a_dir, b"x").expect("write");
    assert!(!save(not_a_dir.join("state"), core.clone()).await);
    assert_eq!(
        failures(metrics),
        "vllm_corrector_state_write_failures_total 1"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The configuration of `vllm-corrector --storage.path <dir>`.
fn with_storage_flag(dir: &Path) -> Config {
    use clap::Parser;
    let args = crate::config::Args::parse_from([
        "vllm-corrector".as_ref(),
        "--storage.path".as_ref(),
        dir.as_os_str(),
    ]);
    Config::from_args(args).expect("valid flags")
}

#[test]
fn check_usable_creates_a_missing_directory_and_leaves_nothing_behind() {
    let dir = scratch_dir("check-fresh");
    let nested = dir.join("a").join("b");
    check_usable(&with_storage_flag(&nested)).expect("a creatable directory is usable");
    assert!(nested.is_dir());
    assert_eq!(std::fs::read_dir(&nested).expect("list").count(), 0);
    // An existing state file is kept as it is.
    std::fs::write(state_file(&nested), b"{}").expect("write");
    check_usable(&with_storage_flag(&nested)).expect("an existing directory is usable");
    assert_eq!(std::fs::read(state_file(&nested)).expect("read"), b"{}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn check_usable_refuses_a_regular_file_and_a_path_under_one_naming_the_flag() {
    let dir = scratch_dir("check-file");
    let file = dir.join("plain-file");
    std::fs::write(&file, b"x").expect("write");
    for path in [file.clone(), file.join("state")] {
        let error = check_usable(&with_storage_flag(&path)).expect_err("not a directory");
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "--storage.path {}: cannot keep the state file there: ",
                path.display()
            )),
            "{message}"
        );
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn check_usable_refuses_a_state_file_that_is_a_directory_and_names_the_file_field() {
    let dir = scratch_dir("check-state-dir");
    std::fs::create_dir_all(state_file(&dir)).expect("mkdir");
    let file = crate::config::FileConfig {
        storage: crate::config::StorageSection {
            path: Some(dir.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    use clap::Parser;
    let args = crate::config::Args::parse_from(["vllm-corrector"]);
    let config = Config::from_parts(args, file).expect("valid");
    let message = check_usable(&config).expect_err("a directory").to_string();
    assert_eq!(
        message,
        format!(
            "storage.path {}: cannot keep the state file there: is a directory, not the state file",
            state_file(&dir).display()
        )
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn check_usable_refuses_a_directory_it_cannot_write_or_create() {
    // procfs refuses new files and directories even to root: an existing directory that cannot
    // be written, and one that cannot be created.
    for path in ["/proc/self", "/proc/vllm-corrector-state"] {
        let outcome = check_usable(&with_storage_flag(Path::new(path)));
        assert!(outcome.is_err(), "{path}: {outcome:?}");
    }
    // A mode-555 directory, unless running with CAP_DAC_OVERRIDE (root writes anyway).
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir("check-read-only");
    let read_only = dir.join("read-only");
    std::fs::create_dir(&read_only).expect("mkdir");
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let root = std::fs::File::create(read_only.join("probe")).is_ok();
    let outcomes = [
        check_usable(&with_storage_flag(&read_only)),
        check_usable(&with_storage_flag(&read_only.join("sub"))),
    ];
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::remove_dir_all(&dir).expect("clean up");
    if !root {
        for outcome in outcomes {
            let message = outcome.expect_err("not writable").to_string();
            assert!(message.contains("Permission denied"), "{message}");
        }
    }
}

#[test]
fn a_line_longer_than_a_record_is_skipped_without_being_held() {
    let long = "x".repeat(engine::MAX_STATE_RECORD_BYTES + 1);
    let text = format!("{{\"version\":3}}\n{long}\nlast");
    let mut reader = BufReader::with_capacity(1 << 10, text.as_bytes());
    let mut line = Vec::new();
    assert!(matches!(next_line(&mut reader, &mut line), Ok(Line::Read)));
    assert_eq!(line, b"{\"version\":3}");
    assert!(matches!(
        next_line(&mut reader, &mut line),
        Ok(Line::TooLong)
    ));
    assert!(line.capacity() <= 2 * engine::MAX_STATE_RECORD_BYTES);
    assert!(matches!(next_line(&mut reader, &mut line), Ok(Line::Read)));
    assert_eq!(line, b"last", "a last line without its newline");
    assert!(matches!(next_line(&mut reader, &mut line), Ok(Line::End)));
}

/// A state file of `n` copies of one retired group's record (engine `r<i>`, newest sample
/// `1_000 + i` s, so the later the newer), format 3 or, when `format_1`, the first format.
fn state_file_of(n: usize, format_1: bool) -> String {
    let line = r#"{"labels":[["engine","ENGINE"],["model_name","m"]],"state":{"states":{},"holds":{"vllm_corrected_tokens_per_output":{"served":{"SumCount":{"sum":2.0,"count":1.0}},"served_ts":TS,"inputs":[[{"input":"GenTotal","le_bits":0},3.0]]}},"newest_sample_ms":TS}}"#;
    let acceptance = r#"{"labels":[["engine","ENGINE"],["model_name","m"]],"acceptance":{"acc":[1.0,2.0,2.0],"bounds":[0.01,0.05],"point":{"count":1.0,"finite":[0.0,1.0],"first_outputs":1.0,"generated":2.0,"per_pos":[],"sum":0.1},"ts":TS}}"#;
    let record = |i: usize| {
        let template = if format_1 { acceptance } else { line };
        template
            .replace("ENGINE", &format!("r{i}"))
            .replace("TS", &(1_000_000 + 1_000 * i).to_string())
    };
    if format_1 {
        let groups: Vec<String> = (0..n).map(record).collect();
        format!("{{\"version\":1,\"groups\":[{}]}}", groups.join(","))
    } else {
        let mut out = String::from("{\"version\":3}\n");
        for i in 0..n {
            out.push_str(&record(i));
            out.push('\n');
        }
        out
    }
}

fn ignored(metrics: &SelfMetrics, reason: &str) -> String {
    let mut text = String::new();
    metrics.encode_text(&mut text).expect("encode");
    let name = format!("vllm_corrector_state_loads_ignored_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(name.as_str()))
        .unwrap_or("no such line")
        .to_owned()
}

#[test]
fn a_state_file_larger_than_the_budget_restores_the_newest_states_and_counts_the_rest() {
    // 20 000 groups under a 1 MiB state budget (a quarter for the retired states), in either
    // format: read a record at a time, the newest samples kept, the rest counted.
    for format_1 in [false, true] {
        let dir = scratch_dir(if format_1 {
            "oversized-1"
        } else {
            "oversized-3"
        });
        std::fs::write(state_file(&dir), state_file_of(20_000, format_1)).expect("write");
        let mut engine = Engine::new(engine::EngineConfig {
            max_state_bytes: 1 << 20,
            ..engine::EngineConfig::default()
        });
        let metrics = SelfMetrics::default();
        let loaded = load(&dir, &mut engine, 1_100_000_000, &metrics);
        let stats = engine.stats();
        assert_eq!(loaded.restored, 20_000, "{loaded:?}");
        assert_eq!(loaded.ignored, 0);
        assert!(stats.memory.retired <= (1 << 20) / 4, "{:?}", stats.memory);
        let kept = stats.retired_groups;
        assert!(kept > 100 && kept < 2_000, "{kept}");
        assert_eq!(loaded.dropped, 20_000 - kept);
        assert_eq!(
            ignored(&metrics, "memory_budget"),
            loaded.dropped.to_string()
        );
        // The newest are those of the last records.
        let snapshot = engine.state_records(&mut engine::StateCursor::default(), usize::MAX);
        assert_eq!(snapshot.len(), kept);
        let text = serde_json::to_string(&snapshot).expect("records");
        assert!(text.contains("\"r19999\""), "the newest kept");
        assert!(
            !text.contains(&format!("\"r{}\"", 20_000 - kept - 1)),
            "the next older dropped"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}

#[test]
fn a_record_longer_than_any_group_writes_is_skipped_and_counted() {
    let dir = scratch_dir("long-record");
    let file = state_file_of(2, false);
    let (header, records) = file.split_once('\n').unwrap();
    let long = format!(
        "{{\"labels\":\"{}\"}}",
        "x".repeat(engine::MAX_STATE_RECORD_BYTES)
    );
    std::fs::write(state_file(&dir), format!("{header}\n{long}\n{records}")).expect("write");
    let mut engine = Engine::new(engine::EngineConfig::default());
    let metrics = SelfMetrics::default();
    let loaded = load(&dir, &mut engine, 1_100_000_000, &metrics);
    assert_eq!((loaded.restored, loaded.ignored, loaded.dropped), (2, 1, 0));
    assert_eq!(ignored(&metrics, "too_large"), "1");
    std::fs::remove_dir_all(&dir).expect("clean up");
}
