//! The load generator's HTTP/1.1 client: a request writer and a response reader over one
//! keep-alive `TcpStream`, loopback targets only. Hand-written because a full client would cost more
//! CPU than the receivers under test on a two-core machine.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A loopback HTTP endpoint.
#[derive(Clone)]
pub(crate) struct Endpoint {
    host: String,
    path: String,
}

impl Endpoint {
    /// Parses `http://host:port/path`; panics unless the host is a loopback address.
    pub(crate) fn parse(url: &str) -> Endpoint {
        let rest = url.strip_prefix("http://").expect("an http:// URL");
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        assert!(
            host.starts_with("127.") || host.starts_with("localhost:") || host.starts_with("[::1]"),
            "loopback targets only, got {host}"
        );
        Endpoint {
            host: host.to_owned(),
            path: if path.is_empty() {
                "/".to_owned()
            } else {
                path.to_owned()
            },
        }
    }
}

/// One keep-alive connection.
pub(crate) struct Connection {
    endpoint: Endpoint,
    reader: BufReader<TcpStream>,
    request: Vec<u8>,
}

impl Connection {
    /// Connects, or panics.
    pub(crate) fn open(endpoint: &Endpoint) -> Connection {
        Connection::try_open(endpoint).expect("connect to the receiver")
    }

    fn try_open(endpoint: &Endpoint) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(&endpoint.host)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Connection {
            endpoint: endpoint.clone(),
            reader: BufReader::with_capacity(16 * 1024, stream),
            request: Vec::new(),
        })
    }

    /// POSTs a remote-write body; returns the status code, or 0 when the connection failed twice
    /// (a receiver may close a keep-alive connection at any time, as VictoriaMetrics does every
    /// `-http.connTimeout`: the body is sent again once on a new connection).
    pub(crate) fn write(&mut self, body: &[u8]) -> u16 {
        match self.try_write(body) {
            Ok(status) => status,
            Err(_) => {
                let Ok(fresh) = Connection::try_open(&self.endpoint) else {
                    return 0;
                };
                *self = fresh;
                self.try_write(body).unwrap_or(0)
            }
        }
    }

    fn try_write(&mut self, body: &[u8]) -> std::io::Result<u16> {
        self.request.clear();
        write!(
            self.request,
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\nUser-Agent: vllm-corrector-loadgen\r\nContent-Length: {}\r\n\r\n",
            self.endpoint.path,
            self.endpoint.host,
            body.len()
        )
        .unwrap();
        self.request.extend_from_slice(body);
        self.reader.get_mut().write_all(&self.request)?;
        Ok(self.read_response()?.0)
    }

    /// GETs the endpoint's path; returns the status and the body.
    pub(crate) fn get(&mut self) -> (u16, Vec<u8>) {
        self.request.clear();
        write!(
            self.request,
            "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: text/plain\r\n\r\n",
            self.endpoint.path, self.endpoint.host
        )
        .unwrap();
        self.reader
            .get_mut()
            .write_all(&self.request)
            .expect("send the request");
        self.read_response().expect("read the response")
    }

    /// Reads a status line, headers, and a `Content-Length` or chunked body.
    fn read_response(&mut self) -> std::io::Result<(u16, Vec<u8>)> {
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
        let (mut length, mut chunked) = (0usize, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            if name.eq_ignore_ascii_case("content-length") {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("bad Content-Length {value:?}")))?;
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
            {
                chunked = true;
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                    .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
                let start = body.len();
                body.resize(start + size, 0);
                self.reader.read_exact(&mut body[start..])?;
                line.clear();
                self.reader.read_line(&mut line)?;
                if size == 0 {
                    break;
                }
            }
        } else {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        }
        Ok((status, body))
    }
}
