//! A receiver without HTTP: an engine behind its lock with the self-metrics and event log
//! [`super::receive`] reports to, and the settings it runs under. What the unit tests, the fuzz
//! harnesses, the integration tests, the benchmarks and the profiling example drive; the service
//! itself receives through `crate::http::write`, with the same [`super::receive`].

use std::sync::{Mutex, MutexGuard};

use super::{Receipt, Settings, Sink, receive};
use crate::config::Limits;
use crate::telemetry::SelfMetrics;
use crate::telemetry::events::EventLog;
use engine::{Engine, EngineConfig};
use protocol::Version;

/// One engine and what [`receive`] needs beside it.
#[derive(Debug)]
pub struct Receiver {
    engine: Mutex<Engine>,
    metrics: SelfMetrics,
    events: EventLog,
    /// The limits requests are received under (default: the service's).
    pub limits: Limits,
    /// The label-check epoch requests are received under; raise it with the label limits.
    pub label_epoch: u64,
}

impl Receiver {
    /// A receiver of an engine with `config`, under the default limits.
    pub fn new(config: EngineConfig) -> Receiver {
        Receiver {
            engine: Mutex::new(Engine::new(config)),
            metrics: SelfMetrics::new(),
            events: EventLog::default(),
            limits: Limits::default(),
            label_epoch: 0,
        }
    }

    /// [`receive`] of a snappy-compressed `body` of `version` at receive time `now_ms` (ms since
    /// the epoch): what the service's write handler does after it read the body.
    pub fn receive(&self, version: Version, body: &[u8], now_ms: i64) -> Receipt {
        let sink = Sink {
            engine: &self.engine,
            metrics: &self.metrics,
            events: &self.events,
        };
        let settings = Settings {
            limits: &self.limits,
            label_epoch: self.label_epoch,
        };
        receive(sink, settings, version, body, now_ms)
    }

    /// [`Receiver::receive`] of a decompressed body (compressed here).
    pub fn receive_raw(&self, version: Version, raw: &[u8], now_ms: i64) -> Receipt {
        let body = snap::raw::Encoder::new()
            .compress_vec(raw)
            .expect("a body under snappy's size limit");
        self.receive(version, &body, now_ms)
    }

    /// The engine, locked.
    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
