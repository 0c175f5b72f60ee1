//! Dev-only helpers shared by vllm-corrector's unit tests (`src/`) and integration tests
//! (`tests/it/`). A dev-dependency only: nothing here reaches the service binary.
//!
//! * [`pki`]: a throwaway certificate authority, server and client certificates for the TLS and
//!   client-certificate tests.
#![forbid(unsafe_code)]

pub mod pki;
