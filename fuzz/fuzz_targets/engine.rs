//! Fuzz target `engine`: the bytes are a program of series, timestamps, staleness markers, bucket
//! layouts, counter resets and idle sweeps run on one engine, its invariants checked at every step.
//! The body is [`service::fuzz::engine`], shared with the stable seed replay test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    service::fuzz::engine(data);
});
