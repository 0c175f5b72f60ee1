//! Tests of `float.rs` against outputs of the real formatters: Go's and Python's.

use super::*;

use rand::{Rng, SeedableRng};

/// Pairs printed by Go's `%g` (`strconv.FormatFloat(v, 'g', -1, 64)`): `promtool tsdb dump` of
/// Prometheus 2.42 on blocks made from these values by `promtool tsdb create-blocks-from
/// openmetrics`.
const GO: [(f64, &str); 38] = [
    (1e21, "1e+21"),
    (1e-7, "1e-07"),
    (123456.0, "123456"),
    (1234567.0, "1.234567e+06"),
    (100000.0, "100000"),
    (0.0001, "0.0001"),
    (0.00001, "1e-05"),
    (9007199254740992.0, "9.007199254740992e+15"),
    (9007199254740994.0, "9.007199254740994e+15"),
    (5e-324, "5e-324"),
    (f64::MAX, "1.7976931348623157e+308"),
    (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
    (0.1 + 0.2, "0.30000000000000004"),
    (1e100, "1e+100"),
    (-1.5, "-1.5"),
    (1e10, "1e+10"),
    (1e6, "1e+06"),
    (1.5e6, "1.5e+06"),
    (1e15, "1e+15"),
    (1e16, "1e+16"),
    (123456.7, "123456.7"),
    (0.1, "0.1"),
    (1.0, "1"),
    (2.5e-7, "2.5e-07"),
    (1e22, "1e+22"),
    (12345678.9, "1.23456789e+07"),
    (1e-5, "1e-05"),
    (999999.0, "999999"),
    (999999.9, "999999.9"),
    (1000000.0001, "1.0000000001e+06"),
    (0.00010000000000000002, "0.00010000000000000002"),
    (-1e6, "-1e+06"),
    (-123456.0, "-123456"),
    // Subnormals: the shortest digits of 1.2345e-320's nearest subnormal are 1.2347.
    (1e-310, "1e-310"),
    (1.2345e-320, "1.2347e-320"),
    (4.0, "4"),
    (0.125, "0.125"),
    (1e300, "1e+300"),
];

#[test]
fn values_print_as_go_formatfloat_g_shortest() {
    for (v, go) in GO {
        assert_eq!(format_value(v), go, "{v:e}");
    }
}

#[test]
fn values_print_specials_as_prometheus_and_both_zeros_as_0() {
    // `expfmt.writeFloat` of client_golang: `f == 0` (true for -0 too) prints `0`.
    assert_eq!(format_value(0.0), "0");
    assert_eq!(format_value(-0.0), "0");
    assert_eq!(format_value(f64::NAN), "NaN");
    assert_eq!(format_value(f64::INFINITY), "+Inf");
    assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
}

/// Pairs printed by Python 3.11 `prometheus_client.utils.floatToGoString` (prometheus_client
/// 0.26), which is how vLLM prints `le`; the first rows were the simulator's own test of its copy.
const PROMETHEUS_CLIENT: [(f64, &str); 35] = [
    (7.0, "7.0"),
    (0.025, "0.025"),
    (1e-05, "1e-05"),
    (1e16, "1e+16"),
    (1.5e16, "1.5e+16"),
    (123456.0, "123456.0"),
    (1234567.0, "1.234567e+06"),
    (1500000.0, "1.5e+06"),
    (1e6, "1e+06"),
    (2e7, "2e+07"),
    (0.0001, "0.0001"),
    (0.007666666666666666, "0.007666666666666666"),
    (1e22, "1e+22"),
    (100000.0, "100000.0"),
    (1700000000.123, "1.700000000123e+09"),
    (1e21, "1e+21"),
    (1e-7, "1e-07"),
    (9007199254740992.0, "9.007199254740992e+15"),
    (9007199254740994.0, "9.007199254740994e+15"),
    (5e-324, "5e-324"),
    (f64::MAX, "1.7976931348623157e+308"),
    (1e100, "1e+100"),
    (1e10, "1e+10"),
    (1e15, "1e+15"),
    (1.0, "1.0"),
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (0.01, "0.01"),
    (20.0, "20.0"),
    (128000.0, "128000.0"),
    (999999.0, "999999.0"),
    (1000000.0001, "1.0000000001e+06"),
    (-1.5, "-1.5"),
    (-5.0, "-5.0"),
    (2.5e-7, "2.5e-07"),
];

#[test]
fn le_prints_as_vllm_and_prometheus_3_print_it() {
    for (v, python) in PROMETHEUS_CLIENT {
        assert_eq!(format_le(v), python, "{v:e}");
    }
    assert_eq!(format_le(f64::INFINITY), "+Inf");
    assert_eq!(format_le(f64::NEG_INFINITY), "-Inf");
    assert_eq!(format_le(f64::NAN), "NaN");
}

#[test]
fn le_is_go_with_a_point_zero_on_integral_values() {
    // Prometheus 3's `formatOpenMetricsFloat`: Go's text, plus `.0` when it has neither `.` nor
    // `e`.
    for (v, go) in GO {
        let want = if go.contains(['.', 'e']) {
            go.to_owned()
        } else {
            format!("{go}.0")
        };
        assert_eq!(format_le(v), want, "{v:e}");
    }
}

#[test]
fn parse_le_reads_what_vllm_and_prometheus_print() {
    for (text, want) in [
        ("1.0", 1.0),
        ("1", 1.0),
        ("0.005", 0.005),
        ("1e+06", 1e6),
        ("1e+010", 1e10),
        ("1e+10", 1e10),
        ("2.5e-07", 2.5e-7),
        ("9.007199254740993e+15", 9007199254740992.0),
        ("5e-324", 5e-324),
        ("+Inf", f64::INFINITY),
        ("Inf", f64::INFINITY),
        ("inf", f64::INFINITY),
        ("+inf", f64::INFINITY),
        ("Infinity", f64::INFINITY),
        ("-Inf", f64::NEG_INFINITY),
    ] {
        assert_eq!(
            parse_le(text).map(f64::to_bits),
            Some(want.to_bits()),
            "{text}"
        );
    }
}

#[test]
fn parse_le_folds_negative_zero_and_refuses_nan_and_junk() {
    for text in ["-0", "-0.0", "-0e5", "0", "0.0"] {
        assert_eq!(parse_le(text).map(f64::to_bits), Some(0u64), "{text}");
    }
    for text in [
        "NaN", "nan", "-NaN", "", " 1", "1 ", "1,5", "0x1p-2", "one", "+", "e5",
    ] {
        assert_eq!(parse_le(text), None, "{text:?}");
    }
}

#[test]
fn every_printed_float_parses_back_to_itself() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let check = |v: f64| {
        if v.is_nan() {
            return;
        }
        let want = (v + 0.0).to_bits();
        assert_eq!(
            parse_le(&format_le(v)).map(f64::to_bits),
            Some(want),
            "{v:e}"
        );
        let value = format_value(v);
        assert_eq!(parse_le(&value).map(f64::to_bits), Some(want), "{v:e}");
        // And Rust's own shortest form has the same digits.
        let ours: f64 = value.parse().expect("parses");
        assert_eq!(format!("{ours:e}"), format!("{:e}", v + 0.0));
    };
    for _ in 0..20_000 {
        check(f64::from_bits(rng.random::<u64>()));
    }
    // Integers past 2^53, where not every integer is a float.
    for k in 0..2_000u64 {
        check(((1u64 << 53) + k * 3) as f64);
        check((1u64 << 60) as f64 + (k as f64) * 512.0);
    }
    // Every power of ten, and its neighbours, across the switches between the two layouts.
    for e in -330..310 {
        let v: f64 = format!("1e{e}").parse().unwrap();
        check(v);
        check(f64::from_bits(v.to_bits() + 1));
        check(f64::from_bits(v.to_bits().saturating_sub(1)));
    }
}

#[test]
fn the_layout_switches_where_go_switches() {
    // %f from 1e-4 up to below 1e6; %e outside (these too printed by promtool, as above).
    assert_eq!(format_value(0.00012), "0.00012");
    assert_eq!(format_value(0.000099), "9.9e-05");
    assert_eq!(format_value(999999.5), "999999.5");
    assert_eq!(format_value(1000000.5), "1.0000005e+06");
    assert_eq!(format_value(-0.00001), "-1e-05");
}
