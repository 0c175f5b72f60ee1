//! The settings a reload swaps (`POST /-/reload`, SIGHUP): receiver limits, the request slots
//! they size, the web settings (TLS, authentication, response headers) and the SLO spec.
//!
//! One `Live` value is replaced whole, so a request sees the limits and the web settings of the
//! same load. Each request reads the current value once (an `Arc` clone under a read lock held
//! for nanoseconds); a reload applies from the next request on, and in-flight requests finish
//! with the settings they started with.

use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::Semaphore;

use crate::config::Limits;
use crate::web::WebSettings;
use engine::slo::SloSpec;

/// Bytes rounded up to KiB, the unit of the in-flight memory budget (saturating at `u32::MAX` KiB).
pub(crate) fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// One load of the reloadable settings.
#[derive(Debug)]
pub(crate) struct Live {
    /// Receiver limits (`limits:` of `--config.file`).
    pub(crate) limits: Limits,
    /// Remote-write slots: `limits.max_concurrent_requests` permits. A reload that changes the
    /// limit brings a new semaphore; requests holding a slot of the old one finish normally, so
    /// for a moment the old holders and the new limit add up.
    pub(crate) permits: Arc<Semaphore>,
    /// Memory budget of request bodies and decode buffers in flight, in KiB permits
    /// (`limits.max_inflight_bytes`); kept across a reload that does not change it.
    pub(crate) inflight_kib: Arc<Semaphore>,
    /// `--web.config.file`, validated.
    pub(crate) web: Arc<WebSettings>,
    /// Raised by every reload that changes `limits.labels`: the engine's series index remembers
    /// which label sets passed the label checks, and forgets them when this grows
    /// (`engine::Engine::batch`).
    pub(crate) label_epoch: u64,
    /// The SLO spec (`slos:` of `--config.file`, else the shipped default), as the engine and
    /// the status pages are to read it.
    pub(crate) slos: Arc<SloSpec>,
}

impl Live {
    /// Settings with fresh request slots for `limits`.
    pub(crate) fn new(limits: Limits, web: Arc<WebSettings>) -> Live {
        Live {
            permits: Arc::new(Semaphore::new(limits.max_concurrent_requests)),
            inflight_kib: Arc::new(Semaphore::new(kib(limits.max_inflight_bytes) as usize)),
            limits,
            web,
            label_epoch: 0,
            slos: Arc::new(SloSpec::shipped_default()),
        }
    }

    /// These settings with the SLO spec `slos` instead: same request slots and memory budget.
    pub(crate) fn with_slos(&self, slos: Arc<SloSpec>) -> Live {
        Live {
            limits: self.limits,
            permits: self.permits.clone(),
            inflight_kib: self.inflight_kib.clone(),
            web: self.web.clone(),
            label_epoch: self.label_epoch,
            slos,
        }
    }

    /// The settings after a reload to `limits`, `web` and `slos`: the request slots and the
    /// memory budget are kept when their limit is unchanged, so a reload never lets extra
    /// requests in.
    pub(crate) fn reloaded(
        &self,
        limits: Limits,
        web: Arc<WebSettings>,
        slos: Arc<SloSpec>,
    ) -> Live {
        let mut live = Live::new(limits, web).with_slos(slos);
        if live.limits.max_concurrent_requests == self.limits.max_concurrent_requests {
            live.permits = self.permits.clone();
        }
        if live.limits.max_inflight_bytes == self.limits.max_inflight_bytes {
            live.inflight_kib = self.inflight_kib.clone();
        }
        live.label_epoch = self.label_epoch + u64::from(live.limits.labels != self.limits.labels);
        live
    }
}

impl Live {
    /// Bytes of the in-flight memory budget held by requests now (whole KiB), and the budget
    /// (`limits.max_inflight_bytes`).
    pub(crate) fn inflight_bytes(&self) -> (usize, usize) {
        let total = kib(self.limits.max_inflight_bytes) as usize;
        let free = self.inflight_kib.available_permits().min(total);
        ((total - free) * 1024, self.limits.max_inflight_bytes)
    }
}

/// The current [`Live`] settings, swapped whole.
#[derive(Debug)]
pub(crate) struct LiveCell(RwLock<Arc<Live>>);

impl LiveCell {
    /// A cell holding `live`.
    pub(crate) fn new(live: Live) -> LiveCell {
        LiveCell(RwLock::new(Arc::new(live)))
    }

    /// The current settings.
    pub(crate) fn get(&self) -> Arc<Live> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the SLO spec alone (at start, with the spec of `--config.file`).
    pub(crate) fn set_slos(&self, slos: Arc<SloSpec>) {
        let live = self.get().with_slos(slos);
        self.set(live);
    }

    /// Replaces the settings; requests that already read the old ones keep them.
    pub(crate) fn set(&self, live: Live) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(live);
    }
}
