//! The protobuf wire format, read by hand: the cursor shared by the borrowed RW 1.0 and RW 2.0
//! decoders ([`super::v1`], [`super::v2`]) and the native histogram decoder ([`super::histogram`]).
//!
//! Source: `protobuf.dev/programming-guides/encoding` (varints, zigzag for `sint32`/`sint64`,
//! fixed64, length-delimited values, packed repeated scalars). Every read is bounds-checked against
//! the message being read, so a nested length can never run past its enclosing message.

use super::ProtocolError;

/// The protobuf wire types the decoders accept. Groups (3, 4) are deprecated and never sent by
/// remote-write senders; they are errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// 0: varint (`int32`, `int64`, `uint32`, `uint64`, `sint*`, `bool`, `enum`).
    Varint,
    /// 1: 8 little-endian bytes (`double`, `fixed64`).
    Fixed64,
    /// 2: a varint length, then that many bytes (strings, messages, packed repeated scalars).
    Len,
    /// 5: 4 little-endian bytes (`float`, `fixed32`).
    Fixed32,
}

/// A cursor over one message's bytes. Every read is bounds-checked against this message.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`, which holds one `message` (named in errors).
    #[inline]
    pub(crate) fn new(buf: &'a [u8], message: &'static str) -> Self {
        Reader::at(buf, 0, message)
    }

    /// A cursor at byte `pos` of `buf` (a caller that read the first bytes of the message itself).
    #[inline]
    pub(crate) fn at(buf: &'a [u8], pos: usize, message: &'static str) -> Self {
        Reader { buf, pos, message }
    }

    /// The offset of the next byte to read.
    #[inline]
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// True when every byte of the message has been read.
    #[inline]
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A [`ProtocolError::Protobuf`] naming the message and the byte offset.
    #[cold]
    #[inline(never)]
    pub(crate) fn error(&self, what: std::fmt::Arguments<'_>) -> ProtocolError {
        ProtocolError::Protobuf(format!("{} at byte {}: {what}", self.message, self.pos))
    }

    /// The error for a known field sent with another wire type than its schema's.
    #[cold]
    #[inline(never)]
    pub(crate) fn wrong_wire(&self, field: u32, wire: Wire) -> ProtocolError {
        self.error(format_args!(
            "field {field} has unexpected wire type {wire:?}"
        ))
    }

    /// Reads a base-128 varint of at most 10 bytes; the 10th byte may only carry bit 63. One- and
    /// two-byte varints (keys, lengths) take the inlined path.
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Result<u64, ProtocolError> {
        match self.buf.get(self.pos) {
            Some(&byte) if byte < 0x80 => {
                self.pos += 1;
                Ok(u64::from(byte))
            }
            // Two bytes: a series' length in a request (128 to 16 383 bytes).
            Some(&low) => match self.buf.get(self.pos + 1) {
                Some(&high) if high < 0x80 => {
                    self.pos += 2;
                    Ok(u64::from(low & 0x7f) | u64::from(high) << 7)
                }
                _ => self.varint_slow(),
            },
            None => self.varint_slow(),
        }
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, ProtocolError> {
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(self.error(format_args!("truncated varint")));
            };
            if i == 9 && byte > 1 {
                return Err(self.error(format_args!("varint overflows 64 bits")));
            }
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(self.error(format_args!("varint overflows 64 bits")))
    }

    /// Reads an `int64` varint: the two's complement of its 64 bits (negative values work).
    pub(crate) fn int64(&mut self) -> Result<i64, ProtocolError> {
        self.varint().map(|v| v as i64)
    }

    /// Reads a `sint32` varint: zigzag over the varint's low 32 bits, as protobuf specifies.
    pub(crate) fn sint32(&mut self) -> Result<i32, ProtocolError> {
        let low = self.varint()? as u32;
        Ok(((low >> 1) as i32) ^ -((low & 1) as i32))
    }

    /// Reads a field key: field number (non-zero, at most 2^29 - 1) and wire type.
    #[inline(always)]
    pub(crate) fn key(&mut self) -> Result<(u32, Wire), ProtocolError> {
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint,
            1 => Wire::Fixed64,
            2 => Wire::Len,
            5 => Wire::Fixed32,
            _ => return Err(self.bad_key(key)),
        };
        match u32::try_from(key >> 3) {
            Ok(field) if field != 0 && key <= u64::from(u32::MAX) => Ok((field, wire)),
            _ => Err(self.bad_key(key)),
        }
    }

    /// The error for a key that [`Reader::key`] refuses, with the same wording in the same order
    /// of checks: out of range, field 0, group wire type, undefined wire type.
    #[cold]
    #[inline(never)]
    fn bad_key(&self, key: u64) -> ProtocolError {
        let Ok(key) = u32::try_from(key) else {
            return self.error(format_args!("field key {key} out of range"));
        };
        let field = key >> 3;
        if field == 0 {
            return self.error(format_args!("field number 0"));
        }
        match key & 7 {
            3 | 4 => self.error(format_args!(
                "field {field} uses the unsupported group wire type"
            )),
            other => self.error(format_args!(
                "field {field} has undefined wire type {other}"
            )),
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        let remaining = self.buf.len() - self.pos;
        if n > remaining {
            return Err(self.error(format_args!("{n} bytes needed, {remaining} left")));
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    /// Reads 8 little-endian bytes.
    #[inline]
    pub(crate) fn fixed64(&mut self) -> Result<u64, ProtocolError> {
        let mut le = [0u8; 8];
        le.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(le))
    }

    /// Reads a `double` (fixed64), bit-exact: NaN payloads such as the staleness marker survive.
    pub(crate) fn double(&mut self) -> Result<f64, ProtocolError> {
        self.fixed64().map(f64::from_bits)
    }

    /// Reads the length of a length-delimited value; it must fit in what is left of this message.
    #[inline(always)]
    pub(crate) fn len(&mut self) -> Result<usize, ProtocolError> {
        let len = self.varint()?;
        let remaining = self.buf.len() - self.pos;
        match usize::try_from(len) {
            Ok(len) if len <= remaining => Ok(len),
            _ => Err(self.error(format_args!(
                "length {len} runs past the {remaining} bytes left"
            ))),
        }
    }

    /// Reads a length-delimited value; its length must fit in what is left of this message.
    #[inline(always)]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ProtocolError> {
        let len = self.len()?;
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    /// Moves past `n` bytes that the caller read itself (at most what is left).
    #[inline]
    pub(crate) fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
    }

    /// Skips one value of wire type `wire`.
    pub(crate) fn skip(&mut self, wire: Wire) -> Result<(), ProtocolError> {
        match wire {
            Wire::Varint => self.varint().map(drop),
            Wire::Fixed64 => self.take(8).map(drop),
            Wire::Len => self.bytes().map(drop),
            Wire::Fixed32 => self.take(4).map(drop),
        }
    }

    /// Reads one occurrence of a repeated varint field, packed (`Len`) or not (`Varint`), calling
    /// `each` with every raw 64-bit value in wire order.
    ///
    /// # Errors
    /// A truncated or overlong varint, or any other wire type.
    pub(crate) fn repeated_varint(
        &mut self,
        field: u32,
        wire: Wire,
        mut each: impl FnMut(u64),
    ) -> Result<(), ProtocolError> {
        match wire {
            Wire::Varint => each(self.varint()?),
            Wire::Len => {
                let mut packed = Reader::new(self.bytes()?, self.message);
                while !packed.at_end() {
                    each(packed.varint()?);
                }
            }
            _ => return Err(self.wrong_wire(field, wire)),
        }
        Ok(())
    }

    /// Reads one occurrence of a repeated `double` field, packed (`Len`, a multiple of 8 bytes)
    /// or not (`Fixed64`), calling `each` with every value in wire order.
    ///
    /// # Errors
    /// A packed length that is not a multiple of 8, or any other wire type.
    pub(crate) fn repeated_double(
        &mut self,
        field: u32,
        wire: Wire,
        mut each: impl FnMut(f64),
    ) -> Result<(), ProtocolError> {
        match wire {
            Wire::Fixed64 => each(self.double()?),
            Wire::Len => {
                let bytes = self.bytes()?;
                if bytes.len() % 8 != 0 {
                    return Err(self.error(format_args!(
                        "packed doubles of field {field} take {} bytes, not a multiple of 8",
                        bytes.len()
                    )));
                }
                for chunk in bytes.chunks_exact(8) {
                    let mut le = [0u8; 8];
                    le.copy_from_slice(chunk);
                    each(f64::from_bits(u64::from_le_bytes(le)));
                }
            }
            _ => return Err(self.wrong_wire(field, wire)),
        }
        Ok(())
    }
}

