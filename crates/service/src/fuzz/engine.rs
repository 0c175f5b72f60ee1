//! The `engine` fuzz target: arbitrary bytes read as a program of operations on one engine, so
//! libFuzzer explores sequences (series, timestamps, staleness markers, bucket layouts, counter
//! resets, idle sweeps, small limits) rather than one request.
//!
//! Every operation is checked as it happens:
//! * no panic;
//! * received = applied + Σ rejected for each [`Engine::ingest`] call;
//! * every derived histogram has ascending `le` bounds ending at `+Inf`, non-decreasing cumulative
//!   counts, none above `_count`, and `+Inf` = `_count`;
//! * every derived component (bucket by `le`, `_sum`, `_count`) of a watched group (`engine` 0
//!   or 1) never falls below what was served for an older frame (evaluations of one frame while
//!   its series arrive replace each other, `docs/ENGINE.md`, invariants 2 and 7), across
//!   single-series staleness markers and flaps, and across the group leaving (markers on every
//!   series, missed scrapes, the idle sweep) and coming back; except where the engine restarted
//!   that family's output on an input reset (`EngineStats::output_resets` rose during the call
//!   that fed the group), and after a retired state was dropped (`EngineStats::retired_dropped`
//!   rose: expired by sample time or evicted for the budget, docs/ENGINE.md, "Groups that leave
//!   and come back");
//! * the engine reports an input reset for a group only if the program sent one of its series a
//!   value below one sent before;
//! * the engine's accounted state stays within `max_state_bytes`, and the retired states within a
//!   quarter of it, while churning groups (`engine="c…"`, with long labels, that scrape and leave)
//!   fill it.

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

/// One addressable series: group, name index, `le` index (buckets only; else 0). Groups 0 and 1
/// are watched; 2 and above churn ([`labels_of`]).
type Key = (u8, usize, usize);

/// Groups below this are watched for falling outputs; the others churn.
const WATCHED: u8 = 2;

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
    lowered: [bool; 256],
    /// Per (family, the group's `engine` label, the only group label that varies): the frame
    /// timestamp of the last derived value seen, that value, and the last value seen for an
    /// older frame (the floor), cleared when the group may restart.
    last_output: HashMap<(Family, u8), Seen>,
    /// Σ `EngineStats::output_resets` after the previous call.
    resets_seen: u64,
    /// Watched groups whose outputs may fall at the next check (engine label value).
    excused: [bool; WATCHED as usize],
    /// Σ `EngineStats::retired_dropped` after the previous call.
    dropped_seen: u64,
    /// The next churning group.
    churn: u8,
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

/// The labels of `key`: a watched group's `engine` is its number; a churning group's is `c` and
/// its number, with a long `pad` label and up to 7 more (label-heavy groups).
fn labels_of(key: Key) -> Vec<(String, String)> {
    let (group, name, le) = key;
    let mut labels = vec![
        ("__name__".to_owned(), NAMES[name].to_owned()),
        ("model_name".to_owned(), "m".to_owned()),
    ];
    if group < WATCHED {
        labels.push(("engine".to_owned(), group.to_string()));
    } else {
        labels.push(("engine".to_owned(), format!("c{group}")));
        let pad = usize::from(group) * 131 % 2048;
        labels.push(("pad".to_owned(), "p".repeat(pad)));
        for i in 0..group % 8 {
            labels.push((format!("l{i}"), format!("{group}-{i}")));
        }
    }
    if name == 13 {
        labels.push((
            "source".to_owned(),
            if le % 2 == 0 {
                "local_compute"
            } else {
                "local_cache_hit"
            }
            .to_owned(),
        ));
    }
    if matches!(name, 0 | 3 | 6 | 9) {
        labels.push(("le".to_owned(), LES[le].to_owned()));
    }
    labels.sort();
    labels
}

