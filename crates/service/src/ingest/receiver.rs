//! A receiver without HTTP: a [`Core`] and the settings it runs under, received into by
//! [`super::receive`]. What the unit tests, the fuzz harnesses, the integration tests, the
//! benchmarks and the profiling example drive; the service itself receives through
//! `crate::http::write`, with the same [`super::receive`].

use std::sync::MutexGuard;

use super::{Receipt, Settings, receive};
use crate::config::Limits;
use crate::core::Core;
use engine::{Engine, EngineConfig};
use protocol::Version;

/// One engine and what `receive` needs beside it.
#[derive(Debug)]
pub struct Receiver {
    core: Core,
    /// The limits requests are received under (default: the service's).
    pub limits: Limits,
    /// The label-check epoch requests are received under; raise it with the label limits.
    pub label_epoch: u64,
}

impl Receiver {
    /// A receiver of an engine with `config`, under the default limits.
    pub fn new(config: EngineConfig) -> Receiver {
        Receiver {
            core: Core::new(Engine::new(config)),
            limits: Limits::default(),
            label_epoch: 0,
        }
    }

    /// `receive` of a snappy-compressed `body` of `version` at receive time `now_ms` (ms since
    /// the epoch): what the service's write handler does after it read the body.
    pub fn receive(&self, version: Version, body: &[u8], now_ms: i64) -> Receipt {
        let settings = Settings {
            limits: &self.limits,
            label_epoch: self.label_epoch,
        };
        receive(&self.core, settings, version, body, now_ms)
    }

    /// [`Receiver::receive`] of a decompressed body (compressed here).
    pub fn receive_raw(&self, version: Version, raw: &[u8], now_ms: i64) -> Receipt {
        let body = snap::raw::Encoder::new()
            .compress_vec(raw)
            .expect("a body under snappy's size limit");
        self.receive(version, &body, now_ms)
    }

    /// The engine, locked ([`Core::engine`]).
    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.core.engine()
    }

    /// The core received into.
    pub fn core(&self) -> &Core {
        &self.core
    }
}
