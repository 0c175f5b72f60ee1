//! Simulated vLLM data in a real Prometheus, beside the corrector's output for the same scrapes:
//! the data the dashboard test (`grafana.rs`) and the PromQL-rules test (`promql_rules.rs`) query.
//!
//! Three simulated vLLM servers (profiles 0.33 with speculative decoding and two engines, 0.14
//! with both ITL names, 0.10 with the old name only) are "scraped" every 15 s over the last
//! [`HISTORY_MS`]: each snapshot goes by remote write (RW 1.0) both to a real Prometheus (2.42 or 3.5,
//! `--web.enable-remote-write-receiver`) and to the corrector binary; then the corrector's
//! `/metrics` is read, as Prometheus scrapes it with `honor_labels: true` (its self-metrics get
//! `job="vllm-corrector"` and `instance`), and written to Prometheus with the same timestamp.
//! Prometheus thus holds what the sidecar deployment gives it, without waiting real minutes:
//! the raw `vllm:*` series, the corrected `vllm_corrected_*` families and `vllm_corrector_*`.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sim::{Profile, SimConfig, Simulator, SpecConfig, remote_write};
use test_support::prometheus::Prometheus;
use test_support::tools::{Tool, require};

use crate::harness::Corrector;
use crate::metrics::Snapshot;
use crate::rw::{self, Point};

/// How much history is written before the tests query: ten minutes of dashboard range plus a
/// five-minute rate window.
pub(crate) const HISTORY_MS: i64 = 15 * 60 * 1000;
/// The simulated scrape interval.
pub(crate) const SCRAPE_MS: i64 = 15_000;
/// The namespace of every simulated vLLM pod.
pub(crate) const NAMESPACE: &str = "inference";

/// One query result row: labels (without `__name__` unless the query keeps it) and value.
pub(crate) type Row = (BTreeMap<String, String>, f64);

/// Wall clock in ms since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A simulated vLLM server and the target labels its scrape gets.
struct Target {
    sim: Simulator,
    labels: Vec<(String, String)>,
}

