//! The guarded client against real listeners on loopback: refused targets see no request, in every
//! way a URL can lead there (an address, a name that resolves to one, a redirect), and allowed ones
//! see it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use clutch_core::guard::{Policy, Rule};
use clutch_outbound::{Client, Error, Options, refused};

/// A listener that counts the requests it gets, answering each with `answer`.
async fn listener(answer: Option<String>) -> (u16, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    let app = axum::Router::new().fallback(move || {
        let count = count.clone();
        let answer = answer.clone();
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            match answer {
                Some(location) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, location)]).into_response(),
                None => StatusCode::OK.into_response(),
            }
        }
    });
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = socket.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(socket, app).await.unwrap() });
    (port, seen)
}

fn client(allow: &[&str], loopback: bool, pinned: &[(&str, &str)]) -> Client {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    let pinned: BTreeMap<String, Vec<String>> =
        pinned.iter().map(|(name, ip)| (name.to_string(), vec![ip.to_string()])).collect();
    let policy = Policy::new(&allow, loopback, &pinned).unwrap();
    Client::new(Arc::new(policy), &Options::default()).unwrap()
}

#[tokio::test]
async fn addresses_in_every_spelling_are_refused_before_sending() {
    let (port, seen) = listener(None).await;
    let c = client(&[], false, &[]);
    for host in ["127.0.0.1", "localhost", "[::1]", "127.1", "2130706433", "0x7f000001"] {
        match c.post(&format!("http://{host}:{port}/push")) {
            Err(Error::Refused(r)) => assert_eq!(r.rule, Rule::Loopback, "{host}"),
            Err(e) => panic!("{host}: {e}"),
            Ok(_) => panic!("{host}: not refused"),
        }
    }
    assert_eq!(seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_name_that_resolves_inward_is_refused_at_connect() {
    let (port, seen) = listener(None).await;
    let c = client(&[], false, &[("public.example", "127.0.0.1")]);
    let e = c.post(&format!("http://public.example:{port}/")).unwrap().send().await.unwrap_err();
    let why = refused(&e).unwrap_or_else(|| panic!("not the guard: {e:?}"));
    assert_eq!((why.host.as_str(), why.rule), ("public.example", Rule::Loopback));
    assert_eq!(seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn allowed_targets_are_reached() {
    let (port, seen) = listener(None).await;
    let r = client(&[], true, &[]).post(&format!("http://127.0.0.1:{port}/")).unwrap().send().await.unwrap();
    assert_eq!(r.status(), 200);
    let by_net = client(&["127.0.0.0/8"], false, &[]);
    assert_eq!(by_net.post(&format!("http://127.0.0.1:{port}/")).unwrap().send().await.unwrap().status(), 200);
    let by_name = client(&["agents.internal"], false, &[("agents.internal", "127.0.0.1")]);
    assert_eq!(by_name.post(&format!("http://agents.internal:{port}/")).unwrap().send().await.unwrap().status(), 200);
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn redirects_are_checked_like_the_first_request() {
    let (inner, inner_seen) = listener(None).await;
    // An allowed host that redirects to a refused address, and to a refused name.
    let (to_address, _) = listener(Some(format!("http://127.0.0.1:{inner}/"))).await;
    let (to_name, _) = listener(Some(format!("http://inner.example:{inner}/"))).await;
    let (to_allowed, _) = listener(Some(format!("http://edge.example:{inner}/"))).await;
    let c = client(&["edge.example"], false, &[("edge.example", "127.0.0.1"), ("inner.example", "127.0.0.1")]);
    for port in [to_address, to_name] {
        let e = c.post(&format!("http://edge.example:{port}/")).unwrap().send().await.unwrap_err();
        assert_eq!(refused(&e).map(|r| r.rule), Some(Rule::Loopback), "{e:?}");
    }
    assert_eq!(inner_seen.load(Ordering::SeqCst), 0, "no redirect reached the refused target");
    let r = c.post(&format!("http://edge.example:{to_allowed}/")).unwrap().send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(inner_seen.load(Ordering::SeqCst), 1, "a redirect to an allowed target is followed");
}
