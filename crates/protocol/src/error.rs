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
    /// The body holds more series (`TimeSeries` messages) than the decoder was allowed
    /// ([`crate::Version::decode_at_most`]): refused before any series is decoded or allocated.
    /// [`crate::Version::count`] gives its samples without decoding them.
    #[error("request holds {series} series, over the {limit} this decode allows")]
    TooManySeries {
        /// Series in the body.
        series: usize,
        /// The most allowed.
        limit: usize,
    },
    /// An RW 1.0 body (by its Content-Type) with no `timeseries` (field 1) but with RW 2.0's
    /// `symbols` (field 4) or `timeseries` (field 5): a 2.0 `Request` sent with the 1.0
    /// Content-Type. Decoded as 1.0 it would be an empty request, answered 204 with every sample
    /// lost and nothing counted, since 1.0 has no fields 4 and 5 (docs/REMOTE-WRITE.md, "A 2.0
    /// body under the 1.0 Content-Type").
    #[error(
        "the body is a remote write 2.0 Request ({symbols} symbols, {series} series in fields 4 \
         and 5, no 1.0 timeseries) sent as 1.0: send it with Content-Type \
         application/x-protobuf;proto=io.prometheus.write.v2.Request"
    )]
    V2BodyAsV1 {
        /// Field-4 (`symbols`) entries in the body.
        symbols: usize,
        /// Field-5 (`timeseries`) entries in the body.
        series: usize,
    },
}
