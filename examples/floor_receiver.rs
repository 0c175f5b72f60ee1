//! The floor of the receive path over HTTP: a remote-write receiver that does only the first
//! stages of vllm-corrector's, so that `scripts/bench-compare.sh` can price them on this machine
//! beside the real service: its targets `floor-http`, `floor-snappy` and `floor-key` (the last two
//! run by default) start this binary with `FLOOR_STAGE` set (docs/PERFORMANCE.md, "The floor,
//! measured"). It keeps nothing and corrects nothing: it is a measuring tool, not a receiver to
//! run.
//!
//! `FLOOR_STAGE` (environment) chooses how far it goes; each stage includes the ones before:
//! - `http` (the default): reads the body over HTTP/1.1 (hyper and axum, tokio with one worker per
//!   CPU, as the service) and answers 204;
//! - `snappy`: also decompresses the body (`protocol::snappy::decompress_into`, the service's call);
//! - `key`: also decodes it as RW 1.0 (`protocol::v1::decode`, labels left pending: the
//!   series count, each series' tail sample and its two-hash key), as the service does before it
//!   takes the engine lock.
//!
//! A body that fails a stage gets 400. Arguments: `--web.listen-address HOST:PORT` (default
//! `127.0.0.1:9091`); `--version` prints the stage; every other argument is ignored, so that the
//! bench can start it with the service's arguments. Serves `GET /-/ready` (200).

use std::cell::RefCell;
use std::hint::black_box;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use protocol::{snappy, v1};

/// The largest body as sent (bytes): the service's default `limits.max_body_bytes` (README).
const MAX_BODY_BYTES: usize = 32 << 20;

/// The largest decompressed body (bytes): the service's default `limits.max_decoded_bytes`
/// (README).
const MAX_DECODED_BYTES: usize = 128 << 20;

/// How far a request is processed (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Http,
    Snappy,
    Key,
}

impl Stage {
    fn from_env() -> Result<Stage, String> {
        match std::env::var("FLOOR_STAGE").as_deref() {
            Err(_) | Ok("http") => Ok(Stage::Http),
            Ok("snappy") => Ok(Stage::Snappy),
            Ok("key") => Ok(Stage::Key),
            Ok(other) => Err(format!(
                "FLOOR_STAGE={other:?}: expected http, snappy or key"
            )),
        }
    }
}

thread_local! {
    /// The decompressed body, reused across the requests a worker runs (as the service does).
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

async fn write(State(stage): State<Stage>, body: Bytes) -> StatusCode {
    if stage == Stage::Http {
        black_box(body.len());
        return StatusCode::NO_CONTENT;
    }
    BUFFER.with_borrow_mut(|buffer| {
        if snappy::decompress_into(&body, MAX_DECODED_BYTES, buffer).is_err() {
            return StatusCode::BAD_REQUEST;
        }
        if stage == Stage::Key {
            match v1::decode(buffer) {
                Ok(request) => {
                    black_box(&request);
                }
                Err(_) => return StatusCode::BAD_REQUEST,
            }
        }
        StatusCode::NO_CONTENT
    })
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let stage = Stage::from_env()?;
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        println!("floor_receiver (stage {stage:?})");
        return Ok(());
    }
    let address = args
        .iter()
        .position(|a| a == "--web.listen-address")
        .and_then(|i| args.get(i + 1))
        .map_or("127.0.0.1:9091", String::as_str);
    let app = Router::new()
        .route("/api/v1/write", post(write))
        .route("/-/ready", get(|| async { StatusCode::OK }))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(stage);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| format!("{address}: {e}"))?;
    axum::serve(listener, app).await.map_err(|e| e.to_string())
}
