//! The `engine` fuzz target: arbitrary bytes read as a program of operations on one engine, so
//! libFuzzer explores sequences (series, timestamps, staleness markers, bucket layouts, counter
//! resets, idle sweeps, small limits) rather than one request.
//!
//! Every operation is checked as it happens:
//! * no panic;
//! * received = applied + Σ rejected for each [`Engine::ingest`] call;
//! * every derived histogram has ascending `le` bounds ending at `+Inf`, non-decreasing cumulative
//!   counts, none above `_count`, and `+Inf` = `_count`;
//! * every derived component (bucket by `le`, `_sum`, `_count`) of a group never falls below what
//!   was served for an older frame (evaluations of one frame while its series arrive replace each
//!   other, `docs/ENGINE.md`, invariants 2 and 7), except where the engine restarted that family's output on an input reset
//!   (`EngineStats::output_resets` rose during the call that fed the group), after a staleness
//!   marker to the group (it may leave and come back afresh) and after an idle sweep;
//! * the engine reports an input reset for a group only if the program sent one of its series a
//!   value below one sent before.

use hashbrown::HashMap;

use engine::{DerivedValue, Engine, EngineConfig, Family, IngestReport};
use protocol::{Label, STALE_NAN_BITS, Sample};

/// The input series names the program can address; histogram buckets take an `le` from [`LES`].
const NAMES: [&str; 17] = [
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:time_per_output_token_seconds_bucket",
    "vllm:time_per_output_token_seconds_sum",
    "vllm:time_per_output_token_seconds_count",
    "vllm:request_time_per_output_token_seconds_bucket",
    "vllm:request_time_per_output_token_seconds_sum",
    "vllm:request_time_per_output_token_seconds_count",
    "vllm:request_generation_tokens_bucket",
    "vllm:request_generation_tokens_count",
    "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_count",
    "vllm:prompt_tokens_by_source_total",
    "vllm:iteration_tokens_total_count",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_drafts_total",
];

/// `le` values the program can use (as vLLM and Prometheus print them, plus odd spellings).
const LES: [&str; 10] = [
    "0.01", "0.025", "0.05", "0.1", "1.0", "1", "2.0", "0", "-0.0", "+Inf",
];

/// Bucket layouts of a full scrape, as indices into [`LES`] (each ends at `+Inf`).
const LAYOUTS: [&[usize]; 4] = [&[0, 2, 9], &[1, 2, 3, 9], &[9], &[7, 4, 6, 9]];

/// Reads the program's bytes; 0 once they run out.
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// One addressable series: group, name index, `le` index (buckets only; else 0).
type Key = (u8, usize, usize);

/// What the harness last saw of one output.
struct Seen {
    /// Frame timestamp, ms.
    ts: i64,
    /// The value served for that frame.
    value: DerivedValue,
    /// The last value served for an older frame: what every value of `ts` must not fall below.
    floor: Option<DerivedValue>,
}

struct Harness {
    engine: Engine,
    /// Sample clock (ms) around which timestamps are chosen, and the receive clock.
    clock: i64,
    /// Last real value sent per series, the base of the next one.
    last_value: HashMap<Key, f64>,
    /// Largest real value sent per series (by parsed `le`), to tell an input reset.
    max_value: HashMap<Key, f64>,
    /// Groups that were sent a value below an earlier one of the same series.
    lowered: [bool; 2],
    /// Per (family, the group's `engine` label, the only group label that varies): the frame
    /// timestamp of the last derived value seen, that value, and the last value seen for an
    /// older frame (the floor), cleared when the group may restart.
    last_output: HashMap<(Family, u8), Seen>,
    /// Σ `EngineStats::output_resets` after the previous call.
    resets_seen: u64,
    /// Groups whose outputs may fall at the next check (engine label value).
    excused: [bool; 2],
    /// Derived values checked so far.
    checked: usize,
}

/// The key of the engine series `key` addresses: `le="1"` and `le="1.0"` (and `0`, `-0.0`) are
/// one bound, and a series without `le` ignores it (the prompt-token source takes its parity).
fn canonical((group, name, le): Key) -> Key {
    let le = match name {
        0 | 3 | 6 | 9 => match le {
            5 => 4,
            8 => 7,
            le => le,
        },
        13 => le % 2,
        _ => 0,
    };
    (group, name, le)
}

