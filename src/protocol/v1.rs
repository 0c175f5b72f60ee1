//! Borrowed decoder of the RW 1.0 `prometheus.WriteRequest` message (see `proto/remote.proto`).

use super::{ProtocolError, WriteRequestRef};

/// Decodes a decompressed RW 1.0 `WriteRequest`, borrowing label strings from `buf`.
///
/// # Errors
/// [`ProtocolError::Protobuf`] on truncated or malformed protobuf, or a label that is not UTF-8.
pub fn decode(buf: &[u8]) -> Result<WriteRequestRef<'_>, ProtocolError> {
    let _ = buf;
    todo!("protocol helper")
}
