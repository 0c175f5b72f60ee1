//! The server loop shared by plain HTTP and TLS: accepts connections from any
//! [`axum::serve::Listener`] (a [`tokio::net::TcpListener`], or [`super::tls::TlsListener`] once
//! the handshake is done) and serves each with hyper's HTTP/1.1 connection
//! (`docs/RELIABILITY.md`, "Slow clients"). hyper does the protocol, keep-alive and the graceful
//! stop (hyper-util's `GracefulShutdown`), and bounds each connection's buffers itself
//! ([`CONNECTION_BUFFER_BYTES`]: a request head past it is answered 431). This module does only
//! what neither hyper nor hyper-util can, each counted in
//! `vllm_corrector_connections_closed_total{reason}`:
//!
//! * `limits.max_connections`: a connection accepted while that many are open is closed at once
//!   (hyper serves one connection; the cap is the accept loop's).
//! * `limits.header_read_timeout` *apart from* `limits.idle_connection_timeout`: a request head
//!   must be complete within the first of these from its first byte (or from the connection
//!   opening), while a keep-alive connection may wait the second for its next request. hyper has
//!   one timer for both: its `header_read_timeout` starts when it begins to wait for a head, idle
//!   or not, so a 10 s head timeout would close every keep-alive connection idle for 10 s (and
//!   hyper has no idle timeout of its own).
//! * `limits.response_write_timeout`: a response must be written within this time of being ready,
//!   or the connection is closed (a client that stops reading a streamed `/metrics` page). hyper
//!   has no write timeout, and a deadline on the response body cannot do it: hyper stops polling
//!   the body while the socket is full, so the deadline would never be seen.
//!
//! The three timeouts are kept by [`TimedIo`], a wrapper of the connection's reads and writes, and
//! the request boundaries it needs (a request started, its response ready) come from the
//! connection's service. The limits are read when a connection is accepted, so a reload applies to
//! new connections.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::serve::Listener;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;

use super::tls::Peer;
use crate::config::Limits;
use crate::telemetry::{CloseReason, ConnectionClosed, InternalEvent, SelfMetrics};

/// The most bytes hyper buffers per connection, each way: a request head (request line and
/// headers) must fit (431 past it; a Prometheus head is under 2 KiB), and a body is handed over
/// in pieces of at most this much. hyper's default (about 400 KiB) let 1 015 connections that
/// send an endless header hold 530 MiB; at 32 KiB, the default 1 024 connections hold at most
/// 32 MiB, within the reserve (`crate::config::limits::RESERVED_BYTES`).
pub(crate) const CONNECTION_BUFFER_BYTES: usize = 32 * 1024;

/// What the authentication layer needs to know about a connection's stream.
pub(crate) trait PeerStream {
    /// Whether the client presented a certificate verified during the TLS handshake.
    fn verified_client_certificate(&self) -> bool;
}

impl PeerStream for TcpStream {
    fn verified_client_certificate(&self) -> bool {
        false
    }
}

impl PeerStream for TlsStream<TcpStream> {
    fn verified_client_certificate(&self) -> bool {
        self.get_ref()
            .1
            .peer_certificates()
            .is_some_and(|chain| !chain.is_empty())
    }
}

/// Where a connection is between requests, for its read deadline.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request head since this instant.
    Head(Instant),
    /// A request is being handled (its body is bounded by `limits.request_body_timeout`).
    Busy,
    /// Idle since the last response was produced.
    Idle(Instant),
}

/// What the connection's stream ([`TimedIo`]) and its service share, under one lock.
#[derive(Debug)]
struct Shared {
    phase: Phase,
    /// When the response being written must be done by: set when the service produced it,
    /// cleared when the next request starts.
    write_deadline: Option<Instant>,
    /// The timeout that closed the connection, if one did.
    timed_out: Option<CloseReason>,
    /// The reader's waker while a read is pending: a new phase brings a new deadline, which only
    /// a new poll arms (hyper may not poll the read again until the socket is readable).
    reader: Option<Waker>,
}

/// One connection's phase and timeouts, shared by its reader ([`TimedIo`]) and its service.
#[derive(Debug)]
struct ConnState {
    shared: Mutex<Shared>,
    header_read_timeout: Duration,
    idle_timeout: Duration,
    response_write_timeout: Duration,
}

