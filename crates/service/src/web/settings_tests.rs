//! `--web.config.file`: parsing and validation, and each authentication scheme through the real
//! router with `oneshot` (none, wrong, right). TLS over real sockets is in `tests/it/auth_tls.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::tls::Peer;
use super::{ClientCertPolicy, WebConfigError, WebSettings};
use crate::config::Limits;
use crate::http::{AppState, app};
use engine::{Engine, EngineConfig};

pub(crate) use test_support::pki;

/// A directory removed on drop.
pub(crate) struct Scratch(pub PathBuf);

impl Scratch {
    pub(crate) fn new() -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("vllm-corrector-web-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn load(dir: &Scratch, yaml: &str) -> Result<WebSettings, WebConfigError> {
    let path = dir.write("web.yml", yaml);
    WebSettings::load(Some(&path))
}

fn error_of(yaml: &str) -> String {
    let dir = Scratch::new();
    load(&dir, yaml).unwrap_err().to_string()
}

/// Writes a CA, a server certificate and key, and a client CA file into `dir`.
fn tls_files(dir: &Scratch) {
    let pki = pki::Pki::new("test CA");
    let server = pki.server();
    dir.write("server.crt", &server.cert_pem);
    dir.write("server.key", &server.key_pem);
    dir.write("ca.crt", &pki.ca_pem);
}

// ---- parsing and validation ----

#[test]
fn the_toolkit_example_with_relative_files_loads() {
    let dir = Scratch::new();
    tls_files(&dir);
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    // Relative names resolve against the web config file's directory, not the working directory.
    let web = load(
        &dir,
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  alice: {hash}\n"
        ),
    )
    .unwrap();
    assert!(web.tls.is_some());
    assert_eq!(web.client_certs, ClientCertPolicy::None);
    assert!(web.auth.is_configured() && web.authenticates());
}

#[test]
fn no_file_and_an_empty_file_mean_plain_http_without_authentication() {
    let web = WebSettings::load(None).unwrap();
    assert!(web.tls.is_none() && !web.authenticates());
    let dir = Scratch::new();
    let web = load(&dir, "\n").unwrap();
    assert!(web.tls.is_none() && !web.authenticates());
}

#[test]
fn unknown_fields_are_refused_by_name() {
    let err = error_of("basic_auth_user:\n  alice: x\n");
    assert!(err.contains("basic_auth_user"), "{err}");
    let err = error_of("tls_server_config:\n  certfile: a\n");
    assert!(err.contains("certfile"), "{err}");
}

#[test]
fn toolkit_fields_this_service_refuses_name_themselves() {
    for (yaml, field) in [
        ("rate_limit:\n  interval: 1s\n  burst: 2\n", "rate_limit"),
        (
            "tls_server_config:\n  client_allowed_sans: [a]\n",
            "tls_server_config.client_allowed_sans",
        ),
        (
            "tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            "tls_server_config.cipher_suites",
        ),
        (
            "tls_server_config:\n  curve_preferences: [X25519]\n",
            "tls_server_config.curve_preferences",
        ),
    ] {
        let err = error_of(yaml);
        assert_eq!(
            err,
            format!("--web.config.file: {field}: not supported by vllm-corrector")
        );
    }
}

#[test]
fn client_auth_types_that_verify_nothing_are_refused() {
    let dir = Scratch::new();
    tls_files(&dir);
    for kind in ["RequestClientCert", "RequireAnyClientCert"] {
        let err = load(
            &dir,
            &format!(
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
                 client_ca_file: ca.crt\n  client_auth_type: {kind}\n"
            ),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("--web.config.file: tls_server_config.client_auth_type:")
                && err.contains("authenticates nobody"),
            "{err}"
        );
    }
}

