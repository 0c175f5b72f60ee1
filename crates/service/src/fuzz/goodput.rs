//! The `goodput` fuzz target: arbitrary bytes read as a vLLM request stream (arrivals, first
//! tokens, finishes, aborts), scraped at moments the bytes choose, with vLLM restarts, corrector
//! restarts from the state file, series that go stale and scrapes that lose a series, fed to one
//! engine counting three SLOs (docs/SLO.md, "SLO counters").
//!
//! After every scrape, per SLO, at the frame the engine served (which may be older than the
//! scrape: one series' staleness marker holds frames back until it lapses):
//! * the goodput bounds bracket the truth: the requests, among the last `finished` ones to
//!   finish by that frame (`vllm_corrected_slo_finished_requests_total` counts the requests
//!   finished since the engine began counting, and requests finish in order; a vLLM process's
//!   requests that finished after the newest of its frames the engine evaluated were never seen
//!   finished), that met every threshold as `vllm bench serve --goodput` counts them;
//! * `lower ≤ upper ≤ finished`, and none of the three falls, unless the engine dropped the
//!   group's state (its `finished` then restarts too);

use engine::slo::{Sli, Slo, SloSet, SloSpec};
use engine::{CounterMetric, DerivedValue, Engine, EngineConfig, Family, IngestReport};
use protocol::{Label, STALE_NAN_BITS, Sample};

/// vLLM's default edges of the TTFT, request TPOT and E2E latency histograms (a prefix of each;
/// `vllm/v1/metrics/loggers.py`), seconds.
const TTFT_EDGES: [f64; 6] = [0.02, 0.04, 0.06, 0.08, 0.1, 0.25];
const TPOT_EDGES: [f64; 5] = [0.01, 0.025, 0.05, 0.075, 0.1];
const E2E_EDGES: [f64; 5] = [0.3, 0.5, 0.8, 1.0, 1.5];

/// The SLOs: two on edges, one between edges (its goodput uses the edges around it).
fn slos() -> SloSpec {
    let slo = |name: &str, slis: &[(Sli, f64)]| Slo::with_thresholds(name, 0.9, slis);
    SloSpec {
        slos: vec![
            slo("tpot", &[(Sli::Tpot, 0.05)]),
            slo(
                "all",
                &[(Sli::Ttft, 0.08), (Sli::Tpot, 0.05), (Sli::E2el, 0.8)],
            ),
            slo(
                "between",
                &[(Sli::Ttft, 0.07), (Sli::Tpot, 0.03), (Sli::E2el, 0.9)],
            ),
        ],
    }
}

/// One request of the stream: times in ms of the sender's clock.
#[derive(Debug, Clone)]
struct Request {
    arrival: i64,
    /// When its first token came; `None` when it never produced one (an abort or error that
    /// may or may not leave a TTFT observation: `ttft_seen`).
    first: Option<i64>,
    finish: i64,
    /// Output tokens.
    n: u32,
    /// Decode time per token after the first, ms.
    tpot_ms: i64,
    /// Finished by an abort or an error.
    abnormal: bool,
    /// When vLLM observed a TTFT for it, and the value (s): at its first token; for a tokenless
    /// request sometimes at its finish (an engine-side abort's empty first output), never else.
    observed: Option<(i64, f64)>,
    /// Filed among the finished requests.
    filed: bool,
    /// The vLLM process it ran in.
    process: u32,
}

impl Request {
    fn ttft(&self) -> Option<f64> {
        self.first.map(|f| (f - self.arrival) as f64 / 1000.0)
    }
    fn tpot(&self) -> f64 {
        if self.n > 1 {
            self.tpot_ms as f64 / 1000.0
        } else {
            0.0
        }
    }
    fn e2el(&self) -> f64 {
        (self.finish - self.arrival) as f64 / 1000.0
    }
    /// As `vllm bench serve --goodput` counts it: every threshold met, TPOT 0 for n ≤ 1, and a
    /// request without a first token fails a TTFT threshold.
    fn good(&self, slo: &Slo) -> bool {
        slo.slis.iter().all(|t| match t.sli {
            Sli::Ttft => self.ttft().is_some_and(|v| v <= t.threshold_seconds),
            Sli::Tpot => self.tpot() <= t.threshold_seconds,
            Sli::E2el => self.e2el() <= t.threshold_seconds,
            Sli::ItlPerToken => true,
        })
    }
}

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
}

/// The bounds last seen for one SLO.
#[derive(Debug, Clone, Copy, Default)]
struct Last {
    finished: f64,
    lower: f64,
    upper: f64,
}