impl ConnState {
    fn new(limits: &Limits) -> ConnState {
        ConnState {
            shared: Mutex::new(Shared {
                phase: Phase::Head(Instant::now()),
                write_deadline: None,
                timed_out: None,
                reader: None,
            }),
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_connection_timeout,
            response_write_timeout: limits.response_write_timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enters `phase` with `write_deadline`, and wakes a pending reader to arm the new deadline.
    fn set(&self, phase: Phase, write_deadline: Option<Instant>) {
        let waker = {
            let mut shared = self.lock();
            shared.phase = phase;
            shared.write_deadline = write_deadline;
            shared.reader.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Bytes arrived: an idle connection starts its next head.
    fn on_bytes(&self) {
        let mut shared = self.lock();
        if matches!(shared.phase, Phase::Idle(_)) {
            shared.phase = Phase::Head(Instant::now());
        }
    }

    /// A request started: nothing is being written.
    fn request_started(&self) {
        self.set(Phase::Busy, None);
    }

    /// The service produced its response: it must be written within the response write timeout.
    fn response_ready(&self) {
        let now = Instant::now();
        self.set(Phase::Idle(now), Some(now + self.response_write_timeout));
    }

    fn write_deadline(&self) -> Option<Instant> {
        self.lock().write_deadline
    }

    fn time_out(&self, reason: CloseReason) -> std::io::Error {
        self.lock().timed_out = Some(reason);
        std::io::Error::new(std::io::ErrorKind::TimedOut, reason.as_str())
    }

    fn timed_out(&self) -> Option<CloseReason> {
        self.lock().timed_out
    }

    /// A read found nothing: keeps `waker` for a phase change, and returns the phase's deadline.
    fn read_pending(&self, waker: &Waker) -> Option<(Instant, CloseReason)> {
        let mut shared = self.lock();
        match &mut shared.reader {
            Some(kept) if kept.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        match shared.phase {
            Phase::Head(since) => Some((
                since + self.header_read_timeout,
                CloseReason::HeaderReadTimeout,
            )),
            Phase::Idle(since) => Some((since + self.idle_timeout, CloseReason::IdleTimeout)),
            Phase::Busy => None,
        }
    }
}

/// A connection's stream whose reads fail with `TimedOut` once the phase's deadline passes (the
/// request head's or the idle one's), and whose writes fail so once a response's write deadline
/// passes while the client does not read, so hyper closes the connection.
struct TimedIo<T> {
    inner: T,
    state: Arc<ConnState>,
    sleep: Pin<Box<Sleep>>,
    armed_for: Option<Instant>,
    write_sleep: Pin<Box<Sleep>>,
    write_armed_for: Option<Instant>,
}

impl<T> TimedIo<T> {
    /// After a write or flush found the socket full: `Pending` until the response's write deadline,
    /// then the `TimedOut` error that closes the connection.
    fn write_pending<R>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<R>> {
        let Some(deadline) = self.state.write_deadline() else {
            return Poll::Pending;
        };
        if self.write_armed_for != Some(deadline) {
            self.write_sleep.as_mut().reset(deadline);
            self.write_armed_for = Some(deadline);
        }
        if self.write_sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(Err(self.state.time_out(CloseReason::ResponseWriteTimeout)))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.state.on_bytes();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let Some((deadline, reason)) = this.state.read_pending(cx.waker()) else {
                    return Poll::Pending;
                };
                if this.armed_for != Some(deadline) {
                    this.sleep.as_mut().reset(deadline);
                    this.armed_for = Some(deadline);
                }
                if this.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                Poll::Ready(Err(this.state.time_out(reason)))
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.write_pending(cx),
            ready => ready,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.write_pending(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.write_pending(cx),
            ready => ready,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting, lets every
/// connection finish its in-flight request (idle ones close at once) and returns when all have
/// closed. The caller bounds that wait (`crate::run::SHUTDOWN_GRACE`).
///
/// Each request carries `ConnectInfo<Peer>` for the client certificate policy. `limits` is called
/// once per accepted connection (the service passes its reloadable settings' current limits, so
/// a reload applies from the next connection); closed and open connections are counted in
/// `metrics`.
///
/// # Errors
/// None today (accept errors are retried inside the listener); the `Result` matches
/// `axum::serve`'s.
pub(crate) async fn serve<L>(
    mut listener: L,
    router: Router,
    limits: impl Fn() -> Limits,
    metrics: Arc<SelfMetrics>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    L: Listener<Addr = SocketAddr>,
    L::Io: PeerStream + AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let open = Arc::new(AtomicUsize::new(0));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, address) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let limits: Limits = limits();
        if open.load(Ordering::Acquire) >= limits.max_connections {
            drop(io);
            ConnectionClosed {
                peer: address,
                reason: CloseReason::MaxConnections,
            }
            .emit(&metrics);
            continue;
        }
        open.fetch_add(1, Ordering::AcqRel);
        metrics.ops.connections.open_changed(1);
        let peer = Peer {
            address,
            verified_client_certificate: io.verified_client_certificate(),
        };
        let conn_state = Arc::new(ConnState::new(&limits));
        let io = TimedIo {
            inner: io,
            state: conn_state.clone(),
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed_for: None,
            write_sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            write_armed_for: None,
        };
        let (router, phases) = (router.clone(), conn_state.clone());
        let service = tower::service_fn(
            move |mut request: axum::extract::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                phases.request_started();
                let (router, phases) = (router.clone(), phases.clone());
                async move {
                    let response = tower::ServiceExt::oneshot(router, request).await;
                    phases.response_ready();
                    response
                }
            },
        );
        let connection = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .header_read_timeout(None)
            .max_buf_size(CONNECTION_BUFFER_BYTES)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        let (open, metrics) = (open.clone(), metrics.clone());
        tokio::spawn(async move {
            let _ = connection.await;
            if let Some(reason) = conn_state.timed_out() {
                ConnectionClosed {
                    peer: address,
                    reason,
                }
                .emit(&metrics);
            }
            open.fetch_sub(1, Ordering::AcqRel);
            metrics.ops.connections.open_changed(-1);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
