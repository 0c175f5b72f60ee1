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
    let engine = Arc::new(std::sync::Mutex::new(Engine::new(
        engine::EngineConfig::default(),
    )));
    let metrics = Arc::new(SelfMetrics::new());
    assert!(save(dir.clone(), engine.clone(), metrics.clone()).await);
    assert!(state_file(&dir).is_file());
    assert_eq!(
        failures(&metrics),
        "vllm_corrector_state_write_failures_total 0"
    );

    let not_a_dir = dir.join("plain-file");
    std::fs::write(&not_a_dir, b"x").expect("write");
    assert!(!save(not_a_dir.join("state"), engine, metrics.clone()).await);
    assert_eq!(
        failures(&metrics),
        "vllm_corrector_state_write_failures_total 1"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}
