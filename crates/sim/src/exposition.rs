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

use std::fmt::Write as _;

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
                let _ = writeln!(out, " {}", float_to_go_string(s.value));
            }
        }
        out
    }
}

/// Python's `repr(float)`: shortest round-trip digits; fixed notation for decimal exponents in
/// `[-4, 16)` with at least one fractional digit (`7.0`), else `d[.ddd]e±XX` (`1e-05`, `1e+16`).
pub(crate) fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{x:e}");
    let (mant, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (sign, mant) = mant.strip_prefix('-').map_or(("", mant), |m| ("-", m));
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if (point as usize) >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

/// `prometheus_client.utils.floatToGoString`: `+Inf`, `-Inf`, `NaN`, else Python `repr`, except
/// that a positive value whose repr has its `.` after position 6 becomes Go's exponent form
/// (`1000000.0` → `1e+06`, `1500000.0` → `1.5e+06`).
pub fn float_to_go_string(d: f64) -> String {
    if d == f64::INFINITY {
        return "+Inf".into();
    }
    if d == f64::NEG_INFINITY {
        return "-Inf".into();
    }
    if d.is_nan() {
        return "NaN".into();
    }
    let s = python_float_repr(d);
    match s.find('.') {
        Some(dot) if d > 0.0 && dot > 6 => {
            let joined = format!("{}.{}{}", &s[..1], &s[1..dot], &s[dot + 1..]);
            let mantissa = joined.trim_end_matches(['0', '.']);
            format!("{mantissa}e+{:02}", dot - 1)
        }
        _ => s,
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
                                labels: labels(base, extra, Some(float_to_go_string(le))),
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