fn target(
    profile: Profile,
    model: &str,
    pod: &str,
    engines: u32,
    spec: bool,
    epoch_ms: i64,
    seed: u64,
) -> Target {
    let cfg = SimConfig {
        profile,
        models: vec![model.to_string()],
        engines_per_model: engines,
        arrival_rate: 3.0,
        output_len: (2, 128),
        max_tokens: 128,
        kv_transfer_prob: if profile == Profile::V0_33 { 0.2 } else { 0.0 },
        spec: spec.then_some(SpecConfig {
            num_speculative_tokens: 3,
            acceptance_prob: 0.7,
            no_draft_fraction: 0.2,
        }),
        seed,
        epoch_unix_ms: epoch_ms,
        ..SimConfig::default()
    };
    let labels = [
        ("job", "vllm"),
        ("namespace", NAMESPACE),
        ("pod", pod),
        ("instance", &format!("{pod}:8000")),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    Target {
        sim: Simulator::new(cfg).expect("simulator config"),
        labels,
    }
}

/// Prometheus fed with simulated data, and the corrector.
pub(crate) struct SimData {
    prometheus: Prometheus,
    /// `http://127.0.0.1:<port>` of Prometheus.
    pub base: String,
    /// The corrector the same scrapes went to.
    pub corrector: Corrector,
    client: reqwest::blocking::Client,
    targets: Vec<Target>,
    /// Timestamp (ms) of the newest step written.
    pub last_step_ms: i64,
}

impl SimData {
    /// Starts the Prometheus `tool` (with `rules` as its only rule file, evaluated every second,
    /// when given) and the corrector, then writes [`HISTORY_MS`] of 15 s scrapes ending at most
    /// 1 s ago. `None` when `tool` is missing and the test opts out ([`require`]).
    pub(crate) fn start(tool: Tool, rules: Option<&str>) -> Option<SimData> {
        Self::start_with(tool, rules, None)
    }

    /// [`SimData::start`] with the corrector's `--config.file` holding `corrector_config` when
    /// given (its `slos:`, say).
    pub(crate) fn start_with(
        tool: Tool,
        rules: Option<&str>,
        corrector_config: Option<&str>,
    ) -> Option<SimData> {
        let binary = require(tool)?;
        let mut config =
            String::from("global:\n  scrape_interval: 15s\n  evaluation_interval: 1s\n");
        if rules.is_some() {
            config.push_str("rule_files:\n  - rules.yml\n");
        }
        let prometheus = Prometheus::builder(&binary, &config)
            .file("rules.yml", rules.unwrap_or_default())
            .start();
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let end = now_ms() - 1_000;
        let start = end - HISTORY_MS;
        let targets = vec![
            target(
                Profile::V0_33,
                "llama-spec",
                "vllm-spec-0",
                2,
                true,
                start,
                1,
            ),
            target(
                Profile::V0_14,
                "llama-014",
                "vllm-014-0",
                1,
                false,
                start,
                2,
            ),
            target(
                Profile::V0_10,
                "llama-010",
                "vllm-010-0",
                1,
                false,
                start,
                3,
            ),
        ];
        let mut data = SimData {
            base: prometheus.base.clone(),
            prometheus,
            corrector: Corrector::start_with_config(corrector_config),
            client,
            targets,
            last_step_ms: start,
        };
        let mut ts = start + SCRAPE_MS;
        while ts <= end {
            data.step(ts);
            ts += SCRAPE_MS;
        }
        Some(data)
    }

    /// Prometheus's log so far, for failure messages.
    pub(crate) fn log_text(&self) -> String {
        self.prometheus.log_text()
    }

    fn post(&self, url: &str, body: Vec<u8>) {
        let response = self
            .client
            .post(url)
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(body)
            .send()
            .unwrap_or_else(|e| panic!("remote write to {url}: {e}"));
        let status = response.status();
        let text = response.text().unwrap_or_default();
        assert!(
            status.is_success(),
            "remote write to {url} answered {status}: {text}\n{}",
            self.log_text()
        );
    }

    /// One scrape of every target at `ts_ms`: raw series to Prometheus and the corrector, then
    /// the corrector's `/metrics` to Prometheus, all with timestamp `ts_ms`.
    pub(crate) fn step(&mut self, ts_ms: i64) {
        let corrector_url = format!("{}/api/v1/write", self.corrector.base);
        let prometheus_url = format!("{}/api/v1/write", self.base);
        let mut bodies = Vec::new();
        for t in &mut self.targets {
            t.sim
                .advance_to((ts_ms - t.sim.config().epoch_unix_ms) as f64 / 1000.0);
            let snapshot = t.sim.snapshot();
            assert_eq!(
                snapshot.timestamp_ms, ts_ms,
                "simulated time is the scrape time"
            );
            for request in remote_write::write_requests(&snapshot, &t.labels, 2_000) {
                bodies.push(remote_write::encode(&request));
            }
        }
        for body in bodies {
            self.post(&corrector_url, body.clone());
            self.post(&prometheus_url, body);
        }
        // The corrector's /metrics, as a `honor_labels: true` scrape stores it.
        let scraped = Snapshot::parse_text(&self.corrector.metrics_text());
        let own = [
            ("job".to_string(), "vllm-corrector".to_string()),
            ("instance".to_string(), self.corrector.address.clone()),
        ];
        let points: Vec<Point> = scraped
            .samples
            .iter()
            .map(|s| {
                let mut labels = s.labels.clone();
                for (n, v) in &own {
                    if !labels.iter().any(|(have, _)| have == n) {
                        labels.push((n.clone(), v.clone()));
                    }
                }
                labels.push(("__name__".to_string(), s.name.clone()));
                labels.sort();
                Point {
                    labels,
                    value: s.value,
                    timestamp_ms: ts_ms,
                }
            })
            .collect();
        self.post(&prometheus_url, rw::body(&points));
        self.last_step_ms = ts_ms;
    }

    fn get_json(&self, path: &str, params: &[(&str, String)]) -> Result<serde_json::Value, String> {
        let mut response = self
            .client
            .get(format!("{}{path}", self.base))
            .query(params)
            .send()
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        response
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if json["status"] != "success" {
            return Err(format!("{}: {}", json["errorType"], json["error"]));
        }
        Ok(json["data"].clone())
    }

    /// An instant query at `time_s` (Unix seconds). Errors: the query error Prometheus returned.
    pub(crate) fn query(&self, expr: &str, time_s: f64) -> Result<Vec<Row>, String> {
        let data = self.get_json(
            "/api/v1/query",
            &[
                ("query", expr.to_string()),
                ("time", format!("{time_s:.3}")),
            ],
        )?;
        rows(&data, false)
    }

    /// A range query over `[start_s, end_s]` every `step_s`; one row per series, holding its
    /// newest value. Errors: the query error Prometheus returned.
    pub(crate) fn query_range(
        &self,
        expr: &str,
        start_s: f64,
        end_s: f64,
        step_s: f64,
    ) -> Result<Vec<Row>, String> {
        let params = [
            ("query", expr.to_string()),
            ("start", format!("{start_s:.3}")),
            ("end", format!("{end_s:.3}")),
            ("step", format!("{step_s}")),
        ];
        let data = self.get_json("/api/v1/query_range", &params)?;
        rows(&data, true)
    }

    /// The values of `label` on the series `selector` matches (Grafana's `label_values`).
    pub(crate) fn label_values(
        &self,
        label: &str,
        selector: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let params: Vec<(&str, String)> = selector
            .map(|s| ("match[]", s.to_string()))
            .into_iter()
            .collect();
        let data = self.get_json(&format!("/api/v1/label/{label}/values"), &params)?;
        Ok(data
            .as_array()
            .ok_or("label values are not an array")?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect())
    }
}

fn rows(data: &serde_json::Value, range: bool) -> Result<Vec<Row>, String> {
    let value_of = |v: &serde_json::Value| -> Result<f64, String> {
        let text = v[1].as_str().ok_or("value is not a string")?;
        text.parse::<f64>().map_err(|e| format!("{text}: {e}"))
    };
    if data["resultType"] == "scalar" {
        return Ok(vec![(BTreeMap::new(), value_of(&data["result"])?)]);
    }
    let mut out = Vec::new();
    for r in data["result"].as_array().ok_or("no result array")? {
        let labels = r["metric"]
            .as_object()
            .ok_or("metric is not an object")?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let value = if range {
            let values = r["values"].as_array().ok_or("no values")?;
            value_of(values.last().ok_or("a range series without values")?)?
        } else {
            value_of(&r["value"])?
        };
        out.push((labels, value));
    }
    Ok(out)
}
