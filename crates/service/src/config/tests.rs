//! Tests of [`super`]: flags, YAML sections, defaults and validation messages.

use super::*;
use protocol::labels::LabelLimits;

fn args(extra: &[&str]) -> Args {
    let mut argv = vec!["vllm-corrector"];
    argv.extend_from_slice(extra);
    Args::try_parse_from(argv).expect("arguments parse")
}

fn from_yaml(text: &str) -> Result<Config, ConfigError> {
    let file = FileConfig::from_yaml(text, Path::new("test.yaml"))?;
    Config::from_parts(args(&[]), file)
}

#[test]
fn no_flags_and_no_file_give_the_documented_defaults() {
    let c = Config::from_args(args(&[])).unwrap();
    assert_eq!(
        c.listen_address,
        "0.0.0.0:9490".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(c.log_level, LogLevel::Info);
    assert_eq!(c.log_format, LogFormat::Logfmt);
    // 10 min = 600 000 ms.
    assert_eq!(
        c.engine,
        EngineConfig {
            idle_timeout_ms: 600_000,
            max_pending_frames: 16,
            max_active_series: 100_000,
            missed_scrapes: 3,
            missed_scrapes_min_wait_ms: 30_000,
            settle_scrapes: 2,
            // 384 MiB − 96 MiB in flight − 64 MiB reserved = 224 MiB = 234 881 024 bytes.
            max_state_bytes: 234_881_024,
            metric_prefix: "vllm:".to_owned(),
            drop_labels: Vec::new(),
            slos: c.engine.slos.clone(),
        }
    );
    // 8 MiB = 8 388 608 bytes, 384 MiB = 402 653 184 bytes.
    assert_eq!(
        c.limits,
        Limits {
            max_memory_bytes: 402_653_184,
            max_body_bytes: 8_388_608,
            max_decoded_bytes: 8_388_608,
            max_concurrent_requests: 64,
            max_series_per_request: 50_000,
            labels: LabelLimits {
                max_labels_per_series: 64,
                max_label_name_length: 1024,
                max_label_value_length: 2048,
            },
            // 10 min = 600 000 ms.
            max_future_skew_ms: 600_000,
            // 96 MiB = 100 663 296 bytes.
            max_inflight_bytes: 100_663_296,
            request_body_timeout: std::time::Duration::from_secs(10),
            max_connections: 1024,
            header_read_timeout: std::time::Duration::from_secs(10),
            // 2 min = 120 s.
            idle_connection_timeout: std::time::Duration::from_secs(120),
            response_write_timeout: std::time::Duration::from_secs(60),
        }
    );
}

#[test]
fn flags_are_parsed() {
    let c = Config::from_args(args(&[
        "--web.listen-address=127.0.0.1:1234",
        "--log.level=debug",
        "--log.format",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        c.listen_address,
        "127.0.0.1:1234".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(c.log_level, LogLevel::Debug);
    assert_eq!(c.log_format, LogFormat::Json);
}

#[test]
fn unknown_log_level_is_refused_by_the_parser() {
    assert!(Args::try_parse_from(["vllm-corrector", "--log.level=verbose"]).is_err());
}

#[test]
fn listen_address_takes_prometheus_forms() {
    let at = |a: &str| {
        Config::from_args(args(&[&format!("--web.listen-address={a}")]))
            .unwrap()
            .listen_address
    };
    assert_eq!(at(":9491"), "0.0.0.0:9491".parse().unwrap());
    assert_eq!(at("localhost:9491"), "127.0.0.1:9491".parse().unwrap());
    assert_eq!(at("[::1]:9491"), "[::1]:9491".parse().unwrap());
}

#[test]
fn bad_listen_address_names_the_flag() {
    let err = Config::from_args(args(&["--web.listen-address=localhost"])).unwrap_err();
    assert!(
        err.to_string().starts_with("--web.listen-address:"),
        "{err}"
    );
}

#[test]
fn yaml_fields_override_defaults_and_absent_ones_keep_them() {
    let c = from_yaml("engine:\n  idle_timeout: 1h 30m\nlimits:\n  max_concurrent_requests: 8\n")
        .unwrap();
    // 1 h 30 min = 5 400 s = 5 400 000 ms.
    assert_eq!(c.engine.idle_timeout_ms, 5_400_000);
    assert_eq!(c.engine.max_pending_frames, 16);
    assert_eq!(c.limits.max_concurrent_requests, 8);
    assert_eq!(c.limits.max_body_bytes, 8_388_608);
    let c = from_yaml("limits:\n  max_active_series: 7\n  max_label_value_length: 9\n").unwrap();
    assert_eq!(c.engine.max_active_series, 7);
    assert_eq!(c.limits.labels.max_label_value_length, 9);
}

#[test]
fn empty_yaml_file_means_defaults() {
    assert_eq!(
        FileConfig::from_yaml("\n", Path::new("x")).unwrap(),
        FileConfig::default()
    );
}

#[test]
fn unknown_yaml_field_is_an_error() {
    let err = from_yaml("engine:\n  idle_timeuot: 5m\n").unwrap_err();
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err}");
    assert!(err.to_string().contains("idle_timeuot"), "{err}");
}

#[test]
fn type_errors_name_the_field_in_the_message() {
    // serde-saphyr reports a line and column only: the field comes from the YAML's structure.
    let err = from_yaml("limits:\n  max_active_series: -5\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("--config.file test.yaml: line 2, column 22: limits.max_active_series: "),
        "{err}"
    );
    assert!(err.to_string().contains("invalid u64"), "{err}");
    let err =
        from_yaml("# engine settings\nengine:\n  idle_timeout: 5m\n\n  max_pending_frames: many\n")
            .unwrap_err();
    assert!(
        err.to_string().contains(": engine.max_pending_frames: "),
        "{err}"
    );
    let err = from_yaml("engine:\n  idle_timeuot: 5m\n").unwrap_err();
    assert!(err.to_string().contains("engine.idle_timeuot: "), "{err}");
    assert_eq!(
        yaml_field_at("a:\n  b:\n    c: 1\n  d: 2\n", 3).as_deref(),
        Some("a.b.c")
    );
    assert_eq!(
        yaml_field_at("a:\n  b:\n    c: 1\n  d: 2\n", 4).as_deref(),
        Some("a.d")
    );
    assert_eq!(yaml_field_at("- x\n", 1), None);
}

#[test]
fn yaml_errors_name_the_file_and_line_and_say_duplicate_key_in_our_words() {
    // Issue 24 item 10: the message pointed at `<input>:3:1` and told the user to "set
    // DuplicateKeyPolicy in Options", an option of the parser's. The file read is named, the
    // repeated key is on line 3 at column 3, and it is `engine.idle_timeout`.
    let dir = std::env::temp_dir().join(format!("vllm-corrector-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("corrector.yaml");
    std::fs::write(&path, "engine:\n  idle_timeout: 5m\n  idle_timeout: 6m\n").unwrap();
    let err = FileConfig::read(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "--config.file {}: line 3, column 3: engine.idle_timeout: duplicate key `idle_timeout`",
            path.display()
        )
    );
    // Any other parse error: the file, the line, no snippet naming `<input>`.
    std::fs::write(&path, "limits:\n  max_active_series: [1\n").unwrap();
    let err = FileConfig::read(&path).unwrap_err().to_string();
    let prefix = format!("--config.file {}: line ", path.display());
    assert!(err.starts_with(&prefix), "{err}");
    assert!(!err.contains("<input>") && !err.contains('\n'), "{err}");
    // The web configuration file alike.
    let web = crate::web::file::WebConfigFile::from_yaml(
        "basic_auth_users:\n  a: x\n  a: y\n",
        std::path::Path::new("web.yml"),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        web,
        "--web.config.file web.yml: line 3, column 3: duplicate key `a`"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_duration_names_the_field() {
    let err = from_yaml("engine:\n  idle_timeout: soon\n").unwrap_err();
    assert!(err.to_string().starts_with("engine.idle_timeout:"), "{err}");
}

#[test]
fn future_skew_is_a_duration_naming_its_field() {
    let c = from_yaml("limits:\n  max_future_skew: 90s\n").unwrap();
    assert_eq!(c.limits.max_future_skew_ms, 90_000);
    let err = from_yaml("limits:\n  max_future_skew: later\n").unwrap_err();
    assert!(
        err.to_string().starts_with("limits.max_future_skew:"),
        "{err}"
    );
}

#[test]
fn decoded_limit_below_the_body_limit_is_refused() {
    // Every body near max_body_bytes would declare more than max_decoded_bytes: all 413.
    let err = from_yaml("limits:\n  max_body_bytes: 1000\n  max_decoded_bytes: 10\n").unwrap_err();
    assert!(
        err.to_string().starts_with("limits.max_decoded_bytes:"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("below limits.max_body_bytes (1000)"),
        "{err}"
    );
    let c = from_yaml("limits:\n  max_body_bytes: 1000\n  max_decoded_bytes: 1000\n").unwrap();
    assert_eq!(c.limits.max_decoded_bytes, 1000);
}

#[test]
fn sub_second_idle_timeout_is_refused() {
    let err = from_yaml("engine:\n  idle_timeout: 500ms\n").unwrap_err();
    assert!(err.to_string().starts_with("engine.idle_timeout:"), "{err}");
}

#[test]
fn zero_limits_name_their_field() {
    for field in [
        "max_body_bytes",
        "max_decoded_bytes",
        "max_concurrent_requests",
        "max_series_per_request",
        "max_labels_per_series",
        "max_label_name_length",
        "max_label_value_length",
        "max_active_series",
        "max_connections",
    ] {
        let err = from_yaml(&format!("limits:\n  {field}: 0\n")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("limits.{field}: must be at least 1")
        );
    }
    let err = from_yaml("engine:\n  max_pending_frames: 0\n").unwrap_err();
    assert!(
        err.to_string().starts_with("engine.max_pending_frames:"),
        "{err}"
    );
    let err = from_yaml("engine:\n  settle_scrapes: 101\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "engine.settle_scrapes: 101 is outside 0..=100"
    );
    assert_eq!(
        from_yaml("engine:\n  settle_scrapes: 0\n")
            .unwrap()
            .engine
            .settle_scrapes,
        0
    );
}

#[test]
fn connection_timeouts_are_read_and_zero_is_refused() {
    let c = from_yaml("limits:\n  header_read_timeout: 3s\n  idle_connection_timeout: 1m 30s\n  max_connections: 7\n  response_write_timeout: 5s\n").unwrap();
    assert_eq!(
        c.limits.response_write_timeout,
        std::time::Duration::from_secs(5)
    );
    assert_eq!(
        c.limits.header_read_timeout,
        std::time::Duration::from_secs(3)
    );
    assert_eq!(
        c.limits.idle_connection_timeout,
        std::time::Duration::from_secs(90)
    );
    assert_eq!(c.limits.max_connections, 7);
    for field in [
        "header_read_timeout",
        "idle_connection_timeout",
        "response_write_timeout",
    ] {
        let err = from_yaml(&format!("limits:\n  {field}: 0s\n")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("limits.{field}: must be longer than 0s")
        );
    }
}

#[test]
fn missing_config_file_is_a_read_error() {
    let err =
        Config::from_args(args(&["--config.file=/nonexistent/vllm-corrector.yaml"])).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
}

#[test]
fn the_memory_budget_sizes_the_engine_state_and_refuses_what_cannot_fit() {
    // 256 MiB − 64 MiB in flight − 64 MiB reserved = 128 MiB of engine state.
    let c = from_yaml(
        "limits:\n  max_memory_bytes: 268435456\n  max_inflight_bytes: 67108864\n  \
         max_body_bytes: 1048576\n  max_decoded_bytes: 1048576\n",
    )
    .unwrap();
    assert_eq!(c.engine.max_state_bytes, 128 * 1024 * 1024);
    // In flight 64 MiB + reserve 64 MiB + 16 MiB of state at least = 144 MiB; one byte less is
    // refused.
    let least = 144 * 1024 * 1024;
    let yaml = |memory: usize| {
        format!(
            "limits:\n  max_memory_bytes: {memory}\n  max_inflight_bytes: 67108864\n  \
             max_decoded_bytes: 1048576\n  max_body_bytes: 1048576\n"
        )
    };
    let err = from_yaml(&yaml(least - 1)).unwrap_err();
    assert!(
        err.to_string().starts_with("limits.max_memory_bytes:"),
        "{err}"
    );
    assert_eq!(
        from_yaml(&yaml(least)).unwrap().engine.max_state_bytes,
        16 * 1024 * 1024
    );
}

#[test]
fn an_inflight_budget_below_the_largest_requests_charge_is_refused() {
    // The largest request: a 1 MiB body decoding to 1 MiB is charged 1 + 1 + 8 MiB + 64 KiB.
    let charge = 10 * 1024 * 1024 + 64 * 1024;
    let yaml = |inflight: usize| {
        format!(
            "limits:\n  max_body_bytes: 1048576\n  max_decoded_bytes: 1048576\n  \
             max_inflight_bytes: {inflight}\n"
        )
    };
    let err = from_yaml(&yaml(charge - 1)).unwrap_err();
    assert!(
        err.to_string().starts_with("limits.max_inflight_bytes:"),
        "{err}"
    );
    assert_eq!(
        from_yaml(&yaml(charge)).unwrap().limits.max_inflight_bytes,
        charge
    );
}

#[test]
fn input_metric_prefix_defaults_to_vllms_and_takes_a_platforms() {
    assert_eq!(from_yaml("").unwrap().engine.metric_prefix, "vllm:");
    let kserve = from_yaml("input:\n  metric_prefix: \"kserve_vllm:\"\n").unwrap();
    assert_eq!(kserve.engine.metric_prefix, "kserve_vllm:");
    for bad in ["\"\"", "\"kserve vllm:\"", "\"1vllm:\"", "\"vllm-\""] {
        let err = from_yaml(&format!("input:\n  metric_prefix: {bad}\n")).unwrap_err();
        assert!(
            err.to_string().contains("input.metric_prefix"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn input_drop_labels_are_label_names_the_rules_do_not_read() {
    let c = from_yaml("input:\n  drop_labels: [region, prometheus_replica, region]\n").unwrap();
    assert_eq!(c.engine.drop_labels, ["region", "prometheus_replica"]);
    for bad in ["[le]", "[__name__]", "[source]", "[\"bad-name\"]", "[\"\"]"] {
        let err = from_yaml(&format!("input:\n  drop_labels: {bad}\n")).unwrap_err();
        assert!(
            err.to_string().contains("input.drop_labels"),
            "{bad}: {err}"
        );
    }
}

/// docs/CONFIGURATION.md says its sample "shows its default" for every field: parsed, it gives the
/// configuration of no file at all, but for `storage` (whose default is none).
#[test]
fn the_documented_sample_file_is_the_defaults() {
    let doc = include_str!("../../../../docs/CONFIGURATION.md");
    let sample = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a yaml block in docs/CONFIGURATION.md");
    let without_storage: String = sample
        .lines()
        .scan(false, |in_storage, line| {
            if !line.starts_with(' ') {
                *in_storage = line.starts_with("storage:");
            }
            Some((!*in_storage).then_some(line))
        })
        .flatten()
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(without_storage.contains("slos:"), "{without_storage}");
    assert_eq!(
        from_yaml(&without_storage).unwrap(),
        Config::from_args(args(&[])).unwrap()
    );
}
