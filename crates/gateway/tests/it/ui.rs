//! The web UI as the router serves it: the page at `/`, its assets with their content types and
//! validators, and the API's JSON 404s left as they were.

use crate::start;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_serves_the_page_and_assets_their_content_types() {
    let d = start().await;
    let page = d.http.get(format!("{}/", d.url)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="/ui/js/main.js">"#), "{html}");

    for (path, content_type) in [
        ("/ui/js/main.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ] {
        let r = d.http.get(format!("{}{path}", d.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], content_type, "{path}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        let etag = r.headers()["etag"].clone();
        assert!(!r.bytes().await.unwrap().is_empty(), "{path}");
        // A browser revalidating with the validator gets 304 and no body.
        let again = d.http.get(format!("{}{path}", d.url)).header("if-none-match", etag.clone()).send().await.unwrap();
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(again.headers()["etag"], etag);
    }
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ui_files_and_api_routes_answer_json_404s() {
    let d = start().await;
    let (status, body) = d.get("/ui/js/nope.js").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
    let (status, body) = d.get("/v1/nope").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
    assert!(body["error"]["hint"].as_str().unwrap().contains("/v1"));
    d.shutdown().await;
}