struct Harness {
    engine: Engine,
    /// Sender clock, ms.
    clock: i64,
    /// The current vLLM process's requests.
    live: Vec<Request>,
    /// Every request that finished, in finish order (every process).
    finished: Vec<Request>,
    /// Series that went stale (by name), until the next vLLM restart.
    stale: Vec<String>,
    /// The current vLLM process.
    process: u32,
    /// Every scrape: its time and process.
    scrapes: Vec<(i64, u32)>,
    /// Per process, the newest of its frames the engine served.
    evaluated: Vec<i64>,
    /// The newest scrape's time.
    last_scrape: i64,
    last: Vec<Option<Last>>,
    checked: usize,
}

/// A counter row: its metric, its own labels and its value.
type Row = (CounterMetric, Vec<(String, String)>, f64);

/// A series of a scrape: its name, its labels besides the group's, and its value.
type Series = (String, Vec<(String, String)>, f64);

fn counters(engine: &Engine) -> Vec<Row> {
    let mut out = Vec::new();
    engine.for_each_derived(Family::SloCounters, |_, value| {
        if let DerivedValue::Counters { rows, values } = value {
            for (row, v) in rows.iter().zip(values) {
                out.push((row.metric, row.labels.clone(), *v));
            }
        }
    });
    out
}

fn find(c: &[Row], m: CounterMetric, pairs: &[(&str, &str)]) -> Option<f64> {
    c.iter()
        .find(|(metric, labels, _)| {
            *metric == m
                && pairs
                    .iter()
                    .all(|(n, v)| labels.iter().any(|(k, x)| k == n && x == v))
        })
        .map(|e| e.2)
}

impl Harness {
    fn new() -> Harness {
        let spec = slos();
        Harness {
            engine: Engine::new(EngineConfig {
                settle_scrapes: 0,
                slos: SloSet::new(&spec, |_| None),
                ..EngineConfig::default()
            }),
            clock: 1_000_000,
            live: Vec::new(),
            finished: Vec::new(),
            stale: Vec::new(),
            process: 0,
            scrapes: Vec::new(),
            evaluated: Vec::new(),
            last_scrape: 0,
            last: vec![None; spec.slos.len()],
            checked: 0,
        }
    }

    /// A request arriving now, from three bytes: its TTFT, tokens and TPOT.
    fn arrive(&mut self, b: &mut Bytes<'_>) {
        let (t, n, p) = (b.next(), b.next(), b.next());
        let ttft = 5 + i64::from(t % 32) * 5;
        let n = match n % 8 {
            0 => 0,
            1 => 1,
            k => u32::from(k) * 3 + u32::from(n / 8 % 16),
        };
        let tpot_ms = 5 + i64::from(p % 16) * 5;
        let first = (n > 0).then_some(self.clock + ttft);
        let finish = self.clock + ttft + tpot_ms * i64::from(n.saturating_sub(1));
        let abnormal = n == 0 || p & 0x40 != 0;
        let observed = match first {
            Some(f) => Some((f, ttft as f64 / 1000.0)),
            None => (p & 0x80 != 0).then_some((finish, ttft as f64 / 1000.0)),
        };
        self.live.push(Request {
            arrival: self.clock,
            first,
            finish,
            n,
            tpot_ms,
            abnormal,
            observed,
            filed: false,
            process: self.process,
        });
    }

    /// The series a scrape of this process shows now, as `(name, extra labels, value)`.
    fn series(&self) -> Vec<Series> {
        let now = self.clock;
        let done: Vec<&Request> = self.live.iter().filter(|r| r.finish <= now).collect();
        let seen: Vec<f64> = self
            .live
            .iter()
            .filter_map(|r| r.observed.filter(|(at, _)| *at <= now).map(|(_, v)| v))
            .collect();
        let mut out = Vec::new();
        let mut hist = |base: &str, edges: &[f64], values: &[f64]| {
            for le in edges.iter().copied().chain([f64::INFINITY]) {
                let count = values.iter().filter(|v| **v <= le).count() as f64;
                let le = protocol::float::format_le(le);
                out.push((format!("{base}_bucket"), vec![("le".to_owned(), le)], count));
            }
            out.push((format!("{base}_sum"), Vec::new(), values.iter().sum()));
            out.push((format!("{base}_count"), Vec::new(), values.len() as f64));
        };
        let tpots: Vec<f64> = done.iter().map(|r| r.tpot()).collect();
        let e2els: Vec<f64> = done.iter().map(|r| r.e2el()).collect();
        let tokens: Vec<f64> = done.iter().map(|r| f64::from(r.n)).collect();
        hist("vllm:time_to_first_token_seconds", &TTFT_EDGES, &seen);
        hist(
            "vllm:request_time_per_output_token_seconds",
            &TPOT_EDGES,
            &tpots,
        );
        hist("vllm:e2e_request_latency_seconds", &E2E_EDGES, &e2els);
        hist(
            "vllm:request_generation_tokens",
            &[1.0, 2.0, 5.0, 10.0],
            &tokens,
        );
        let aborts = done.iter().filter(|r| r.abnormal).count() as f64;
        let success = done.len() as f64 - aborts;
        for (reason, v) in [("abort", aborts), ("error", 0.0), ("stop", success)] {
            let labels = vec![("finished_reason".to_owned(), reason.to_owned())];
            out.push(("vllm:request_success_total".to_owned(), labels, v));
        }
        out.retain(|(name, labels, _)| !self.stale.iter().any(|s| *s == series_id(name, labels)));
        out
    }

