//! Snappy block decompression with the decoded-length cap checked before allocating.

use super::ProtocolError;

/// Decompresses a snappy **block** format body (not framed) into `out`, reusing its allocation.
///
/// The declared decoded length is read from the block header first; a declaration over
/// `max_decoded_bytes` is rejected before any allocation (remote-write notes, checklist item 4).
///
/// # Errors
/// [`ProtocolError::DecodedTooLarge`] for a declaration over the cap, [`ProtocolError::Snappy`] for
/// a corrupt body (framed snappy included).
pub fn decompress_into(body: &[u8], max_decoded_bytes: usize, out: &mut Vec<u8>) -> Result<(), ProtocolError> {
    let _ = (body, max_decoded_bytes, out);
    todo!("protocol helper")
}
