//! The vLLM 0.33 fixtures (`tests/fixtures/vllm-0.33/`) as remote-write points.

use std::time::{SystemTime, UNIX_EPOCH};

use promtext::{Format, parse};

use crate::rw::Point;

/// Target label `job` the tests add, as Prometheus would.
pub(crate) const JOB: &str = "vllm";
/// Target label `instance` the tests add, as Prometheus would.
pub(crate) const INSTANCE: &str = "vllm-0.test:8000";
/// The fixtures' `model_name`.
pub(crate) const MODEL: &str = "Qwen/Qwen3-8B";

/// One fixture scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scrape {
    /// `t1.prom`: the first scrape.
    T1,
    /// `t2.prom`: the second scrape.
    T2,
    /// `t3-restart.prom`: engine "0" restarted, engine "1" unchanged since t2.
    T3Restart,
}

impl Scrape {
    fn file(self) -> &'static str {
        match self {
            Scrape::T1 => "t1.prom",
            Scrape::T2 => "t2.prom",
            Scrape::T3Restart => "t3-restart.prom",
        }
    }

    /// The fixture file's text.
    pub(crate) fn text(self) -> String {
        let path = format!(
            "{}/tests/fixtures/vllm-0.33/{}",
            env!("CARGO_MANIFEST_DIR"),
            self.file()
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
    }

    /// Every sample of the scrape at `timestamp_ms`, with `job` and `instance` added and the labels
    /// sorted by name (as Prometheus sends them), in file order.
    pub(crate) fn points(self, timestamp_ms: i64) -> Vec<Point> {
        let exposition = parse(&self.text(), Format::Text004).expect("fixture parses");
        exposition
            .samples
            .into_iter()
            .map(|s| {
                let mut labels = s.labels;
                labels.push(("__name__".into(), s.name));
                labels.push(("job".into(), JOB.into()));
                labels.push(("instance".into(), INSTANCE.into()));
                labels.sort();
                Point {
                    labels,
                    value: s.value,
                    timestamp_ms,
                }
            })
            .collect()
    }
}

/// The group labels of a fixture engine, as derived series carry them.
pub(crate) fn group(engine: &str) -> Vec<(String, String)> {
    group_of(MODEL, engine)
}

/// Group labels `{engine, instance, job, model_name}` for any model name, at [`INSTANCE`].
pub(crate) fn group_of(model: &str, engine: &str) -> Vec<(String, String)> {
    group_at(model, engine, INSTANCE)
}

/// Group labels `{engine, instance, job, model_name}` with job [`JOB`] at any `instance`.
pub(crate) fn group_at(model: &str, engine: &str, instance: &str) -> Vec<(String, String)> {
    vec![
        ("engine".into(), engine.into()),
        ("instance".into(), instance.into()),
        ("job".into(), JOB.into()),
        ("model_name".into(), model.into()),
    ]
}

/// Three scrape timestamps 15 s apart, ending a little before now (ms since the epoch).
pub(crate) fn scrape_times() -> [i64; 3] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let t1 = now / 1000 * 1000 - 60_000;
    [t1, t1 + 15_000, t1 + 30_000]
}
