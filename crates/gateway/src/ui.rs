//! The web UI: the static files under `crates/gateway/ui/`, embedded in the binary at compile time and
//! served at `/` (the page) and `/ui/...` (its modules, styles and icons). Nothing is built at run time.
//! Each file has a strong `ETag` and `Cache-Control: no-cache`, so a browser revalidates and usually
//! gets a 304; a unit test checks that every file in `ui/` is embedded.
//!
//! The page is plain ES modules, one per view, with no build step; each file's header says what it
//! does: `js/main.js` starts it (and holds the window of recent events it loads, `?history=N`),
//! `js/stream.js` follows the log over one WebSocket resumed by cursor, `js/store.js` indexes the
//! events and derives task, tool call and agent state, `js/views/` render from the store, long
//! timelines in `js/components/virtual-list.js`. It uses only the public HTTP API; its types of what
//! it reads (`js/api-types.js`) are generated from the published schemas (`tests/it/ui_types.rs`).

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use clutch_proto::ErrorCode;

use crate::access::Routes;
use crate::error::ApiError;

/// The page and its assets, served at `/` and `/ui/{path}`.
pub(crate) fn routes(routes: Routes) -> Routes {
    routes.add("GET", "/", index).add("GET", "/ui/{*path}", asset)
}

/// One embedded file, by its path under `ui/`.
struct Asset {
    path: &'static str,
    bytes: &'static [u8],
}

macro_rules! assets {
    ($($path:literal),* $(,)?) => {
        &[$(Asset { path: $path, bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $path)) }),*]
    };
}

/// Every file of the UI. A unit test checks that this list and the `ui/` folder agree.
static ASSETS: &[Asset] = assets![
    "index.html",
    "app.css",
    "favicon.svg",
    "js/api-types.js",
    "js/api.js",
    "js/components/elements.js",
    "js/components/virtual-list.js",
    "js/main.js",
    "js/render/events.js",
    "js/render/payloads.js",
    "js/router.js",
    "js/store.js",
    "js/stream.js",
    "js/types.js",
    "js/util.js",
    "js/views/agents.js",
    "js/views/auth.js",
    "js/views/composer.js",
    "js/views/positions.js",
    "js/views/replay.js",
    "js/views/run.js",
    "js/views/sidebar.js",
    "js/views/thread.js",
    "js/views/timeline.js",
    "js/views/tools.js",
    "js/views/workflow.js",
];

/// Strong validators, one per asset, in `ASSETS` order: the length and a hash of the bytes. They change
/// only with a new binary, so a browser revalidates (`no-cache`) and usually gets a 304.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    ASSETS
        .iter()
        .map(|a| {
            let tag = format!("\"{:x}-{:016x}\"", a.bytes.len(), hasher.hash_one(a.bytes));
            HeaderValue::from_str(&tag).expect("an ETag is ASCII")
        })
        .collect()
});

/// The page may load only its own scripts, styles and images, and talk only to its own origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers).unwrap_or_else(|e| e.into_response())
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers).unwrap_or_else(|e| e.into_response())
}

fn serve(path: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    let Some(at) = ASSETS.iter().position(|a| a.path == path) else {
        return Err(
            ApiError::new(ErrorCode::NotFound, format!("no UI file at /ui/{path}")).hint("the web UI is served at /")
        );
    };
    let asset = &ASSETS[at];
    let etag = ETAGS[at].clone();
    let mut response = if headers.get(header::IF_NONE_MATCH).is_some_and(|v| v == etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, content_type(path))], asset.bytes).into_response()
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, etag);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if path.ends_with(".html") {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
        h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    Ok(response)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map_or("", |(_, ext)| ext) {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn files_under(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.is_dir() {
                files_under(&path, root, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }

    #[test]
    fn every_ui_file_is_embedded_and_every_embedded_file_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let mut on_disk = Vec::new();
        files_under(&root, &root, &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded, "list every file of crates/gateway/ui in ASSETS (src/ui.rs), and only those");
    }

    #[test]
    fn every_asset_has_a_known_content_type() {
        for a in ASSETS {
            assert_ne!(content_type(a.path), "application/octet-stream", "{}", a.path);
        }
    }
}