#[test]
fn a_client_ca_and_a_verifying_policy_need_each_other() {
    let dir = Scratch::new();
    tls_files(&dir);
    let base = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let err = load(&dir, &format!("{base}  client_ca_file: ca.crt\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("without a client auth policy"), "{err}");
    let err = load(
        &dir,
        &format!("{base}  client_auth_type: RequireAndVerifyClientCert\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("tls_server_config.client_ca_file"), "{err}");
    let web = load(
        &dir,
        &format!("{base}  client_ca_file: ca.crt\n  client_auth_type: VerifyClientCertIfGiven\n"),
    )
    .unwrap();
    assert_eq!(web.client_certs, ClientCertPolicy::VerifyIfGiven);
    assert!(web.authenticates() && !web.auth.is_configured());
}

#[test]
fn tls_versions_older_than_1_2_and_inverted_ranges_are_refused() {
    let dir = Scratch::new();
    tls_files(&dir);
    let base = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let err = load(&dir, &format!("{base}  min_version: TLS10\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tls_server_config.min_version") && err.contains("TLS10"),
        "{err}"
    );
    let err = load(
        &dir,
        &format!("{base}  min_version: TLS13\n  max_version: TLS12\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("tls_server_config.max_version"), "{err}");
    assert!(load(&dir, &format!("{base}  min_version: TLS13\n")).is_ok());
}

#[test]
fn certificate_problems_name_the_field() {
    let dir = Scratch::new();
    tls_files(&dir);
    // Inline and file both given.
    let err = load(
        &dir,
        "tls_server_config:\n  cert: x\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("either cert or cert_file"), "{err}");
    // A key without a certificate.
    let err = error_of("tls_server_config:\n  key: x\n");
    assert!(
        err.contains("tls_server_config.cert_file: missing"),
        "{err}"
    );
    // A missing file names the field and the resolved path.
    let err = load(
        &dir,
        "tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n",
    )
    .unwrap_err();
    assert!(
        matches!(&err, WebConfigError::Read { path, .. } if path.ends_with("nope.crt")),
        "{err}"
    );
    // A key that belongs to another certificate.
    let other = pki::Pki::new("other").server();
    dir.write("other.key", &other.key_pem);
    let err = load(
        &dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("tls_server_config.key_file"), "{err}");
}

#[test]
fn credentials_are_validated_when_loaded() {
    let err = error_of("basic_auth_users:\n  alice: plaintext\n");
    assert!(
        err.starts_with("--web.config.file: basic_auth_users.alice: not a bcrypt hash"),
        "{err}"
    );
    let hash = bcrypt::hash("x", 4).unwrap();
    let err = error_of(&format!("basic_auth_users:\n  \"a:b\": {hash}\n"));
    assert!(err.contains("no ':'"), "{err}");
    let err = error_of("bearer_tokens: [\"\"]\n");
    assert!(err.contains("bearer_tokens[0]"), "{err}");
    let err = error_of("bearer_tokens: [\"two words\"]\n");
    assert!(err.contains("no whitespace"), "{err}");
    let err = error_of("bearer_token_files: [/nonexistent/token]\n");
    assert!(err.contains("bearer_token_files"), "{err}");
}

#[test]
fn response_headers_follow_the_toolkit_rules() {
    let err = error_of("http_server_config:\n  headers:\n    X-Powered-By: me\n");
    assert!(err.contains("cannot be configured"), "{err}");
    let err = error_of("http_server_config:\n  headers:\n    X-Frame-Options: allow\n");
    assert!(err.contains("deny, sameorigin"), "{err}");
    let dir = Scratch::new();
    let web = load(
        &dir,
        "http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n    \
         Content-Security-Policy: \"\"\n",
    )
    .unwrap();
    // The blank one is unset.
    assert_eq!(web.headers.len(), 1);
    assert_eq!(web.headers[0].0, "x-frame-options");
}

#[test]
fn secrets_never_reach_debug_output() {
    let dir = Scratch::new();
    let file = super::WebConfigFile::from_yaml(
        "bearer_tokens: [tok-abc]\nbasic_auth_users:\n  alice: $2y$04$abc\n",
        &dir.0,
    )
    .unwrap();
    let text = format!("{file:?}");
    assert!(
        !text.contains("tok-abc") && !text.contains("$2y$"),
        "{text}"
    );
}

// ---- the schemes, through the router ----

fn state(web: WebSettings) -> AppState {
    let state =
        AppState::new(Engine::new(EngineConfig::default()), Limits::default()).with_web(web);
    state.set_ready(true);
    state
}

fn basic(user: &str, password: &str) -> String {
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// Sends one request; `peer` becomes the `ConnectInfo<Peer>` the server would attach.
async fn send(
    state: &AppState,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    peer: Option<bool>,
) -> (StatusCode, HeaderMap, String) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    let mut request = request.body(Body::empty()).unwrap();
    if let Some(verified) = peer {
        let address: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(Peer {
            address,
            verified_client_certificate: verified,
        }));
    }
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn failures(state: &AppState, reason: &str) -> String {
    let text = crate::http::metrics::render_all(state, crate::exposition::Format::Text);
    let prefix = format!("vllm_corrector_auth_failures_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
}

fn challenges(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .map(|v| v.to_str().unwrap().split(' ').next().unwrap().to_owned())
        .collect()
}

fn settings(dir: &Scratch, yaml: &str) -> WebSettings {
    load(dir, yaml).unwrap()
}

#[tokio::test]
async fn basic_auth_none_wrong_and_right() {
    let dir = Scratch::new();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let state = state(settings(
        &dir,
        &format!("basic_auth_users:\n  alice: {hash}\n"),
    ));

    let (status, headers, _) = send(&state, "GET", "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenges(&headers), ["Basic"]);
    let (status, _, _) = send(
        &state,
        "GET",
        "/metrics",
        Some(&basic("alice", "wrong")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(
        &state,
        "GET",
        "/metrics",
        Some(&basic("bob", "s3cret")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&state, "GET", "/metrics", Some("Basic !!!"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let right = basic("alice", "s3cret");
    let (status, _, _) = send(&state, "GET", "/metrics", Some(&right), None).await;
    assert_eq!(status, StatusCode::OK);
    // A wrong password after a cached success is still wrong: the cache keys on the password.
    let (status, _, _) = send(
        &state,
        "GET",
        "/metrics",
        Some(&basic("alice", "s3cre")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The write route too: past auth, an empty body reaches the handler's own 400.
    let (status, _, text) = send(&state, "POST", "/api/v1/write", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    // 1 missing (the first request) + 1 missing (the write); 4 invalid (wrong, bob, !!!, s3cre).
    assert_eq!(failures(&state, "missing_credentials"), "2");
    assert_eq!(failures(&state, "invalid_credentials"), "4");
}

#[tokio::test]
async fn a_client_over_its_allowance_gets_503_with_retry_after_counted_as_rate_limited() {
    let dir = Scratch::new();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let state = state(settings(
        &dir,
        &format!("basic_auth_users:\n  alice: {hash}\n"),
    ));
    assert_eq!(failures(&state, "rate_limited"), "0");
    let burst = crate::web::throttle::BURST as usize;
    for i in 0..burst {
        let wrong = basic("alice", &format!("guess-{i}"));
        let (status, _, _) = send(&state, "GET", "/metrics", Some(&wrong), Some(false)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "guess {i}");
    }
    let wrong = basic("alice", "one-more");
    let (status, headers, text) = send(&state, "GET", "/metrics", Some(&wrong), Some(false)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert_eq!(headers[header::RETRY_AFTER], "1");
    assert!(challenges(&headers).is_empty(), "{headers:?}");
    assert_eq!(failures(&state, "rate_limited"), "1");
    assert_eq!(failures(&state, "invalid_credentials"), burst.to_string());
}

#[tokio::test]
async fn htpasswd_2y_hashes_are_accepted() {
    // htpasswd -B writes $2y$; the algorithm is bcrypt's $2b$, only the prefix differs.
    let hash = bcrypt::hash("pw", 4).unwrap().replacen("$2b$", "$2y$", 1);
    let dir = Scratch::new();
    let state = state(settings(
        &dir,
        &format!("basic_auth_users:\n  u: \"{hash}\"\n"),
    ));
    let (status, _, _) = send(&state, "GET", "/metrics", Some(&basic("u", "pw")), None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn bearer_tokens_none_wrong_and_right_from_the_list_and_from_files() {
    let dir = Scratch::new();
    dir.write("token", "file-token\n");
    let state = state(settings(
        &dir,
        "bearer_tokens: [inline-token]\nbearer_token_files: [token]\n",
    ));
    let (status, headers, _) = send(&state, "GET", "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenges(&headers), ["Bearer"]);
    // "aW5saW5lLXRva2Vu" is base64 of "inline-token": the right secret in an unconfigured scheme.
    for wrong in [
        "Bearer inline-toke",
        "Bearer file-token2",
        "Basic aW5saW5lLXRva2Vu",
    ] {
        let (status, _, _) = send(&state, "GET", "/metrics", Some(wrong), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{wrong}");
    }
    for right in ["Bearer inline-token", "bearer file-token"] {
        let (status, _, _) = send(&state, "GET", "/metrics", Some(right), None).await;
        assert_eq!(status, StatusCode::OK, "{right}");
    }
}

#[tokio::test]
async fn with_users_and_tokens_either_scheme_passes_and_both_are_challenged() {
    let dir = Scratch::new();
    let hash = bcrypt::hash("pw", 4).unwrap();
    let state = state(settings(
        &dir,
        &format!("basic_auth_users:\n  u: {hash}\nbearer_tokens: [t0k]\n"),
    ));
    let (status, headers, _) = send(&state, "GET", "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenges(&headers), ["Basic", "Bearer"]);
    for right in [basic("u", "pw"), "Bearer t0k".to_owned()] {
        let (status, _, _) = send(&state, "GET", "/metrics", Some(&right), None).await;
        assert_eq!(status, StatusCode::OK, "{right}");
    }
}

#[tokio::test]
async fn probes_stay_open_and_every_other_route_is_protected() {
    let dir = Scratch::new();
    let state = state(settings(&dir, "bearer_tokens: [t0k]\n"));
    for path in ["/-/healthy", "/-/ready"] {
        let (status, _, _) = send(&state, "GET", path, None, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    for (method, path) in [
        ("GET", "/metrics"),
        ("GET", "/"),
        ("GET", "/status"),
        ("GET", "/api/v1/groups"),
        ("GET", "/docs"),
        ("POST", "/api/v1/write"),
        ("POST", "/-/reload"),
        ("GET", "/no-such-route"),
        ("GET", "/-/healthy/../metrics"),
    ] {
        let (status, _, _) = send(&state, method, path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
}

#[tokio::test]
async fn a_client_ca_requires_a_verified_certificate_on_every_protected_route() {
    let dir = Scratch::new();
    tls_files(&dir);
    let state = state(settings(
        &dir,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_ca_file: ca.crt\n  client_auth_type: VerifyClientCertIfGiven\n",
    ));
    // No connection info at all (never the case when served) and a connection without a
    // certificate are both refused; probes stay open.
    for peer in [None, Some(false)] {
        let (status, _, text) = send(&state, "GET", "/metrics", None, peer).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{peer:?} {text}");
    }
    let (status, _, _) = send(&state, "GET", "/-/ready", None, Some(false)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(&state, "GET", "/metrics", None, Some(true)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(failures(&state, "missing_client_certificate"), "2");
}

#[tokio::test]
async fn without_a_web_config_nothing_is_required() {
    let state = state(WebSettings::default());
    let (status, _, _) = send(&state, "GET", "/metrics", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn configured_headers_are_on_every_response_refusals_included() {
    let dir = Scratch::new();
    let state = state(settings(
        &dir,
        "bearer_tokens: [t0k]\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n",
    ));
    for auth in [None, Some("Bearer t0k")] {
        let (_, headers, _) = send(&state, "GET", "/metrics", auth, None).await;
        assert_eq!(headers["x-content-type-options"], "nosniff", "{auth:?}");
    }
}
