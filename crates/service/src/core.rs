//! The engine behind its lock, with the self-metrics and the event log it reports to: what every
//! write, scrape, sweep, reload and state write shares ([`Core`]). The HTTP state, the ingest path,
//! the receiver without HTTP, the reloader and the storage writer all hold one.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::telemetry::SelfMetrics;
use crate::telemetry::events::EventLog;
use engine::Engine;

/// One engine and what reports about it.
#[derive(Debug)]
pub struct Core {
    engine: Mutex<Engine>,
    /// Self-metrics (shared with the connection layer, which counts connections).
    pub(crate) metrics: Arc<SelfMetrics>,
    /// The rate-limited log of the engine's group events.
    pub(crate) events: EventLog,
}

impl Core {
    /// A core around `engine`, with fresh self-metrics and event log.
    pub fn new(engine: Engine) -> Core {
        Core {
            engine: Mutex::new(engine),
            metrics: Arc::new(SelfMetrics::new()),
            events: EventLog::default(),
        }
    }

    /// Locks the engine. A panic in an earlier holder (a bug, already logged, counted and answered
    /// 400) does not stop the service: the lock is taken over. The engine may then hold part of
    /// that request's samples; every later request is applied as usual.
    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine, when its lock is free now (tests: a response holds no lock between chunks).
    #[cfg(test)]
    pub(crate) fn try_engine(&self) -> Option<MutexGuard<'_, Engine>> {
        self.engine.try_lock().ok()
    }

    /// True when a holder of the engine lock panicked (tests).
    #[cfg(test)]
    pub(crate) fn is_poisoned(&self) -> bool {
        self.engine.is_poisoned()
    }
}
