//! Dev-only helpers shared by the unit tests of the workspace's crates and the integration tests in
//! `tests/it`: one copy, reached as a dev-dependency, never built into the service.
//!
//! * [`tools`]: where Prometheus, promtool, vmagent and Chromium are found (two releases of the
//!   first three), and [`tools::require`], which fails a test whose tool is missing unless the
//!   test opts out by name.
//! * [`process`]: child processes with a log file, a readiness wait and teardown; temporary
//!   directories and free ports.
//! * The launchers: [`corrector`] (the binary under test), [`prometheus`] (any version),
//!   [`vmagent`], and the [`promtool`] runner.
//! * [`pki`]: a throwaway certificate authority with server and client certificates (rcgen).
//! * [`flood`]: HTTP/1.1 clients from a chosen loopback address, one or hundreds, plain or TLS.
#![forbid(unsafe_code)]

pub mod corrector;
pub mod flood;
pub mod pki;
pub mod process;
pub mod prometheus;
pub mod promtool;
pub mod tools;
pub mod vmagent;
