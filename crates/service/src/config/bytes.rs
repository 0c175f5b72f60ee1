//! Byte counts in `--config.file` (`limits.max_memory_bytes` and the other `*_bytes` fields): a
//! plain integer of bytes, as before, or a number with a unit, parsed by the `bytesize` crate:
//! `B`; `k`/`kB`, `M`/`MB`, `G`/`GB`, `T`/`TB` (powers of 1000, as Kubernetes' `M` and `G`);
//! `Ki`/`KiB`, `Mi`/`MiB`, `Gi`/`GiB`, `Ti`/`TiB` (powers of 1024, as Kubernetes' `Mi` and `Gi`),
//! case-insensitive, with or without a space (`512MiB`, `512 Mi`, `1.5GiB`). A refusal is a YAML
//! error, so its message names the line and the field (`yaml_message`) and says the accepted
//! forms ([`ACCEPTED`]).

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Visitor};

/// The accepted forms, as every refusal states them.
pub(crate) const ACCEPTED: &str = "a byte count is an integer of bytes (402653184) or a number \
     with a unit: B; kB, MB, GB, TB (powers of 1000; k, M, G, T alike); KiB, MiB, GiB, TiB \
     (powers of 1024; Ki, Mi, Gi, Ti alike), e.g. 384MiB, 8 MiB, 1.5GiB, 1GB";

/// `text` as a number of bytes.
///
/// # Errors
/// What is wrong and [`ACCEPTED`]: not a number with a known unit, negative, or past
/// `usize::MAX` bytes.
pub(crate) fn parse(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    let size: bytesize::ByteSize = trimmed
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count: {ACCEPTED}"))?;
    // `bytesize` saturates a product past u64::MAX; nothing that large is a memory size.
    if size.as_u64() == u64::MAX {
        return Err(format!("{text:?} is too large"));
    }
    usize::try_from(size.as_u64()).map_err(|_| format!("{text:?} is too large"))
}

/// `#[serde(deserialize_with = "…")]` of a byte-count field: an integer, or a string [`parse`]
/// reads.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    deserializer.deserialize_any(ByteCount)
}

struct ByteCount;

impl Visitor<'_> for ByteCount {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ACCEPTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
        usize::try_from(v).map_err(|_| E::custom(format!("{v} is too large")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<usize, E> {
        u64::try_from(v)
            .map_err(|_| E::custom(format!("{v} is negative: {ACCEPTED}")))
            .and_then(|v| self.visit_u64(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<usize, E> {
        Err(E::custom(format!(
            "{v} is not a whole number of bytes: {ACCEPTED}"
        )))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
        parse(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests;
