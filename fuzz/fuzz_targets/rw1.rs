//! Fuzz target `rw1`: a snappy-compressed RW 1.0 body: decompressed under the length cap, decoded, ingested.
//! The body is [`service::fuzz::rw1`], shared with the stable seed replay test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| service::fuzz::rw1(data));
