//! Opening fails with a message that tells the user what to fix; these need no running server.

use clutch_store_postgres::{Error, Options, Store};

fn options() -> Options {
    Options { schema: None, pool_size: 2, writer: false, lists: true }
}

#[tokio::test]
async fn a_malformed_url_is_explained() {
    let error = Store::open("definitely not a url", options()).await.unwrap_err();
    assert!(matches!(error, Error::Url(_)), "{error:?}");
    assert!(error.to_string().contains("postgres://user:password@host:5432/database"), "{error}");
}

#[tokio::test]
async fn an_unreachable_server_is_explained_without_the_password() {
    let error = Store::open("postgres://clutch:s3cret@127.0.0.1:1/clutch", options()).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    assert!(message.starts_with("cannot connect to PostgreSQL at 127.0.0.1:1/clutch: "), "{message}");
    assert!(message.ends_with("is the server running and the URL right?"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}

#[tokio::test]
async fn bad_options_are_refused_before_connecting() {
    let no_pool = Options { schema: None, pool_size: 0, writer: false, lists: true };
    assert!(matches!(Store::open("postgres://127.0.0.1:1/x", no_pool).await, Err(Error::Options(_))));
    let long = Options { schema: Some("s".repeat(64)), pool_size: 1, writer: false, lists: true };
    assert!(matches!(Store::open("postgres://127.0.0.1:1/x", long).await, Err(Error::Options(_))));
}
