//! The fuzz seed corpus (`fuzz/seeds/<target>/`) on stable Rust: every seed replayed through the
//! fuzz targets' own code ([`service::fuzz`]), then a seeded, bounded mutation of each, so
//! CI catches a decoder or ingest panic without nightly or cargo-fuzz. `write_seed_corpus`
//! (ignored) regenerates the seeds from the encoders and the vLLM 0.33 fixtures.

use std::path::PathBuf;

use prost::Message;
use protocol::encode::{self, SeriesSpec};
use protocol::prompb::v2;
use protocol::{MetadataRef, MetricType, Sample, snappy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use service::fuzz;

use crate::fixture::Scrape;
use crate::rw2_equivalence::{rw1_native, rw2_classic, rw2_native};

/// The fuzz targets, as named in `fuzz/Cargo.toml`.
const TARGETS: [&str; 3] = ["rw1", "rw2", "exposition"];

/// A fixed scrape time (2025-06-15), so regenerated seeds are byte-identical.
const T: i64 = 1_750_000_000_000;

fn seed_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target)
}

/// Every seed of `target`, by file name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = seed_dir(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    out
}

fn run(target: &str, data: &[u8]) {
    match target {
        "rw1" => fuzz::rw1(data),
        "rw2" => fuzz::rw2(data),
        _ => fuzz::exposition(data),
    }
}

#[test]
fn fuzz_seeds_replay_and_decode() {
    for target in TARGETS {
        let seeds = seeds(target);
        assert!(seeds.len() >= 3, "{target}: {} seeds", seeds.len());
        for (name, data) in &seeds {
            // A seed that does not even decode would only exercise the error paths.
            match target {
                "exposition" => {
                    let text = std::str::from_utf8(data).unwrap();
                    let format = if name.ends_with(".om") {
                        promtext::Format::OpenMetrics
                    } else {
                        promtext::Format::Text004
                    };
                    promtext::parse(text, format)
                        .unwrap_or_else(|e| panic!("{target}/{name}: {e:?}"));
                }
                rw => {
                    let mut raw = Vec::new();
                    snappy::decompress_into(data, fuzz::MAX_DECODED_BYTES, &mut raw).unwrap();
                    let decoded = if rw == "rw1" {
                        protocol::v1::decode(&raw).map(|_| ())
                    } else {
                        protocol::v2::decode(&raw).map(|_| ())
                    };
                    decoded.unwrap_or_else(|e| panic!("{target}/{name}: {e}"));
                }
            }
            run(target, data);
        }
    }
}

/// One random edit: flip bytes, overwrite with a boundary value, insert, delete, duplicate a
/// range, or truncate.
fn mutate(rng: &mut StdRng, data: &mut Vec<u8>) {
    if data.is_empty() {
        data.push(rng.random());
        return;
    }
    let i = rng.random_range(0..data.len());
    match rng.random_range(0..6) {
        0 => data[i] ^= 1 << rng.random_range(0..8),
        1 => data[i] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)],
        2 => {
            let bytes: Vec<u8> = (0..rng.random_range(1..9)).map(|_| rng.random()).collect();
            data.splice(i..i, bytes);
        }
        3 => {
            let end = (i + rng.random_range(1..16)).min(data.len());
            data.drain(i..end);
        }
        4 => {
            let end = (i + rng.random_range(1..32)).min(data.len());
            let copy = data[i..end].to_vec();
            let at = rng.random_range(0..=data.len());
            data.splice(at..at, copy);
        }
        _ => data.truncate(i),
    }
}

#[test]
fn fuzz_seeds_mutated_never_panic() {
    let mut rng = StdRng::seed_from_u64(0xf022);
    for target in TARGETS {
        for (_, seed) in seeds(target) {
            // The protobuf under the snappy layer, so mutations reach the decoders, not only the
            // snappy checks.
            let inner = if target == "exposition" {
                seed.clone()
            } else {
                let mut raw = Vec::new();
                snappy::decompress_into(&seed, fuzz::MAX_DECODED_BYTES, &mut raw).unwrap();
                raw
            };
            for _ in 0..150 {
                let mut data = inner.clone();
                for _ in 0..rng.random_range(1..5) {
                    mutate(&mut rng, &mut data);
                }
                match target {
                    "rw1" => fuzz::rw1_decoded(&data),
                    "rw2" => fuzz::rw2_decoded(&data),
                    _ => fuzz::exposition(&data),
                }
            }
            for _ in 0..30 {
                let mut data = seed.clone();
                mutate(&mut rng, &mut data);
                run(target, &data);
            }
        }
    }
}

