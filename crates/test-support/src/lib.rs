//! Dev-only helpers shared by the unit tests of the workspace's crates and the integration tests in
//! `tests/it`: one copy, reached as a dev-dependency, never built into the service.
//!
//! * [`pki`]: a throwaway certificate authority with server and client certificates (rcgen).
//! * [`flood`]: HTTP/1.1 clients from a chosen loopback address, one or hundreds, plain or TLS.
#![forbid(unsafe_code)]

pub mod flood;
pub mod pki;
