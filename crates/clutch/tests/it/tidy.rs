//! Architecture invariants checked on the source tree (rust-analyzer's `tidy`): which crate may
//! depend on which, crate metadata, file headers, leftover debugging macros, a synchronous `proto`,
//! and an ARCHITECTURE.md that names every crate; and, in the modules below, rules read from the
//! code itself. Manifests and Cargo.lock are read with the `toml` crate.

mod codes;
mod defaults;
mod imports;
mod tokens;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// Who may depend on whom: crate directory → the internal crates (by directory) its
/// `[dependencies]` may name. `None` means anything (the binary wires everything together).
const RULES: &[(&str, Option<&[&str]>)] = &[
    ("proto", Some(&[])),
    ("store", Some(&["proto"])),
    ("store-sqlite", Some(&["store", "proto"])),
    ("store-postgres", Some(&["store", "proto"])),
    ("core", Some(&["proto", "store"])),
    ("outbound", Some(&["core", "proto", "store"])),
    ("gateway", Some(FACE_DEPS)),
    ("mcp", Some(FACE_DEPS)),
    ("a2a", Some(FACE_DEPS)),
    // The MCP client (other servers' tools, run for `tool.call`s) lives in `tools`, beside the other
    // tool adapters; runtime's agents call tools through the log (`tool.call` → `tool.result`), so
    // runtime depends on neither `tools` nor the `mcp` face.
    ("tools", Some(&["core", "proto", "store", "outbound"])),
    // Its providers are the operator's config, reached by a client of its own; an agent that
    // reaches a URL from someone else's data would go through outbound.
    ("runtime", Some(&["core", "proto", "store", "outbound"])),
    ("app", Some(&["core", "proto", "store", "gateway", "mcp", "a2a", "tools", "runtime"])),
    (
        "bench",
        Some(&[
            "app",
            "core",
            "proto",
            "store",
            "store-sqlite",
            "store-postgres",
            "gateway",
            "mcp",
            "tools",
            "runtime",
        ]),
    ),
    ("clutch", None),
];

/// What a face may use: core does the work, proto and (for its types) store describe it, and
/// outbound is the one way out for requests aimed by someone else's data.
const FACE_DEPS: &[&str] = &["core", "proto", "store", "outbound"];
/// The faces, which never depend on each other.
const FACES: &[&str] = &["gateway", "mcp", "a2a"];
/// The storage backends: chosen by the binary (and by the bench for its own stores), used elsewhere
/// only by tests.
const BACKENDS: &[&str] = &["store-sqlite", "store-postgres"];
/// Crates whose `[dev-dependencies]` may not add a backend: the layers below the backends, and the
/// backends themselves.
const NO_BACKEND_IN_TESTS: &[&str] = &["proto", "store", "store-sqlite", "store-postgres"];
/// The app builder, which the tests of a face (and of `tools`, the adapters it wires) may use to
/// build their daemon as the binary does (a cycle through [dev-dependencies] only, which Cargo
/// allows for tests).
const APP: &str = "app";
/// The load drivers: only the binary links them, behind its `bench` feature.
const BENCH: &str = "bench";

const HOW_TO_CHANGE: &str = "If the new edge is intended, change RULES in crates/clutch/tests/it/tidy.rs and \
     the code map in ARCHITECTURE.md together.";

#[test]
fn every_crate_is_in_the_architecture_rules() {
    let unknown: Vec<String> = manifests()
        .iter()
        .filter(|m| rule(&m.dir).is_none())
        .map(|m| {
            format!(
                "  crates/{dir} (`{}`) is not in the architecture rules: add it to RULES in \
                 crates/clutch/tests/it/tidy.rs with the internal crates it may depend on, and give it a \
                 paragraph in ARCHITECTURE.md's code map",
                m.name.as_deref().unwrap_or("?"),
                dir = m.dir
            )
        })
        .collect();
    assert!(unknown.is_empty(), "unknown crates:\n{}", unknown.join("\n"));
}

