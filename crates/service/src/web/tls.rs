//! TLS: the rustls server configuration built from `tls_server_config` (ring provider, TLS 1.2
//! and 1.3), and [`TlsListener`], an [`axum::serve::Listener`] that completes handshakes off the
//! accept loop.
//!
//! Each new connection uses the server configuration current at accept time, so a reload
//! (`POST /-/reload`, SIGHUP) swaps certificates, keys and client CAs for the next connection;
//! open connections keep theirs. Handshakes run in their own tasks, each within
//! [`HANDSHAKE_TIMEOUT`]; the accept loop never waits for them. At most
//! [`MAX_PENDING_HANDSHAKES`] are in progress: a new connection arriving with that many closes the
//! oldest, so connections that never finish their handshake (idle ones send no ClientHello) cannot
//! keep new ones waiting in the kernel's backlog. Failures, timeouts and connections closed so are
//! counted in `vllm_corrector_tls_handshake_failures_total`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::file::{ClientCertPolicy, TlsServerConfig, WebConfigError, invalid, read_file};
use crate::telemetry::{InternalEvent, SelfMetrics, TlsHandshakeFailed};

/// Longest a client may take to complete its TLS handshake.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most handshakes in progress at once; a new connection beyond them closes the oldest.
pub(crate) const MAX_PENDING_HANDSHAKES: usize = 256;

/// Builds the rustls configuration of `tls_server_config`; `(None, None)` when neither `cert`
/// nor `cert_file` is set and no other TLS field is (plain HTTP, as in the toolkit).
///
/// # Errors
/// [`WebConfigError`] naming the field: a certificate or key given twice (inline and file) or
/// not at all, unreadable or invalid PEM, a key that does not match the certificate, a client
/// CA without a verifying `client_auth_type` or the reverse, a refused field or version.
pub(crate) fn server_config(
    section: &TlsServerConfig,
    dir: &Path,
) -> Result<(Option<Arc<ServerConfig>>, ClientCertPolicy), WebConfigError> {
    const S: &str = "tls_server_config";
    for (set, name) in [
        (section.client_allowed_sans.is_some(), "client_allowed_sans"),
        (section.cipher_suites.is_some(), "cipher_suites"),
        (section.curve_preferences.is_some(), "curve_preferences"),
    ] {
        if set {
            return Err(invalid(
                format!("{S}.{name}"),
                "not supported by vllm-corrector",
            ));
        }
    }
    let cert = pem_source(
        "cert",
        section.cert.as_deref(),
        section.cert_file.as_deref(),
        dir,
    )?;
    let key = pem_source(
        "key",
        section.key.as_ref().map(|k| k.0.as_str()),
        section.key_file.as_deref(),
        dir,
    )?;
    let policy = client_policy(section.client_auth_type.as_deref())?;
    let client_ca = pem_source(
        "client_ca",
        section.client_ca.as_deref(),
        section.client_ca_file.as_deref(),
        dir,
    )?;
    let (cert, key) = match (cert, key) {
        (Some(c), Some(k)) => (c, k),
        (None, None) if policy == ClientCertPolicy::None && client_ca.is_none() => {
            return Ok((None, ClientCertPolicy::None));
        }
        (None, _) => return Err(invalid(format!("{S}.cert_file"), "missing")),
        (_, None) => return Err(invalid(format!("{S}.key_file"), "missing")),
    };
    let versions = protocol_versions(
        section.min_version.as_deref(),
        section.max_version.as_deref(),
    )?;

    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("{S}.cert_file"), format!("invalid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(
            format!("{S}.cert_file"),
            "holds no CERTIFICATE block",
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
        invalid(
            format!("{S}.key_file"),
            format!("no usable private key: {e}"),
        )
    })?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| invalid(format!("{S}.min_version"), e.to_string()))?;
    let builder = match (policy, client_ca) {
        (ClientCertPolicy::None, None) => builder.with_no_client_auth(),
        (ClientCertPolicy::None, Some(_)) => {
            return Err(invalid(
                format!("{S}.client_auth_type"),
                "a client CA is configured without a client auth policy: set \
                 RequireAndVerifyClientCert or VerifyClientCertIfGiven",
            ));
        }
        (_, None) => {
            return Err(invalid(
                format!("{S}.client_ca_file"),
                "verifying client certificates needs client_ca_file or client_ca",
            ));
        }
        (policy, Some(ca)) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&ca) {
                let c = c.map_err(|e| {
                    invalid(format!("{S}.client_ca_file"), format!("invalid PEM: {e}"))
                })?;
                roots.add(c).map_err(|e| {
                    invalid(format!("{S}.client_ca_file"), format!("invalid CA: {e}"))
                })?;
            }
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if policy == ClientCertPolicy::VerifyIfGiven {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| invalid(format!("{S}.client_ca_file"), e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| invalid(format!("{S}.key_file"), e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ignore_client_order = section.prefer_server_cipher_suites.unwrap_or(true);
    Ok((Some(Arc::new(config)), policy))
}

/// The PEM bytes of `name` given inline or as `name_file`; an error when both are set.
fn pem_source(
    name: &str,
    inline: Option<&str>,
    file: Option<&Path>,
    dir: &Path,
) -> Result<Option<Vec<u8>>, WebConfigError> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(invalid(
            format!("tls_server_config.{name}"),
            format!("set either {name} or {name}_file, not both"),
        )),
        (Some(text), None) => Ok(Some(text.as_bytes().to_vec())),
        (None, Some(path)) => {
            read_file(&format!("tls_server_config.{name}_file"), dir, path).map(Some)
        }
        (None, None) => Ok(None),
    }
}

