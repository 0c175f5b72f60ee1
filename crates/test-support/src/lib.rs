//! Dev-only helpers shared by the unit tests of the workspace's crates and the integration tests in
//! `tests/it`: one copy, reached as a dev-dependency, never built into the service.
//!
//! * [`pki`]: a throwaway certificate authority with server and client certificates (rcgen).
#![forbid(unsafe_code)]

pub mod pki;
