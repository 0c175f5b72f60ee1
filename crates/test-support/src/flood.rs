//! HTTP/1.1 clients over tokio from a chosen source address, for authentication floods
//! (`tests/it/auth_flood.rs`, `examples/auth_flood.rs`). On Linux every 127.x.y.z address is
//! loopback, so a flood from 127.0.0.1 and a legitimate client from 127.0.0.2 are two clients to
//! the server.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

/// A stream a request can go over: TCP or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A TLS client configuration trusting only `ca_pem`, and the name to check.
#[derive(Clone)]
pub struct Tls {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl Tls {
    /// Trusts the CA certificates in `ca_pem` and checks the server against `name`.
    ///
    /// # Errors
    /// Invalid PEM, a certificate rustls refuses, or an invalid name.
    pub fn new(ca_pem: &[u8], name: &str) -> Result<Tls, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots
                .add(cert.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name: ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?,
        })
    }
}

/// A TCP connection from `from` (port chosen by the system) to `to`.
///
/// # Errors
/// The socket's, the bind's or the connect's.
pub async fn tcp_from(from: IpAddr, to: SocketAddr) -> io::Result<TcpStream> {
    let socket = if from.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// A connection from `from` to `to`, over TLS when `tls` is given, buffered for [`get`].
///
/// # Errors
/// As [`tcp_from`], or the TLS handshake's.
pub async fn connect(
    from: IpAddr,
    to: SocketAddr,
    tls: Option<&Tls>,
) -> io::Result<BufReader<Box<dyn Stream>>> {
    let tcp = tcp_from(from, to).await?;
    let stream: Box<dyn Stream> = match tls {
        Some(tls) => Box::new(tls.connector.connect(tls.name.clone(), tcp).await?),
        None => Box::new(tcp),
    };
    Ok(BufReader::new(stream))
}

/// `Basic` credentials for an `Authorization` header.
pub fn basic(user: &str, password: &str) -> String {
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {pair}")
}

/// Sends `GET path` (with `authorization` when given) on a keep-alive connection and reads the
/// whole answer; its status code.
///
/// # Errors
/// The connection's, or an answer that is not HTTP/1.1 with a `Content-Length`.
pub async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut BufReader<S>,
    path: &str,
    authorization: Option<&str>,
) -> io::Result<u16> {
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: corrector\r\n{auth}\r\n");
    stream.get_mut().write_all(request.as_bytes()).await?;
    let mut line = String::new();
    stream.read_line(&mut line).await?;
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no status line: {line:?}")))?;
    let mut length = 0;
    loop {
        line.clear();
        if stream.read_line(&mut line).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    Ok(status)
}

/// Answers the flood got, by status.
#[derive(Debug, Default)]
pub struct Tally {
    /// 401s.
    pub unauthorized: AtomicU64,
    /// 503s.
    pub unavailable: AtomicU64,
    /// Any other status.
    pub other: AtomicU64,
    /// Failed connections and requests.
    pub errors: AtomicU64,
}

/// Clients sending wrong passwords as fast as they are answered, each on a keep-alive connection
/// (a new one when the server closes it), until dropped.
pub struct Flood {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Their answers so far.
    pub tally: Arc<Tally>,
}

impl Flood {
    /// Starts `clients` clients from `from` to `to` (over `tls` when given), asking for `path` as
    /// `user` with a wrong password: a new one on every request when `distinct`, else always the
    /// same. Call from within a tokio runtime.
    pub fn start(
        clients: usize,
        from: IpAddr,
        to: SocketAddr,
        tls: Option<Tls>,
        (path, user): (&str, &str),
        distinct: bool,
    ) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let serial = Arc::new(AtomicU64::new(0));
        let tasks = (0..clients)
            .map(|_| {
                let (stop, tally, serial, tls) =
                    (stop.clone(), tally.clone(), serial.clone(), tls.clone());
                let (path, user) = (path.to_owned(), user.to_owned());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut stream) = connect(from, to, tls.as_ref()).await else {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        };
                        while !stop.load(Ordering::Relaxed) {
                            let n = if distinct {
                                serial.fetch_add(1, Ordering::Relaxed)
                            } else {
                                0
                            };
                            let authorization = basic(&user, &format!("wrong-{n}"));
                            let counter = match get(&mut stream, &path, Some(&authorization)).await
                            {
                                Ok(401) => &tally.unauthorized,
                                Ok(503) => &tally.unavailable,
                                Ok(_) => &tally.other,
                                Err(_) => {
                                    tally.errors.fetch_add(1, Ordering::Relaxed);
                                    break;
                                }
                            };
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        Flood { stop, tasks, tally }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in &self.tasks {
            task.abort();
        }
    }
}
