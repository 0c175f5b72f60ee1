//! `--format sloth`: Sloth `prometheus/v1` specs (`sloth generate -i FILE`), one SLO of Sloth's per
//! SLO and SLI, with `sli.events` queries on the same series as our rules.
//!
//! Sloth takes the SLO period from its command line (`--default-slo-period`, 30d by default), not
//! from the spec, so the SLOs are printed as one spec document per window; for a window other
//! than the 28d and 30d Sloth ships, the header of that document carries the `AlertWindows`
//! (`--slo-period-windows-path`) with the windows our own rules use, commented out.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_saphyr::LitString;

use engine::slo::{Sli, SliTarget, Slo, SloSpec};

use super::groups::{EVENTS, GOOD_EVENTS, Names, duration, histogram, match_matchers, title};
use super::le::{le_matcher, selector, string, sum_by};
use super::windows::{Severity, burn_windows};
use super::{Reads, Source, yaml};

#[derive(Serialize)]
struct Spec {
    version: &'static str,
    service: &'static str,
    slos: Vec<SlothSlo>,
}

#[derive(Serialize)]
struct SlothSlo {
    name: String,
    objective: f64,
    description: String,
    labels: BTreeMap<String, String>,
    sli: SlothSli,
    alerting: Alerting,
}

#[derive(Serialize)]
struct SlothSli {
    events: Events,
}

#[derive(Serialize)]
struct Events {
    error_query: LitString,
    total_query: LitString,
}

#[derive(Serialize)]
struct Alerting {
    name: String,
    annotations: BTreeMap<String, String>,
    page_alert: Alert,
    ticket_alert: Alert,
}

#[derive(Serialize)]
struct Alert {
    labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct AlertWindows {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    spec: WindowsSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WindowsSpec {
    slo_period: String,
    page: QuickSlow,
    ticket: QuickSlow,
}

#[derive(Serialize)]
struct QuickSlow {
    quick: Window,
    slow: Window,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Window {
    error_budget_percent: f64,
    short_window: String,
    long_window: String,
}

/// `(error_query, total_query)` of one SLI, with Sloth's `{{.window}}` for the range.
fn queries(slo: &Slo, target: &SliTarget, reads: Reads<'_>) -> (String, String) {
    let rate = |selector: String| format!("rate({selector}[{{{{.window}}}}])");
    match reads.source {
        Source::Counters => {
            let of = [
                format!("slo={}", string(&slo.name)),
                format!("sli={}", string(target.sli.name())),
            ];
            let total = sum_by(&slo.by, &rate(selector(EVENTS, &of)));
            let good = sum_by(&slo.by, &rate(selector(GOOD_EVENTS, &of)));
            (format!("{total}\n-\n{good}\n"), format!("{total}\n"))
        }
        Source::Buckets => {
            let h = histogram(target.sli, reads.prefix);
            let matchers = match_matchers(slo);
            let mut bucket = matchers.clone();
            bucket.push(le_matcher(target.threshold_seconds));
            let total = sum_by(&slo.by, &rate(selector(&format!("{h}_count"), &matchers)));
            let good = sum_by(&slo.by, &rate(selector(&format!("{h}_bucket"), &bucket)));
            (format!("{total}\n-\n{good}\n"), format!("{total}\n"))
        }
    }
}

fn camel(sli: Sli) -> &'static str {
    match sli {
        Sli::Ttft => "Ttft",
        Sli::Tpot => "Tpot",
        Sli::E2el => "E2el",
        Sli::ItlPerToken => "ItlPerToken",
    }
}

fn sloth_slo(slo: &Slo, target: &SliTarget, reads: Reads<'_>) -> SlothSlo {
    let (error, total) = queries(slo, target, reads);
    let severity = |s: Severity| Alert {
        labels: BTreeMap::from([("severity".to_owned(), s.label().to_owned())]),
    };
    SlothSlo {
        name: format!("{}-{}", slo.name, target.sli),
        objective: (target.objective * 100.0 * 1e9).round() / 1e9,
        description: if slo.description.is_empty() {
            title(slo, target)
        } else {
            format!("{}: {}", title(slo, target), slo.description)
        },
        labels: BTreeMap::from([
            ("slo".to_owned(), slo.name.clone()),
            ("sli".to_owned(), target.sli.name().to_owned()),
        ]),
        sli: SlothSli {
            events: Events {
                error_query: LitString(error),
                total_query: LitString(total),
            },
        },
        alerting: Alerting {
            name: format!(
                "{}{}ErrorBudgetBurn",
                Names::of(slo).alert,
                camel(target.sli)
            ),
            annotations: BTreeMap::from([(
                "summary".to_owned(),
                format!("{} is burning its error budget.", title(slo, target)),
            )]),
            page_alert: severity(Severity::Page),
            ticket_alert: severity(Severity::Ticket),
        },
    }
}

/// The `AlertWindows` of our rules for `window_ms`, as Sloth reads them.
fn alert_windows(window_ms: u64) -> AlertWindows {
    let [fast, slow, quick, long] = burn_windows(window_ms).map(|w| Window {
        error_budget_percent: w.budget_percent,
        short_window: duration(w.short_ms),
        long_window: duration(w.long_ms),
    });
    AlertWindows {
        api_version: "sloth.slok.dev/v1",
        kind: "AlertWindows",
        spec: WindowsSpec {
            slo_period: duration(window_ms),
            page: QuickSlow { quick: fast, slow },
            ticket: QuickSlow { quick, slow: long },
        },
    }
}

/// The Sloth output: one `prometheus/v1` document per SLO window, `---`-separated.
pub(crate) fn render(spec: &SloSpec, reads: Reads<'_>, origin: &str) -> String {
    let mut by_window: BTreeMap<u64, Vec<&Slo>> = BTreeMap::new();
    for slo in &spec.slos {
        by_window.entry(slo.window_ms).or_default().push(slo);
    }
    let mut out = format!(
        "# Sloth prometheus/v1 SLO specs printed by `vllm-corrector rules --format sloth` from\n\
         # {origin} (docs/SLO.md): one Sloth SLO per SLO and SLI, on the same series as the\n\
         # rules of `vllm-corrector rules`. Load either these or those, not both.\n"
    );
    if by_window.is_empty() {
        out.push_str("# The spec has no SLO (slos: []): nothing to print.\n");
    }
    for (window_ms, slos) in by_window {
        let period = duration(window_ms);
        out.push_str(&format!(
            "---\n# SLOs with a {period} window: sloth generate -i <this document> \
             --default-slo-period {period}\n"
        ));
        if !["28d", "30d"].contains(&period.as_str()) {
            out.push_str(
                "# Sloth ships alert windows for 28d and 30d only; for this period put the following\n\
                 # AlertWindows (the windows of our rules) in a file of --slo-period-windows-path:\n",
            );
            for line in yaml(&alert_windows(window_ms)).lines() {
                out.push_str(&format!("#   {line}\n"));
            }
        }
        let document = Spec {
            version: "prometheus/v1",
            service: "vllm",
            slos: slos
                .iter()
                .flat_map(|slo| slo.slis.iter().map(|t| sloth_slo(slo, t, reads)))
                .collect(),
        };
        out.push_str(&yaml(&document));
    }
    out
}
