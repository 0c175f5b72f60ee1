//! `--format pyrra`: Pyrra `ServiceLevelObjective` objects (`pyrra.dev/v1alpha1`), one per SLO and
//! SLI, for Pyrra's Kubernetes or filesystem mode.
//!
//! From the counters, each is a `ratio` indicator. Pyrra wants the errors as one vector selector,
//! and the corrector serves good events, so the output begins with a PrometheusRule recording
//! `vllm_slo:bad_events:total` (events − good events, per series: both counters of a series come
//! from one scrape of the corrector and reset together, so the difference is a counter). From the
//! buckets, each is a `latency` indicator on the histogram, its `le` written as vLLM and the
//! corrector print it (`0.1`, `20.0`), which Prometheus 3 keeps as it is.

use serde::Serialize;
use serde_saphyr::LitString;

use engine::slo::{SliTarget, Slo, SloSpec};

use super::groups::{
    EVENTS, GOOD_EVENTS, Names, duration, histogram, match_matchers, percent, title,
};
use super::le::{selector, string};
use super::{Metadata, Reads, Source, operator_labels, yaml};

/// The recorded bad-events counter Pyrra's ratio indicators read.
pub(crate) const BAD_EVENTS: &str = "vllm_slo:bad_events:total";

#[derive(Serialize)]
struct Objective {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: ObjectiveSpec,
}

#[derive(Serialize)]
struct ObjectiveSpec {
    description: String,
    target: String,
    window: String,
    indicator: Indicator,
    alerting: Alerting,
}

#[derive(Serialize)]
struct Indicator {
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<Ratio>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency: Option<Latency>,
}

#[derive(Serialize)]
struct Ratio {
    errors: Query,
    total: Query,
    grouping: Vec<String>,
}

#[derive(Serialize)]
struct Latency {
    success: Query,
    total: Query,
    grouping: Vec<String>,
}

#[derive(Serialize)]
struct Query {
    metric: String,
}

#[derive(Serialize)]
struct Alerting {
    name: String,
}

#[derive(Serialize)]
struct HelperRule {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: HelperSpec,
}

#[derive(Serialize)]
struct HelperSpec {
    groups: Vec<HelperGroup>,
}

#[derive(Serialize)]
struct HelperGroup {
    name: &'static str,
    rules: Vec<HelperRecord>,
}

#[derive(Serialize)]
struct HelperRecord {
    record: &'static str,
    expr: LitString,
}

/// `le` as vLLM (Python `prometheus_client`) prints it: `0.1`, `20.0`, `1e-05`.
fn python_le(t: f64) -> String {
    if (1e-4..1e6).contains(&t) {
        if t.fract() == 0.0 {
            format!("{t:.1}")
        } else {
            format!("{t}")
        }
    } else {
        let text = format!("{t:e}");
        match text.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
                format!("{m}e{sign}{digits:0>2}")
            }
            None => text,
        }
    }
}

fn indicator(slo: &Slo, target: &SliTarget, reads: Reads<'_>) -> Indicator {
    let grouping = slo.by.clone();
    match reads.source {
        Source::Counters => {
            let of = [
                format!("slo={}", string(&slo.name)),
                format!("sli={}", string(target.sli.name())),
            ];
            Indicator {
                ratio: Some(Ratio {
                    errors: Query {
                        metric: selector(BAD_EVENTS, &of),
                    },
                    total: Query {
                        metric: selector(EVENTS, &of),
                    },
                    grouping,
                }),
                latency: None,
            }
        }
        Source::Buckets => {
            let h = histogram(target.sli, reads.prefix);
            let matchers = match_matchers(slo);
            let mut bucket = matchers.clone();
            bucket.push(format!(
                "le={}",
                string(&python_le(target.threshold_seconds))
            ));
            Indicator {
                ratio: None,
                latency: Some(Latency {
                    success: Query {
                        metric: selector(&format!("{h}_bucket"), &bucket),
                    },
                    total: Query {
                        metric: selector(&format!("{h}_count"), &matchers),
                    },
                    grouping,
                }),
            }
        }
    }
}

fn objective(slo: &Slo, target: &SliTarget, reads: Reads<'_>) -> Objective {
    Objective {
        api_version: "pyrra.dev/v1alpha1",
        kind: "ServiceLevelObjective",
        metadata: Metadata {
            name: format!("{}-{}", slo.name, target.sli).replace('_', "-"),
            namespace: super::NAMESPACE,
            labels: operator_labels(),
        },
        spec: ObjectiveSpec {
            description: if slo.description.is_empty() {
                title(slo, target)
            } else {
                format!("{}: {}", title(slo, target), slo.description)
            },
            target: percent(target.objective),
            window: duration(slo.window_ms),
            indicator: indicator(slo, target, reads),
            alerting: Alerting {
                name: format!("{}ErrorBudgetBurn", Names::of(slo).alert),
            },
        },
    }
}

/// The Pyrra output: (counters) the bad-events PrometheusRule, then one ServiceLevelObjective per
/// SLO and SLI, `---`-separated.
pub(crate) fn render(spec: &SloSpec, reads: Reads<'_>, origin: &str) -> String {
    let mut out = format!(
        "# Pyrra ServiceLevelObjective objects printed by `vllm-corrector rules --format pyrra`\n\
         # from {origin} (docs/SLO.md): one per SLO and SLI. Apply them where Pyrra watches\n\
         # (kubectl apply -f), or put them in Pyrra's filesystem directory. Load either these or\n\
         # the rules of `vllm-corrector rules`, not both.\n"
    );
    if spec.slos.is_empty() {
        out.push_str("# The spec has no SLO (slos: []): nothing to print.\n");
        return out;
    }
    if reads.source == Source::Counters {
        let helper = HelperRule {
            api_version: "monitoring.coreos.com/v1",
            kind: "PrometheusRule",
            metadata: Metadata {
                name: "vllm-corrector-slo-bad-events".to_owned(),
                namespace: super::NAMESPACE,
                labels: operator_labels(),
            },
            spec: HelperSpec {
                groups: vec![HelperGroup {
                    name: "vllm-slo.pyrra",
                    rules: vec![HelperRecord {
                        record: BAD_EVENTS,
                        expr: LitString(format!("{EVENTS} - {GOOD_EVENTS}\n")),
                    }],
                }],
            },
        };
        out.push_str(
            "---\n# The errors the ratio indicators read: bad events, recorded per series.\n",
        );
        out.push_str(&yaml(&helper));
    }
    for slo in &spec.slos {
        for target in &slo.slis {
            out.push_str("---\n");
            out.push_str(&yaml(&objective(slo, target, reads)));
        }
    }
    out
}