#[test]
fn internal_dependencies_point_the_allowed_way() {
    let bad = layering_violations(&manifests());
    assert!(
        bad.is_empty(),
        "dependencies break the layering (proto <- store <- store backends; proto, store <- core <- outbound; \
         core, outbound <- faces (gateway, mcp, a2a) and runtime; core, faces <- app <- bench; everything <- \
         clutch):\n{}\n{HOW_TO_CHANGE}",
        bad.join("\n")
    );
}

/// One line per internal dependency that RULES do not allow.
fn layering_violations(manifests: &[Manifest]) -> Vec<String> {
    let dir_of: BTreeMap<&str, &str> =
        manifests.iter().filter_map(|m| Some((m.name.as_deref()?, m.dir.as_str()))).collect();
    let mut bad = Vec::new();
    for m in manifests {
        let Some(Some(allowed)) = rule(&m.dir) else { continue };
        let from = m.dir.as_str();
        for dep in &m.deps {
            let Some(&to) = dir_of.get(dep.name.as_str()) else { continue };
            let test_backend =
                dep.section == Section::Dev && BACKENDS.contains(&to) && !NO_BACKEND_IN_TESTS.contains(&from);
            // A crate's tests may turn on its own test-only features (proto's `fuzz`).
            let own_feature = dep.section == Section::Dev && to == from;
            let test_app = dep.section == Section::Dev
                && to == APP
                && (FACES.contains(&from) || from == "tools" || from == "runtime");
            // The runtime's tests give their daemon an MCP server (`tools`' config) to call.
            let test_tools = dep.section == Section::Dev && from == "runtime" && to == "tools";
            if allowed.contains(&to) || test_backend || own_feature || test_app || test_tools {
                continue;
            }
            let why = if to == BENCH {
                "the bench measures the daemon and is no part of it: only the binary's `bench` feature links it"
                    .to_string()
            } else if FACES.contains(&from) && FACES.contains(&to) {
                "faces never depend on each other; move what they share into core (or proto)".to_string()
            } else if BACKENDS.contains(&to) && !NO_BACKEND_IN_TESTS.contains(&from) {
                format!(
                    "store backends are chosen by the binary; program against `clutch-store`'s traits and use \
                     `{}` only in [dev-dependencies]",
                    dep.name
                )
            } else if allowed.is_empty() {
                format!("{from} depends on nothing internal")
            } else {
                format!("{from} may only depend on {}", allowed.join(", "))
            };
            bad.push(format!(
                "  {}:{}: `{}` depends on `{}` in [{}]: {why}",
                m.rel_path(),
                dep.line,
                m.name.as_deref().unwrap_or(from),
                dep.name,
                dep.section.header()
            ));
        }
    }
    bad
}

#[test]
fn internal_crates_are_unpublished_0_0_0_and_named_after_their_directory() {
    let mut bad = Vec::new();
    for m in manifests() {
        let path = m.rel_path();
        let want = if m.dir == "clutch" { "clutch".to_string() } else { format!("clutch-{}", m.dir) };
        if m.name.as_deref() != Some(want.as_str()) {
            bad.push(format!("  {path}: [package] name must be \"{want}\" (crates/<dir> holds clutch-<dir>)"));
        }
        if m.version.as_deref() != Some("0.0.0") {
            bad.push(format!("  {path}: [package] needs `version = \"0.0.0\"` (internal crates are never versioned)"));
        }
        if m.publish != Some(false) {
            bad.push(format!("  {path}: [package] needs `publish = false`"));
        }
        for dep in m.deps.iter().filter(|d| d.name.starts_with("clutch") && !d.workspace) {
            bad.push(format!(
                "  {path}:{}: write `{}.workspace = true`; internal crates are declared once, in the root \
                 Cargo.toml's [workspace.dependencies]",
                dep.line, dep.name
            ));
        }
    }
    assert!(bad.is_empty(), "crate metadata:\n{}", bad.join("\n"));
}