fn check_shape(value: &DerivedValue) {
    if let DerivedValue::Counters { rows, values } = value {
        use engine::CounterMetric::{
            GoodputRequests, SloEvents, SloFinishedRequests, SloGoodEvents,
        };
        let find = |metric, labels: &[(String, String)]| {
            rows.iter()
                .zip(values)
                .find(|(r, _)| r.metric == metric && r.labels == labels)
                .map(|(_, v)| *v)
        };
        for (row, v) in rows.iter().zip(values) {
            assert!(
                v.is_finite() && *v >= 0.0,
                "a counter that counts: {row:?} {v}"
            );
            let slo = [row
                .labels
                .iter()
                .find(|(n, _)| n == "slo")
                .cloned()
                .expect("slo")];
            let with = |name: &str, value: &str| {
                let mut l = vec![(name.to_owned(), value.to_owned())];
                l.extend(slo.iter().cloned());
                l.sort();
                l
            };
            match row.metric {
                SloGoodEvents => {
                    let events = find(SloEvents, &row.labels).expect("events beside good events");
                    assert!(*v <= events, "good events {v} above events {events}");
                }
                SloFinishedRequests => {
                    let lower = find(GoodputRequests, &with("bound", "lower")).expect("lower");
                    let upper = find(GoodputRequests, &with("bound", "upper")).expect("upper");
                    assert!(lower <= upper && upper <= *v, "{lower} <= {upper} <= {v}");
                }
                _ => {}
            }
        }
    }
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
        (
            DerivedValue::Counters {
                rows: r0,
                values: v0,
            },
            DerivedValue::Counters { rows, values },
        ) => {
            let row_fell = rows.iter().zip(values).any(|(row, v)| {
                r0.iter().zip(v0).any(|(r, v0)| {
                    r.metric == row.metric && r.labels == row.labels && lower(*v0, *v)
                })
            });
            row_fell.then(|| format!("{old:?} -> {new:?}"))
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
            // A staleness marker excuses nothing: one series' marker never lets a frame be
            // evaluated without it, and a group that leaves keeps what it served.
            if !s.value.is_nan() {
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
        let stats = self.engine.stats();
        let resets: u64 = stats.output_resets.iter().sum();
        if std::mem::replace(&mut self.resets_seen, resets) < resets {
            assert!(
                self.lowered[g],
                "an input reset reported for group {g}, which never had a value fall"
            );
            if let Some(excused) = self.excused.get_mut(g) {
                *excused = true;
            }
        }
        self.budget_holds();
        self.check();
    }

    /// The state budget holds, and a dropped retired state excuses the watched groups (either
    /// may have been the one dropped).
    fn budget_holds(&mut self) {
        let stats = self.engine.stats();
        let max = self.engine.config().max_state_bytes;
        let used = self.engine.state_bytes();
        assert!(
            used <= max,
            "state {used} B over the budget {max} B: {stats:?}"
        );
        assert!(
            stats.memory.retired <= max / 4,
            "retired states {} B over a quarter of {max} B",
            stats.memory.retired
        );
        let dropped = stats.retired_dropped.iter().sum();
        if std::mem::replace(&mut self.dropped_seen, dropped) < dropped {
            self.excused = [true; WATCHED as usize];
        }
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
                    .map_or(WATCHED, |(_, v)| v.parse().unwrap_or(WATCHED));
                *checked += 1;
                if group >= WATCHED {
                    return;
                }
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

    /// Up to 8 churning groups (label-heavy, cycling through `engine="c2"` … `"c255"`, so some
    /// come back): each sends a scrape, and most then leave with markers on every series.
    fn churn(&mut self, b: &mut Bytes<'_>) {
        for _ in 0..1 + b.next() % 8 {
            let group = self.churn;
            self.churn = self.churn.checked_add(1).unwrap_or(WATCHED);
            self.scrape(group, b);
            if !b.next().is_multiple_of(4) {
                self.mark_stale(group, b);
            }
        }
    }

    /// Every series `group` was sent, in order (so a program replays the same way).
    fn keys_of(&self, group: u8) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .last_value
            .keys()
            .copied()
            .filter(|k| k.0 == group)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// A staleness marker on every series `group` was sent.
    fn mark_stale(&mut self, group: u8, b: &mut Bytes<'_>) {
        let stale = Sample {
            value: f64::from_bits(STALE_NAN_BITS),
            timestamp_ms: self.timestamp(b),
        };
        for key in self.keys_of(group) {
            self.ingest(key, &[stale]);
        }
    }

    /// One series of `group` flaps: its staleness marker and a real value (raised by a little)
    /// at one timestamp, in either order, as remote write's shards may deliver them.
    fn flap(&mut self, group: u8, b: &mut Bytes<'_>) {
        let keys = self.keys_of(group);
        if keys.is_empty() {
            return;
        }
        let key = keys[usize::from(b.next()) % keys.len()];
        let timestamp_ms = self.timestamp(b);
        let real = Sample {
            value: self.last_value[&key] + f64::from(b.next() % 4),
            timestamp_ms,
        };
        let stale = Sample {
            value: f64::from_bits(STALE_NAN_BITS),
            timestamp_ms,
        };
        let order = if b.next().is_multiple_of(2) {
            [real, stale]
        } else {
            [stale, real]
        };
        for sample in order {
            self.ingest(key, &[sample]);
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
        // Small budgets, so churning groups fill them: room for a few groups, or a dozen.
        max_state_bytes: match b.next() % 4 {
            0 => EngineConfig::default().max_state_bytes,
            n => (64 * 1024) << (2 * n),
        },
        ..EngineConfig::default()
    };
    let mut h = Harness {
        engine: Engine::new(config),
        clock: 1_750_000_000_000,
        last_value: HashMap::new(),
        max_value: HashMap::new(),
        lowered: [false; 256],
        last_output: HashMap::new(),
        resets_seen: 0,
        excused: [false; WATCHED as usize],
        dropped_seen: 0,
        churn: WATCHED,
        checked: 0,
    };
    let mut ops = 0;
    while !b.done() && ops < 4096 {
        ops += 1;
        let op = b.next();
        let group = op >> 7;
        match op % 10 {
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
            5 => h.mark_stale(group, &mut b),
            6 => h.clock += 15_000 * i64::from(1 + b.next() % 4),
            7 => {
                h.clock += 1000 * i64::from(b.next());
                h.engine.sweep_idle(h.clock);
                h.budget_holds();
                h.check();
            }
            8 => h.churn(&mut b),
            _ => h.flap(group, &mut b),
        }
    }
    h.checked
}
