//! SLO readings of hand-written dumps; every expected value is worked in a comment.

use super::*;
use crate::readings::{DumpSample, cumulative_by_suffix};

const GROUP: [(&str, &str); 2] = [("engine", "0"), ("model_name", "m")];

fn sample(name: &str, extra: &[(&str, &str)], value: f64) -> DumpSample {
    DumpSample {
        name: name.into(),
        labels: GROUP
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        value,
        timestamp_ms: None,
        line: 0,
        cumulative: cumulative_by_suffix(name),
    }
}

/// One dump: SLO `chat`'s counters (TTFT and TPOT counted, E2EL not), its goodput, and vLLM's
/// raw TTFT and TPOT histograms with buckets at 0.05, 0.1 and 0.5 s.
#[allow(clippy::too_many_arguments)]
fn dump(
    ttft: (f64, f64),
    tpot: (f64, f64),
    goodput: (f64, f64, f64),
    raw_ttft: [f64; 4],
    raw_tpot: [f64; 4],
) -> Dump {
    let mut samples = vec![
        sample(
            "vllm_corrected_slo_events_total",
            &[("slo", "chat"), ("sli", "ttft")],
            ttft.0,
        ),
        sample(
            "vllm_corrected_slo_good_events_total",
            &[("slo", "chat"), ("sli", "ttft")],
            ttft.1,
        ),
        sample(
            "vllm_corrected_slo_events_total",
            &[("slo", "chat"), ("sli", "tpot")],
            tpot.0,
        ),
        sample(
            "vllm_corrected_slo_good_events_total",
            &[("slo", "chat"), ("sli", "tpot")],
            tpot.1,
        ),
        sample(
            "vllm_corrected_slo_finished_requests_total",
            &[("slo", "chat")],
            goodput.0,
        ),
        sample(
            "vllm_corrected_goodput_requests_total",
            &[("slo", "chat"), ("bound", "lower")],
            goodput.1,
        ),
        sample(
            "vllm_corrected_goodput_requests_total",
            &[("slo", "chat"), ("bound", "upper")],
            goodput.2,
        ),
    ];
    for (family, counts) in [
        ("vllm:time_to_first_token_seconds", raw_ttft),
        ("vllm:request_time_per_output_token_seconds", raw_tpot),
    ] {
        for (le, c) in ["0.05", "0.1", "0.5", "+Inf"].iter().zip(counts) {
            samples.push(sample(&format!("{family}_bucket"), &[("le", le)], c));
        }
        samples.push(sample(&format!("{family}_sum"), &[], 0.0));
        samples.push(sample(&format!("{family}_count"), &[], counts[3]));
    }
    Dump::from_samples(samples).unwrap()
}

fn spec() -> SloSpec {
    let mut spec = SloSpec::shipped_default();
    let slo = &mut spec.slos[0];
    slo.name = "chat".into();
    slo.slis = vec![
        engine::slo::SliTarget {
            sli: Sli::Ttft,
            threshold_seconds: 0.5,
            objective: 0.99,
        },
        engine::slo::SliTarget {
            sli: Sli::Tpot,
            threshold_seconds: 0.05,
            objective: 0.99,
        },
        // No bucket at 2 s in the raw dump, no counters in the corrector's.
        engine::slo::SliTarget {
            sli: Sli::E2el,
            threshold_seconds: 2.0,
            objective: 0.99,
        },
    ];
    spec
}

#[test]
fn counters_raw_buckets_and_goodput_are_read_as_increases_of_one_group() {
    let before = dump(
        (100.0, 90.0),
        (80.0, 70.0),
        (100.0, 60.0, 70.0),
        [10.0, 40.0, 90.0, 100.0],
        [50.0, 80.0, 95.0, 100.0],
    );
    let after = dump(
        (300.0, 280.0),
        (230.0, 200.0),
        (300.0, 180.0, 210.0),
        [20.0, 100.0, 270.0, 300.0],
        [170.0, 250.0, 290.0, 300.0],
    );
    let spec = spec();
    let slos = total(&before, &after, &spec);
    assert_eq!(slos.len(), 1);
    let chat = &slos[0];
    assert_eq!(chat.name, "chat");
    // TTFT: (280 − 90) / (300 − 100) = 190 / 200 = 0.95; TPOT (200 − 70) / (230 − 80) = 130 / 150.
    assert_eq!(
        chat.slis[&Sli::Ttft],
        Count {
            events: 200.0,
            good: 190.0
        }
    );
    assert_eq!(chat.attainment(Sli::Ttft), Some(0.95));
    assert_eq!(chat.attainment(Sli::Tpot), Some(130.0 / 150.0));
    assert_eq!(chat.attainment(Sli::E2el), None, "not counted");
    // Goodput: 200 finished, lower 120, upper 140: 0.6 and 0.7.
    let g = chat.goodput.unwrap();
    assert_eq!((g.finished, g.lower, g.upper), (200.0, 120.0, 140.0));
    assert_eq!(g.ratios(), Some((0.6, 0.7)));
    // Raw TTFT at 0.5: (270 − 90) / (300 − 100) = 0.9; raw TPOT at 0.05 (vLLM's, with the
    // requests of at most one token at 0 s): (170 − 50) / 200 = 0.6. E2EL has no histogram.
    assert_eq!(chat.raw_attainment(Sli::Ttft), Some(0.9));
    assert_eq!(chat.raw_attainment(Sli::Tpot), Some(0.6));
    assert_eq!(chat.raw_attainment(Sli::E2el), None);
    // The naive goodput needs a raw reading of each goodput SLI of the SLO: E2EL has none.
    assert_eq!(chat.naive_goodput(&spec.slos[0]), None);
    let mut two = spec.slos[0].clone();
    two.slis.truncate(2);
    // min(0.9, 0.6) = 0.6.
    assert_eq!(chat.naive_goodput(&two), Some(0.6));
}

#[test]
fn a_fallen_counter_gives_no_reading_and_groups_sum_their_counts() {
    let before = dump(
        (100.0, 90.0),
        (80.0, 70.0),
        (100.0, 60.0, 70.0),
        [0.0; 4],
        [0.0; 4],
    );
    // TTFT events fell (a reset): TTFT gives nothing; TPOT still reads 10 / 20.
    let after = dump(
        (50.0, 45.0),
        (100.0, 80.0),
        (120.0, 70.0, 85.0),
        [0.0; 4],
        [0.0; 4],
    );
    let slos = total(&before, &after, &spec());
    assert!(!slos[0].slis.contains_key(&Sli::Ttft));
    assert_eq!(slos[0].attainment(Sli::Tpot), Some(0.5));
    // Two groups of the same SLO: counts add, then divide. (10 + 30) / (20 + 40), not the mean
    // of 0.5 and 0.75.
    let mut a = slos[0].clone();
    let b = SloInterval {
        name: "chat".into(),
        slis: BTreeMap::from([(
            Sli::Tpot,
            Count {
                events: 40.0,
                good: 30.0,
            },
        )]),
        raw: BTreeMap::new(),
        goodput: Some(Goodput {
            finished: 10.0,
            lower: 1.0,
            upper: 2.0,
        }),
    };
    a.add(&b);
    assert_eq!(a.attainment(Sli::Tpot), Some(40.0 / 60.0));
    // Goodput: finished 20 + 10, lower 10 + 1, upper 15 + 2.
    let g = a.goodput.unwrap();
    assert_eq!((g.finished, g.lower, g.upper), (30.0, 11.0, 17.0));
}
