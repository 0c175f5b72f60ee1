//! The exposition: a [`Snapshot`] of every sample, and its text rendering exactly as Python
//! `prometheus_client` (0.2x, `generate_latest`) prints the Prometheus text format 0.0.4.
//!
//! Facts reproduced (from `prometheus_client/exposition.py` and `utils.py`):
//! * a counter family `X` is printed as `# HELP X_total`, `# TYPE X_total counter`, `X_total`;
//! * each counter and histogram child also has a `X_created` sample (Unix seconds), printed
//!   after the family under its own `# HELP X_created` / `# TYPE X_created gauge`;
//! * histogram children print their cumulative `_bucket{le}` lines, then `_count`, then `_sum`;
//! * labels are sorted by name inside the braces;
//! * values and `le` go through `floatToGoString`: Python `repr` (`7.0`, `0.025`, `1e-05`),
//!   switched to Go's exponent form when the integer part has more than 6 digits (`1e+06`).
//!   That is [`protocol::float::write_le`] for every value at or above -1e6, which every value
//!   here is (counts, seconds, tokens, ratios, Unix times).

use std::fmt::Write as _;

use protocol::float;

use super::metrics::{ChildOrder, Kind, MetricsRegistry, Value};

/// One sample of a snapshot: name, sorted labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotSample {
    /// Metric name (`__name__`), e.g. `vllm:inter_token_latency_seconds_bucket`.
    pub name: String,
    /// Labels other than `__name__`, sorted by name.
    pub labels: Vec<(String, String)>,
    /// Value (a count, tokens, seconds or a Unix time for `_created`).
    pub value: f64,
}

/// The Prometheus type printed on a family's `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExposedType {
    /// `counter`
    Counter,
    /// `gauge`
    Gauge,
    /// `histogram`
    Histogram,
}

impl ExposedType {
    /// The `# TYPE` keyword.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExposedType::Counter => "counter",
            ExposedType::Gauge => "gauge",
            ExposedType::Histogram => "histogram",
        }
    }
}

/// One printed family (a `# HELP`/`# TYPE` block). `_created` samples form their own gauge
/// family, as `prometheus_client` prints them.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotFamily {
    /// Name on the `# HELP`/`# TYPE` lines (`vllm:X_total` for counters, `vllm:X_created`).
    pub name: String,
    /// Type on the `# TYPE` line.
    pub exposed_type: ExposedType,
    /// Help text.
    pub(crate) help: String,
    /// Samples in printing order.
    pub samples: Vec<SnapshotSample>,
}

/// Every sample the simulator exposes at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The instant, Unix milliseconds (remote write uses it as the sample timestamp).
    pub timestamp_ms: i64,
    /// Families in printing order.
    pub families: Vec<SnapshotFamily>,
}

impl Snapshot {
    /// All samples, flattened in printing order.
    pub fn samples(&self) -> impl Iterator<Item = &SnapshotSample> {
        self.families.iter().flat_map(|f| f.samples.iter())
    }

    /// The value of the sample with exactly this name and these labels (any order), if any.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut want: Vec<(&str, &str)> = labels.to_vec();
        want.sort();
        self.samples()
            .find(|s| {
                s.name == name
                    && s.labels.len() == want.len()
                    && s.labels
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
            })
            .map(|s| s.value)
    }

    /// The text format 0.0.4 body, byte for byte as `prometheus_client.generate_latest`.
    pub(crate) fn render_text(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let help = f.help.replace('\\', r"\\").replace('\n', r"\n");
            let _ = writeln!(out, "# HELP {} {}", f.name, help);
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.exposed_type.as_str());
            for s in &f.samples {
                out.push_str(&s.name);
                if !s.labels.is_empty() {
                    out.push('{');
                    for (i, (k, v)) in s.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let v = v
                            .replace('\\', r"\\")
                            .replace('\n', r"\n")
                            .replace('"', "\\\"");
                        let _ = write!(out, "{k}=\"{v}\"");
                    }
                    out.push('}');
                }
                out.push(' ');
                float::write_le(&mut out, s.value);
                out.push('\n');
            }
        }
        out
    }
}

