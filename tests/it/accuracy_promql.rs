//! Accuracy suite: a small client of Prometheus's HTTP query API (`/api/v1/query`), exact to the
//! millisecond and to the bit.
//!
//! Source: Prometheus "HTTP API" docs. Sample timestamps come back as float Unix seconds with
//! millisecond precision (`1717000000.123`), values as strings printed by Go's
//! `strconv.FormatFloat(v, 'f', -1, 64)`, which round-trip to the same `f64`. An instant query of a
//! range selector (`x[30s]`) returns the raw stored samples with their own timestamps, no
//! interpolation and no extrapolation; stale markers are not returned. A native histogram's samples
//! come back under `histograms`, each `[time, {"count": "…", "sum": "…", "buckets": […]}]`, the
//! count and sum printed as the float values are.

use std::collections::BTreeMap;
use std::time::Duration;

/// A series' labels, `__name__` included.
pub(crate) type Labels = BTreeMap<String, String>;

/// One series of a range-vector answer: its labels and raw samples `(timestamp ms, value)`,
/// oldest first.
#[derive(Debug, Clone)]
pub(crate) struct RangeSeries {
    /// Labels, `__name__` included.
    pub labels: Labels,
    /// `(Unix timestamp in ms, value)` as stored by Prometheus.
    pub samples: Vec<(i64, f64)>,
}

impl RangeSeries {
    /// The label `name`, or `""` (PromQL's view of a missing label).
    pub(crate) fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// A client of one Prometheus server's query API.
#[derive(Debug, Clone)]
pub(crate) struct PromApi {
    base: String,
    client: reqwest::blocking::Client,
}

/// Unix milliseconds as the `time=` parameter (float seconds, exactly the same instant).
pub(crate) fn time_param(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Float Unix seconds from the API as whole milliseconds (the API prints ms precision).
fn json_time_ms(v: &serde_json::Value) -> Result<i64, String> {
    let s = v
        .as_f64()
        .ok_or_else(|| format!("timestamp {v} is not a number"))?;
    Ok((s * 1000.0).round() as i64)
}

fn json_value(v: &serde_json::Value) -> Result<f64, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("value {v} is not a string"))?;
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s.parse::<f64>().map_err(|e| format!("value {s:?}: {e}")),
    }
}

fn json_labels(v: &serde_json::Value) -> Result<Labels, String> {
    let object = v
        .as_object()
        .ok_or_else(|| format!("metric {v} is not an object"))?;
    Ok(object
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect())
}

impl PromApi {
    /// A client of the Prometheus at `base` (`http://127.0.0.1:9090`).
    pub(crate) fn new(base: &str) -> PromApi {
        PromApi {
            base: base.to_string(),
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .expect("build HTTP client"),
        }
    }

    /// Runs `expr` as an instant query at `at_ms`; returns `data` of a successful answer.
    /// Errors: transport, non-JSON, or `status` other than `success` (the message holds the body).
    pub(crate) fn query(&self, expr: &str, at_ms: i64) -> Result<serde_json::Value, String> {
        let response = self
            .client
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", expr), ("time", &time_param(at_ms))])
            .send()
            .map_err(|e| format!("query {expr:?}: {e}"))?;
        let text = response.text().map_err(|e| e.to_string())?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("query {expr:?}: {e}: {text}"))?;
        if json["status"] != "success" {
            return Err(format!("query {expr:?} failed: {text}"));
        }
        Ok(json["data"].clone())
    }

    /// An instant vector: `(labels, value)` per series of `expr` at `at_ms`.
    /// Errors: as [`PromApi::query`], or when the result is not a vector.
    pub(crate) fn vector(&self, expr: &str, at_ms: i64) -> Result<Vec<(Labels, f64)>, String> {
        let data = self.query(expr, at_ms)?;
        if data["resultType"] != "vector" {
            return Err(format!("{expr:?} is not a vector: {data}"));
        }
        let mut out = Vec::new();
        for r in data["result"].as_array().into_iter().flatten() {
            out.push((json_labels(&r["metric"])?, json_value(&r["value"][1])?));
        }
        Ok(out)
    }

    /// The raw samples of `selector` in `(at_ms − range_ms, at_ms]`, per series. A native
    /// histogram series `x` comes back as the two series `x_sum` and `x_count` it holds (what a
    /// classic histogram's `_sum` and `_count` series would hold).
    /// Errors: as [`PromApi::query`], or when the result is not a matrix.
    pub(crate) fn matrix(
        &self,
        selector: &str,
        range_ms: i64,
        at_ms: i64,
    ) -> Result<Vec<RangeSeries>, String> {
        let expr = format!("{selector}[{range_ms}ms]");
        let data = self.query(&expr, at_ms)?;
        if data["resultType"] != "matrix" {
            return Err(format!("{expr:?} is not a matrix: {data}"));
        }
        let mut out = Vec::new();
        for r in data["result"].as_array().into_iter().flatten() {
            let labels = json_labels(&r["metric"])?;
            if let Some(histograms) = r["histograms"].as_array() {
                for part in ["sum", "count"] {
                    let mut samples = Vec::new();
                    for pair in histograms {
                        samples.push((json_time_ms(&pair[0])?, json_value(&pair[1][part])?));
                    }
                    let mut labels = labels.clone();
                    let name = labels.get("__name__").cloned().unwrap_or_default();
                    labels.insert("__name__".to_string(), format!("{name}_{part}"));
                    out.push(RangeSeries { labels, samples });
                }
                continue;
            }
            let mut samples = Vec::new();
            for pair in r["values"].as_array().into_iter().flatten() {
                samples.push((json_time_ms(&pair[0])?, json_value(&pair[1])?));
            }
            out.push(RangeSeries { labels, samples });
        }
        Ok(out)
    }
}

/// A PromQL string literal for `value` (double quotes; `\` and `"` escaped).
pub(crate) fn quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn time_param_prints_the_same_millisecond() {
    // 1717000000123 ms is 1717000000.123 s; 5 ms is 0.005 s (zero-padded).
    assert_eq!(time_param(1_717_000_000_123), "1717000000.123");
    assert_eq!(time_param(1_717_000_000_005), "1717000000.005");
    assert_eq!(
        json_time_ms(&serde_json::json!(1_717_000_000.123)).unwrap(),
        1_717_000_000_123
    );
}