fn client_policy(name: Option<&str>) -> Result<ClientCertPolicy, WebConfigError> {
    let field = "tls_server_config.client_auth_type";
    match name.unwrap_or("NoClientCert") {
        "" | "NoClientCert" => Ok(ClientCertPolicy::None),
        "VerifyClientCertIfGiven" => Ok(ClientCertPolicy::VerifyIfGiven),
        "RequireAndVerifyClientCert" => Ok(ClientCertPolicy::RequireAndVerify),
        refused @ ("RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert") => {
            Err(invalid(
                field,
                format!(
                    "{refused} accepts unverified certificates and authenticates nobody; \
                     use RequireAndVerifyClientCert or VerifyClientCertIfGiven"
                ),
            ))
        }
        other => Err(invalid(
            field,
            format!(
                "{other:?} is not one of NoClientCert, VerifyClientCertIfGiven, \
                 RequireAndVerifyClientCert"
            ),
        )),
    }
}

/// The rustls versions between `min` (default `TLS12`) and `max` (default `TLS13`).
fn protocol_versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<&'static SupportedProtocolVersion>, WebConfigError> {
    fn rank(field: &str, name: &str) -> Result<u8, WebConfigError> {
        match name {
            "TLS12" => Ok(12),
            "TLS13" => Ok(13),
            "TLS10" | "TLS11" => Err(invalid(
                format!("tls_server_config.{field}"),
                format!("{name} is not supported: rustls speaks TLS12 and TLS13 only"),
            )),
            other => Err(invalid(
                format!("tls_server_config.{field}"),
                format!("{other:?} is not one of TLS12, TLS13"),
            )),
        }
    }
    let lo = rank("min_version", min.unwrap_or("TLS12"))?;
    let hi = rank("max_version", max.unwrap_or("TLS13"))?;
    if lo > hi {
        return Err(invalid(
            "tls_server_config.max_version",
            "is below min_version",
        ));
    }
    let mut versions = Vec::new();
    if lo <= 12 {
        versions.push(&rustls::version::TLS12);
    }
    if hi >= 13 {
        versions.push(&rustls::version::TLS13);
    }
    Ok(versions)
}

/// What the auth middleware learns about a request's connection (`ConnectInfo<Peer>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Peer {
    /// The client's address.
    pub(crate) address: SocketAddr,
    /// Whether the client presented a certificate, verified during the handshake against the
    /// client CA (rustls fails the handshake on an unverifiable one).
    pub(crate) verified_client_certificate: bool,
}

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Peer {
            address: *stream.remote_addr(),
            verified_client_certificate: false,
        }
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        let (_, connection) = stream.io().get_ref();
        Peer {
            address: *stream.remote_addr(),
            verified_client_certificate: connection
                .peer_certificates()
                .is_some_and(|chain| !chain.is_empty()),
        }
    }
}

/// A TLS listener: accepts TCP connections, completes each handshake in its own task with the
/// server configuration current at accept time, and hands finished streams to the connection
/// loop (`crate::web::conn::serve`).
#[derive(Debug)]
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accept_loop: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Wraps a bound TCP listener. `current` gives the server configuration for each accepted
    /// connection (the service passes the one its reloadable settings hold, `crate::live`, so a
    /// reload applies from the next connection). Connections accepted while `current` gives
    /// `None` are closed (the service never turns TLS off at run time: a reload doing so is
    /// refused).
    ///
    /// # Errors
    /// The error of `local_addr`.
    pub(crate) fn new(
        tcp: TcpListener,
        current: impl Fn() -> Option<Arc<ServerConfig>> + Send + 'static,
        metrics: Arc<SelfMetrics>,
    ) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let accept_loop = tokio::spawn(async move {
            // One sender per handshake in progress, oldest first: sending closes that one. A
            // finished handshake drops its receiver.
            let mut pending: VecDeque<oneshot::Sender<()>> = VecDeque::new();
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // EMFILE and friends: back off instead of spinning, as axum does.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(config) = current() else {
                    continue;
                };
                pending.retain(|handshake| !handshake.is_closed());
                if pending.len() >= MAX_PENDING_HANDSHAKES
                    && let Some(oldest) = pending.pop_front()
                {
                    let _ = oldest.send(());
                }
                let (give_way, told) = oneshot::channel();
                pending.push_back(give_way);
                let (tx, metrics) = (tx.clone(), metrics.clone());
                tokio::spawn(async move {
                    let handshake = TlsAcceptor::from(config).accept(stream);
                    let error = tokio::select! {
                        outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake) => {
                            match outcome {
                                Ok(Ok(tls)) => {
                                    let _ = tx.send((tls, peer)).await;
                                    return;
                                }
                                Ok(Err(error)) => error.to_string(),
                                Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
                            }
                        }
                        Ok(()) = told => format!(
                            "closed for a newer connection: {MAX_PENDING_HANDSHAKES} handshakes \
                             in progress"
                        ),
                    };
                    TlsHandshakeFailed { peer, error }.emit(&metrics);
                });
            }
        });
        Ok(TlsListener {
            ready,
            local,
            accept_loop,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept loop ended (only when the listener is being dropped): never resolve.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