/// One child of a family: (global engine index, child index, extra label).
type Child<'a> = (usize, usize, Option<(&'a str, &'a str)>);

fn labels(
    base: &(String, String),
    extra: Option<(&str, &str)>,
    le: Option<String>,
) -> Vec<(String, String)> {
    let mut l = vec![
        ("engine".to_string(), base.1.clone()),
        ("model_name".to_string(), base.0.clone()),
    ];
    if let Some((k, v)) = extra {
        l.push((k.to_string(), v.to_string()));
    }
    if let Some(le) = le {
        l.push(("le".to_string(), le));
    }
    l.sort();
    l
}

impl MetricsRegistry {
    /// The snapshot at `timestamp_ms`; `created_s` is every child's `_created` value (Unix s).
    pub(crate) fn snapshot(&self, timestamp_ms: i64, created_s: f64) -> Snapshot {
        let mut families = Vec::new();
        for (fi, spec) in self.specs.iter().enumerate() {
            // Children in prometheus_client creation order: (engine, child index, extra label).
            let mut children: Vec<Child<'_>> = Vec::new();
            let engines = 0..self.engine_labels.len();
            match &spec.children {
                ChildOrder::Single => children.extend(engines.map(|e| (e, 0, None))),
                ChildOrder::ValueMajor(name, vals) => {
                    for (c, v) in vals.iter().enumerate() {
                        children.extend(engines.clone().map(|e| (e, c, Some((*name, v.as_str())))));
                    }
                }
                ChildOrder::EngineMajor(name, vals) => {
                    for e in engines {
                        children.extend(
                            vals.iter()
                                .enumerate()
                                .map(|(c, v)| (e, c, Some((*name, v.as_str())))),
                        );
                    }
                }
            }
            let (name, exposed_type) = match spec.kind {
                Kind::Counter => (format!("{}_total", spec.name), ExposedType::Counter),
                Kind::Gauge => (spec.name.to_string(), ExposedType::Gauge),
                Kind::Histogram => (spec.name.to_string(), ExposedType::Histogram),
            };
            let mut samples = Vec::new();
            let mut created = Vec::new();
            for (e, c, extra) in children {
                let base = &self.engine_labels[e];
                match &self.values[e][fi][c] {
                    Value::Scalar(x) => samples.push(SnapshotSample {
                        name: name.clone(),
                        labels: labels(base, extra, None),
                        value: *x,
                    }),
                    Value::Hist(h) => {
                        let mut cum = 0u64;
                        for (i, n) in h.counts.iter().enumerate() {
                            cum += n;
                            let le = spec.bounds.get(i).copied().unwrap_or(f64::INFINITY);
                            samples.push(SnapshotSample {
                                name: format!("{}_bucket", spec.name),
                                labels: labels(base, extra, Some(float::format_le(le))),
                                value: cum as f64,
                            });
                        }
                        let l = labels(base, extra, None);
                        let count = SnapshotSample {
                            name: format!("{}_count", spec.name),
                            labels: l.clone(),
                            value: cum as f64,
                        };
                        samples.push(count);
                        samples.push(SnapshotSample {
                            name: format!("{}_sum", spec.name),
                            labels: l,
                            value: h.sum,
                        });
                    }
                }
                if spec.kind != Kind::Gauge {
                    let name = format!("{}_created", spec.name);
                    created.push(SnapshotSample {
                        name,
                        labels: labels(base, extra, None),
                        value: created_s,
                    });
                }
            }
            families.push(SnapshotFamily {
                name,
                exposed_type,
                help: spec.help.to_string(),
                samples,
            });
            if !created.is_empty() {
                families.push(SnapshotFamily {
                    name: format!("{}_created", spec.name),
                    exposed_type: ExposedType::Gauge,
                    help: spec.help.to_string(),
                    samples: created,
                });
            }
        }
        Snapshot {
            timestamp_ms,
            families,
        }
    }
}
