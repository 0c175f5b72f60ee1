//! Allocation counts of the receive path (Performance issue): heap allocations per decoded series
//! (RW1 decode, labels resolved and normalised) and per applied sample (engine, steady state). Counts, not
//! timings: they do not depend on the machine's load.
//!
//! Run: `cargo bench --bench alloc`. Uses `dhat`'s counting global allocator: the crate forbids
//! `unsafe` in every target, and a hand-written `GlobalAlloc` needs an `unsafe impl`.

use engine::{Engine, EngineConfig, IngestReport};
use protocol::{NameMemo, snappy, v1};

#[path = "support/scrape.rs"]
mod scrape;
#[path = "support/vllm_shape.rs"]
mod vllm_shape;

use scrape::{Scrape, one_request};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn allocations() -> u64 {
    dhat::HeapStats::get().total_blocks
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();

    let (body, _) = one_request(4);
    let mut buffer = Vec::new();
    snappy::decompress_into(&body, 128 << 20, &mut buffer).unwrap();
    let rounds = 20;
    let mut series = 0;
    let before = allocations();
    for _ in 0..rounds {
        let mut request = v1::decode(&buffer).unwrap();
        let (limits, mut memo) = (Default::default(), NameMemo::default());
        let mut scratch = protocol::LabelScratch::default();
        for i in 0..request.series.len() {
            request.resolve(i, &mut scratch).unwrap();
            request.check_labels(i, &limits, &mut memo).unwrap();
        }
        series += request.series.len();
    }
    let decode = (allocations() - before) as f64 / series as f64;

    let templates = vllm_shape::fleet(20, 2);
    let mut scrape = Scrape::new(&templates);
    let mut engine = Engine::new(EngineConfig::default());
    let mut k = 0;
    for _ in 0..20 {
        k += 1;
        scrape.at(k);
        scrape.ingest(&mut engine, &mut IngestReport::default());
    }
    let (mut samples, mut spent) = (0, 0);
    for _ in 0..5 {
        k += 1;
        scrape.at(k);
        let before = allocations();
        scrape.ingest(&mut engine, &mut IngestReport::default());
        spent += allocations() - before;
        samples += scrape.samples();
    }
    println!(
        "alloc/decode: {decode:.3} allocations per decoded series (RW1 decode + normalise, 500-sample requests)"
    );
    println!(
        "alloc/engine: {:.3} allocations per applied sample (full vLLM scrape, {} series, steady state)",
        spent as f64 / samples as f64,
        scrape.samples()
    );
}
