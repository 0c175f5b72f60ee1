//! A request's share of the in-flight memory budget (`limits.max_inflight_bytes`), counted in
//! KiB permits of one semaphore ([`crate::live::Live::inflight_kib`]) and grown as the request's
//! buffers grow (docs/RELIABILITY.md, "The memory budget").

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::live::kib;

/// Bytes of the in-flight budget one request holds, in whole KiB; released when dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<Semaphore>,
    held: Option<OwnedSemaphorePermit>,
}

impl Charge {
    /// A charge of nothing yet against `budget`.
    pub(crate) fn new(budget: &Arc<Semaphore>) -> Charge {
        Charge {
            budget: Arc::clone(budget),
            held: None,
        }
    }

    /// KiB held.
    fn held_kib(&self) -> usize {
        self.held
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Bytes held (whole KiB).
    pub(crate) fn bytes(&self) -> usize {
        self.held_kib() * 1024
    }

    fn add(&mut self, permit: OwnedSemaphorePermit) {
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
    }

    /// The KiB to add to hold `bytes`, if any.
    fn missing_kib(&self, bytes: usize) -> Option<u32> {
        let missing = (kib(bytes) as usize).checked_sub(self.held_kib())?;
        u32::try_from(missing).ok().filter(|&n| n > 0)
    }

    /// Grows the charge to at least `bytes` if the budget has that much free now; `false`, holding
    /// what it held, otherwise (also while another request waits in [`Charge::grow_to`]: the
    /// semaphore serves waiters first).
    pub(crate) fn try_grow_to(&mut self, bytes: usize) -> bool {
        let Some(missing) = self.missing_kib(bytes) else {
            return true;
        };
        match Arc::clone(&self.budget).try_acquire_many_owned(missing) {
            Ok(permit) => {
                self.add(permit);
                true
            }
            Err(_) => false,
        }
    }

    /// Grows the charge to at least `bytes`, waiting at most `wait` for others to release theirs;
    /// `false`, holding what it held, when the budget stayed spent.
    pub(crate) async fn grow_to(&mut self, bytes: usize, wait: Duration) -> bool {
        let Some(missing) = self.missing_kib(bytes) else {
            return true;
        };
        let acquire = Arc::clone(&self.budget).acquire_many_owned(missing);
        match tokio::time::timeout(wait, acquire).await {
            Ok(Ok(permit)) => {
                self.add(permit);
                true
            }
            _ => false,
        }
    }

    /// Releases what is held beyond `bytes` (rounded up to KiB).
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        let keep = kib(bytes) as usize;
        if let Some(held) = &mut self.held
            && let Some(extra) = held.num_permits().checked_sub(keep).filter(|&n| n > 0)
        {
            drop(held.split(extra));
        }
    }
}

#[cfg(test)]
mod tests;
