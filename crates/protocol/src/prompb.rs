//! Owned prost types of the remote-write schemas, generated at build time from `proto/`.
//! Compiled with the `encode` feature (and in this crate's tests).
//!
//! These types are **not** the hot path: the receiver decodes RW 1.0 bodies with the borrowed walker
//! in [`super::v1`]. They exist to *encode* requests (tests, benches, the simulator, see
//! [`super::encode`]) and to serve as an independent test oracle for the borrowed decoder.

/// RW 1.0 messages, protobuf package `prometheus` (`proto/remote.proto`).
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/prometheus.rs"));
}

/// RW 2.0 messages, protobuf package `io.prometheus.write.v2` (`proto/remote_v2.proto`).
pub mod v2 {
    include!(concat!(env!("OUT_DIR"), "/io.prometheus.write.v2.rs"));
}
