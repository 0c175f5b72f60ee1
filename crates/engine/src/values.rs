//! The values the rules produce and the reasons they give: leaf types, used by the rules and the
//! rest of the engine alike.

/// Shape of a derived family on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyKind {
    /// `_bucket{le}`, `_sum`, `_count`.
    Histogram,
    /// `_sum` and `_count` only (exposed as a summary without quantiles).
    SumCount,
}

/// One derived value: cumulative since the inputs' last counter reset.
///
/// Stored (`--storage.path`, in a hold) as `StoredValue`: JSON has no infinity, so a
/// histogram's bounds are stored without its last, `+Inf`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "StoredValue", try_from = "StoredValue")]
pub enum DerivedValue {
    /// A histogram: `(le, cumulative count)` pairs in ascending `le`, ending with `+Inf`; the
    /// `+Inf` count equals `count`. Counts may be fractional for estimated families.
    Histogram {
        /// `(upper bound in seconds, cumulative count)`, ascending, last bound `f64::INFINITY`.
        buckets: Vec<(f64, f64)>,
        /// Sum of observations, seconds.
        sum: f64,
        /// Number of observations (requests or tokens, per family).
        count: f64,
    },
    /// A sum and a count.
    SumCount {
        /// Sum, in the family's unit (seconds or tokens).
        sum: f64,
        /// Count, in the family's unit (tokens or iterations).
        count: f64,
    },
}

/// [`DerivedValue`] as stored: a histogram's finite bounds and every bucket count (the last one
/// `+Inf`'s).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
enum StoredValue {
    Histogram {
        bounds: Vec<f64>,
        counts: Vec<f64>,
        sum: f64,
        count: f64,
    },
    SumCount {
        sum: f64,
        count: f64,
    },
}

impl From<DerivedValue> for StoredValue {
    fn from(value: DerivedValue) -> StoredValue {
        match value {
            DerivedValue::Histogram {
                buckets,
                sum,
                count,
            } => {
                let finite = buckets.len().saturating_sub(1);
                StoredValue::Histogram {
                    bounds: buckets[..finite].iter().map(|(le, _)| *le).collect(),
                    counts: buckets.iter().map(|(_, c)| *c).collect(),
                    sum,
                    count,
                }
            }
            DerivedValue::SumCount { sum, count } => StoredValue::SumCount { sum, count },
        }
    }
}

impl TryFrom<StoredValue> for DerivedValue {
    type Error = &'static str;

    fn try_from(value: StoredValue) -> Result<DerivedValue, &'static str> {
        match value {
            StoredValue::Histogram {
                bounds,
                counts,
                sum,
                count,
            } => {
                if counts.len() != bounds.len() + 1 {
                    return Err("a histogram needs one count per finite bound and one for +Inf");
                }
                if !bounds.windows(2).all(|w| w[0] < w[1]) || bounds.iter().any(|b| !b.is_finite())
                {
                    return Err("histogram bounds must be finite and ascending");
                }
                let les = bounds.into_iter().chain([f64::INFINITY]);
                Ok(DerivedValue::Histogram {
                    buckets: les.zip(counts).collect(),
                    sum,
                    count,
                })
            }
            StoredValue::SumCount { sum, count } => Ok(DerivedValue::SumCount { sum, count }),
        }
    }
}

impl DerivedValue {
    /// Samples it is written as on `/metrics` at most: one per bucket (with `+Inf`), `_sum` and
    /// `_count`.
    pub fn lines(&self) -> usize {
        match self {
            DerivedValue::Histogram { buckets, .. } => buckets.len() + 2,
            DerivedValue::SumCount { .. } => 2,
        }
    }

    /// Heap bytes the value holds (its buckets), for the engine's memory accounting.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            DerivedValue::Histogram { buckets, .. } => buckets.capacity() * 16,
            DerivedValue::SumCount { .. } => 0,
        }
    }

    /// True when no component is negative.
    pub(crate) fn is_non_negative(&self) -> bool {
        match self {
            DerivedValue::Histogram {
                buckets,
                sum,
                count,
            } => *sum >= 0.0 && *count >= 0.0 && buckets.iter().all(|(_, c)| *c >= 0.0),
            DerivedValue::SumCount { sum, count } => *sum >= 0.0 && *count >= 0.0,
        }
    }

    /// True when every bucket count and the `_count` are integers (the `_sum` may be anything).
    pub(crate) fn has_integer_counts(&self) -> bool {
        let integer = |v: &f64| v.fract() == 0.0;
        match self {
            DerivedValue::Histogram { buckets, count, .. } => {
                integer(count) && buckets.iter().all(|(_, c)| integer(c))
            }
            DerivedValue::SumCount { count, .. } => integer(count),
        }
    }

    /// True when every number is finite (the state file's JSON has no other numbers).
    pub(crate) fn is_finite(&self) -> bool {
        match self {
            DerivedValue::Histogram {
                buckets,
                sum,
                count,
            } => sum.is_finite() && count.is_finite() && buckets.iter().all(|(_, c)| c.is_finite()),
            DerivedValue::SumCount { sum, count } => sum.is_finite() && count.is_finite(),
        }
    }
}