/// Decodes a zigzag-encoded 64-bit value (`sint64`).
pub(crate) fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The varint that fills `m[start..]` exactly (ends with the last byte of `m`), read from the one
/// little-endian word ending `m`: the value a [`Reader`] at `start` reads when it then stands at the
/// end. `None` when the bytes are not such a varint, and also (undecided: ask a [`Reader`]) when
/// they are longer than 8 bytes or `m` is shorter than 8. For a sample's millisecond timestamp
/// (6 bytes, the last field of a canonical `Sample`): one word read and three shift-and-mask steps
/// that pack the 7-bit groups, instead of a loop per byte. Always inlined: called once per
/// sample, where a call costs more than its body (docs/PERFORMANCE.md, "Receive path:
/// instructions per sample").
#[inline(always)]
pub(crate) fn varint_filling(m: &[u8], start: usize) -> Option<u64> {
    let n = m.len().checked_sub(start)?;
    if n == 0 || n > 8 {
        return None;
    }
    let tail: &[u8; 8] = m.last_chunk()?;
    let word = u64::from_le_bytes(*tail) >> (8 * (8 - n));
    let ends = !word & 0x8080_8080_8080_8080 & (u64::MAX >> (64 - 8 * n));
    if ends != 1 << (8 * n - 1) {
        return None;
    }
    let x = word & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    Some((x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4))
}

