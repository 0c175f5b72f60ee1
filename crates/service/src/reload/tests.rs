//! Reload through both triggers' common path (`POST /-/reload` with `oneshot`, and
//! [`Reloader::reload`], which SIGHUP calls): good files swap, bad files keep the old
//! configuration and set the failure metric, engine state survives. SIGHUP itself is tested on
//! the binary in `tests/it/reload.rs`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use clap::Parser;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::Reloader;
use crate::clock::now_ms;
use crate::config::{Args, Config};
use crate::http::{AppState, app};
use crate::web::WebSettings;
use crate::web::settings_tests::Scratch;
use engine::Engine;
use engine::slo::{Sli, SloSpec};
use protocol::Sample;
use protocol::encode::encode_v1;

/// A service state built from `config.yml` and `web.yml` in `dir`, as `service::run` builds it.
fn service(dir: &Scratch) -> AppState {
    let args = Args::try_parse_from([
        "vllm-corrector".into(),
        format!("--config.file={}", dir.0.join("config.yml").display()),
        format!("--web.config.file={}", dir.0.join("web.yml").display()),
    ])
    .unwrap();
    let config = Config::from_args(args.clone()).unwrap();
    let web = WebSettings::load(config.web_config_file.as_deref()).unwrap();
    let state = AppState::new(Engine::new(config.engine.clone()), config.limits).with_web(web);
    state.live_cell().set_slos(Arc::new(config.slos));
    let reloader = Arc::new(Reloader::new(
        args,
        config.storage.clone(),
        state.core.clone(),
        state.live_cell().clone(),
    ));
    state.set_ready(true);
    state.with_reloader(reloader)
}

