//! The filters: selectors parsed and matched as PromQL's, state, reason and family checked, and
//! through `/api/v1/groups` and `/status` (with paging).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::*;
use crate::http::paging_tests::served_groups_with;
use crate::http::{AppState, app};
use engine::IngestReport;
use protocol::{Label, Sample};

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

fn filter(query: &str) -> Result<Filter, String> {
    let mut f = Filter::default();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        assert!(f.take(&name, &value)?, "{name} is a filter parameter");
    }
    Ok(f)
}

#[test]
fn a_selector_matches_as_promql_matches() {
    let f = filter(
        "match[]={job=\"vllm\", instance=~\"10\\\\.0\\\\..*\",model_name!=\"x\",engine!~'1|2',}",
    )
    .unwrap();
    let group = |instance: &str, engine: &str| {
        labels(&[
            ("engine", engine),
            ("instance", instance),
            ("job", "vllm"),
            ("model_name", "m"),
        ])
    };
    assert!(f.labels(&group("10.0.0.1:8000", "0")));
    // Anchored at both ends: a prefix is no match.
    assert!(!f.labels(&group("110.0.0.1:8000", "0")));
    assert!(!f.labels(&group("10.0.0.1:8000", "1")));
    // A missing label matches "": `model_name!="x"` holds for a group without one.
    assert!(f.labels(&labels(&[
        ("engine", "0"),
        ("instance", "10.0.0.9"),
        ("job", "vllm")
    ])));
    assert!(!f.labels(&labels(&[("engine", "0"), ("instance", "10.0.0.9")])));
    // Two selectors: either.
    let f = filter("match[]={engine=\"1\"}&match[]={engine=\"2\"}").unwrap();
    assert!(f.labels(&labels(&[("engine", "2")])));
    assert!(!f.labels(&labels(&[("engine", "3")])));
    // Escapes inside quotes.
    let f = filter("match[]={path=\"a\\\"b\\\\c\"}").unwrap();
    assert!(f.labels(&labels(&[("path", "a\"b\\c")])));
}

#[test]
fn a_bad_filter_says_what_is_wrong() {
    let cases = [
        ("match[]=job=\"x\"", "a selector is {name=\"value\", …}"),
        ("match[]={}", "a selector needs at least one matcher"),
        ("match[]={job}", "expected =, !=, =~ or !~ after job"),
        ("match[]={job=x}", "expected a quoted value"),
        (
            "match[]={job=\"x\" instance=\"y\"}",
            "expected , or } after a matcher",
        ),
        ("match[]={1x=\"y\"}", "expected a label name"),
        ("match[]={job=~\"(\"}", "\"(\" is not a regular expression"),
        (
            "state=broken",
            "state=\"broken\" is none of served, degraded, withheld",
        ),
        ("reason=lost", "reason=\"lost\" is none of missing_input, "),
        ("family=vllm:x", "family=\"vllm:x\" is no corrected family"),
    ];
    for (query, want) in cases {
        let error = filter(query).unwrap_err();
        assert!(error.contains(want), "{query}: {error}");
    }
    // 64 matchers pass, over any number of selectors; the 65th is refused.
    let eight = format!("match[]={{{}}}", ["a=~\".*\""; 8].join(","));
    assert!(filter(&[eight.as_str(); 8].join("&")).is_ok());
    let over = format!("{}&match[]={{b=\"c\"}}", [eight.as_str(); 8].join("&"));
    assert_eq!(
        filter(&over).unwrap_err(),
        format!("more than {MAX_MATCHERS} label matchers over all match[] selectors")
    );
    let many = vec!["match[]={a=\"b\"}"; MAX_SELECTORS + 1].join("&");
    assert_eq!(
        filter(&many).unwrap_err(),
        format!("more than {MAX_SELECTORS} match[] selectors")
    );
}

#[test]
fn state_reason_and_family_look_at_the_families_as_status_shows_them() {
    let [itl, tokens] = [
        Family::named("vllm_corrected_token_weighted_itl_seconds"),
        Family::named("vllm_corrected_tokens_per_output"),
    ];
    let served = |family| FamilyStatus {
        family,
        withheld: None,
        degraded: false,
        missing_input: None,
        limit: None,
    };
    let missing = |family| FamilyStatus {
        withheld: Some(WithheldReason::MissingInput),
        missing_input: Some("vllm:x"),
        ..served(family)
    };
    let group = [served(itl), missing(tokens)];
    for (query, listed) in [
        ("state=served", true),
        ("state=degraded", false),
        ("state=withheld&reason=missing_input", true),
        ("reason=limit", false),
        (
            "family=vllm_corrected_tokens_per_output&state=served",
            false,
        ),
        (
            "family=vllm_corrected_token_weighted_itl_seconds&state=served",
            true,
        ),
        (
            "family=vllm_corrected_token_weighted_itl_seconds&reason=missing_input",
            false,
        ),
    ] {
        let f = filter(query).unwrap();
        assert!(f.reads_families(), "{query}");
        assert_eq!(f.families(&group, &[]), listed, "{query}");
    }
    assert!(!Filter::default().reads_families());
}

