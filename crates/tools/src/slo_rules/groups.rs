//! The rule groups of one SLO: recording rules, then alerts, as plain data ready to serialise
//! (`groups:` of a Prometheus rule file, `spec.groups` of a PrometheusRule).
//!
//! Per SLO named `N` (`m` = `vllm_slo_N`, `C` = `N` in CamelCase), three groups:
//!
//! * `vllm-slo-N.sli`: `m:sli_error:ratio_rate<w>` for every window of the burn-rate table,
//!   `m:objective:ratio` and `m:threshold:seconds` per SLI, and (counters source)
//!   `m:goodput:ratio_rate5m`/`1h` and `m:goodput_requests:rate5m`, each with `bound`, and
//!   `m:raw_good:ratio_rate5m`/`1h` per goodput SLI (vLLM's own histograms at the threshold:
//!   the naive reading the goodput bounds are shown beside);
//! * `vllm-slo-N.budget` (evaluated every 5 m, since it reads the whole SLO window):
//!   `m:sli_error:ratio_rate<window>`, `m:error_budget:remaining_ratio` per SLI and (counters)
//!   `m:goodput:ratio_rate<window>`;
//! * `vllm-slo-N.alerts`: `VllmSloCErrorBudgetBurn` (four window pairs per SLI, pages and
//!   tickets) and `VllmSloCErrorBudgetExhausted` per SLI.
//!
//! Every ratio sums its numerator and its denominator by `slo`, `sli` and the SLO's `by` labels
//! first, then divides: never a mean of per-group ratios.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_saphyr::LitString;

use engine::slo::{EventUnit, Sli, SliTarget, Slo, format_ms};

use super::le::{le_matcher, selector, string, sum_by};
use super::windows::{BurnWindow, Severity, burn_windows, ratio_windows};
use super::{Reads, Source};
use crate::presentation::SLO;
use crate::slo_readings::GOODPUT_SLIS;

/// Events per group, SLO and SLI (`slo`, `sli` labels): the corrector's counters.
pub const EVENTS: &str = "vllm_corrected_slo_events_total";
/// Good events (value at most the threshold) per group, SLO and SLI.
pub const GOOD_EVENTS: &str = "vllm_corrected_slo_good_events_total";
/// Finished requests per group and SLO (`slo` label).
pub const FINISHED: &str = "vllm_corrected_slo_finished_requests_total";
/// Requests that met every threshold of the SLO, a lower and an upper bound (`bound` label).
pub const GOODPUT: &str = "vllm_corrected_goodput_requests_total";

/// How often the budget group is evaluated: it reads the whole SLO window.
const BUDGET_INTERVAL: &str = "5m";
/// `for` of the budget-exhausted alert.
const EXHAUSTED_FOR: &str = "15m";

/// One rule of a group: a recording rule (`record`) or an alert (`alert`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Rule {
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alert: Option<String>,
    expr: LitString,
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    for_: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
}

/// A rule group.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Group {
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<String>,
    pub(crate) rules: Vec<Rule>,
}

fn record(name: String, expr: String, labels: &[(&str, &str)]) -> Rule {
    Rule {
        record: Some(name),
        alert: None,
        expr: LitString(format!("{}\n", expr.trim_end())),
        for_: None,
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        annotations: BTreeMap::new(),
    }
}

/// The names derived from an SLO's name.
pub(crate) struct Names {
    /// `vllm_slo_<name>`: the level part of every recorded name.
    pub(crate) metric: String,
    /// `VllmSlo<Name>`: the prefix of every alert name.
    pub(crate) alert: String,
}

impl Names {
    pub(crate) fn of(slo: &Slo) -> Names {
        let camel: String = slo
            .name
            .split('_')
            .map(|part| {
                let mut chars = part.chars();
                chars.next().map_or_else(String::new, |c| {
                    c.to_ascii_uppercase().to_string() + chars.as_str()
                })
            })
            .collect();
        Names {
            metric: format!("vllm_slo_{}", slo.name),
            alert: format!("VllmSlo{camel}"),
        }
    }

    /// `vllm_slo_<name>:sli_error:ratio_rate<w>`.
    pub(crate) fn ratio(&self, window_ms: u64) -> String {
        format!(
            "{}:sli_error:ratio_rate{}",
            self.metric,
            duration(window_ms)
        )
    }
}