#[test]
fn every_source_file_starts_with_a_doc_line() {
    let bad: Vec<String> = source_files()
        .into_iter()
        .filter(|(_, text)| !text.lines().next().is_some_and(|l| l.starts_with("//!")))
        .map(|(path, _)| format!("  {}", rel(&path)))
        .collect();
    assert!(
        bad.is_empty(),
        "these files do not start with a `//!` line saying why the file exists:\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_placeholder_or_debugging_macros_in_src() {
    let mut bad = Vec::new();
    for (path, text) in source_files() {
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            // Spelled in pieces so that this file does not match itself in text searches.
            for needle in [concat!("todo", "!("), concat!("unimplemented", "!("), concat!("dbg", "!(")] {
                if line.contains(needle) {
                    bad.push(format!("  {}:{}: {}", rel(&path), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "`todo!`, `unimplemented!` and `dbg!` do not belong in shipped code: finish the code, return an \
         error, or log with `tracing`:\n{}",
        bad.join("\n")
    );
}

/// Core is face-neutral: it names no HTTP route (anywhere in its source) and no MCP tool in what
/// it says (string literals); a next step is a `proto::error::Next`, which each face words.
#[test]
fn core_names_no_route_and_no_tool() {
    let tools = mcp_tool_names();
    assert!(tools.len() >= 10, "the MCP tool names were not found in crates/mcp/src: {tools:?}");
    let mut bad = Vec::new();
    for (path, text) in source_files() {
        if !rel(&path).starts_with("crates/core/") {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let at = format!("  {}:{}: {}", rel(&path), i + 1, line.trim());
            if line.contains(concat!("/v1", "/")) {
                bad.push(format!("{at} (an HTTP route)"));
            }
            for literal in line.split('"').skip(1).step_by(2) {
                // A one-word tool (`search`) is also an English word: only the literal that is it names it.
                let names = |t: &&String| if t.contains('_') { mentions(literal, t) } else { literal == t.as_str() };
                if let Some(tool) = tools.iter().find(names) {
                    bad.push(format!("{at} (the MCP tool `{tool}`)"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "core speaks to every face: name the next step with `clutch_proto::error::Next` (each face words \
         it) and leave routes and tools to the faces:\n{}",
        bad.join("\n")
    );
}

/// Core builds what it shows and writes from types (`view`, `payload`, `workflow::api`), whose
/// schemas are published: no JSON by hand (`json!`) outside test code, except in `config`, which
/// builds the card parts of a policy file as input to check.
#[test]
fn core_builds_no_json_by_hand() {
    let mut bad = Vec::new();
    for (path, text) in source_files() {
        let file = rel(&path);
        if !file.starts_with("crates/core/src/") || file.starts_with("crates/core/src/config/") {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            if line.trim_start() == "#[cfg(test)]" {
                break;
            }
            if !line.trim_start().starts_with("//") && line.contains(concat!("json", "!(")) {
                bad.push(format!("  {file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "core shows and writes typed shapes: give the shape a serde + schemars type in `view` or `payload` \
         (published by `published`, typed for the UI by crates/gateway/tests/it/ui_types.rs) and build it:\n{}",
        bad.join("\n")
    );
}

/// The names of the MCP face's tools: each `tool(` in crates/mcp/src is followed by its name.
fn mcp_tool_names() -> Vec<String> {
    let mut names = Vec::new();
    for (path, text) in source_files() {
        if !rel(&path).starts_with("crates/mcp/") {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim_end().ends_with("tool(")
                && let Some(name) =
                    lines.get(i + 1).and_then(|l| l.trim().strip_prefix('"')).and_then(|l| l.split('"').next())
            {
                names.push(name.to_owned());
            }
        }
    }
    names
}

#[test]
fn proto_stays_synchronous() {
    let proto = manifests().into_iter().find(|m| m.dir == "proto").expect("crates/proto/Cargo.toml");
    let mut bad: Vec<String> = proto
        .deps
        .iter()
        .filter(|d| is_async(&d.name))
        .map(|d| format!("  {}:{}: `{}` in [{}]", proto.rel_path(), d.line, d.name, d.section.header()))
        .collect();

    // No async runtime through other crates either, as Cargo.lock records them. (Only runtimes: the
    // lock also lists target-specific and feature-gated edges, e.g. ulid -> web-time -> js-sys ->
    // futures-util for wasm, which never reach a native build.)
    let lock_path = root().join("Cargo.lock");
    let lock = fs::read_to_string(&lock_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; run `cargo generate-lockfile`", lock_path.display()));
    let graph = lock_graph(&lock_path, &lock);
    let mut via: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from(["clutch-proto"]);
    while let Some(name) = queue.pop_front() {
        for dep in graph.get(name).into_iter().flatten() {
            if dep != "clutch-proto" && !via.contains_key(dep.as_str()) {
                via.insert(dep, name);
                queue.push_back(dep);
            }
        }
    }
    for (&name, _) in via.iter().filter(|(n, _)| is_runtime(n)) {
        let mut chain = vec![name];
        while let Some(&parent) = via.get(chain.last().unwrap()) {
            chain.push(parent);
        }
        chain.reverse();
        bad.push(format!("  Cargo.lock: {}", chain.join(" -> ")));
    }
    assert!(
        bad.is_empty(),
        "proto is pure data and pure functions: no async runtime or async crate, directly or not:\n{}\n\
         Move the async code to core (or a face) and keep only types and checks in proto.",
        bad.join("\n")
    );
}

#[test]
fn architecture_md_mentions_every_crate() {
    let path = root().join("ARCHITECTURE.md");
    let Ok(text) = fs::read_to_string(&path) else {
        panic!(
            "ARCHITECTURE.md is missing at the repository root ({}). Write it in matklad's shape: bird's-eye \
             view, entry points, a code map with one paragraph per crate in crates/ (with **Invariant** and \
             **API boundary** notes), cross-cutting concerns.",
            path.display()
        );
    };
    let missing: Vec<String> = manifests()
        .iter()
        .filter(|m| !mentions(&text, &m.dir) && !mentions(&text, &format!("clutch-{}", m.dir)))
        .map(|m| format!("  crates/{} (write `{}` in the code map)", m.dir, m.dir))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not mention these crates; give each a paragraph in the code map:\n{}",
        missing.join("\n")
    );
}

/// The map stays a map: the tuning of a mechanism (a buffer's size, a timeout, a measured figure)
/// belongs in the doc of the module that has it, where it changes with the code. Numbers that name
/// something are allowed: versions (`1.0`), protocol revisions (`2025-11-25`) and RFCs.
#[test]
fn architecture_md_holds_no_tuning_numbers() {
    let text = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let found = tuning_numbers(&text);
    assert!(
        found.is_empty(),
        "ARCHITECTURE.md holds numbers of mechanisms; say what and where, and move how much to the module's doc:\n{}",
        found.join("\n")
    );
}

/// Each number of `text` that names nothing, with its line: `12: 4096`. A word that starts with a
/// digit is a number (`500ms`, `1,024`, `20%`); one that starts with a letter is a name (`a2a`,
/// `ed25519`, `v0`).
fn tuning_numbers(text: &str) -> Vec<String> {
    /// The protocol versions the project speaks (A2A's, Clutch's).
    const VERSIONS: [&str; 3] = ["1.0", "0.3", "0.1"];
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || "`()[]{};:,'\"*".contains(c))
            .map(|w| w.trim_end_matches('.'))
            .filter(|w| !w.is_empty())
            .collect();
        for (j, word) in words.iter().enumerate() {
            if !word.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let revision = word.len() == 10 && word.split('-').map(str::len).eq([4, 2, 2]);
            let rfc = j > 0 && words[j - 1] == "RFC";
            if !(VERSIONS.contains(word) || revision || rfc) {
                found.push(format!("{}: {word}", i + 1));
            }
        }
    }
    found
}

#[test]
fn the_map_check_tells_names_from_tuning() {
    let text = "A2A 1.0 and 0.3, MCP 2025-11-25, RFC 8785, ed25519, a2a, v0.\n\
                At most 32 subscribers (1024 events, 500ms); 4.4 switches; a 20% drop.\n";
    assert_eq!(tuning_numbers(text), ["2: 32", "2: 1024", "2: 500ms", "2: 4.4", "2: 20%"]);
}

/// The daemon ships without the load drivers: the binary links `clutch-bench` only through its
/// `bench` feature, nothing the daemon is built from reaches it (Cargo.lock), and in the binary's
/// sources only the CLI names it, each time in an item under `#[cfg(feature = "bench")]`, so that
/// `cargo build -p clutch --no-default-features` builds the daemon alone.
#[test]
fn the_bench_stays_out_of_the_daemon() {
    let mut bad = Vec::new();
    let binary = manifests().into_iter().find(|m| m.dir == "clutch").expect("crates/clutch/Cargo.toml");
    for dep in binary.deps.iter().filter(|d| d.name == "clutch-bench") {
        if dep.section != Section::Normal || !dep.optional {
            bad.push(format!(
                "  {}:{}: `clutch-bench` must be an optional entry of [dependencies], turned on by the `bench` feature",
                binary.rel_path(),
                dep.line
            ));
        }
    }
    let naming: Vec<(&String, &Vec<String>)> =
        binary.features.iter().filter(|(_, enables)| enables.iter().any(|e| e.contains("clutch-bench"))).collect();
    let only_bench =
        matches!(naming.as_slice(), [(name, enables)] if *name == "bench" && **enables == ["dep:clutch-bench"]);
    if !only_bench {
        bad.push(format!(
            "  {}: [features] must hold `bench = [\"dep:clutch-bench\"]` and no other feature may name the bench; \
             found {naming:?}",
            binary.rel_path()
        ));
    }

    let lock_path = root().join("Cargo.lock");
    let lock = fs::read_to_string(&lock_path).expect("Cargo.lock");
    let graph = lock_graph(&lock_path, &lock);
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from(["clutch-app".to_string()]);
    while let Some(name) = queue.pop_front() {
        for dep in graph.get(&name).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                queue.push_back(dep.clone());
            }
        }
    }
    if seen.contains("clutch-bench") {
        bad.push("  Cargo.lock: `clutch-app` (the daemon) reaches `clutch-bench`".to_string());
    }

    let cli = ["main.rs", "cli.rs"].map(|f| root().join("crates/clutch/src").join(f).canonicalize().unwrap());
    for (path, text) in source_files() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.contains("clutch_bench")) {
            let gated = lines[i.saturating_sub(3)..i].iter().any(|l| l.trim() == r#"#[cfg(feature = "bench")]"#);
            let allowed =
                path.starts_with(root().join("crates/bench")) || (gated && cli.contains(&path.canonicalize().unwrap()));
            if !allowed {
                bad.push(format!("  {}:{}: {}", rel(&path), i + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "the daemon must not depend on the bench (crates/bench); only the binary's CLI reaches it, behind its \
         `bench` feature:\n{}",
        bad.join("\n")
    );
}

// ---- reading the tree ----

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rel(path: &Path) -> String {
    let root = root().canonicalize().unwrap();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root).unwrap_or(&path).display().to_string()
}

fn rule(dir: &str) -> Option<Option<&'static [&'static str]>> {
    RULES.iter().find(|(d, _)| *d == dir).map(|(_, allowed)| *allowed)
}

/// Whether a crate is an async runtime or an async building block.
fn is_async(name: &str) -> bool {
    const EXACT: &[&str] = &["tokio", "smol", "mio", "futures", "hyper", "axum", "reqwest", "tonic", "tower"];
    const PREFIXES: &[&str] = &["tokio-", "async-", "futures-", "hyper-", "axum-", "tower-", "actix"];
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether a crate is an async runtime (or its reactor).
fn is_runtime(name: &str) -> bool {
    ["tokio", "async-std", "smol", "async-executor", "async-global-executor", "mio"].contains(&name)
}

/// Whether `word` appears in `text` not as part of a longer name (`store` is not mentioned by
/// `store-sqlite`).
fn mentions(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

/// Every `.rs` file under `crates/*/src`, with its text.
fn source_files() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for m in manifests() {
        let mut stack = vec![root().join("crates").join(&m.dir).join("src")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    files.push((path, text));
                }
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no source files found under {}/crates/*/src", root().display());
    files
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Normal,
    Dev,
    Build,
}

impl Section {
    fn header(self) -> &'static str {
        match self {
            Section::Normal => "dependencies",
            Section::Dev => "dev-dependencies",
            Section::Build => "build-dependencies",
        }
    }
}

#[derive(Debug)]
struct Dep {
    /// The package name (after any `package = "..."` rename).
    name: String,
    section: Section,
    line: usize,
    /// Written `x.workspace = true` or `x = { workspace = true, ... }`.
    workspace: bool,
    /// `optional = true`: only a feature turns it on.
    optional: bool,
}

#[derive(Debug)]
struct Manifest {
    dir: String,
    name: Option<String>,
    /// `version`, when it is a string (not `version.workspace = true`).
    version: Option<String>,
    /// `publish`, when it is a boolean (not a list of registries).
    publish: Option<bool>,
    /// In the order of the file.
    deps: Vec<Dep>,
    /// `[features]`: each feature and what it enables.
    features: BTreeMap<String, Vec<String>>,
}

impl Manifest {
    fn rel_path(&self) -> String {
        format!("crates/{}/Cargo.toml", self.dir)
    }
}

/// Every `crates/*/Cargo.toml`, parsed; a directory without one fails the test.
fn manifests() -> Vec<Manifest> {
    let crates = root().join("crates");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", crates.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let path = dir.join("Cargo.toml");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("crates/{name} has no readable Cargo.toml ({e}); every directory in crates/ is a crate")
        });
        out.push(parse_manifest(name, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    }
    assert!(out.len() >= 2, "found only {} crates under {}", out.len(), crates.display());
    out
}

/// A Cargo.toml as far as the rules read it.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawManifest {
    package: Option<RawPackage>,
    /// `[target.'cfg(unix)'.dependencies]` and the like.
    #[serde(default)]
    target: BTreeMap<String, RawDeps>,
    #[serde(default)]
    features: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct RawPackage {
    name: Option<String>,
    version: Option<toml::Value>,
    publish: Option<toml::Value>,
}

/// The three dependency tables (of the manifest, or of a target): each dependency, with where its name is written, and its value
/// (`"1"`, or a table in any of its forms: `x.workspace = true`, `x = { ... }`, `[dependencies.x]`).
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawDeps {
    #[serde(default)]
    dependencies: BTreeMap<Spanned<String>, toml::Value>,
    #[serde(default)]
    dev_dependencies: BTreeMap<Spanned<String>, toml::Value>,
    #[serde(default)]
    build_dependencies: BTreeMap<Spanned<String>, toml::Value>,
}

fn parse_manifest(dir: String, text: &str) -> Result<Manifest, toml::de::Error> {
    let raw: RawManifest = toml::from_str(text)?;
    // The manifest's own tables are read apart: `#[serde(flatten)]` would lose where keys are written.
    let top: RawDeps = toml::from_str(text)?;
    let line = |at: usize| text[..at].matches('\n').count() + 1;
    let tables = std::iter::once(&top).chain(raw.target.values()).flat_map(|d| {
        [
            (Section::Normal, &d.dependencies),
            (Section::Dev, &d.dev_dependencies),
            (Section::Build, &d.build_dependencies),
        ]
    });
    let mut deps = Vec::new();
    for (section, table) in tables {
        for (key, value) in table {
            let get = |k: &str| value.as_table().and_then(|t| t.get(k));
            let yes = |k: &str| get(k).and_then(toml::Value::as_bool) == Some(true);
            deps.push(Dep {
                name: get("package").and_then(toml::Value::as_str).unwrap_or(key.get_ref()).to_owned(),
                section,
                line: line(key.span().start),
                workspace: yes("workspace"),
                optional: yes("optional"),
            });
        }
    }
    deps.sort_by_key(|d| d.line);
    let package = raw.package;
    Ok(Manifest {
        dir,
        name: package.as_ref().and_then(|p| p.name.clone()),
        version: package.as_ref().and_then(|p| p.version.as_ref()?.as_str().map(str::to_owned)),
        publish: package.as_ref().and_then(|p| p.publish.as_ref()?.as_bool()),
        deps,
        features: raw.features,
    })
}

/// Cargo.lock as package name → the names of its dependencies (all versions merged).
fn lock_graph(path: &Path, lock: &str) -> BTreeMap<String, BTreeSet<String>> {
    #[derive(Deserialize)]
    struct Lock {
        #[serde(default)]
        package: Vec<Package>,
    }
    #[derive(Deserialize)]
    struct Package {
        name: String,
        #[serde(default)]
        dependencies: Vec<String>,
    }
    let lock: Lock = toml::from_str(lock).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in lock.package {
        // `"name"`, `"name 1.2.3"` or `"name 1.2.3 (registry+...)"`.
        let deps = package.dependencies.iter().filter_map(|d| d.split(' ').next()).map(str::to_owned);
        graph.entry(package.name).or_default().extend(deps);
    }
    graph
}

#[test]
fn the_manifest_reader_understands_the_usual_forms() {
    let m = parse_manifest(
        "x".into(),
        r#"
[package]
name = "clutch-x" # the name
version = "0.0.0"
publish = false

[features]
dependencies = ["dep:serde"]

[dependencies]
clutch-proto.workspace = true
clutch-store = { workspace = true, features = ["conformance"] }
renamed = { package = "clutch-core", path = "../core" }
serde = "1"

[dev-dependencies.clutch-store-sqlite]
workspace = true

[target.'cfg(unix)'.dependencies]
tokio = { workspace = true }

[build-dependencies]
cc = "1"

[[test]]
name = "it"
path = "tests/it/main.rs"
"#,
    )
    .unwrap();
    assert_eq!(m.name.as_deref(), Some("clutch-x"));
    assert_eq!(m.version.as_deref(), Some("0.0.0"));
    assert_eq!(m.publish, Some(false));
    let deps: Vec<(&str, Section, bool, usize)> =
        m.deps.iter().map(|d| (d.name.as_str(), d.section, d.workspace, d.line)).collect();
    assert_eq!(
        deps,
        [
            ("clutch-proto", Section::Normal, true, 11),
            ("clutch-store", Section::Normal, true, 12),
            ("clutch-core", Section::Normal, false, 13),
            ("serde", Section::Normal, false, 14),
            ("clutch-store-sqlite", Section::Dev, true, 16),
            ("tokio", Section::Normal, true, 20),
            ("cc", Section::Build, false, 23),
        ]
    );
    assert_eq!(m.features, BTreeMap::from([("dependencies".to_owned(), vec!["dep:serde".to_owned()])]));
    let bench =
        parse_manifest("y".into(), "[dependencies]\nclutch-bench = { workspace = true, optional = true }\n").unwrap();
    assert!(bench.deps[0].optional && bench.deps[0].workspace);
    let lock = "version = 4\n[[package]]\nname = \"a\"\ndependencies = [\"b\", \"c 1.0.0\", \"c 2.0.0 (registry+x)\"]\n\n[[package]]\nname = \"b\"\n";
    let graph = lock_graph(Path::new("Cargo.lock"), lock);
    assert_eq!(graph["a"], BTreeSet::from(["b".to_owned(), "c".to_owned()]));
    assert!(graph["b"].is_empty());
    assert!(mentions("the `store` crate", "store"));
    assert!(!mentions("clutch-store-sqlite and store_x", "store"));
    assert!(mentions("see crates/store.", "store"));
}

#[test]
fn the_layering_check_catches_wrong_edges() {
    let manifest = |dir: &str, deps: &[(&str, Section)]| Manifest {
        dir: dir.into(),
        name: Some(if dir == "clutch" { "clutch".into() } else { format!("clutch-{dir}") }),
        version: Some("0.0.0".into()),
        publish: Some(false),
        deps: deps
            .iter()
            .enumerate()
            .map(|(i, (to, section))| Dep {
                name: format!("clutch-{to}"),
                section: *section,
                line: i + 1,
                workspace: true,
                optional: false,
            })
            .collect(),
        features: BTreeMap::new(),
    };
    use Section::{Dev, Normal};
    let fine = [
        manifest("proto", &[]),
        manifest("store", &[("proto", Normal)]),
        manifest("store-sqlite", &[("store", Normal), ("proto", Normal), ("store", Dev)]),
        manifest("store-postgres", &[("store", Normal), ("proto", Normal)]),
        manifest("core", &[("proto", Normal), ("store", Normal), ("store-sqlite", Dev), ("store-postgres", Dev)]),
        manifest(
            "gateway",
            &[("core", Normal), ("proto", Normal), ("store", Normal), ("store-sqlite", Dev), ("app", Dev)],
        ),
        manifest("mcp", &[("core", Normal), ("proto", Normal), ("app", Dev)]),
        manifest("runtime", &[("core", Normal), ("proto", Normal), ("store-sqlite", Dev)]),
        manifest(
            "app",
            &[("core", Normal), ("store", Normal), ("gateway", Normal), ("mcp", Normal), ("store-sqlite", Dev)],
        ),
        manifest("bench", &[("app", Normal), ("store-sqlite", Normal), ("store-postgres", Normal), ("mcp", Normal)]),
        manifest(
            "clutch",
            &[("app", Normal), ("bench", Normal), ("gateway", Normal), ("store-sqlite", Normal), ("runtime", Normal)],
        ),
    ];
    assert_eq!(layering_violations(&fine), Vec::<String>::new());

    let wrong = [
        manifest("proto", &[("store", Dev)]),
        manifest("store", &[("proto", Normal), ("core", Normal), ("store-sqlite", Dev)]),
        manifest("store-sqlite", &[("store", Normal), ("store-postgres", Dev)]),
        manifest("store-postgres", &[("store", Normal)]),
        manifest("core", &[("proto", Normal), ("store-sqlite", Normal), ("gateway", Dev)]),
        manifest("gateway", &[("core", Normal), ("mcp", Normal)]),
        manifest("mcp", &[("core", Normal), ("a2a", Dev)]),
        manifest("a2a", &[("core", Normal)]),
        manifest("runtime", &[("core", Normal), ("gateway", Normal), ("mcp", Dev)]),
        manifest("app", &[("core", Normal), ("bench", Normal), ("store-sqlite", Normal)]),
        manifest("bench", &[("app", Normal), ("a2a", Normal)]),
    ];
    let found = layering_violations(&wrong).join("\n");
    for expected in [
        "crates/proto/Cargo.toml:1: `clutch-proto` depends on `clutch-store` in [dev-dependencies]: proto depends on nothing internal",
        "crates/store/Cargo.toml:2: `clutch-store` depends on `clutch-core` in [dependencies]: store may only depend on proto",
        "crates/store/Cargo.toml:3: `clutch-store` depends on `clutch-store-sqlite` in [dev-dependencies]",
        "crates/store-sqlite/Cargo.toml:2: `clutch-store-sqlite` depends on `clutch-store-postgres`",
        "crates/core/Cargo.toml:2: `clutch-core` depends on `clutch-store-sqlite` in [dependencies]: store backends are chosen by the binary",
        "crates/core/Cargo.toml:3: `clutch-core` depends on `clutch-gateway` in [dev-dependencies]: core may only depend on proto, store",
        "crates/gateway/Cargo.toml:2: `clutch-gateway` depends on `clutch-mcp` in [dependencies]: faces never depend on each other",
        "crates/mcp/Cargo.toml:2: `clutch-mcp` depends on `clutch-a2a` in [dev-dependencies]: faces never depend on each other",
        "crates/runtime/Cargo.toml:2: `clutch-runtime` depends on `clutch-gateway` in [dependencies]: runtime may only depend on core, proto, store, outbound",
        "crates/runtime/Cargo.toml:3: `clutch-runtime` depends on `clutch-mcp` in [dev-dependencies]",
        "crates/app/Cargo.toml:2: `clutch-app` depends on `clutch-bench` in [dependencies]: the bench measures the daemon and is no part of it",
        "crates/app/Cargo.toml:3: `clutch-app` depends on `clutch-store-sqlite` in [dependencies]: store backends are chosen by the binary",
        "crates/bench/Cargo.toml:2: `clutch-bench` depends on `clutch-a2a` in [dependencies]: bench may only depend on app,",
    ] {
        assert!(found.contains(expected), "missing {expected:?} in:\n{found}");
    }
    assert_eq!(found.lines().count(), 13, "{found}");
}
