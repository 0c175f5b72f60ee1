//! Floats as the Prometheus text formats spell them: sample values and `le` bounds, printed and
//! read in one place for the protocol, the engine, the exposition, the simulator and the tools.
//!
//! * [`write_value`]: a sample value as Prometheus prints it (the text format of `client_golang`,
//!   `expfmt.writeFloat`): Go's `strconv.FormatFloat(v, 'g', -1, 64)` — the shortest digits that
//!   read back to the same `f64`, in exponent form below `1e-4` and from `1e+06` on (`0.125`,
//!   `123456`, `1.234567e+06`, `1e-07`) — with `+Inf`, `-Inf`, `NaN`, and `0` for both zeros.
//! * [`write_le`]: an `le` bound as vLLM prints it (Python `prometheus_client`'s `floatToGoString`)
//!   and as Prometheus 3 normalises `le` on ingestion (`formatOpenMetricsFloat`): Go's form, with
//!   `.0` added to an integral value (`1.0`, `20.0`, `0.005`, `1e+06`, `+Inf`). The two agree on
//!   every bound at or above zero, so a corrected bucket's `le` equals the raw series' `le`.
//!   (`prometheus_client` before 0.26 printed a bound of 1e10 or more with an extra zero,
//!   `1e+010`; its fix, client_python #1190, made it Go's `1e+10`, which is what is printed here.)
//! * [`parse_le`]: an `le` bound as Prometheus reads it.

use std::fmt::Write as _;

/// Parses an `le` bound as Prometheus reads one (Go's `strconv.ParseFloat`, decimal forms): any
/// spelling of a float (`1.0`, `1`, `1e+06`, `0.005`), and `+Inf`, `Inf`, `inf` or `infinity` in
/// any case, signed or not. `-0` reads as `0`: they are one bound, and bounds are compared by
/// their bits. `None` for NaN (no bound) and for anything else that is not a float. Go's
/// hexadecimal floats (`0x1p-2`) are not read: no exposition prints them.
pub fn parse_le(text: &str) -> Option<f64> {
    let v = text.parse::<f64>().ok()?;
    // Adding +0.0 turns -0.0 into +0.0 and leaves every other value as it is.
    (!v.is_nan()).then_some(v + 0.0)
}

/// Appends `v` as Prometheus prints a sample value (see the module doc): `NaN`, `+Inf`, `-Inf`,
/// `0` for either zero, else Go's `FormatFloat(v, 'g', -1, 64)`.
pub fn write_value(out: &mut String, v: f64) {
    if v == 0.0 {
        out.push('0');
    } else if !write_special(out, v) {
        write_go(out, v);
    }
}

/// [`write_value`] into a new string.
pub fn format_value(v: f64) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

/// Appends `v` as an `le` bound is printed by vLLM and normalised by Prometheus 3 (see the module
/// doc): Go's form ([`write_value`]), with `.0` after an integral value, and `+Inf`, `-Inf`, `NaN`.
pub fn write_le(out: &mut String, v: f64) {
    if write_special(out, v) {
        return;
    }
    let start = out.len();
    write_go(out, v);
    if !out[start..].contains(['.', 'e']) {
        out.push_str(".0");
    }
}

/// [`write_le`] into a new string.
pub fn format_le(v: f64) -> String {
    let mut out = String::new();
    write_le(&mut out, v);
    out
}

/// Writes the spelling of a NaN or an infinity and returns `true`; `false` for a finite `v`.
fn write_special(out: &mut String, v: f64) -> bool {
    let text = if v.is_nan() {
        "NaN"
    } else if v == f64::INFINITY {
        "+Inf"
    } else if v == f64::NEG_INFINITY {
        "-Inf"
    } else {
        return false;
    };
    out.push_str(text);
    true
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` of a finite `v`: the shortest digits that round-trip
/// (Rust's `{:e}` finds the same ones), laid out as `%e` when the decimal exponent is below -4 or
/// at least 6, else as `%f` with no trailing zeros (Go's `'g'` switches at precision 6 when the
/// precision is the shortest). The exponent has a sign and at least two digits (`e+06`, `e-324`).
fn write_go(out: &mut String, v: f64) {
    let mut scratch = Scratch::default();
    // `{:e}` of a finite f64: one digit, an optional fraction, `e`, the exponent (`1.5e-7`).
    let _ = write!(scratch, "{:e}", v.abs());
    let (mantissa, exponent) = scratch
        .text()
        .split_once('e')
        .unwrap_or((scratch.text(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (lead, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if v.is_sign_negative() {
        out.push('-');
    }
    if !(-4..6).contains(&exponent) {
        out.push_str(lead);
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(fraction);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        let _ = write!(out, "{magnitude}");
    } else if exponent >= 0 {
        // `exponent + 1` digits before the point: the lead digit and some of the fraction, padded
        // with zeros when the fraction is shorter.
        let before = exponent as usize;
        out.push_str(lead);
        if fraction.len() <= before {
            out.push_str(fraction);
            out.extend(std::iter::repeat_n('0', before - fraction.len()));
        } else {
            out.push_str(&fraction[..before]);
            out.push('.');
            out.push_str(&fraction[before..]);
        }
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
        out.push_str(lead);
        out.push_str(fraction);
    }
}

/// A stack buffer for one `{:e}` text (at most 24 bytes: `1.7976931348623157e308`).
#[derive(Default)]
struct Scratch {
    bytes: [u8; 32],
    len: usize,
}

impl Scratch {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for Scratch {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let room = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
