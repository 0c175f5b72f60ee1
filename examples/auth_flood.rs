//! Authentication under a flood (`docs/SECURITY.md`, "Authentication under floods"): how long
//! one legitimate client waits for its answer while `--bad` clients send wrong passwords as fast
//! as they are answered, and `--idle` connections sit open without a byte (over TLS: without a
//! ClientHello).
//!
//! The flood and the idle connections come from `--flood-from` (default 127.0.0.1), the
//! legitimate client from `--from` (default 127.0.0.2): on Linux every 127.x.y.z address is
//! loopback, so the receiver sees two clients. After `--warmup`, the legitimate client opens a
//! new connection (TLS with `--ca`), sends `GET /metrics` with `--user`/`--password` and waits;
//! this is repeated `--probes` times, a second apart (only the first check is uncached: later
//! ones measure the connection). Prints one `RESULT key=value …` line. Loopback only.
//!
//! ```text
//! vllm-corrector --web.listen-address 127.0.0.1:19720 --web.config.file web.yml &
//! cargo run --release --example auth_flood -- --address 127.0.0.1:19720 \
//!     --user prometheus --password secret --bad 600
//! ```

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;
use test_support::flood::{Flood, Tls, basic, connect, get, tcp_from};

#[derive(Parser)]
#[command(about = "One legitimate client's wait under a flood of wrong passwords (loopback only)")]
struct Args {
    /// The receiver's `host:port` on the loopback interface.
    #[arg(long)]
    address: SocketAddr,
    /// The configured user.
    #[arg(long)]
    user: String,
    /// Its password.
    #[arg(long)]
    password: String,
    /// Concurrent clients sending wrong passwords.
    #[arg(long, default_value_t = 600)]
    bad: usize,
    /// A different wrong password on every request (the same one otherwise).
    #[arg(long)]
    distinct: bool,
    /// Connections opened first and left idle (no byte sent).
    #[arg(long, default_value_t = 0)]
    idle: usize,
    /// CA certificate (PEM) of the receiver's TLS certificate: speak TLS.
    #[arg(long)]
    ca: Option<std::path::PathBuf>,
    /// The name the receiver's certificate is checked against.
    #[arg(long, default_value = "localhost")]
    server_name: String,
    /// Source address of the flood and the idle connections.
    #[arg(long, default_value = "127.0.0.1")]
    flood_from: IpAddr,
    /// Source address of the legitimate client.
    #[arg(long, default_value = "127.0.0.2")]
    from: IpAddr,
    /// Flood time before the first probe.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "3s")]
    warmup: Duration,
    /// Legitimate requests, a second apart.
    #[arg(long, default_value_t = 3)]
    probes: usize,
    /// How long the legitimate client waits for an answer.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    timeout: Duration,
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    if !args.address.ip().is_loopback() {
        return Err(format!(
            "{}: only loopback addresses are accepted",
            args.address
        ));
    }
    let tls = match &args.ca {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(Tls::new(&pem, &args.server_name)?)
        }
        None => None,
    };

    let mut idle = Vec::with_capacity(args.idle);
    for _ in 0..args.idle {
        // A full accept queue drops SYNs; do not wait for the kernel's retries.
        let connected = tokio::time::timeout(
            Duration::from_secs(2),
            tcp_from(args.flood_from, args.address),
        );
        match connected.await {
            Ok(Ok(stream)) => idle.push(stream),
            Ok(Err(e)) => return Err(format!("idle connection {}: {e}", idle.len())),
            Err(_) => break,
        }
    }
    let flood = Flood::start(
        args.bad,
        args.flood_from,
        args.address,
        tls.clone(),
        ("/metrics", &args.user),
        args.distinct,
    );
    tokio::time::sleep(args.warmup).await;

    let authorization = basic(&args.user, &args.password);
    let mut probes = Vec::new();
    for i in 0..args.probes {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let started = Instant::now();
        let outcome = tokio::time::timeout(args.timeout, async {
            let mut stream = connect(args.from, args.address, tls.as_ref()).await?;
            get(&mut stream, "/metrics", Some(&authorization)).await
        })
        .await;
        let took = started.elapsed().as_millis();
        let status = match outcome {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("error({e})"),
            Err(_) => "timeout".to_owned(),
        };
        println!("probe {i}: {status} after {took} ms");
        probes.push(format!("probe{i}_ms={took} probe{i}_status={status}"));
    }
    let tally = &flood.tally;
    println!(
        "RESULT bad={} distinct={} idle={} tls={} {} flood_401={} flood_503={} flood_other={} \
         flood_errors={}",
        args.bad,
        args.distinct,
        idle.len(),
        tls.is_some(),
        probes.join(" "),
        tally.unauthorized.load(Ordering::Relaxed),
        tally.unavailable.load(Ordering::Relaxed),
        tally.other.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed),
    );
    Ok(())
}
