//! Fuzz target `exposition`: exposition text, parsed as text 0.0.4 and as OpenMetrics.
//! The body is [`service::fuzz::exposition`], shared with the stable seed replay test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| service::fuzz::exposition(data));