    /// Sends the scrape of now, less the series whose index is `skip` (a series lost on the way:
    /// the frame stays incomplete). Returns true when every series was sent.
    fn scrape(&mut self, skip: Option<usize>) -> bool {
        // A target is never scraped twice at one timestamp.
        if self.clock <= self.last_scrape {
            self.advance(self.last_scrape - self.clock + 1);
        }
        self.last_scrape = self.clock;
        self.scrapes.push((self.clock, self.process));
        let series = self.series();
        let mut complete = true;
        for (i, (name, extra, value)) in series.iter().enumerate() {
            if skip.is_some_and(|k| k % series.len() == i) {
                complete = false;
                continue;
            }
            self.send(name, extra, *value);
        }
        complete
    }

    fn send(&mut self, name: &str, extra: &[(String, String)], value: f64) {
        let mut labels = vec![
            Label {
                name: "__name__",
                value: name,
            },
            Label {
                name: "engine",
                value: "0",
            },
        ];
        labels.extend(extra.iter().map(|(n, v)| Label { name: n, value: v }));
        labels.sort_by(|a, b| a.name.cmp(b.name));
        let sample = Sample {
            value,
            timestamp_ms: self.clock,
        };
        let mut report = IngestReport::default();
        self.engine
            .ingest(&labels, &[sample], self.clock, &mut report);
        assert_eq!(report.received, report.applied + report.rejected_total());
        self.note_output();
    }

    /// Notes the frame the SLO counters are served at, and returns it with its process: every
    /// frame the engine evaluates is seen here, since it evaluates only while series arrive.
    fn note_output(&mut self) -> Option<(i64, usize)> {
        let mut at = None;
        self.engine
            .for_each_output_at(Family::SloCounters, |_, ts, _| at = Some(ts));
        let at = at?;
        let Some(&(_, q)) = self.scrapes.iter().rev().find(|(ts, _)| *ts == at) else {
            panic!("the SLO counters are at {at}, a time never scraped");
        };
        let q = q as usize;
        if self.evaluated.len() <= q {
            self.evaluated.resize(q + 1, i64::MIN);
        }
        self.evaluated[q] = self.evaluated[q].max(at);
        Some((at, q))
    }

    /// Moves the clock on and files the requests that finished by then, in finish order.
    fn advance(&mut self, ms: i64) {
        self.clock += ms;
        let now = self.clock;
        let mut done: Vec<&mut Request> = self
            .live
            .iter_mut()
            .filter(|r| !r.filed && r.finish <= now)
            .collect();
        done.sort_by_key(|r| r.finish);
        for r in done {
            r.filed = true;
            self.finished.push(r.clone());
        }
    }

    /// vLLM restarts: its requests in flight never finish, its counters start again at 0, and it
    /// is scraped at once, before any of its own requests finish, so that the engine sees its
    /// counters fall. (A restart whose first scrape shows every counter at or above the last one
    /// the engine saw cannot be told from no restart, by the engine or by Prometheus' `rate()`:
    /// docs/GOODPUT.md, "The bounds, interval by interval".)
    ///
    /// It restarts only when the engine has evaluated the process's newest scrape: a process
    /// whose frames still wait for a series (one series' staleness marker holds them for the
    /// pending window) would leave requests that finished in frames the engine never completed,
    /// which neither bound counts (docs/GOODPUT.md, "The bounds, interval by interval"), and which this harness
    /// cannot tell apart.
    fn restart_vllm(&mut self) {
        if !self.scrape(None) || self.note_output().map(|(at, _)| at) != Some(self.clock) {
            return;
        }
        self.live.clear();
        self.stale.clear();
        self.process += 1;
        self.scrape(None);
    }

    /// The corrector restarts with its state file.
    fn restart_corrector(&mut self) {
        let mut cursor = engine::StateCursor::default();
        let mut records = Vec::new();
        while !cursor.is_done() {
            records.extend(self.engine.state_records(&mut cursor, 8));
        }
        let config = self.engine.config().clone();
        self.engine = Engine::new(config);
        for record in records {
            let _ = self.engine.restore_record(record, self.clock);
        }
    }

