//! Float samples and the staleness marker (RW 1.0 `Sample`; RW 2.0 `Sample`).

/// Bit pattern of the Prometheus staleness marker: a NaN that Prometheus writes when a series
/// disappears from a scrape. Compare bits, never the float (every NaN compares unequal).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// True when `value` is exactly the Prometheus staleness marker (by bits).
#[inline]
pub fn is_stale_marker(value: f64) -> bool {
    value.to_bits() == STALE_NAN_BITS
}

/// One float sample: a value and its timestamp in milliseconds since the Unix epoch.
///
/// Source: `Sample` in RW 1.0 (`double value = 1; int64 timestamp = 2`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The sample value (seconds, tokens or a count, depending on the series).
    pub value: f64,
    /// Timestamp in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

/// One series' float samples: one inline (a sender puts one sample in each `TimeSeries`).
pub type Samples = smallvec::SmallVec<[Sample; 1]>;
