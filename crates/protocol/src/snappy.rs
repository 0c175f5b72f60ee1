//! Snappy block decompression with the decoded-length cap checked before allocating.
//!
//! Source: docs/REMOTE-WRITE.md, checklist item 4; the snappy block format description
//! (`google/snappy`, `format_description.txt`): a varint of the decoded length, then literal and copy
//! elements.

use super::ProtocolError;

/// Most decoded bytes one compressed byte can stand for in the snappy block format.
///
/// The densest element is a 2-byte-offset copy: 3 bytes of input (tag plus offset) emit up to
/// 64 bytes, so `64 / 3 < 22` output bytes per input byte. A 1-byte-offset copy emits at most 11
/// bytes for 2, a 4-byte-offset copy at most 64 for 5, and a literal never more than its own length.
const MAX_EXPANSION: u64 = 22;

/// Decompresses a snappy **block** format body (not framed) into `out`, reusing its allocation.
///
/// `body` is the HTTP request body; on success `out` holds exactly the decoded bytes. The declared
/// decoded length is read from the block header first (`snap::raw::decompress_len`); a declaration
/// over `max_decoded_bytes` is rejected before any allocation (docs/REMOTE-WRITE.md, checklist item 4),
/// and so is one that the body is too short to produce (over `MAX_EXPANSION` bytes per byte).
///
/// # Errors
/// * [`ProtocolError::DecodedTooLarge`] when the header declares more than `max_decoded_bytes`
///   (including declarations over the format's own 4 GiB limit).
/// * [`ProtocolError::Snappy`] for an empty, corrupt or truncated body, or a framed-snappy stream
///   (its stream identifier chunk is not a valid block).
pub fn decompress_into(
    body: &[u8],
    max_decoded_bytes: usize,
    out: &mut Vec<u8>,
) -> Result<(), ProtocolError> {
    let cap = max_decoded_bytes as u64;
    let declared = match snap::raw::decompress_len(body) {
        Ok(n) => n as u64,
        Err(snap::Error::TooBig { given, .. }) => {
            return Err(ProtocolError::DecodedTooLarge {
                declared: given,
                cap,
            });
        }
        Err(e) => return Err(ProtocolError::Snappy(e.to_string())),
    };
    if declared > cap {
        return Err(ProtocolError::DecodedTooLarge { declared, cap });
    }
    if declared > (body.len() as u64).saturating_mul(MAX_EXPANSION) {
        return Err(ProtocolError::Snappy(format!(
            "header declares {declared} decoded bytes, more than a {}-byte body can hold",
            body.len()
        )));
    }
    // Only growth is zero-filled: the decoder writes every one of the `declared` bytes or fails.
    out.resize(declared as usize, 0);
    match snap::raw::Decoder::new().decompress(body, out) {
        Ok(n) => {
            out.truncate(n);
            Ok(())
        }
        Err(e) => {
            out.clear();
            Err(ProtocolError::Snappy(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests;
