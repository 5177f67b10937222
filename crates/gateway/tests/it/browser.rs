//! The browser policy on the wire, for every route: a foreign `Origin` (and `null`) and a rebound
//! `Host` are refused on each route of the access table, on the other faces' routes (MCP, A2A), on
//! paths no route serves, as plain requests, SSE and WebSocket upgrades, before any token or body is
//! looked at; the daemon's own origin, loopback names, configured hosts and origins, and requests
//! without `Origin` pass, the live stream's WebSocket and SSE included.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clutch_app::{App, face};
use clutch_gateway::access::ACCESS;
use clutch_gateway::browser::{Options, Policy};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::stream::next_json;
use crate::{msg, run_id};

/// A daemon as `clutch serve` builds it, with the MCP and A2A faces, behind `browser`.
struct Daemon {
    addr: SocketAddr,
    app: App,
    _dir: tempfile::TempDir,
}

async fn start(browser: Policy, tokens: Option<Arc<dyn clutch_core::access::Tokens>>) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let options = clutch_gateway::Options { browser, tokens, ..Default::default() };
    let mut app = App::builder(Arc::new(store))
        .gateway(options)
        .face(face::Mcp(Default::default()))
        .face(face::A2a::default())
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    app.listen(listener);
    Daemon { addr, app, _dir: dir }
}

fn policy(hosts: &[&str], origins: &[&str]) -> Policy {
    Policy::new(&Options {
        allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
        allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
        ..Options::default()
    })
    .unwrap()
}

/// One HTTP/1.1 request on a connection of its own, written as given (so that `Host` is exactly
/// what a browser under DNS rebinding would send): the status and the body, as JSON when it is.
async fn raw(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()));
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // The daemon closes the connection after its answer (`connection: close`), or it is a stream.
    let read = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {text:?}"));
    if read.is_err() {
        return (status, Value::Null); // still open: a stream or an upgraded connection
    }
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned())))
}

