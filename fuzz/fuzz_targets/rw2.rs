//! Fuzz target `rw2`: a snappy-compressed RW 2.0 body: decompressed under the length cap, decoded, ingested.
//! The body is [`service::fuzz::rw2`], shared with the stable seed replay test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| service::fuzz::rw2(data));