/// An SLI the SLO counters leave out shows as withheld in `vllm_corrected_slo` on `/status` and in
/// `vllm_corrector_family_info`; the filters list its group the same way, with the note's reason.
#[test]
fn state_reason_and_family_find_the_slis_an_slo_leaves_out() {
    let served = |family| FamilyStatus {
        family,
        withheld: None,
        degraded: false,
        missing_input: None,
        limit: None,
    };
    let group = [
        served(Family::SloCounters),
        served(Family::named("vllm_corrected_tokens_per_output")),
    ];
    let note = engine::slo::SliNote {
        slo: "chat".into(),
        sli: engine::slo::Sli::Tpot,
        reason: engine::slo::SliNoteReason::NotABucketEdge,
        detail: "0.07 s is not an le".into(),
    };
    for (query, with_note, without) in [
        ("state=withheld", true, false),
        ("reason=not_a_bucket_edge", true, false),
        ("reason=incomplete", false, false),
        ("family=vllm_corrected_slo&state=withheld", true, false),
        ("family=vllm_corrected_slo&state=served", true, true),
        (
            "family=vllm_corrected_tokens_per_output&reason=not_a_bucket_edge",
            false,
            false,
        ),
    ] {
        let f = filter(query).unwrap();
        assert_eq!(
            f.families(&group, std::slice::from_ref(&note)),
            with_note,
            "{query}"
        );
        assert_eq!(f.families(&group, &[]), without, "{query}");
    }
}

/// Six groups serving token-weighted ITL (`instance` 000000 to 000005) and one, `lone`, with
/// only the generation-tokens counter: every family withheld.
fn seven_groups() -> AppState {
    let state = served_groups_with(6, |_| 0);
    let labels = [
        Label {
            name: "__name__",
            value: "vllm:generation_tokens_total",
        },
        Label {
            name: "instance",
            value: "lone",
        },
    ];
    let sample = Sample {
        value: 1.0,
        timestamp_ms: 16_000,
    };
    let mut report = IngestReport::default();
    state
        .lock_engine()
        .ingest(&labels, &[sample], 16_000, &mut report);
    assert_eq!(report.applied, 1);
    state
}

async fn get(state: &AppState, path: &str) -> (StatusCode, String) {
    let request = Request::builder().uri(path).body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// The instances `/api/v1/groups?<query>` lists, and its `total`.
async fn listed(state: &AppState, query: &str) -> (Vec<String>, u64) {
    let (status, body) = get(state, &format!("/api/v1/groups?{query}")).await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let instances = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["labels"]["instance"].as_str().unwrap().to_owned())
        .collect();
    (instances, v["total"].as_u64().unwrap())
}

#[tokio::test]
async fn the_groups_api_lists_what_the_filters_select_and_refuses_a_limit_past_the_maximum() {
    let state = seven_groups();
    let (status, body) = get(&state, "/api/v1/groups?limit=5000").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "bad page query: limit=5000 is over the maximum of 1000 groups per page; follow the \
         next-page cursor for more\n"
    );
    let (all, total) = listed(&state, "").await;
    assert_eq!((all.len(), total), (7, 7));
    // %7B%7D are { }, %3D~ is =~, %22 is ".
    let (some, total) = listed(&state, "match[]=%7Binstance%3D~%2200000%5B1-3%5D%22%7D").await;
    assert_eq!(some, ["000001", "000002", "000003"]);
    assert_eq!(total, 3);
    let (either, _) = listed(
        &state,
        "match[]=%7Binstance%3D%22000000%22%7D&match[]=%7Binstance%3D%22lone%22%7D",
    )
    .await;
    assert_eq!(either, ["000000", "lone"]);
    let itl = "family=vllm_corrected_token_weighted_itl_seconds";
    assert_eq!(
        listed(&state, &format!("{itl}&state=withheld")).await.0,
        ["lone"]
    );
    assert_eq!(listed(&state, &format!("{itl}&state=served")).await.1, 6);
    assert_eq!(listed(&state, "reason=missing_input").await.1, 7);
    assert_eq!(listed(&state, "reason=limit").await.1, 0);
    let (status, body) = get(&state, "/api/v1/groups?state=sideways").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn status_pages_keep_the_filter_in_their_links() {
    let state = seven_groups();
    let mut path = "/status?match[]=%7Binstance%3D~%2200000%5B1-4%5D%22%7D&limit=1".to_owned();
    let mut seen = Vec::new();
    loop {
        let (status, body) = get(&state, &path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(body.contains("4 of 7 group(s) match"), "{body}");
        for row in body.split("<tr class=\"group\">").skip(1) {
            let value = row.split("instance=&quot;").nth(1).unwrap();
            seen.push(value[..value.find("&quot;").unwrap()].to_owned());
        }
        let Some(link) = body.split("<a id=\"next-page\" href=\"").nth(1) else {
            break;
        };
        path = format!("/{}", link[..link.find('"').unwrap()].replace("&amp;", "&"));
        assert!(
            path.starts_with("/status?match%5B%5D=%7Binstance"),
            "{path}"
        );
    }
    assert_eq!(seen, ["000001", "000002", "000003", "000004"]);
}
