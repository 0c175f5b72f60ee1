//! The protocol layer's one error enum.

/// Errors of the protocol layer. Each maps to exactly one HTTP status in the service's HTTP layer.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtocolError {
    /// The snappy block header declares more decoded bytes than the configured cap.
    /// Detected from the header alone, before any allocation.
    #[error("snappy body declares {declared} decoded bytes, over the cap of {cap}")]
    DecodedTooLarge {
        /// Decoded length declared by the snappy header, in bytes.
        declared: u64,
        /// Configured cap, in bytes.
        cap: u64,
    },
    /// The body is not valid snappy block format (framed snappy also lands here).
    #[error("invalid snappy block body: {0}")]
    Snappy(String),
    /// The decompressed body is not a valid protobuf `WriteRequest` (RW 1.0) or `Request` (RW 2.0).
    #[error("invalid protobuf WriteRequest: {0}")]
    Protobuf(String),
    /// RW 2.0: `symbols` is not empty and its first entry is not the empty string, which the 2.0
    /// specification requires ("Symbols" of the `Request` message).
    #[error("invalid remote write 2.0 request: symbols[0] must be the empty string, got {0:?}")]
    SymbolsStartNotEmpty(String),
}