    /// The checks after a scrape.
    fn check(&mut self) {
        let Some((at, q)) = self.note_output() else {
            return;
        };
        // The requests the engine can have seen finish, by that frame, in finish order.
        let seen: Vec<&Request> = self
            .finished
            .iter()
            .filter(|r| {
                let p = r.process as usize;
                (p < q && r.finish <= self.evaluated.get(p).copied().unwrap_or(i64::MIN))
                    || (p == q && r.finish <= at)
            })
            .collect();
        let c = counters(&self.engine);
        for (i, slo) in slos().slos.iter().enumerate() {
            let name = slo.name.as_str();
            let get = |m, extra: &[(&str, &str)]| {
                let mut pairs = vec![("slo", name)];
                pairs.extend_from_slice(extra);
                find(&c, m, &pairs)
            };
            let (Some(finished), Some(lower), Some(upper)) = (
                get(CounterMetric::SloFinishedRequests, &[]),
                get(CounterMetric::GoodputRequests, &[("bound", "lower")]),
                get(CounterMetric::GoodputRequests, &[("bound", "upper")]),
            ) else {
                continue;
            };
            assert!(
                lower <= upper && upper <= finished,
                "{name}: {lower} {upper} {finished}"
            );
            let f = finished as usize;
            assert!(f <= seen.len(), "{name}: {f} finished of {}", seen.len());
            let recent = &seen[seen.len() - f..];
            if std::env::var_os("GOODPUT_FUZZ_TRACE").is_some() {
                eprintln!(
                    "  check {name} at {at} f {f} lower {lower} upper {upper} of {} recent {:?}",
                    seen.len(),
                    recent
                        .iter()
                        .map(|r| (
                            r.process,
                            r.arrival,
                            r.finish,
                            r.n,
                            r.ttft(),
                            r.abnormal,
                            r.good(slo)
                        ))
                        .collect::<Vec<_>>()
                );
            }
            let truth = recent.iter().filter(|r| r.good(slo)).count() as f64;
            assert!(
                lower <= truth && truth <= upper,
                "{name}: {lower} <= {truth} <= {upper} over the last {f} finished"
            );
            if let Some(last) = self.last[i]
                && finished >= last.finished
            {
                assert!(
                    lower >= last.lower && upper >= last.upper,
                    "{name} fell: {last:?} -> {lower} {upper}"
                );
            }
            self.last[i] = Some(Last {
                finished,
                lower,
                upper,
            });
            self.checked += 1;
        }
    }
}

fn series_id(name: &str, labels: &[(String, String)]) -> String {
    let mut id = name.to_owned();
    for (n, v) in labels {
        id.push_str(&format!(",{n}={v}"));
    }
    id
}

/// Runs the program `data`; returns how many bounds were checked.
pub(crate) fn run(data: &[u8]) -> usize {
    let mut b = Bytes { data, pos: 0 };
    let mut h = Harness::new();
    let trace = std::env::var_os("GOODPUT_FUZZ_TRACE").is_some();
    while b.pos < data.len() {
        let op = b.next() % 16;
        if trace {
            eprintln!(
                "op {op} clock {} live {} finished {}",
                h.clock,
                h.live.len(),
                h.finished.len()
            );
        }
        match op {
            0..=5 => h.arrive(&mut b),
            6..=9 => {
                let ms = 10 + i64::from(b.next()) * 4;
                h.advance(ms);
            }
            10..=12 => {
                h.scrape(None);
                h.check();
            }
            13 => {
                let k = usize::from(b.next());
                h.scrape(Some(k));
                h.check();
            }
            14 => match b.next() % 3 {
                0 => {
                    if trace {
                        eprintln!("  vllm restart");
                    }
                    h.restart_vllm()
                }
                1 => {
                    if trace {
                        eprintln!("  corrector restart");
                    }
                    h.restart_corrector()
                }
                _ => {
                    // One series goes stale (a marker), and the scrapes lose it from now on.
                    let series = h.series();
                    let k = usize::from(b.next()) % series.len().max(1);
                    if let Some((name, labels, _)) = series.get(k).cloned() {
                        if trace {
                            eprintln!("  stale {}", series_id(&name, &labels));
                        }
                        h.send(&name, &labels, f64::from_bits(STALE_NAN_BITS));
                        h.stale.push(series_id(&name, &labels));
                    }
                }
            },
            _ => {
                let ms = 1 + i64::from(b.next());
                h.advance(ms);
            }
        }
    }
    h.checked
}
