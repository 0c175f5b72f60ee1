//! Remote write 2.0 feeds the rules exactly as remote write 1.0 does (issue 4, "Done when").
//!
//! The vLLM 0.33 fixtures' three scrapes (t1, t2, and t3 with engine "0" restarted) are sent four
//! ways, each into a fresh engine through the library's own decode and ingest path:
//! 1. RW 1.0, classic histograms (the reference);
//! 2. RW 2.0, the same classic series, with per-series metadata;
//! 3. RW 2.0, every histogram family as one native histogram with custom buckets (schema −53), as
//!    Prometheus 3 sends after `convert_classic_histograms_to_nhcb` (integer counts);
//! 4. RW 1.0 with the same custom-bucket histograms (float counts).
//!
//! After every scrape, every derived value of every family (`Engine::for_each_derived`) and the
//! sample accounting must be identical, and the token-weighted ITL must equal the hand value of
//! `EXPECTED.md` (so the comparison is not between four empty outputs).

use std::collections::BTreeMap;

use engine::{DerivedValue, Engine, EngineConfig, Family, IngestReport};
use prost::Message;
use protocol::encode::{self, CustomBucketsSpec, RequestV2Builder, SeriesSpec};
use protocol::prompb::{v1, v2};
use protocol::{MetricType, Sample, Version};
use service::ingest::Receiver;

use crate::expected::fixture;
use crate::fixture::{Scrape, scrape_times};
use crate::rw::Point;

/// Every derived value, per family, with its group labels.
type Outputs = Vec<(Family, Vec<(String, String)>, DerivedValue)>;

fn outputs(engine: &Engine) -> Outputs {
    let mut out = Vec::new();
    for family in Family::ALL {
        engine.for_each_derived(family, |labels, value| {
            out.push((family, labels.to_vec(), value.clone()));
        });
    }
    out
}

/// One way of sending: a body per scrape, and which decoder reads it.
struct Sender {
    name: &'static str,
    rw2: bool,
    receiver: Receiver,
    report: IngestReport,
}

impl Sender {
    fn new(name: &'static str, rw2: bool) -> Sender {
        Sender {
            name,
            rw2,
            // Scrape by scrape from the first (docs/ENGINE.md, "Settling").
            receiver: Receiver::new(EngineConfig {
                settle_scrapes: 0,
                ..EngineConfig::default()
            }),
            report: IngestReport::default(),
        }
    }

    /// Receives a snappy-compressed body as the service does; it must be fully accepted.
    fn send(&mut self, body: &[u8], now_ms: i64) {
        let version = if self.rw2 { Version::V2 } else { Version::V1 };
        let receipt = self.receiver.receive(version, body, now_ms);
        assert_eq!(receipt.result, Ok(()), "{}", self.name);
        self.report.merge(&receipt.report);
    }
}

fn spec(p: &Point) -> SeriesSpec {
    (
        p.labels.clone(),
        vec![Sample {
            value: p.value,
            timestamp_ms: p.timestamp_ms,
        }],
    )
}

/// The points of one scrape split into classic histograms (keyed by base name and labels
/// without `__name__` and `le`) and every other point.
struct Split {
    histograms: BTreeMap<(String, Vec<(String, String)>), CustomBucketsSpec>,
    floats: Vec<Point>,
}

fn split(points: &[Point], timestamp_ms: i64) -> Split {
    let bucket_bases: Vec<String> = points
        .iter()
        .filter_map(|p| {
            p.label("__name__")?
                .strip_suffix("_bucket")
                .map(str::to_owned)
        })
        .collect();
    let mut out = Split {
        histograms: BTreeMap::new(),
        floats: Vec::new(),
    };
    for p in points {
        let name = p.label("__name__").unwrap();
        let part = ["_bucket", "_sum", "_count"]
            .into_iter()
            .find_map(|s| name.strip_suffix(s).map(|base| (base, s)))
            .filter(|(base, _)| bucket_bases.iter().any(|b| b == base));
        let Some((base, suffix)) = part else {
            out.floats.push(p.clone());
            continue;
        };
        let rest: Vec<(String, String)> = p
            .labels
            .iter()
            .filter(|(n, _)| n != "__name__" && n != "le")
            .cloned()
            .collect();
        let h = out
            .histograms
            .entry((base.to_owned(), rest))
            .or_insert_with(|| CustomBucketsSpec {
                bounds: Vec::new(),
                cumulative: Vec::new(),
                count: 0.0,
                sum: 0.0,
                timestamp_ms,
                float: false,
            });
        match suffix {
            "_sum" => h.sum = p.value,
            "_count" => h.count = p.value,
            _ => {
                let le = protocol::float::parse_le(p.label("le").unwrap()).unwrap();
                if le.is_finite() {
                    // The fixture lists buckets in ascending order, as every exposition does.
                    h.bounds.push(le);
                    h.cumulative.push(p.value);
                }
            }
        }
    }
    out
}

