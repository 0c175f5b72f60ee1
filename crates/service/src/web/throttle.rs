//! What keeps bcrypt checks from being queued out (`docs/SECURITY.md`, "Authentication under
//! floods"): an allowance of checks per client, a bounded number of checks at once, and a bounded
//! wait for one. `super::auth` asks for both before it runs bcrypt; a check refused here is
//! answered 503 with `Retry-After` (`AuthFailure::RateLimited`), without running bcrypt.
//!
//! * **Per client** ([`Throttle::admit`]): a token bucket of [`BURST`] checks refilled at
//!   [`REFILL_PER_SECOND`], with at most [`MAX_IN_FLIGHT_PER_CLIENT`] running or waiting. A
//!   successful check gives its token back, so only failed checks use the allowance. A client is
//!   its IPv4 address, or its IPv6 /64 (one host usually holds a whole /64).
//! * **At once** ([`Throttle::slot`]): as many checks as the process has cores; a check waits at
//!   most [`MAX_SLOT_WAIT`] for one.
//!
//! The table of clients is bounded: [`MAX_CLIENTS`] entries in two generations ([`Recent`]), the
//! least recently seen dropped first; a dropped client starts again with a full bucket.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Checks a client may fail at once before it is limited to [`REFILL_PER_SECOND`].
pub(crate) const BURST: f32 = 10.0;

/// Checks a second a client regains, up to [`BURST`].
pub(crate) const REFILL_PER_SECOND: f32 = 1.0;

/// Checks of one client running or waiting for a slot at once.
pub(crate) const MAX_IN_FLIGHT_PER_CLIENT: u32 = 2;

/// Longest a check waits for one of the [`Throttle::slot`]s.
pub(crate) const MAX_SLOT_WAIT: Duration = Duration::from_secs(1);

/// Most clients tracked: 48 bytes each, at most about 400 KiB with the hash tables' spare room.
pub(crate) const MAX_CLIENTS: usize = 4096;

/// A map of at most `2 × half` entries, the least recently used dropped first: entries live in
/// `current` until it holds `half`, then the whole of it becomes `previous` and the old `previous`
/// is dropped. An entry found in `previous` moves back to `current`. O(1) per operation.
#[derive(Debug)]
pub(crate) struct Recent<K, V> {
    current: HashMap<K, V>,
    previous: HashMap<K, V>,
    half: usize,
}

impl<K: Hash + Eq + Copy, V> Recent<K, V> {
    /// An empty map holding at most `capacity` entries (at least 2).
    pub(crate) fn new(capacity: usize) -> Self {
        Recent {
            current: HashMap::new(),
            previous: HashMap::new(),
            half: (capacity / 2).max(1),
        }
    }

    /// The entry of `key`, if kept.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        if !self.current.contains_key(key) {
            let value = self.previous.remove(key)?;
            self.insert_current(*key, value);
        }
        self.current.get_mut(key)
    }

    /// The entry of `key`, inserted by `make` if not kept.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        if self.get_mut(&key).is_none() {
            self.insert_current(key, make());
        }
        self.current.get_mut(&key).expect("just inserted")
    }

    fn insert_current(&mut self, key: K, value: V) {
        if self.current.len() >= self.half {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key, value);
    }
}

/// One client's allowance.
#[derive(Debug)]
struct Bucket {
    tokens: f32,
    updated: Instant,
    in_flight: u32,
}

/// The per-client allowance and the slots of checks at once. Rebuilt with the web settings, so a
/// reload starts afresh.
#[derive(Debug)]
pub(crate) struct Throttle {
    clients: Mutex<Recent<IpAddr, Bucket>>,
    slots: Arc<Semaphore>,
}

/// The client a check is charged to: an IPv4 address (IPv4-mapped IPv6 included) or an IPv6 /64.
fn client_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

impl Throttle {
    /// A throttle running at most `slots` checks at once (at least 1).
    pub(crate) fn new(slots: usize) -> Self {
        Throttle {
            clients: Mutex::new(Recent::new(MAX_CLIENTS)),
            slots: Arc::new(Semaphore::new(slots.max(1))),
        }
    }

    /// As many slots as the process may use cores (`std::thread::available_parallelism`, which
    /// follows cgroup CPU quotas).
    pub(crate) fn per_core() -> Self {
        Throttle::new(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// Takes one check of `client`'s allowance now, or `None` when it has none left or already
    /// [`MAX_IN_FLIGHT_PER_CLIENT`] checks in flight. `None` for `client` (a request without a
    /// peer address, which the server always attaches) shares one allowance.
    pub(crate) fn admit(self: &Arc<Self>, client: Option<IpAddr>) -> Option<Admitted> {
        self.admit_at(client, Instant::now())
    }

    fn admit_at(self: &Arc<Self>, client: Option<IpAddr>, now: Instant) -> Option<Admitted> {
        let key = client.map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), client_key);
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = clients.get_or_insert_with(key, || Bucket {
            tokens: BURST,
            updated: now,
            in_flight: 0,
        });
        let refill =
            now.saturating_duration_since(bucket.updated).as_secs_f32() * REFILL_PER_SECOND;
        bucket.tokens = (bucket.tokens + refill).min(BURST);
        bucket.updated = now;
        if bucket.tokens < 1.0 || bucket.in_flight >= MAX_IN_FLIGHT_PER_CLIENT {
            return None;
        }
        bucket.tokens -= 1.0;
        bucket.in_flight += 1;
        Some(Admitted {
            throttle: self.clone(),
            key,
            give_back: false,
        })
    }

    /// One of the slots, waiting at most [`MAX_SLOT_WAIT`]; `None` when none freed in time.
    pub(crate) async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(MAX_SLOT_WAIT, self.slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

/// A check admitted by [`Throttle::admit`]: in flight until dropped. Its token is spent unless
/// [`Admitted::give_back`] is called.
#[derive(Debug)]
pub(crate) struct Admitted {
    throttle: Arc<Throttle>,
    key: IpAddr,
    give_back: bool,
}

impl Admitted {
    /// Returns the token when dropped: the check succeeded, or never ran.
    pub(crate) fn give_back(&mut self) {
        self.give_back = true;
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut clients = self
            .throttle
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A client dropped from the table meanwhile starts afresh: nothing to return.
        if let Some(bucket) = clients.get_mut(&self.key) {
            bucket.in_flight = bucket.in_flight.saturating_sub(1);
            if self.give_back {
                bucket.tokens = (bucket.tokens + 1.0).min(BURST);
            }
        }
    }
}

#[cfg(test)]
mod tests;