fn labels_of(key: Key) -> Vec<(&'static str, String)> {
    let (group, name, le) = key;
    let mut labels = vec![
        ("__name__", NAMES[name].to_owned()),
        ("engine", group.to_string()),
        ("model_name", "m".to_owned()),
    ];
    if name == 13 {
        labels.push((
            "source",
            if le % 2 == 0 {
                "local_compute"
            } else {
                "local_cache_hit"
            }
            .to_owned(),
        ));
    }
    if matches!(name, 0 | 3 | 6 | 9) {
        labels.push(("le", LES[le].to_owned()));
    }
    labels.sort();
    labels
}

fn check_shape(value: &DerivedValue) {
    if let DerivedValue::Histogram { buckets, count, .. } = value {
        assert!(
            buckets.windows(2).all(|w| w[0].0 < w[1].0),
            "bounds ascend: {buckets:?}"
        );
        assert!(
            buckets.windows(2).all(|w| w[1].1 >= w[0].1),
            "cumulative counts never fall with le (and are not NaN): {buckets:?}"
        );
        assert!(
            buckets.iter().all(|(_, c)| *c <= *count),
            "no bucket above the count: {buckets:?} vs {count}"
        );
        let last = buckets.last().expect("a +Inf bucket");
        assert!(last.0 == f64::INFINITY, "ends at +Inf: {buckets:?}");
        assert!(
            last.1.to_bits() == count.to_bits() || last.1 == *count,
            "+Inf bucket is the count: {buckets:?} vs {count}"
        );
    }
}

/// Components of `new` that are lower than the same component of `old` (by `le` for buckets).
fn fell(old: &DerivedValue, new: &DerivedValue) -> Option<String> {
    let lower = |a: f64, b: f64| b < a;
    match (old, new) {
        (DerivedValue::SumCount { sum: s0, count: c0 }, DerivedValue::SumCount { sum, count }) => {
            (lower(*s0, *sum) || lower(*c0, *count)).then(|| format!("{old:?} -> {new:?}"))
        }
        (
            DerivedValue::Histogram {
                buckets: b0,
                sum: s0,
                count: c0,
            },
            DerivedValue::Histogram {
                buckets,
                sum,
                count,
            },
        ) => {
            let bucket_fell = buckets
                .iter()
                .any(|(le, c)| b0.iter().any(|(l, c0)| l == le && lower(*c0, *c)));
            (lower(*s0, *sum) || lower(*c0, *count) || bucket_fell)
                .then(|| format!("{old:?} -> {new:?}"))
        }
        _ => None,
    }
}

impl Harness {
    fn ingest(&mut self, key: Key, samples: &[Sample]) {
        let owned = labels_of(key);
        let labels: Vec<Label<'_>> = owned
            .iter()
            .map(|(n, v)| Label { name: n, value: v })
            .collect();
        let g = usize::from(key.0);
        let canonical = canonical(key);
        for s in samples {
            if protocol::is_stale_marker(s.value) {
                self.excused[g] = true;
            } else if !s.value.is_nan() {
                let max = self.max_value.entry(canonical).or_insert(s.value);
                self.lowered[g] |= s.value < *max;
                *max = max.max(s.value);
                self.last_value.insert(canonical, s.value);
            }
        }
        let mut report = IngestReport::default();
        self.engine
            .ingest(&labels, samples, self.clock, &mut report);
        assert_eq!(
            report.received,
            samples.len() as u64,
            "every sample is counted once"
        );
        assert_eq!(
            report.received,
            report.applied + report.rejected_total(),
            "received = applied + Σ rejected"
        );
        let resets: u64 = self.engine.stats().output_resets.iter().sum();
        if std::mem::replace(&mut self.resets_seen, resets) < resets {
            assert!(
                self.lowered[g],
                "an input reset reported for group {g}, which never had a value fall"
            );
            self.excused[g] = true;
        }
        self.check();
    }

    /// Checks every output's shape and, outside excused groups, that nothing fell.
    fn check(&mut self) {
        for (g, excused) in self.excused.iter_mut().enumerate() {
            if std::mem::take(excused) {
                self.last_output
                    .retain(|(_, group), _| usize::from(*group) != g);
            }
        }
        for family in Family::ALL {
            let (last, checked) = (&mut self.last_output, &mut self.checked);
            self.engine.for_each_output_at(family, |labels, ts, value| {
                check_shape(value);
                let group = labels
                    .iter()
                    .find(|(n, _)| n == "engine")
                    .map_or(2, |(_, v)| v.parse().unwrap_or(2));
                let key = (family, group);
                // A frame is evaluated again while its series arrive, each evaluation replacing
                // the one before; what must never fall is the value against older frames.
                let floor = match last.remove(&key) {
                    Some(seen) if seen.ts == ts => seen.floor,
                    Some(seen) => Some(seen.value),
                    None => None,
                };
                if let Some(old) = &floor
                    && let Some(what) = fell(old, value)
                {
                    panic!("{family:?} of {labels:?} fell with no input reset: {what}");
                }
                last.insert(
                    key,
                    Seen {
                        ts,
                        value: value.clone(),
                        floor,
                    },
                );
                *checked += 1;
            });
        }
    }