async fn post(
    state: &AppState,
    path: &str,
    body: Vec<u8>,
    auth: Option<&str>,
) -> (StatusCode, String) {
    let mut request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .header(header::CONTENT_ENCODING, "snappy");
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let response = app(state.clone())
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn metric(state: &AppState, name: &str) -> f64 {
    let text = crate::http::metrics::render_all(state, crate::exposition::Format::Text);
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// One RW 1.0 body holding one sample of a series a rule reads.
fn tokens_body(now: i64) -> Vec<u8> {
    let labels = [
        ("__name__", "vllm:generation_tokens_total"),
        ("engine", "0"),
        ("model_name", "m"),
    ]
    .map(|(n, v)| (n.to_owned(), v.to_owned()))
    .to_vec();
    encode_v1(
        &[(
            labels,
            vec![Sample {
                value: 10.0,
                timestamp_ms: now,
            }],
        )],
        &[],
    )
}

#[tokio::test]
async fn a_good_reload_swaps_limits_and_engine_settings_and_keeps_engine_state() {
    let dir = Scratch::new();
    dir.write("config.yml", "limits:\n  max_body_bytes: 1000\n");
    dir.write("web.yml", "");
    let state = service(&dir);
    let now = now_ms();
    let body = tokens_body(now);
    assert_eq!(
        post(&state, "/api/v1/write", body.clone(), None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(state.lock_engine().stats().active_series, 1);
    // 2000 zero bytes: over the 1000-byte cap before the reload.
    let big = vec![0u8; 2000];
    assert_eq!(
        post(&state, "/api/v1/write", big.clone(), None).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // The default idle timeout (10 min) keeps the group 5 s later.
    assert_eq!(state.lock_engine().sweep_idle(now + 5_000), 0);

    dir.write(
        "config.yml",
        "engine:\n  idle_timeout: 1s\nlimits:\n  max_body_bytes: 4000\n",
    );
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(
        (status, text.as_str()),
        (StatusCode::OK, "configuration reloaded\n")
    );

    // Now 2000 bytes pass the cap and fail as corrupt snappy (400), not as too large.
    assert_eq!(
        post(&state, "/api/v1/write", big, None).await.0,
        StatusCode::BAD_REQUEST
    );
    // The series is still there, and the new 1 s idle timeout removes its group 5 s later.
    assert_eq!(state.lock_engine().stats().active_series, 1);
    assert_eq!(state.lock_engine().sweep_idle(now + 5_000), 1);
    assert_eq!(
        metric(&state, "vllm_corrector_config_last_reload_successful"),
        1.0
    );
    let stamp = metric(
        &state,
        "vllm_corrector_config_last_reload_success_timestamp_seconds",
    );
    assert!(stamp >= now as f64 / 1000.0, "{stamp} < {now} ms");
}

#[tokio::test]
async fn a_bad_config_file_keeps_the_old_configuration_and_sets_the_failure_metric() {
    let dir = Scratch::new();
    dir.write("config.yml", "limits:\n  max_body_bytes: 1000\n");
    dir.write("web.yml", "");
    let state = service(&dir);
    let reloader = state.reloader().unwrap().clone();
    reloader.reload().unwrap();
    let good_stamp = metric(
        &state,
        "vllm_corrector_config_last_reload_success_timestamp_seconds",
    );

    // A valid cap next to an invalid field: nothing of the file may apply.
    dir.write(
        "config.yml",
        "limits:\n  max_body_bytes: 4000\n  max_concurrent_requests: 0\n",
    );
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let file = dir.0.join("config.yml");
    assert_eq!(
        text,
        format!(
            "--config.file {}: limits.max_concurrent_requests: must be at least 1\n",
            file.display()
        )
    );
    assert_eq!(
        post(&state, "/api/v1/write", vec![0u8; 2000], None).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        metric(&state, "vllm_corrector_config_last_reload_successful"),
        0.0
    );
    assert_eq!(
        metric(
            &state,
            "vllm_corrector_config_last_reload_success_timestamp_seconds"
        ),
        good_stamp
    );

    // Malformed YAML through the direct call (the SIGHUP path) fails the same way.
    dir.write("config.yml", "limits: [\n");
    assert!(reloader.reload().is_err());
    assert_eq!(
        metric(&state, "vllm_corrector_config_last_reload_successful"),
        0.0
    );

    // Fixing the file recovers.
    dir.write("config.yml", "limits:\n  max_body_bytes: 4000\n");
    reloader.reload().unwrap();
    assert_eq!(
        metric(&state, "vllm_corrector_config_last_reload_successful"),
        1.0
    );
    assert_eq!(
        post(&state, "/api/v1/write", vec![0u8; 2000], None).await.0,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn a_web_config_reload_swaps_credentials_and_a_bad_one_keeps_them() {
    let dir = Scratch::new();
    dir.write("config.yml", "");
    dir.write("web.yml", "bearer_tokens: [old-token]\n");
    let state = service(&dir);
    let old = Some("Bearer old-token");
    let new = Some("Bearer new-token");
    // An empty body: 400 from the handler means authentication passed.
    assert_eq!(
        post(&state, "/api/v1/write", Vec::new(), old).await.0,
        StatusCode::BAD_REQUEST
    );

    dir.write("web.yml", "bearer_tokens: [new-token]\n");
    assert_eq!(
        post(&state, "/-/reload", Vec::new(), old).await.0,
        StatusCode::OK
    );
    assert_eq!(
        post(&state, "/api/v1/write", Vec::new(), old).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post(&state, "/api/v1/write", Vec::new(), new).await.0,
        StatusCode::BAD_REQUEST
    );

    // A bad web config (and a config file that alone would be fine) keeps the new token.
    dir.write("config.yml", "limits:\n  max_body_bytes: 5\n");
    dir.write("web.yml", "bearer_tokens: [\"\"]\n");
    let (status, text) = post(&state, "/-/reload", Vec::new(), new).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(text.contains("bearer_tokens[0]"), "{text}");
    assert_eq!(state.limits().max_body_bytes, 8_388_608);
    assert_eq!(
        post(&state, "/api/v1/write", Vec::new(), new).await.0,
        StatusCode::BAD_REQUEST
    );
    // The reload route itself is protected.
    assert_eq!(
        post(&state, "/-/reload", Vec::new(), None).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn turning_tls_on_by_reload_is_refused() {
    let dir = Scratch::new();
    dir.write("config.yml", "");
    dir.write("web.yml", "");
    let state = service(&dir);
    let pki = crate::web::settings_tests::pki::Pki::new("ca");
    let server = pki.server();
    dir.write("s.crt", &server.cert_pem);
    dir.write("s.key", &server.key_pem);
    dir.write(
        "web.yml",
        "tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n",
    );
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(text, "--web.config.file: turning TLS on needs a restart\n");
    assert!(state.live().web.tls.is_none());
}

#[tokio::test]
async fn a_reload_that_changes_storage_is_refused_naming_the_field_and_keeps_the_old_configuration()
{
    let dir = Scratch::new();
    let first = dir.0.join("state-a");
    dir.write(
        "config.yml",
        &format!(
            "engine:\n  idle_timeout: 10m\nstorage:\n  path: {}\n",
            first.display()
        ),
    );
    dir.write("web.yml", "");
    let state = service(&dir);
    let moved = dir.0.join("state-b");
    // A new path, and a new idle timeout that must not be applied with it.
    dir.write(
        "config.yml",
        &format!(
            "engine:\n  idle_timeout: 1m\nstorage:\n  path: {}\n",
            moved.display()
        ),
    );
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        text,
        format!(
            "storage.path: changed from {} to {}, which applies only at start; restart the \
             service to apply it, or restore the old value to reload the rest\n",
            first.display(),
            moved.display()
        )
    );
    assert_eq!(state.core.engine().config().idle_timeout_ms, 600_000);
    assert_eq!(
        metric(&state, "vllm_corrector_config_last_reload_successful"),
        0.0
    );
    // Removing the setting is a change too; the interval is start-only as well.
    dir.write("config.yml", "");
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(text.starts_with("storage.path: changed from "), "{text}");
    assert!(text.contains(" to none, "), "{text}");
    dir.write(
        "config.yml",
        &format!(
            "storage:\n  path: {}\n  write_interval: 5s\n",
            first.display()
        ),
    );
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        text.starts_with(
            "storage.write_interval: changed from 30s to 5s, which applies only at start"
        ),
        "{text}"
    );
    // The old values again: the rest reloads.
    dir.write(
        "config.yml",
        &format!(
            "engine:\n  idle_timeout: 1m\nstorage:\n  path: {}\n",
            first.display()
        ),
    );
    let (status, _) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(state.core.engine().config().idle_timeout_ms, 60_000);
}

#[tokio::test]
async fn unchanged_concurrency_keeps_the_request_slots() {
    let dir = Scratch::new();
    dir.write("config.yml", "limits:\n  max_concurrent_requests: 2\n");
    dir.write("web.yml", "");
    let state = service(&dir);
    let _held = state.permits().try_acquire_owned().unwrap();
    state.reloader().unwrap().reload().unwrap();
    // Same limit: same semaphore, one of two slots still taken.
    assert_eq!(state.permits().available_permits(), 1);
    dir.write("config.yml", "limits:\n  max_concurrent_requests: 3\n");
    state.reloader().unwrap().reload().unwrap();
    // New limit: fresh slots; the held one belongs to the old semaphore.
    assert_eq!(state.permits().available_permits(), 3);
}

#[tokio::test]
async fn a_reload_swaps_the_slo_spec_and_a_bad_one_keeps_it() {
    let dir = Scratch::new();
    dir.write("config.yml", "engine:\n  settle_scrapes: 0\n");
    dir.write("web.yml", "");
    let state = service(&dir);
    // No `slos:` key: the shipped default, TPOT <= 0.1 s for 99 %.
    assert_eq!(*state.live_cell().get().slos, SloSpec::shipped_default());

    dir.write(
        "config.yml",
        "slos:\n  - name: chat\n    objective: 0.995\n    window: 7d\n    ttft: 0.5\n    \
         tpot: 0.05\n    objectives: {ttft: 0.9}\n",
    );
    let (status, _) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::OK);
    let live = state.live_cell().get();
    let chat = live.slos.get("chat").expect("the reloaded SLO");
    assert_eq!(live.slos.slos.len(), 1);
    assert_eq!(chat.window_ms, 7 * 86_400_000);
    assert_eq!(chat.objective, 0.995);
    let ttft = chat.target(Sli::Ttft).unwrap();
    let tpot = chat.target(Sli::Tpot).unwrap();
    assert_eq!((ttft.threshold_seconds, ttft.objective), (0.5, 0.9));
    assert_eq!((tpot.threshold_seconds, tpot.objective), (0.05, 0.995));

    // An objective of 99 (a percentage) is refused, naming the field; "chat" stays.
    dir.write(
        "config.yml",
        "slos:\n  - name: other\n    objective: 99\n    tpot: 0.05\n",
    );
    let (status, text) = post(&state, "/-/reload", Vec::new(), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        text.contains("slos[0].objective: 99 is not a fraction"),
        "{text}"
    );
    assert!(state.live_cell().get().slos.get("chat").is_some());

    // `slos: []`: no SLO at all.
    dir.write("config.yml", "slos: []\n");
    assert_eq!(
        post(&state, "/-/reload", Vec::new(), None).await.0,
        StatusCode::OK
    );
    assert!(state.live_cell().get().slos.slos.is_empty());
}
