//! The `vllm-corrector` binary under test, started through the one launcher of
//! `crates/test-support` ([`test_support::corrector`]), with the remote-write and `/metrics`
//! helpers of these tests on top ([`Corrector`]).

use std::ops::{Deref, DerefMut};

use test_support::corrector::CorrectorBuilder;
pub(crate) use test_support::process::{TempDir, free_address, free_port};

use crate::rw::{self, Point};

/// The binary under test.
pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_vllm-corrector");

/// A builder for the binary under test ([`test_support::corrector::Corrector::builder`]).
pub(crate) fn corrector() -> CorrectorBuilder {
    test_support::corrector::Corrector::builder(BINARY)
}

/// A running corrector; killed on drop. Its log goes to a file that failures print.
pub(crate) struct Corrector(test_support::corrector::Corrector);

/// The `engine:` line of [`Corrector::start_unsettled`].
pub(crate) const UNSETTLED: &str = "engine:\n  settle_scrapes: 0\n";

impl Deref for Corrector {
    type Target = test_support::corrector::Corrector;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Corrector {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl From<test_support::corrector::Corrector> for Corrector {
    fn from(started: test_support::corrector::Corrector) -> Corrector {
        Corrector(started)
    }
}

impl Corrector {
    /// Starts the binary with embedded defaults.
    pub(crate) fn start() -> Corrector {
        corrector().start().into()
    }

    /// Starts the binary with the defaults but `engine.settle_scrapes: 0`, for tests that check
    /// what the first one or two hand-made scrapes give (docs/ENGINE.md, "Settling"; the settling
    /// itself is checked by `crates/engine/src/settle_tests.rs` and, with the defaults, by the accuracy
    /// chains).
    pub(crate) fn start_unsettled() -> Corrector {
        Self::start_with_config(Some(UNSETTLED))
    }

    /// Starts the binary, with `--config.file` holding `yaml` when given, and waits for `/-/ready`.
    pub(crate) fn start_with_config(yaml: Option<&str>) -> Corrector {
        match yaml {
            Some(yaml) => corrector().config(yaml).start().into(),
            None => Self::start(),
        }
    }

    /// Posts one RW1 body built from `points`; returns the HTTP status.
    pub(crate) fn post(&self, points: &[Point]) -> u16 {
        let response = self
            .client()
            .post(self.url("/api/v1/write"))
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(rw::body(points))
            .send()
            .unwrap_or_else(|e| {
                panic!(
                    "POST /api/v1/write failed: {e}\n--- log ---\n{}",
                    self.log_text()
                )
            });
        response.status().as_u16()
    }

    /// Posts `points` and asserts a 2xx answer.
    pub(crate) fn write(&self, points: &[Point]) {
        let status = self.post(points);
        assert!(
            (200..300).contains(&status),
            "remote write answered {status}\n--- log ---\n{}",
            self.log_text()
        );
    }

    /// `GET /metrics` in text format 0.0.4 (no `Accept` header).
    pub(crate) fn metrics_text(&self) -> String {
        self.get_metrics(None)
    }

    /// `GET /metrics` with `Accept: application/openmetrics-text`.
    pub(crate) fn metrics_openmetrics(&self) -> String {
        self.get_metrics(Some("application/openmetrics-text; version=1.0.0"))
    }

    fn get_metrics(&self, accept: Option<&str>) -> String {
        let send = || {
            let mut request = self.client().get(self.url("/metrics"));
            if let Some(accept) = accept {
                request = request.header("Accept", accept);
            }
            request.send()
        };
        // Once more on a connection error: the client may pick its pooled keep-alive connection
        // in the instant the server closes it for idleness (the slow-client tests set a 1 s idle
        // timeout), and a GET is safe to repeat.
        let response = send().or_else(|_| send()).unwrap_or_else(|e| {
            panic!("GET /metrics failed: {e}\n--- log ---\n{}", self.log_text())
        });
        assert!(
            response.status().is_success(),
            "GET /metrics answered {}",
            response.status()
        );
        response.text().unwrap()
    }

    /// `/metrics` (text 0.0.4), parsed.
    pub(crate) fn snapshot(&self) -> crate::metrics::Snapshot {
        crate::metrics::Snapshot::parse_text(&self.metrics_text())
    }
}
