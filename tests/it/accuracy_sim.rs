//! Accuracy suite: the vLLM simulator (`sim`) served in real time from inside the
//! test on a loopback address.
//!
//! It serves exactly what `vllm-corrector simulate` serves (`sim::serve::router`): `/metrics` with
//! the profile's series plus `vllm_sim_snapshot_time_seconds`, and `/truth?from=&to=`. Simulated
//! time is the whole milliseconds elapsed since start, from an epoch equal to the Unix time at start
//! (docs/SIMULATOR.md, "Real-time mode").
//!
//! [`SimServer::restart`] replaces the simulator behind the same listener: a vLLM restart faster
//! than one scrape interval, so the sender's next scrape sees every counter back near 0 (a counter
//! reset) and never a failed scrape (which would make the sender write staleness markers instead;
//! removing a target tests that).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use sim::serve::{LiveSim, router, unix_now_ms};
use sim::{SimConfig, Simulator};
use tower::ServiceExt;

/// The simulator currently served, with its router.
type Current = Arc<Mutex<(LiveSim, Router)>>;

fn live(cfg: SimConfig) -> (LiveSim, Router) {
    let cfg = SimConfig {
        epoch_unix_ms: unix_now_ms(),
        ..cfg
    };
    let live = LiveSim::new(Simulator::new(cfg).expect("valid simulator config"));
    let routes = router(live.clone());
    (live, routes)
}

/// One simulator target serving HTTP on `address` until dropped.
pub(crate) struct SimServer {
    /// `127.0.0.1:<port>`: the scrape target, hence the `instance` label of its series.
    pub address: String,
    current: Current,
    runtime: Option<tokio::runtime::Runtime>,
    client: reqwest::blocking::Client,
}

impl SimServer {
    /// Starts a simulator with `cfg` (its epoch replaced by the current Unix ms) serving on a free
    /// loopback port. Like `simulate`, a 100 ms ticker keeps simulated time close to the wall
    /// clock between scrapes. Panics when `cfg` is invalid.
    pub(crate) fn start(cfg: SimConfig) -> SimServer {
        let current: Current = Arc::new(Mutex::new(live(cfg)));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("accuracy-sim")
            .enable_all()
            .build()
            .expect("tokio runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind a loopback port");
        let address = listener.local_addr().unwrap().to_string();
        let ticking = current.clone();
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let sim = ticking.lock().unwrap().0.clone();
                sim.with(|_| ());
            }
        });
        let serving = current.clone();
        let app =
            Router::new().fallback_service(tower::service_fn(move |request: Request<Body>| {
                let routes = serving.lock().unwrap().1.clone();
                async move { routes.oneshot(request).await }
            }));
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SimServer {
            address,
            current,
            runtime: Some(runtime),
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
        }
    }

    /// Replaces the simulator by a fresh one with `cfg` (new epoch, every counter at 0), behind
    /// the same listener and connections.
    pub(crate) fn restart(&self, cfg: SimConfig) {
        let fresh = live(cfg);
        *self.current.lock().unwrap() = fresh;
    }

    /// `GET /truth?from=&to=` (Unix seconds, rounded to ms by the simulator): the truth over
    /// `[from, to)` as JSON (`WindowTruth`, docs/SIMULATOR.md). Panics on an HTTP error.
    pub(crate) fn truth(&self, from_s: f64, to_s: f64) -> serde_json::Value {
        let url = format!("http://{}/truth?from={from_s}&to={to_s}", self.address);
        let response = self
            .client
            .get(&url)
            .send()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert!(
            response.status().is_success(),
            "GET {url} answered {}",
            response.status()
        );
        let text = response.text().unwrap_or_else(|e| panic!("GET {url}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}: {text}"))
    }
}

impl Drop for SimServer {
    /// Drops the runtime and every task on it (listener, ticker, open connections).
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(5));
        }
    }
}