/// `ms` as a Prometheus duration (`5m`, `1d`, `2d19h12m`); every window here is whole minutes.
pub(crate) fn duration(ms: u64) -> String {
    format_ms(ms).unwrap_or_else(|| format!("{ms}ms"))
}

/// The histogram an SLI reads with `--source buckets`: vLLM's own for TTFT and E2EL (under the
/// input prefix `prefix`, `input.metric_prefix`), the corrector's for canonical TPOT (also
/// recorded by `vllm-corrector rules corrections`) and for per-token ITL (served by the corrector
/// only: PromQL cannot compute those buckets).
pub(crate) fn histogram(sli: Sli, prefix: &str) -> String {
    match sli {
        Sli::Ttft => format!("{prefix}time_to_first_token_seconds"),
        Sli::Tpot => "vllm_corrected_request_time_per_output_token_seconds".to_owned(),
        Sli::E2el => format!("{prefix}e2e_request_latency_seconds"),
        Sli::ItlPerToken => "vllm_corrected_acceptance_corrected_itl_seconds".to_owned(),
    }
}

/// The `match:` of `slo` as PromQL matchers (`model_name=~"meta-llama/.*"`).
pub(crate) fn match_matchers(slo: &Slo) -> Vec<String> {
    slo.matchers
        .iter()
        .map(|m| format!("{}=~{}", m.label, string(&m.regex)))
        .collect()
}

/// `1 - (good / total)` with both sides summed by `by` first.
fn error_ratio(by: &[String], good: &str, total: &str) -> String {
    format!(
        "1 - (\n    {}\n  /\n    {}\n)",
        sum_by(by, good),
        sum_by(by, total)
    )
}