/// Every route of the access table as a request line, its parameters filled in, and the routes the
/// other faces add, and a path no route serves.
fn every_route() -> Vec<(&'static str, String)> {
    let mut routes: Vec<(&'static str, String)> = ACCESS
        .iter()
        .map(|(method, path, _)| {
            let filled: Vec<String> = path
                .split('/')
                .map(|part| if part.starts_with('{') { "x".to_owned() } else { part.to_owned() })
                .collect();
            (*method, filled.join("/"))
        })
        .collect();
    for (method, path) in [
        ("POST", "/mcp"),
        ("GET", "/mcp"),
        ("POST", "/mcp/worker"),
        ("GET", "/.well-known/agent-card.json"),
        ("GET", "/.well-known/agent.json"),
        ("POST", "/a2a"),
        ("POST", "/a2a/rest/message:send"),
        ("POST", "/v1/a2a/send"),
        ("GET", "/no/such/route"),
        ("DELETE", "/v1/messages"),
    ] {
        routes.push((method, path.to_owned()));
    }
    routes
}

const UPGRADE: [(&str, &str); 4] = [
    ("upgrade", "websocket"),
    ("connection", "Upgrade"),
    ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("sec-websocket-version", "13"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_and_rebound_hosts_are_refused_on_every_route() {
    let d = start(Policy::default(), None).await;
    let own = d.addr.to_string();
    let rebound = format!("evil.example:{}", d.addr.port());
    let rebound_origin = format!("http://{rebound}");
    let cases: [(&str, Vec<(&str, &str)>); 5] = [
        ("ORIGIN_NOT_ALLOWED", vec![("host", &own), ("origin", "https://evil.example")]),
        ("ORIGIN_NOT_ALLOWED", vec![("host", &own), ("origin", "null")]),
        // Another page on this machine is another origin too.
        ("ORIGIN_NOT_ALLOWED", vec![("host", &own), ("origin", "http://127.0.0.1:5173")]),
        ("HOST_NOT_ALLOWED", vec![("host", &rebound)]),
        // What a rebinding page sends: its own name, as Host and as Origin.
        ("HOST_NOT_ALLOWED", vec![("host", &rebound), ("origin", &rebound_origin)]),
    ];
    let routes = every_route();
    for (method, path) in &routes {
        for (code, headers) in &cases {
            for (shape, extra) in
                [("plain", &[][..]), ("websocket", &UPGRADE[..]), ("sse", &[("accept", "text/event-stream")][..])]
            {
                let mut all = headers.clone();
                all.extend_from_slice(extra);
                all.push(("content-type", "application/json"));
                let (status, body) = raw(d.addr, method, path, &all, "{}").await;
                assert_eq!(status, 403, "{method} {path} {shape} {headers:?}: {body}");
                assert_eq!(body["error"]["code"], *code, "{method} {path} {shape} {headers:?}: {body}");
            }
        }
    }
    assert!(routes.len() > ACCESS.len());
    // Nothing was read, let alone stored.
    assert_eq!(d.app.log.head().await.unwrap(), 0);
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refusal_comes_before_the_token_check_and_says_what_to_change() {
    struct One;
    impl clutch_core::access::Tokens for One {
        fn authenticate(&self, token: &str) -> Option<clutch_core::access::Grant> {
            (token == "ops-secret").then(|| clutch_core::access::Grant {
                name: "ops".into(),
                role: clutch_core::access::Role::Admin,
                agent_id: None,
            })
        }
    }
    let d = start(Policy::default(), Some(Arc::new(One))).await;
    let own = d.addr.to_string();
    let bearer = "Bearer ops-secret";
    let (status, body) = raw(d.addr, "GET", "/v1/agents", &[("host", &own), ("authorization", bearer)], "").await;
    assert_eq!(status, 200, "{body}");
    // A token does not make a foreign page's request its own, and no token is asked of it first.
    for auth in [Some(bearer), None] {
        let mut headers = vec![("host", own.as_str()), ("origin", "https://evil.example")];
        headers.extend(auth.map(|a| ("authorization", a)));
        let (status, body) = raw(d.addr, "GET", "/v1/agents", &headers, "").await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("ORIGIN_NOT_ALLOWED")), "{body}");
        assert_eq!(body["error"]["field"], "Origin");
        assert!(body["error"]["message"].as_str().unwrap().contains("https://evil.example"), "{body}");
        assert!(body["error"]["hint"].as_str().unwrap().contains("http.allowed_origins"), "{body}");
    }
    let (status, body) = raw(d.addr, "GET", "/v1/agents", &[("host", "evil.example:7700")], "").await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("HOST_NOT_ALLOWED")), "{body}");
    assert_eq!(body["error"]["field"], "Host");
    assert!(body["error"]["message"].as_str().unwrap().contains("evil.example:7700"), "{body}");
    assert!(body["error"]["hint"].as_str().unwrap().contains("http.allowed_hosts"), "{body}");
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_own_pages_loopback_names_and_clients_without_origin_pass() {
    let d = start(Policy::default(), None).await;
    let port = d.addr.port();
    let (status, body) = raw(
        d.addr,
        "POST",
        "/v1/messages",
        &[("host", &d.addr.to_string()), ("content-type", "application/json")],
        &msg(&run_id(), "task.progress").to_string(),
    )
    .await;
    assert_eq!(status, 201, "a client without Origin: {body}");
    for (host, origin) in [
        (format!("127.0.0.1:{port}"), Some(format!("http://127.0.0.1:{port}"))),
        (format!("localhost:{port}"), Some(format!("http://localhost:{port}"))),
        (format!("LocalHost:{port}"), None),
        (format!("app.localhost:{port}"), Some(format!("http://app.localhost:{port}"))),
        (format!("[::1]:{port}"), Some(format!("http://[::1]:{port}"))),
        (format!("127.0.0.2:{port}"), None),
    ] {
        let mut headers = vec![("host", host.as_str())];
        headers.extend(origin.as_deref().map(|o| ("origin", o)));
        for path in ["/v1/agents", "/", "/healthz", "/.well-known/agent-card.json"] {
            let (status, body) = raw(d.addr, "GET", path, &headers, "").await;
            assert_eq!(status, 200, "{path} {headers:?}: {body}");
        }
        // The page's own POST (browsers send Origin with every POST).
        let (status, body) = raw(
            d.addr,
            "POST",
            "/v1/messages",
            &[headers.clone(), vec![("content-type", "application/json")]].concat(),
            &msg(&run_id(), "task.progress").to_string(),
        )
        .await;
        assert_eq!(status, 201, "{headers:?}: {body}");
    }
    // The live stream, as the web UI opens it: a WebSocket from the daemon's own page, and SSE.
    let mut request = format!("ws://{}/v1/stream?after=0", d.addr).into_client_request().unwrap();
    request.headers_mut().insert("origin", format!("http://{}", d.addr).parse().unwrap());
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    let first = next_json(&mut socket).await;
    assert_eq!(first["seq"], 1, "{first}");
    let sse = reqwest::Client::new()
        .get(format!("http://{}/v1/stream?after=0", d.addr))
        .header("accept", "text/event-stream")
        .header("origin", format!("http://{}", d.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    assert_eq!(sse.headers()["content-type"], "text/event-stream");
    drop((socket, sse));
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_websocket_is_refused_before_the_upgrade_and_a_configured_one_passes() {
    let d = start(policy(&["hub.example.com", "*.corp.example"], &["https://dash.example.com"]), None).await;
    let port = d.addr.port();
    for (host, origin) in [
        (d.addr.to_string(), "https://evil.example"),
        (d.addr.to_string(), "null"),
        (d.addr.to_string(), "https://dash.example.com:8443"),
        (format!("evil.example:{port}"), "https://dash.example.com"),
    ] {
        let mut request = format!("ws://{}/v1/stream?after=0", d.addr).into_client_request().unwrap();
        request.headers_mut().insert("host", host.parse().unwrap());
        request.headers_mut().insert("origin", origin.parse().unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status(), 403, "{host} from {origin}");
                let body: Value = serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
                let code = if host.starts_with("evil") { "HOST_NOT_ALLOWED" } else { "ORIGIN_NOT_ALLOWED" };
                assert_eq!(body["error"]["code"], code, "{host} from {origin}: {body}");
            }
            Ok((_, response)) => panic!("{host} from {origin}: upgraded ({})", response.status()),
            Err(e) => panic!("{host} from {origin}: {e}"),
        }
    }
    raw(d.addr, "POST", "/v1/messages", &[("host", &d.addr.to_string())], &msg(&run_id(), "task.progress").to_string())
        .await;
    for (host, origin) in [
        (d.addr.to_string(), "https://dash.example.com".to_owned()),
        (format!("hub.example.com:{port}"), format!("http://hub.example.com:{port}")),
        (format!("a.corp.example:{port}"), "https://dash.example.com".to_owned()),
    ] {
        let mut request = format!("ws://{}/v1/stream?after=0", d.addr).into_client_request().unwrap();
        request.headers_mut().insert("host", host.parse().unwrap());
        request.headers_mut().insert("origin", origin.parse().unwrap());
        let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
        assert_eq!(response.status(), 101, "{host} from {origin}");
        assert_eq!(next_json(&mut socket).await["seq"], 1);
        let (status, body) = raw(d.addr, "GET", "/v1/agents", &[("host", &host), ("origin", &origin)], "").await;
        assert_eq!(status, 200, "{host} from {origin}: {body}");
    }
    d.app.stop().await.unwrap();
}