/// The histogram series' labels: the group labels with `__name__` = the base name, sorted.
fn native_labels(base: &str, rest: &[(String, String)]) -> Vec<(String, String)> {
    let mut labels = rest.to_vec();
    labels.push(("__name__".into(), base.into()));
    labels.sort();
    labels
}

pub(crate) fn rw2_classic(points: &[Point]) -> Vec<u8> {
    let mut b = RequestV2Builder::new();
    for p in points {
        let labels_refs = b.label_refs(&p.labels);
        let metadata = Some(b.metadata(MetricType::Counter, "from the fixture", ""));
        b.push(v2::TimeSeries {
            labels_refs,
            samples: vec![v2::Sample {
                value: p.value,
                timestamp: p.timestamp_ms,
                start_timestamp: 1_750_000_000_123,
            }],
            metadata,
            ..Default::default()
        });
    }
    encode::compress(&b.build().encode_to_vec())
}

pub(crate) fn rw2_native(points: &[Point], timestamp_ms: i64) -> Vec<u8> {
    let split = split(points, timestamp_ms);
    let mut b = RequestV2Builder::new();
    for ((base, rest), h) in &split.histograms {
        let labels_refs = b.label_refs(&native_labels(base, rest));
        let metadata = Some(b.metadata(MetricType::Histogram, "from the fixture", "seconds"));
        b.push(v2::TimeSeries {
            labels_refs,
            histograms: vec![h.to_v2()],
            metadata,
            ..Default::default()
        });
    }
    for p in &split.floats {
        let labels_refs = b.label_refs(&p.labels);
        b.push(v2::TimeSeries {
            labels_refs,
            samples: vec![v2::Sample {
                value: p.value,
                timestamp: p.timestamp_ms,
                start_timestamp: 0,
            }],
            ..Default::default()
        });
    }
    encode::compress(&b.build().encode_to_vec())
}

pub(crate) fn rw1_native(points: &[Point], timestamp_ms: i64) -> Vec<u8> {
    let split = split(points, timestamp_ms);
    let floats: Vec<SeriesSpec> = split.floats.iter().map(spec).collect();
    let mut request = encode::write_request_v1(&floats, &[]);
    for ((base, rest), h) in &split.histograms {
        let float = CustomBucketsSpec {
            float: true,
            ..h.clone()
        };
        request.timeseries.push(v1::TimeSeries {
            labels: native_labels(base, rest)
                .into_iter()
                .map(|(name, value)| v1::Label { name, value })
                .collect(),
            histograms: vec![float.to_v1()],
            ..Default::default()
        });
    }
    encode::compress(&request.encode_to_vec())
}

#[test]
fn rw2_and_native_custom_buckets_give_the_rw1_outputs_scrape_by_scrape() {
    let times = scrape_times();
    let mut senders = [
        Sender::new("RW1 classic", false),
        Sender::new("RW2 classic", true),
        Sender::new("RW2 native custom buckets", true),
        Sender::new("RW1 native custom buckets", false),
    ];
    let scrapes = [Scrape::T1, Scrape::T2, Scrape::T3Restart];
    for (scrape, ts) in scrapes.into_iter().zip(times) {
        let points = Scrape::points(scrape, ts);
        let split = split(&points, ts);
        // ITL, TPOT, TTFT, request latencies, token counts, iteration tokens: many families, two
        // engines each.
        assert!(split.histograms.len() >= 10, "{}", split.histograms.len());
        let classic: Vec<SeriesSpec> = points.iter().map(spec).collect();
        let bodies = [
            encode::encode_v1(&classic, &[]),
            rw2_classic(&points),
            rw2_native(&points, ts),
            rw1_native(&points, ts),
        ];
        for (sender, body) in senders.iter_mut().zip(&bodies) {
            sender.send(body, ts);
        }
        let reference = outputs(&senders[0].receiver.engine());
        for sender in &senders[1..] {
            assert_eq!(
                outputs(&sender.receiver.engine()),
                reference,
                "{} after {scrape:?}",
                sender.name
            );
            // A custom-bucket histogram counts as the classic samples it stands for.
            assert_eq!(
                sender.report, senders[0].report,
                "{} after {scrape:?}",
                sender.name
            );
        }
        for engine in ["0", "1"] {
            let want = fixture(scrape, engine).token_weighted;
            let got = reference.iter().find_map(|(family, labels, value)| {
                let ours = labels.iter().any(|(n, v)| n == "engine" && v == engine);
                match (*family, value) {
                    (Family::TokenWeightedItl, DerivedValue::SumCount { sum, count }) if ours => {
                        Some((*sum, *count))
                    }
                    _ => None,
                }
            });
            assert_eq!(got, Some(want), "engine {engine} after {scrape:?}");
        }
    }
}