/// The `engine` target's seeds (`fuzz/seeds/engine/`): programs of scrapes, layout changes,
/// counter resets, staleness markers and idle sweeps. Each must check real outputs (a seed that
/// produced none would test nothing), and 200 mutations of each must keep every invariant.
#[test]
fn engine_fuzz_seeds_replay_and_mutated_keep_the_engine_invariants() {
    let seeds = seeds("engine");
    assert!(seeds.len() >= 4, "{} engine seeds", seeds.len());
    let mut rng = StdRng::seed_from_u64(0xe9e);
    for (name, seed) in &seeds {
        let checked = fuzz::engine(seed);
        assert!(
            checked > 20,
            "engine/{name}: only {checked} derived values checked"
        );
        for _ in 0..200 {
            let mut data = seed.clone();
            for _ in 0..rng.random_range(1..5) {
                mutate(&mut rng, &mut data);
            }
            fuzz::engine(&data);
        }
    }
}

use encode::series_spec as spec;

/// The lines of a fixture that belong to a few families (a histogram with `le="1.0"`, a counter
/// with `_created`, a counter by `source`): the formats' features in a few KB, since libFuzzer's
/// speed falls with input size.
fn excerpt(text: &str) -> Vec<u8> {
    const FAMILIES: [&str; 3] = [
        "vllm:request_generation_tokens",
        "vllm:generation_tokens",
        "vllm:prompt_tokens_by_source",
    ];
    let mut out = String::new();
    for line in text.lines() {
        let name = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
            .unwrap_or(line);
        let name = name.split(['{', ' ']).next().unwrap_or("");
        let family = ["_bucket", "_sum", "_count", "_total", "_created"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        if FAMILIES.contains(&family) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.into_bytes()
}

/// Regenerates `fuzz/seeds/`: `cargo test --test it write_seed_corpus -- --ignored`.
#[test]
#[ignore = "writes fuzz/seeds; run by hand after changing the encoders or fixtures"]
fn write_seed_corpus() {
    let t1 = Scrape::T1.points(T);
    let t2 = Scrape::T2.points(T + 15_000);
    let classic: Vec<SeriesSpec> = t1
        .iter()
        .map(|p| {
            (
                p.labels.clone(),
                vec![Sample {
                    value: p.value,
                    timestamp_ms: p.timestamp_ms,
                }],
            )
        })
        .collect();
    let tokens = [
        ("__name__", "vllm:generation_tokens_total"),
        ("engine", "0"),
        ("model_name", "m"),
    ];
    // Out of order and duplicated, a stale marker, an unsorted series with an empty value.
    let small = [
        spec(&tokens, &[(2.0, T + 15_000), (1.0, T), (2.0, T + 15_000)]),
        spec(
            &[
                ("model_name", "m"),
                ("pod", ""),
                ("__name__", "vllm:num_requests_running"),
            ],
            &[(f64::from_bits(0x7ff0_0000_0000_0002), T)],
        ),
    ];
    let metadata = [MetadataRef {
        metric_type: MetricType::Histogram,
        family_name: "vllm:inter_token_latency_seconds",
        help: "Histogram of inter-token latency in seconds.",
        unit: "seconds",
    }];
    let mut bad_refs = encode::request_v2(&small);
    bad_refs.timeseries[0].labels_refs.push(99);
    let om = "# TYPE vllm:generation_tokens counter\n# HELP vllm:generation_tokens Generation tokens.\n\
              vllm:generation_tokens_total{engine=\"0\"} 1240.0 1750000000.000\n\
              vllm:generation_tokens_created{engine=\"0\"} 1.75e+09\n\
              # TYPE vllm:inter_token_latency_seconds histogram\n\
              vllm:inter_token_latency_seconds_bucket{le=\"0.05\"} 3 # {trace_id=\"a\"} 0.04 1750000000.0\n\
              vllm:inter_token_latency_seconds_bucket{le=\"+Inf\"} 4\n\
              vllm:inter_token_latency_seconds_sum 0.2\nvllm:inter_token_latency_seconds_count 4\n# EOF\n";
    let files: [(&str, &str, Vec<u8>); 11] = [
        (
            "rw1",
            "fixture_t1_classic.bin",
            encode::encode_v1(&classic, &[]),
        ),
        ("rw1", "fixture_t2_native.bin", rw1_native(&t2, T + 15_000)),
        (
            "rw1",
            "small_edge_cases.bin",
            encode::encode_v1(&small, &[]),
        ),
        (
            "rw1",
            "metadata_only.bin",
            encode::encode_v1(&[], &metadata),
        ),
        ("rw2", "fixture_t1_classic.bin", rw2_classic(&t1)),
        ("rw2", "fixture_t2_native.bin", rw2_native(&t2, T + 15_000)),
        ("rw2", "small_edge_cases.bin", encode::encode_v2(&small)),
        (
            "rw2",
            "bad_refs.bin",
            encode::compress(&v2::Request::encode_to_vec(&bad_refs)),
        ),
        ("exposition", "t1.prom", excerpt(&Scrape::T1.text())),
        (
            "exposition",
            "t3-restart.prom",
            excerpt(&Scrape::T3Restart.text()),
        ),
        ("exposition", "small.om", om.as_bytes().to_vec()),
    ];
    for (target, name, bytes) in files {
        let dir = seed_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// A program for the `goodput` target: mostly arrivals, clock steps and scrapes, with now and
/// then a lost series, a stale series, a vLLM restart or a corrector restart.
fn goodput_program(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut out = vec![rng.random()];
    while out.len() < len {
        let op: u8 = match rng.random_range(0..100) {
            0..45 => rng.random_range(0..6),
            45..75 => rng.random_range(6..10),
            75..95 => rng.random_range(10..13),
            95..97 => 13,
            _ => 14,
        };
        out.push(op);
        out.extend((0..3).map(|_| rng.random::<u8>()));
    }
    out
}

/// The `goodput` target's seeds (`fuzz/seeds/goodput/`): request streams scraped into an engine
/// counting three SLOs. Each must check real bounds, and mutations of each must keep the true
/// goodput within them.
#[test]
fn goodput_fuzz_seeds_replay_and_mutated_keep_the_truth_within_the_bounds() {
    let seeds = seeds("goodput");
    assert!(seeds.len() >= 3, "{} goodput seeds", seeds.len());
    let mut rng = StdRng::seed_from_u64(0x900d);
    for (name, seed) in &seeds {
        let checked = run_goodput(seed);
        assert!(
            checked > 50,
            "goodput/{name}: only {checked} bounds checked"
        );
        for _ in 0..40 {
            let mut data = seed.clone();
            for _ in 0..rng.random_range(1..5) {
                mutate(&mut rng, &mut data);
            }
            run_goodput(&data);
        }
    }
    for _ in 0..25 {
        let len = rng.random_range(200..3000);
        run_goodput(&goodput_program(&mut rng, len));
    }
}

/// [`fuzz::goodput`], writing the program that failed to `target/goodput-failure.bin` (replay
/// it with `GOODPUT_FUZZ_TRACE=1` to see its steps).
fn run_goodput(data: &[u8]) -> usize {
    match std::panic::catch_unwind(|| fuzz::goodput(data)) {
        Ok(checked) => checked,
        Err(panic) => {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/goodput-failure.bin");
            let _ = std::fs::write(&path, data);
            std::panic::resume_unwind(panic)
        }
    }
}

/// Many more random programs for the `goodput` target than CI runs, for a stable-Rust soak:
/// `GOODPUT_PROGRAMS=5000 cargo test --release --test it goodput_fuzz_soak -- --ignored`
/// (`GOODPUT_FIRST_SEED=N` starts at seed N instead of 0). A
/// failing program is kept in `target/goodput-failure.bin`; `GOODPUT_REPLAY=FILE` runs that one
/// program alone (with `GOODPUT_FUZZ_TRACE=1`, step by step).
#[test]
#[ignore]
fn goodput_fuzz_soak() {
    if let Some(path) = std::env::var_os("GOODPUT_REPLAY") {
        let data = std::fs::read(&path).expect("GOODPUT_REPLAY names a readable file");
        eprintln!("{} bounds checked", fuzz::goodput(&data));
        return;
    }
    let n: u64 = std::env::var("GOODPUT_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let first: u64 = std::env::var("GOODPUT_FIRST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut checked = 0;
    for seed in first..first.saturating_add(n) {
        let mut rng = StdRng::seed_from_u64(seed);
        let len = rng.random_range(200..6000);
        checked += run_goodput(&goodput_program(&mut rng, len));
    }
    eprintln!("{n} programs, {checked} bounds checked");
}
