//! The values the rules produce and the reasons they give: leaf types, used by the rules and the
//! rest of the engine alike.

/// Shape of a derived family on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyKind {
    /// `_bucket{le}`, `_sum`, `_count`.
    Histogram,
    /// `_sum` and `_count` only (exposed as a summary without quantiles).
    SumCount,
    /// Labelled counters of several metric families ([`CounterMetric`]): the SLO counters.
    Counters,
}

/// A metric family of [`DerivedValue::Counters`] rows: the SLO counters (docs/SLO.md, "SLO
/// counters"). Each is a counter in requests, or in tokens for `sli="itl_per_token"`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum CounterMetric {
    /// `vllm_corrected_slo_events_total{slo, sli}`: the SLI's events.
    SloEvents,
    /// `vllm_corrected_slo_good_events_total{slo, sli}`: the events at most the threshold.
    SloGoodEvents,
    /// `vllm_corrected_slo_finished_requests_total{slo}`: requests finished since the baseline.
    SloFinishedRequests,
    /// `vllm_corrected_goodput_requests_total{slo, bound}`: of those, the ones that met every
    /// threshold of the SLO, bounded below (`bound="lower"`) and above (`"upper"`).
    GoodputRequests,
}

impl CounterMetric {
    /// Every metric, in exposition order.
    pub const ALL: [CounterMetric; 4] = [
        CounterMetric::SloEvents,
        CounterMetric::SloGoodEvents,
        CounterMetric::SloFinishedRequests,
        CounterMetric::GoodputRequests,
    ];

    /// The family name, without `_total` (OpenMetrics' `# TYPE` name).
    pub fn name(self) -> &'static str {
        match self {
            CounterMetric::SloEvents => "vllm_corrected_slo_events",
            CounterMetric::SloGoodEvents => "vllm_corrected_slo_good_events",
            CounterMetric::SloFinishedRequests => "vllm_corrected_slo_finished_requests",
            CounterMetric::GoodputRequests => "vllm_corrected_goodput_requests",
        }
    }

    /// The `# HELP` text.
    pub fn help(self) -> &'static str {
        match self {
            CounterMetric::SloEvents => {
                "Events of the SLI of the SLO (requests; tokens for itl_per_token), exact where the threshold is a bucket edge."
            }
            CounterMetric::SloGoodEvents => "Events of the SLI at most the SLO's threshold.",
            CounterMetric::SloFinishedRequests => {
                "Requests finished since the corrector began counting the SLO for this engine."
            }
            CounterMetric::GoodputRequests => {
                "Finished requests that met every threshold of the SLO (as vllm bench serve --goodput counts them), bounded below and above."
            }
        }
    }
}

/// One counter of a [`DerivedValue::Counters`]: its metric and its own labels (`slo`, and `sli`
/// or `bound`), which the group's labels are written before.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CounterRow {
    /// The metric family.
    pub metric: CounterMetric,
    /// The row's labels, e.g. `[("slo", "chat"), ("sli", "ttft")]`.
    pub labels: Vec<(String, String)>,
    /// The fingerprint of the SLO layout the row counts under (names, thresholds, bucket edges;
    /// not shown): a value served under one layout is never held into another
    /// (`crates/engine/src/hold.rs`), so a changed threshold restarts its counters at 0.
    #[serde(default)]
    pub layout: u64,
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
    /// Labelled counters: `values[i]` is the counter `rows[i]`. The rows are shared by every
    /// output of one plan.
    Counters {
        /// What each value is.
        rows: std::sync::Arc<[CounterRow]>,
        /// The counters, in requests or tokens.
        values: Vec<f64>,
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
    Counters {
        rows: Vec<CounterRow>,
        values: Vec<f64>,
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
            DerivedValue::Counters { rows, values } => StoredValue::Counters {
                rows: rows.to_vec(),
                values,
            },
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
            StoredValue::Counters { rows, values } => {
                if rows.len() != values.len() {
                    return Err("counters need one value per row");
                }
                Ok(DerivedValue::Counters {
                    rows: rows.into(),
                    values,
                })
            }
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
            DerivedValue::Counters { values, .. } => values.len(),
        }
    }

    /// Heap bytes the value holds (its buckets), for the engine's memory accounting.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            DerivedValue::Histogram { buckets, .. } => buckets.capacity() * 16,
            DerivedValue::SumCount { .. } => 0,
            // The rows are shared with the plan; counted once per value here as an upper bound
            // of their share.
            DerivedValue::Counters { rows, values } => {
                values.capacity() * 8 + rows.iter().map(row_bytes).sum::<usize>()
            }
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
            DerivedValue::Counters { values, .. } => values.iter().all(|v| *v >= 0.0),
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
            // Counters may count fractions (the ITL-per-token rows are estimated token counts
            // under speculative decoding); OpenMetrics counters are floats.
            DerivedValue::Counters { .. } => true,
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
            DerivedValue::Counters { values, .. } => values.iter().all(|v| v.is_finite()),
        }
    }
}

/// Heap bytes of one counter row: its labels.
fn row_bytes(row: &CounterRow) -> usize {
    size_of::<CounterRow>()
        + row
            .labels
            .iter()
            .map(|(n, v)| n.capacity() + v.capacity() + 2 * size_of::<String>())
            .sum::<usize>()
}
