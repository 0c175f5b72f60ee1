//! Tests of [`super`]: byte counts with units, alone and through `--config.file`.

use super::*;
use crate::config::{Config, FileConfig};
use clap::Parser;
use std::path::Path;

#[test]
fn byte_counts_take_iec_and_si_units_and_plain_integers() {
    let cases: [(&str, usize); 9] = [
        ("402653184", 402_653_184),
        ("384MiB", 384 * 1024 * 1024),
        ("64KiB", 64 * 1024),
        ("8 MiB", 8 * 1024 * 1024),
        ("512Mi", 512 * 1024 * 1024),
        ("1GB", 1_000_000_000),
        ("1G", 1_000_000_000),
        ("1.5GiB", 3 * 512 * 1024 * 1024),
        ("100kb", 100_000),
    ];
    for (text, bytes) in cases {
        assert_eq!(parse(text), Ok(bytes), "{text}");
    }
}

#[test]
fn a_bad_byte_count_says_what_is_wrong_and_the_accepted_forms() {
    for text in ["512XB", "MiB", "-1", "12 parsecs", ""] {
        let error = parse(text).unwrap_err();
        assert!(
            error.starts_with(&format!("{text:?} is not a byte count: ")),
            "{error}"
        );
        assert!(error.ends_with(ACCEPTED), "{error}");
    }
    assert_eq!(
        parse("20000000EiB"),
        Err("\"20000000EiB\" is too large".to_owned())
    );
}

fn from_yaml(text: &str) -> Result<Config, String> {
    let args = crate::config::Args::parse_from(["vllm-corrector"]);
    FileConfig::from_yaml(text, Path::new("test.yaml"))
        .and_then(|file| Config::from_parts(args, file))
        .map_err(|e| e.to_string())
}

#[test]
fn the_limits_take_byte_counts_with_units_in_the_configuration_file() {
    let c = from_yaml(
        "limits:\n  max_memory_bytes: 512MiB\n  max_inflight_bytes: 128MiB\n  \
         max_body_bytes: 4MiB\n  max_decoded_bytes: 8388608\n",
    )
    .unwrap();
    assert_eq!(c.limits.max_memory_bytes, 536_870_912);
    assert_eq!(c.limits.max_inflight_bytes, 134_217_728);
    assert_eq!(c.limits.max_body_bytes, 4_194_304);
    assert_eq!(c.limits.max_decoded_bytes, 8_388_608);
    // The engine's share follows: 512 − 128 − 64 MiB reserved = 320 MiB.
    assert_eq!(c.engine.max_state_bytes, 320 * 1024 * 1024);
}

#[test]
fn a_bad_byte_count_in_the_file_names_the_line_the_field_and_the_accepted_forms() {
    let error = from_yaml("limits:\n  max_memory_bytes: 512XB\n").unwrap_err();
    assert!(
        error.starts_with(
            "--config.file test.yaml: line 2, column 21: limits.max_memory_bytes: \"512XB\" is not a byte count: a byte count is an integer"
        ),
        "{error}"
    );
    let error = from_yaml("limits:\n  max_body_bytes: -5\n").unwrap_err();
    assert!(
        error.contains("limits.max_body_bytes: -5 is negative: a byte count is"),
        "{error}"
    );
    let error = from_yaml("limits:\n  max_body_bytes: 1.5\n").unwrap_err();
    assert!(
        error.contains("limits.max_body_bytes: 1.5 is not a whole number of bytes"),
        "{error}"
    );
}
