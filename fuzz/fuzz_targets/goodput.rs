//! Fuzz target `goodput`: the bytes are a vLLM request stream (arrivals, first tokens, finishes,
//! aborts) scraped into one engine counting three SLOs, with vLLM and corrector restarts, lost and
//! stale series; the true goodput must lie within the bounds after every scrape, and the bounds
//! never fall. The body is [`service::fuzz::goodput`], shared with the stable seed replay test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    service::fuzz::goodput(data);
});
