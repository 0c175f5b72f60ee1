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
