//! [`SeriesKey`]: the identity of one series' labels, for the series index
//! (docs/ENGINE.md, "The series index").
//!
//! Two `foldhash` passes with independent seeds drawn once per process ([`independent_hashers`]).
//! A one-pass 128-bit replacement (two
//! folded-multiply chains sharing the 8-byte reads) was measured and dropped: it costs 404
//! instructions per vLLM-shaped series against 271 for the two passes (docs/PERFORMANCE.md), since
//! each chain needs its own multiply per 16 bytes either way.

use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;

use foldhash::SharedSeed;
use foldhash::fast::SeedableRandomState;

/// The identity of one series' labels: two independent 64-bit hashes (`hash`, `check`) of either
/// the bytes of its label fields as they came on the wire (RW 1.0: the `TimeSeries`' leading run
/// of field-1 `Label` messages, keys and lengths included; `SeriesKey::of`) or its decoded
/// label text ([`SeriesKey::of_labels`]). The same bytes always decode to the same labels, so a
/// receiver can remember what it decided for a key and skip decoding and checking those labels
/// the next time (docs/ENGINE.md, "The series index"). Two label sets with one key would need
/// both 64-bit hashes to collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    /// First hash (foldhash, the first of [`independent_hashers`]): the hash-table hash.
    pub hash: u64,
    /// Second, independent hash (the second of [`independent_hashers`]), compared on every hit.
    pub check: u64,
}

/// Two foldhash hashers for 128-bit identities, drawn once per process: each has its own shared
/// seed (the constants foldhash multiplies with) and its own per-hasher seed, from `std`'s
/// `RandomState` (the operating system's randomness).
///
/// Fixed seeds (the `FixedState` used before) are public constants. A sender that knows them can
/// write 16 bytes that zero foldhash's multiplications, so everything before those bytes leaves the
/// hash unchanged. Two different label runs then share a key, and the second is taken for the
/// first (issue 14's review). With seeds unknown outside the process, such input has to be guessed.
/// The keys are not stable across restarts; nothing stores them.
pub fn independent_hashers() -> &'static [SeedableRandomState; 2] {
    static SHARED: LazyLock<[SharedSeed; 2]> = LazyLock::new(|| {
        let random = std::hash::RandomState::new();
        [
            SharedSeed::from_u64(random.hash_one(0u8)),
            SharedSeed::from_u64(random.hash_one(1u8)),
        ]
    });
    static HASHERS: LazyLock<[SeedableRandomState; 2]> = LazyLock::new(|| {
        let random = std::hash::RandomState::new();
        let shared: &'static [SharedSeed; 2] = &SHARED;
        [
            SeedableRandomState::with_seed(random.hash_one(2u8), &shared[0]),
            SeedableRandomState::with_seed(random.hash_one(3u8), &shared[1]),
        ]
    });
    &HASHERS
}

/// One foldhash pass over `bytes`. The bytes go in with one `write` (no length prefix: foldhash's
/// `write` folds the length into its state itself).
#[inline]
fn pass(hasher: &SeedableRandomState, bytes: &[u8]) -> u64 {
    let mut h = hasher.build_hasher();
    h.write(bytes);
    h.finish()
}

impl SeriesKey {
    /// The key of a decoded label set, in the order given: its text (name, 0xff, value, 0xff per
    /// label, an unambiguous encoding since label text is UTF-8, where 0xff never occurs) is
    /// gathered into `scratch` (cleared first), then hashed in one call per hasher. For labels
    /// whose encoding is not stable across requests (RW 2.0 symbol references) or not available.
    pub fn of_labels(labels: &[crate::Label<'_>], scratch: &mut Vec<u8>) -> SeriesKey {
        scratch.clear();
        for l in labels {
            scratch.extend_from_slice(l.name.as_bytes());
            scratch.push(0xff);
            scratch.extend_from_slice(l.value.as_bytes());
            scratch.push(0xff);
        }
        SeriesKey::of(scratch)
    }

    /// The key of `label_bytes` (the raw encoded label fields), any length. The same bytes give
    /// the same key within one process ([`independent_hashers`]).
    #[inline]
    pub(crate) fn of(label_bytes: &[u8]) -> SeriesKey {
        let [first, second] = independent_hashers();
        SeriesKey {
            hash: pass(first, label_bytes),
            check: pass(second, label_bytes),
        }
    }
}

#[cfg(test)]
mod tests;