/// Counts the occurrences of each of `fields` in one message, skipping every value: the first,
/// cheap pass that sizes the vectors of the second.
///
/// A run of `fields[0]` values with a one-byte key and a two-byte length (a `WriteRequest`'s
/// `TimeSeries` of 128 to 16 383 bytes, as a vLLM series is) is counted in a tight loop; the
/// general loop takes over at the first other field, and reports any error.
pub(crate) fn count_fields<const N: usize>(
    buf: &[u8],
    message: &'static str,
    fields: [u32; N],
) -> Result<[usize; N], ProtocolError> {
    let mut counts = [0usize; N];
    let mut pos = 0;
    if let Some(&first) = fields.first()
        && first < 16
    {
        let key = (first as u8) << 3 | 2;
        while let [k, lo, hi, ..] = buf[pos..] {
            let len = usize::from(lo & 0x7f) | usize::from(hi) << 7;
            if k != key || lo < 0x80 || hi >= 0x80 || hi == 0 || pos + 3 + len > buf.len() {
                break;
            }
            counts[0] += 1;
            pos += 3 + len;
        }
    }
    let mut r = Reader::at(buf, pos, message);
    while !r.at_end() {
        let (field, wire) = r.key()?;
        if let Some(i) = fields.iter().position(|&f| f == field) {
            counts[i] += 1;
        }
        match wire {
            Wire::Len => drop(r.bytes()?),
            other => r.skip(other)?,
        }
    }
    Ok(counts)
}

/// `bytes` as a string, or `""` with `valid` cleared when they are not UTF-8.
pub(crate) fn lenient_utf8<'a>(bytes: &'a [u8], valid: &mut bool) -> &'a str {
    std::str::from_utf8(bytes).unwrap_or_else(|_| {
        *valid = false;
        ""
    })
}

/// `bytes` as a string.
///
/// # Errors
/// [`ProtocolError::Protobuf`] naming `field` when they are not UTF-8 (a protobuf `string` must be).
pub(crate) fn utf8<'a>(bytes: &'a [u8], field: &str) -> Result<&'a str, ProtocolError> {
    std::str::from_utf8(bytes)
        .map_err(|e| ProtocolError::Protobuf(format!("{field} is not UTF-8: {e}")))
}

#[cfg(test)]
mod tests;