/// The recording rule of the error ratio over `window_ms`: one rule for all SLIs from the
/// counters, one per SLI (with `slo` and `sli` as rule labels) from the buckets.
fn ratio_rules(slo: &Slo, names: &Names, reads: Reads<'_>, window_ms: u64) -> Vec<Rule> {
    let w = duration(window_ms);
    match reads.source {
        Source::Counters => {
            let by: Vec<String> = ["slo", "sli"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain(slo.by.iter().cloned())
                .collect();
            let of = [format!("slo={}", string(&slo.name))];
            let rate = |name: &str| format!("rate({}[{w}])", selector(name, &of));
            vec![record(
                names.ratio(window_ms),
                error_ratio(&by, &rate(GOOD_EVENTS), &rate(EVENTS)),
                &[],
            )]
        }
        Source::Buckets => slo
            .slis
            .iter()
            .map(|target| {
                let h = histogram(target.sli, reads.prefix);
                let (good, total) = bucket_rates(slo, &h, target.threshold_seconds, &w);
                record(
                    names.ratio(window_ms),
                    error_ratio(&slo.by, &good, &total),
                    &[("slo", &slo.name), ("sli", target.sli.name())],
                )
            })
            .collect(),
    }
}

/// `rate(h_bucket{match…, le=~"t"}[w])` and `rate(h_count{match…}[w])`: the good events and the
/// events of histogram `h` at threshold `t`, over the groups `slo` matches.
fn bucket_rates(slo: &Slo, h: &str, t: f64, w: &str) -> (String, String) {
    let matchers = match_matchers(slo);
    let mut bucket = matchers.clone();
    bucket.push(le_matcher(t));
    let good = format!("rate({}[{w}])", selector(&format!("{h}_bucket"), &bucket));
    let total = format!("rate({}[{w}])", selector(&format!("{h}_count"), &matchers));
    (good, total)
}

/// `sum by (slo, bound, by…) (rate(goodput[w])) / ignoring(bound) group_left sum by (slo, by…)
/// (rate(finished[w]))`: the goodput bounds as fractions of the finished requests.
fn goodput_ratio(slo: &Slo, names: &Names, window_ms: u64) -> Rule {
    let w = duration(window_ms);
    let of = [format!("slo={}", string(&slo.name))];
    let by_slo: Vec<String> = std::iter::once("slo".to_owned())
        .chain(slo.by.iter().cloned())
        .collect();
    let mut by_bound = by_slo.clone();
    by_bound.insert(1, "bound".to_owned());
    let goodput = sum_by(&by_bound, &format!("rate({}[{w}])", selector(GOODPUT, &of)));
    let finished = sum_by(&by_slo, &format!("rate({}[{w}])", selector(FINISHED, &of)));
    record(
        format!("{}:goodput:ratio_rate{w}", names.metric),
        format!("{goodput}\n/ ignoring (bound) group_left\n{finished}"),
        &[],
    )
}

/// `vllm_slo_<name>:raw_good:ratio_rate<w>{slo, sli}` for each goodput SLI of `slo` (TTFT, TPOT,
/// E2EL): the share of events at most the threshold as vLLM's own histogram gives it (its bucket
/// at the threshold over its `_count`, each summed by the `by` labels first; `match:` applied, as
/// the raw series are not filtered by the corrector). It is what a user writes without the
/// corrector, vLLM's TPOT counting every request of at most one output token as a good event of
/// 0 s; the least of them is the naive goodput the dashboard shows beside the bounds.
fn raw_good_ratios(slo: &Slo, names: &Names, reads: Reads<'_>, window_ms: u64) -> Vec<Rule> {
    let w = duration(window_ms);
    slo.slis
        .iter()
        .filter(|t| GOODPUT_SLIS.contains(&t.sli))
        .map(|target| {
            let h = format!("{}{}", reads.prefix, SLO.raw_histogram(target.sli));
            let (good, total) = bucket_rates(slo, &h, target.threshold_seconds, &w);
            record(
                format!("{}:raw_good:ratio_rate{w}", names.metric),
                format!("{}\n/\n{}", sum_by(&slo.by, &good), sum_by(&slo.by, &total)),
                &[("slo", &slo.name), ("sli", target.sli.name())],
            )
        })
        .collect()
}

/// The three groups of `slo`; `interval` is the `interval:` of the SLI and alert groups.
pub(crate) fn slo_groups(slo: &Slo, reads: Reads<'_>, interval: Option<&str>) -> Vec<Group> {
    let names = Names::of(slo);
    let mut sli = Vec::new();
    for window in ratio_windows(slo.window_ms) {
        sli.extend(ratio_rules(slo, &names, reads, window));
    }
    for target in &slo.slis {
        let labels = [("slo", slo.name.as_str()), ("sli", target.sli.name())];
        sli.push(record(
            format!("{}:objective:ratio", names.metric),
            format!("vector({})", target.objective),
            &labels,
        ));
        sli.push(record(
            format!("{}:threshold:seconds", names.metric),
            format!("vector({})", target.threshold_seconds),
            &labels,
        ));
    }
    let mut budget = ratio_rules(slo, &names, reads, slo.window_ms);
    for target in &slo.slis {
        budget.push(record(
            format!("{}:error_budget:remaining_ratio", names.metric),
            format!(
                "1 - {}{{sli=\"{}\"}} / (1 - {})",
                names.ratio(slo.window_ms),
                target.sli,
                target.objective
            ),
            &[("slo", &slo.name), ("sli", target.sli.name())],
        ));
    }
    if reads.source == Source::Counters {
        let of = [format!("slo={}", string(&slo.name))];
        let mut by_bound = vec!["slo".to_owned(), "bound".to_owned()];
        by_bound.extend(slo.by.iter().cloned());
        sli.push(goodput_ratio(slo, &names, 5 * 60_000));
        sli.push(goodput_ratio(slo, &names, 60 * 60_000));
        sli.push(record(
            format!("{}:goodput_requests:rate5m", names.metric),
            sum_by(&by_bound, &format!("rate({}[5m])", selector(GOODPUT, &of))),
            &[],
        ));
        for window in [5 * 60_000, 60 * 60_000] {
            sli.extend(raw_good_ratios(slo, &names, reads, window));
        }
        budget.push(goodput_ratio(slo, &names, slo.window_ms));
    }
    let mut alerts = Vec::new();
    for target in &slo.slis {
        for window in burn_windows(slo.window_ms) {
            alerts.push(burn_alert(slo, &names, target, &window));
        }
    }
    for target in &slo.slis {
        alerts.push(exhausted_alert(slo, &names, target));
    }
    let interval = interval.map(str::to_owned);
    vec![
        Group {
            name: format!("vllm-slo-{}.sli", slo.name),
            interval: interval.clone(),
            rules: sli,
        },
        Group {
            name: format!("vllm-slo-{}.budget", slo.name),
            interval: Some(BUDGET_INTERVAL.to_owned()),
            rules: budget,
        },
        Group {
            name: format!("vllm-slo-{}.alerts", slo.name),
            interval,
            rules: alerts,
        },
    ]
}

/// `namespace={{ $labels.namespace }} model_name={{ $labels.model_name }}`, or `all groups`.
fn where_text(slo: &Slo) -> String {
    if slo.by.is_empty() {
        return "all groups".to_owned();
    }
    slo.by
        .iter()
        .map(|l| format!("{l}={{{{ $labels.{l} }}}}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fraction as a percentage for text: 0.01 gives `1`, 0.0005 gives `0.05`.
pub(crate) fn percent(fraction: f64) -> String {
    let p = (fraction * 100.0 * 1e6).round() / 1e6;
    format!("{p}")
}

fn events(sli: Sli) -> &'static str {
    match sli.unit() {
        EventUnit::Requests => "requests",
        EventUnit::Tokens => "tokens",
    }
}

/// `SLO chat, TPOT <= 0.05 s`.
pub(crate) fn title(slo: &Slo, target: &SliTarget) -> String {
    format!(
        "SLO {}, {} <= {} s",
        slo.name,
        target.sli.label(),
        target.threshold_seconds
    )
}

fn burn_alert(slo: &Slo, names: &Names, target: &SliTarget, w: &BurnWindow) -> Rule {
    let threshold = format!("({} * (1 - {}))", w.factor, target.objective);
    let (long, short) = (duration(w.long_ms), duration(w.short_ms));
    let sli = format!("{{sli=\"{}\"}}", target.sli);
    let expr = format!(
        "{}{sli} > {threshold}\nand\n{}{sli} > {threshold}\n",
        names.ratio(w.long_ms),
        names.ratio(w.short_ms)
    );
    let pace = match w.severity {
        Severity::Page => "fast",
        Severity::Ticket => "steadily",
    };
    let summary = format!(
        "{}: {} burns its error budget {pace}.",
        title(slo, target),
        where_text(slo)
    );
    let description = format!(
        "{{{{ $value | humanizePercentage }}}} of the {} of {} had {} above {} s over the last \
         {long} (and still over the last {short}): more than {} times the error budget of {} % \
         that the objective of {} % allows, {} % of the {} budget in {long}.",
        events(target.sli),
        where_text(slo),
        target.sli.label(),
        target.threshold_seconds,
        w.factor,
        percent(target.error_budget()),
        percent(target.objective),
        w.budget_percent,
        duration(slo.window_ms),
    );
    Rule {
        record: None,
        alert: Some(format!("{}ErrorBudgetBurn", names.alert)),
        expr: LitString(expr),
        for_: Some(duration(w.for_ms)),
        labels: [
            ("severity", w.severity.label().to_owned()),
            ("long_window", long),
            ("short_window", short),
            ("slo", slo.name.clone()),
            ("sli", target.sli.name().to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
        annotations: [("summary", summary), ("description", description)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    }
}

fn exhausted_alert(slo: &Slo, names: &Names, target: &SliTarget) -> Rule {
    let window = duration(slo.window_ms);
    Rule {
        record: None,
        alert: Some(format!("{}ErrorBudgetExhausted", names.alert)),
        expr: LitString(format!(
            "{}:error_budget:remaining_ratio{{sli=\"{}\"}} <= 0\n",
            names.metric, target.sli
        )),
        for_: Some(EXHAUSTED_FOR.to_owned()),
        labels: BTreeMap::from([
            ("severity".to_owned(), "warning".to_owned()),
            ("slo".to_owned(), slo.name.clone()),
            ("sli".to_owned(), target.sli.name().to_owned()),
        ]),
        annotations: BTreeMap::from([
            (
                "summary".to_owned(),
                format!(
                    "{}: {} has spent its {window} error budget.",
                    title(slo, target),
                    where_text(slo)
                ),
            ),
            (
                "description".to_owned(),
                format!(
                    "Over the last {window}, more than {} % of the {} of {} had {} above {} s, \
                     the objective of {} % is missed: {{{{ $value | humanizePercentage }}}} of \
                     the error budget remains.",
                    percent(target.error_budget()),
                    events(target.sli),
                    where_text(slo),
                    target.sli.label(),
                    target.threshold_seconds,
                    percent(target.objective),
                ),
            ),
        ]),
    }
}
