//! The load drivers' HTTP client: one HTTP/1.1 keep-alive connection per simulated client (hyper's
//! connection API, no pool, no URL parsing per call) sending requests whose headers are built once,
//! so that the driver, which shares the daemon's cores, costs little and the same for every endpoint
//! it measures.

use anyhow::{Context, bail};
use axum::body::Bytes;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

/// Where requests go: a daemon's address and the headers every request to it carries.
#[derive(Clone)]
pub struct Target {
    /// `host:port`, to connect to and to send as `Host`.
    authority: String,
    headers: HeaderMap,
}

impl Target {
    /// From a base URL such as `http://127.0.0.1:7700` (plain HTTP only).
    pub fn new(base: &str) -> anyhow::Result<Target> {
        let uri: Uri = base.parse().with_context(|| format!("invalid URL {base:?}"))?;
        if uri.scheme_str() != Some("http") {
            bail!("only http:// URLs can be measured: {base:?}");
        }
        let authority = uri.authority().context("the URL has no host")?.as_str().to_owned();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(&authority)?);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        Ok(Target { authority, headers })
    }

    /// POSTs to `path` with these headers besides the common ones.
    pub fn post(&self, path: &str, extra: &[(&'static str, &str)]) -> anyhow::Result<Endpoint> {
        let mut headers = self.headers.clone();
        for (name, value) in extra {
            headers.insert(HeaderName::from_static(name), HeaderValue::from_str(value)?);
        }
        Ok(Endpoint { method: Method::POST, uri: path.parse()?, headers })
    }

    /// A GET of `path`.
    pub fn get(&self, path: &str) -> anyhow::Result<Endpoint> {
        Ok(Endpoint { method: Method::GET, uri: path.parse()?, headers: self.headers.clone() })
    }

    /// Opens one connection.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("cannot connect to {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "bench connection closed");
            }
        });
        Ok(Connection { sender, driver })
    }
}

/// A method, a path and every header: what stays the same from one request to the next.
#[derive(Clone)]
pub struct Endpoint {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

/// One keep-alive connection; requests on it go one at a time.
pub struct Connection {
    sender: http1::SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
}

impl Connection {
    /// Sends `body` to `endpoint` and reads the whole answer.
    pub async fn send(&mut self, endpoint: &Endpoint, body: Bytes) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = endpoint.method.clone();
        *request.uri_mut() = endpoint.uri.clone();
        *request.headers_mut() = endpoint.headers.clone();
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// Sends and fails unless the answer is a success.
    pub async fn ok(&mut self, endpoint: &Endpoint, body: Bytes) -> anyhow::Result<Bytes> {
        let (status, answer) = self.send(endpoint, body).await?;
        if !status.is_success() {
            bail!("{} answered {status}: {}", endpoint.uri, String::from_utf8_lossy(&answer));
        }
        Ok(answer)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