    /// A value for `key`: mostly its last value plus an increment, sometimes a reset, a repeat or
    /// a staleness marker.
    fn value(&mut self, key: Key, b: &mut Bytes<'_>) -> f64 {
        let prev = self.last_value.get(&canonical(key)).copied().unwrap_or(0.0);
        let x = f64::from(b.next());
        match b.next() % 16 {
            0 => f64::from_bits(STALE_NAN_BITS),
            1 => f64::NAN,
            2 => x,
            3 => prev,
            4 => prev + x * 1e6,
            5 => prev + x / 256.0,
            _ => prev + x,
        }
    }

    fn timestamp(&self, b: &mut Bytes<'_>) -> i64 {
        match b.next() % 8 {
            0 => self.clock - 15_000,
            1 => self.clock + i64::from(b.next()) * 1000,
            _ => self.clock,
        }
    }

    /// Every series of `group` at one timestamp, with consistent (cumulative, monotone) values
    /// when `consistent`, each raised by the program's bytes.
    fn scrape(&mut self, group: u8, b: &mut Bytes<'_>) {
        let layout = LAYOUTS[usize::from(b.next()) % LAYOUTS.len()];
        let ts = self.timestamp(b);
        let skip = b.next();
        for name in 0..NAMES.len() {
            if skip != 0 && usize::from(skip) % NAMES.len() == name {
                continue;
            }
            let les: Vec<usize> = match name {
                0 | 3 | 6 => layout.to_vec(),
                9 => vec![4, 6, 9],
                13 => vec![0, 1],
                _ => vec![0],
            };
            let mut floor = 0.0f64;
            for le in les {
                let key = (group, name, le);
                let prev = self.last_value.get(&canonical(key)).copied().unwrap_or(0.0);
                let value = (prev + f64::from(b.next() % 8)).max(floor);
                floor = value;
                self.ingest(
                    key,
                    &[Sample {
                        value,
                        timestamp_ms: ts,
                    }],
                );
            }
        }
    }
}

/// Runs the program in `data` (see the module documentation) and returns how many derived values
/// it checked. Panics on a violated invariant.
pub(super) fn run(data: &[u8]) -> usize {
    let mut b = Bytes { data, pos: 0 };
    let config = EngineConfig {
        idle_timeout_ms: 60_000,
        max_pending_frames: 1 + usize::from(b.next() % 8),
        max_active_series: 8 + usize::from(b.next()) * 2,
        settle_scrapes: u32::from(b.next() % 3),
        ..EngineConfig::default()
    };
    let mut h = Harness {
        engine: Engine::new(config),
        clock: 1_750_000_000_000,
        last_value: HashMap::new(),
        max_value: HashMap::new(),
        lowered: [false; 2],
        last_output: HashMap::new(),
        resets_seen: 0,
        excused: [false; 2],
        checked: 0,
    };
    let mut ops = 0;
    while !b.done() && ops < 4096 {
        ops += 1;
        let op = b.next();
        let group = op >> 7;
        match op % 8 {
            0..=2 => {
                let name = usize::from(b.next()) % NAMES.len();
                let le = usize::from(b.next()) % LES.len();
                let key = (group, name, le);
                let n = 1 + usize::from(b.next() % 3);
                let samples: Vec<Sample> = (0..n)
                    .map(|_| Sample {
                        value: h.value(key, &mut b),
                        timestamp_ms: h.timestamp(&mut b),
                    })
                    .collect();
                h.ingest(key, &samples);
            }
            3 | 4 => h.scrape(group, &mut b),
            5 => {
                let stale = Sample {
                    value: f64::from_bits(STALE_NAN_BITS),
                    timestamp_ms: h.timestamp(&mut b),
                };
                let keys: Vec<Key> = h
                    .last_value
                    .keys()
                    .copied()
                    .filter(|k| k.0 == group)
                    .collect();
                for key in keys {
                    h.ingest(key, &[stale]);
                }
            }
            6 => h.clock += 15_000 * i64::from(1 + b.next() % 4),
            _ => {
                h.clock += 1000 * i64::from(b.next());
                h.excused = [true; 2];
                h.engine.sweep_idle(h.clock);
                h.check();
            }
        }
    }
    h.checked
}
