//! [`SeriesKey`]: the identity of one series' encoded label bytes, for the known-series fast path
//! (docs/PERFORMANCE.md, "The known-series fast path").
//!
//! Two `foldhash` passes with different fixed seeds. A one-pass 128-bit replacement (two
//! folded-multiply chains sharing the 8-byte reads) was measured and dropped: it costs 404
//! instructions per vLLM-shaped series against 271 for the two passes (docs/PERFORMANCE.md), since
//! each chain needs its own multiply per 16 bytes either way.

use std::hash::{BuildHasher, Hasher};

/// The identity of one series' encoded labels: two independent 64-bit hashes (`hash`, `check`) of
/// the bytes of its label fields as they came on the wire (RW 1.0: the `TimeSeries`' leading run
/// of field-1 `Label` messages, keys and lengths included). The same bytes always decode to the
/// same labels, so a receiver can remember what it decided for a key and skip decoding and
/// checking those labels the next time (docs/PERFORMANCE.md, "The known-series fast path").
/// Two label sets with one key would need both 64-bit hashes to collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    /// First hash (foldhash, fixed seed): the hash-table hash.
    pub hash: u64,
    /// Second, independent hash (foldhash, another fixed seed), compared on every hit.
    pub check: u64,
}

/// The two fixed seeds.
const SEEDS: [u64; 2] = [0x6c61_6265_6c5f_6b31, 0x9e37_79b9_7f4a_7c15];

/// One foldhash pass over `bytes` with `seed`. The bytes go in with one `write` (no length
/// prefix: foldhash's `write` folds the length into its state itself).
#[inline]
fn pass(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = foldhash::fast::FixedState::with_seed(seed).build_hasher();
    h.write(bytes);
    h.finish()
}

impl SeriesKey {
    /// The key of `label_bytes` (the raw encoded label fields), any length.
    #[inline]
    pub(crate) fn of(label_bytes: &[u8]) -> SeriesKey {
        SeriesKey {
            hash: pass(SEEDS[0], label_bytes),
            check: pass(SEEDS[1], label_bytes),
        }
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
