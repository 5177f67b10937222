//! No import cycles between the files of a crate: if `a.rs` uses `b.rs`, `b.rs` does not use `a.rs`,
//! directly or through others. A file uses another when it names a path into it (`use crate::b::X`,
//! `crate::b::f()`, `super::b::X`, a module it imported or declared: `b::X`). Arrows into the crate
//! root and into a file's own ancestors (`super::` from `engine/apply.rs` to `engine.rs`, from a
//! `mod tests` to its file) are not counted; a path through a re-export of the root (`crate::Engine`
//! for `pub use engine::Engine;`) counts as one to the file it re-exports from.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::tokens::{self, Kind, Token};

#[test]
fn no_import_cycles_between_the_files_of_a_crate() {
    let mut by_crate: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (path, text) in super::source_files() {
        let rel = super::rel(&path);
        let Some((krate, file)) = rel.strip_prefix("crates/").and_then(|r| r.split_once("/src/")) else { continue };
        by_crate.entry(krate.to_owned()).or_default().push((file.to_owned(), text));
    }
    let cycles: Vec<String> = by_crate.iter().flat_map(|(krate, files)| cycles(krate, files)).collect();
    assert!(
        cycles.is_empty(),
        "{} import cycles between the files of a crate (each file, then what it uses of the next):\n{}\n\
         Break each by moving what both sides need into a file of its own, or into the one that owns it, so \
         that the files of a crate form layers.",
        cycles.len(),
        cycles.join("\n")
    );
}

/// One line per cycle among `files` (paths under `src/`, with their text) of `krate`, each strongly
/// connected set of files covered by as few shortest cycles as it takes:
/// `krate: a.rs -> b.rs -> a.rs (a.rs -> b.rs: b::X; b.rs -> a.rs: a::Y)`.
fn cycles(krate: &str, files: &[(String, String)]) -> Vec<String> {
    let graph = graph(files);
    let mut out = Vec::new();
    for component in components(&graph) {
        let mut covered = BTreeSet::new();
        for start in &component {
            if covered.contains(start) {
                continue;
            }
            let Some(cycle) = shortest_cycle(&graph, &component, start) else { continue };
            let arrows: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let names: Vec<&str> = graph[w[0]][w[1]].iter().map(String::as_str).collect();
                    format!("{} -> {}: {}", w[0], w[1], names.join(", "))
                })
                .collect();
            out.push(format!("  {krate}: {} ({})", cycle.join(" -> "), arrows.join("; ")));
            covered.extend(cycle);
        }
    }
    out
}

/// file → the files it uses → the names it uses of each (`b::X`; `b::X (tests)` when only test code
/// names it).
type Graph<'a> = BTreeMap<&'a str, BTreeMap<&'a str, BTreeSet<String>>>;

fn graph(files: &[(String, String)]) -> Graph<'_> {
    let modules: BTreeMap<Vec<String>, &str> =
        files.iter().filter_map(|(path, _)| Some((module_of(path)?, path.as_str()))).collect();
    let parsed: Vec<(Vec<String>, &str, Parsed)> = files
        .iter()
        .filter_map(|(path, text)| {
            let module = module_of(path)?;
            let parsed = parse(&module, &tokens::lex(text));
            Some((module, path.as_str(), parsed))
        })
        .collect();
    let mut world = World { known: modules.keys().cloned().collect(), ..World::default() };
    for (_, _, p) in &parsed {
        world.known.extend(p.modules.iter().cloned());
        for (scope, name, path) in &p.bindings {
            world.bindings.entry(scope.clone()).or_default().insert(name.clone(), path.clone());
        }
        for (scope, path) in &p.globs {
            world.globs.entry(scope.clone()).or_default().push(path.clone());
        }
    }

    // The names a path can start with and still lead into this crate (most paths are other crates'
    // or a type's, and need no resolving).
    let mut local: BTreeSet<&str> = ["crate", "self", "super"].into();
    local.extend(world.known.iter().filter_map(|m| m.last()).map(String::as_str));
    local.extend(world.bindings.values().flat_map(|b| b.keys()).map(String::as_str));
    let mut graph: Graph<'_> = BTreeMap::new();
    for (module, path, p) in &parsed {
        // (file, name) → whether only test code names it.
        let mut used: BTreeMap<(&str, String), bool> = BTreeMap::new();
        for reference in &p.refs {
            if !reference.segments.first().is_some_and(|s| local.contains(s.as_str())) {
                continue;
            }
            let Some(absolute) = world.resolve(&reference.scope, &reference.segments, 0) else { continue };
            let Some((target, mut name)) = world.file_of(absolute, &modules, 0) else { continue };
            // Into the root or into an ancestor (a child module naming its parent): not an arrow.
            if module.starts_with(&target) {
                continue;
            }
            if reference.glob {
                name.push_str("::*");
            }
            *used.entry((modules[&target], name)).or_insert(true) &= reference.test;
        }
        let arrows = graph.entry(path).or_default();
        for ((to, name), test) in used {
            arrows.entry(to).or_default().insert(if test { format!("{name} (tests)") } else { name });
        }
    }
    graph
}

/// The module a file under `src/` holds: `lib.rs` and `main.rs` the root, `a/b.rs` and
/// `a/b/mod.rs` `a::b`.
fn module_of(path: &str) -> Option<Vec<String>> {
    let stem = path.strip_suffix(".rs")?;
    let mut segments: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if segments.last().is_some_and(|s| s == "mod") || stem == "lib" || stem == "main" {
        segments.pop();
    }
    Some(segments)
}

/// A path written in a file: `scope` is the module it is written in (the file's, or an inline
/// module's in it), `segments` as written (`super`, `crate`, `self` included).
struct Ref {
    scope: Vec<String>,
    segments: Vec<String>,
    /// `use path::*`.
    glob: bool,
    test: bool,
}

#[derive(Default)]
struct Parsed {
    refs: Vec<Ref>,
    /// What `use` items bring into a module: (module, name, path as written).
    bindings: Vec<(Vec<String>, String, Vec<String>)>,
    /// `use path::*` items: (module, path as written).
    globs: Vec<(Vec<String>, Vec<String>)>,
    /// Modules written inline (`mod tests { ... }`) or declared (`mod x;`).
    modules: Vec<Vec<String>>,
}

fn parse(module: &[String], tokens: &[Token]) -> Parsed {
    let mut parsed = Parsed::default();
    // The inline modules open at this point, with the brace depth inside each.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let scope = |open: &[(String, usize)]| {
        let mut s = module.to_vec();
        s.extend(open.iter().map(|(n, _)| n.clone()));
        s
    };
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.is("{") {
            depth += 1;
        } else if t.is("}") {
            if open.last().is_some_and(|(_, d)| *d == depth) {
                open.pop();
            }
            depth = depth.saturating_sub(1);
        } else if t.is("mod")
            && let Some(name) = tokens.get(i + 1).and_then(Token::ident)
        {
            let mut child = scope(&open);
            child.push(name.to_owned());
            parsed.modules.push(child);
            if tokens.get(i + 2).is_some_and(|t| t.is("{")) {
                open.push((name.to_owned(), depth + 1));
            }
            i += 2;
            continue;
        } else if t.is("use") {
            let here = scope(&open);
            let mut leaves = Vec::new();
            i = use_tree(tokens, i + 1, &mut Vec::new(), &mut leaves, true);
            for leaf in leaves {
                match &leaf.binds {
                    Binds::Name(name) => parsed.bindings.push((here.clone(), name.clone(), leaf.path.clone())),
                    Binds::Glob => parsed.globs.push((here.clone(), leaf.path.clone())),
                    Binds::Nothing => {}
                }
                let glob = leaf.binds == Binds::Glob;
                parsed.refs.push(Ref { scope: here.clone(), segments: leaf.path, glob, test: t.test });
            }
            continue;
        } else if t.kind == Kind::Ident && tokens.get(i + 1).is_some_and(|n| n.is("::")) && starts_path(tokens, i) {
            let mut segments = vec![t.text.clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|n| n.is("::"))
                && let Some(next) = tokens.get(j + 1).and_then(Token::ident)
            {
                segments.push(next.to_owned());
                j += 2;
            }
            parsed.refs.push(Ref { scope: scope(&open), segments, glob: false, test: t.test });
            i = j;
            continue;
        }
        i += 1;
    }
    parsed
}

/// Whether the name at `i` begins a path rather than continuing one (`a::b`, `x.b`, `$crate`) or
/// being a visibility (`pub(in crate::a)`).
fn starts_path(tokens: &[Token], i: usize) -> bool {
    let Some(before) = i.checked_sub(1).map(|b| &tokens[b]) else { return true };
    if before.is("::") || before.is(".") || before.is("$") || tokens[i].text == "Self" {
        return false;
    }
    !(before.is("in") && i >= 2 && tokens[i - 2].is("("))
}

/// One path of a `use` item, and what it brings into scope.
struct Leaf {
    path: Vec<String>,
    binds: Binds,
}

#[derive(PartialEq, Eq)]
enum Binds {
    Name(String),
    Glob,
    /// `as _`.
    Nothing,
}

/// Reads the use tree at `i` below `prefix` into `leaves`; returns the index after it: after the
/// `;` of the item (`top`), else at the `,` or `}` that follows it.
fn use_tree(tokens: &[Token], mut i: usize, prefix: &mut Vec<String>, leaves: &mut Vec<Leaf>, top: bool) -> usize {
    let depth = prefix.len();
    if tokens.get(i).is_some_and(|t| t.is("::")) {
        // `use ::name`: another crate's.
        prefix.push("::".into());
        i += 1;
    }
    while let Some(t) = tokens.get(i) {
        if let Some(name) = t.ident() {
            if tokens.get(i + 1).is_some_and(|n| n.is("::")) {
                prefix.push(name.to_owned());
                i += 2;
                continue;
            }
            let mut path = prefix.clone();
            let mut binds = if name == "self" {
                prefix.last().cloned().map_or(Binds::Nothing, Binds::Name)
            } else {
                path.push(name.to_owned());
                Binds::Name(name.to_owned())
            };
            i += 1;
            if tokens.get(i).is_some_and(|t| t.is("as")) {
                binds = match tokens.get(i + 1).and_then(Token::ident) {
                    Some(alias) if alias != "_" => Binds::Name(alias.to_owned()),
                    _ => Binds::Nothing,
                };
                i += 2;
            }
            leaves.push(Leaf { path, binds });
        } else if t.is("*") {
            leaves.push(Leaf { path: prefix.clone(), binds: Binds::Glob });
            i += 1;
        } else if t.is("{") {
            i += 1;
            while tokens.get(i).is_some_and(|t| !t.is("}")) {
                i = use_tree(tokens, i, prefix, leaves, false);
                if tokens.get(i).is_some_and(|t| t.is(",")) {
                    i += 1;
                }
            }
            i += 1;
        }
        break;
    }
    prefix.truncate(depth);
    let stop = |t: &Token| if top { t.is(";") } else { t.is(",") || t.is("}") };
    while tokens.get(i).is_some_and(|t| !stop(t)) {
        i += 1;
    }
    i + usize::from(top)
}

/// What the crate's files declare: every module, and what `use` items bring into each.
#[derive(Default)]
struct World {
    known: BTreeSet<Vec<String>>,
    bindings: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
}

/// How many `use` items a path is followed through before the rule gives up on it.
const HOPS: usize = 8;

impl World {
    /// `segments`, written in `scope`, as a path from the crate root; `None` for another crate's
    /// path, or a name the rule does not place (a local type's associated item, a variable).
    fn resolve(&self, scope: &[String], segments: &[String], hops: usize) -> Option<Vec<String>> {
        let (first, mut rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => scope.to_vec(),
            "super" => {
                let mut base = scope.to_vec();
                base.pop()?;
                base
            }
            "::" => return None,
            name => self.lookup(scope, name, hops)?,
        };
        while let Some((segment, tail)) = rest.split_first()
            && segment == "super"
        {
            base.pop()?;
            rest = tail;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// What `name` means in `scope`: a child module, what a `use` item binds it to, or what a glob
    /// import brings.
    fn lookup(&self, scope: &[String], name: &str, hops: usize) -> Option<Vec<String>> {
        if hops > HOPS {
            return None;
        }
        let mut child = scope.to_vec();
        child.push(name.to_owned());
        if self.known.contains(&child) {
            return Some(child);
        }
        if let Some(path) = self.bindings.get(scope).and_then(|b| b.get(name)) {
            return self.resolve(scope, path, hops + 1);
        }
        self.globs.get(scope).into_iter().flatten().find_map(|glob| {
            let module = self.resolve(scope, glob, hops + 1).filter(|m| m != scope && self.known.contains(m))?;
            self.lookup(&module, name, hops + 1)
        })
    }

    /// The file module `path` leads into (its longest prefix that is a file) and the name used of
    /// it (`b::X`); through the root's `use` items when the path goes into the root.
    fn file_of(
        &self,
        path: Vec<String>,
        files: &BTreeMap<Vec<String>, &str>,
        hops: usize,
    ) -> Option<(Vec<String>, String)> {
        let depth = (0..=path.len()).rev().find(|n| files.contains_key(&path[..*n]))?;
        if depth > 0 {
            return Some((path[..depth].to_vec(), path[..(depth + 1).min(path.len())].join("::")));
        }
        let (first, rest) = path.split_first()?;
        let mut full = self.lookup(&[], first, hops + 1)?;
        full.extend(rest.iter().cloned());
        self.file_of(full, files, hops + 1)
    }
}

/// The strongly connected sets of more than one file (Tarjan's algorithm), each sorted.
fn components<'a>(graph: &Graph<'a>) -> Vec<Vec<&'a str>> {
    struct State<'a, 'g> {
        graph: &'g Graph<'a>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(s: &mut State<'a, '_>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in s.graph.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The shortest cycle from `start` back to it within `component` (breadth first), `start` at both
/// ends.
fn shortest_cycle<'a>(graph: &Graph<'a>, component: &[&'a str], start: &'a str) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in graph.get(v).into_iter().flat_map(|e| e.keys()).filter(|w| component.contains(w)) {
            if w == start {
                let mut cycle = vec![v];
                while let Some(&before) = came_from.get(cycle.last().unwrap()) {
                    cycle.push(before);
                }
                cycle.reverse();
                cycle.push(start);
                return Some(cycle);
            }
            if !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    None
}

#[test]
fn the_import_check_finds_cycles_and_only_cycles() {
    let files = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
    };
    let tangled = files(&[
        ("lib.rs", "//! root\nmod a;\nmod b;\nmod c;\nmod d;\nmod engine;\npub use a::Alpha;\npub struct Root;"),
        (
            "a.rs",
            concat!(
                "//! A.\n",
                "use crate::{b::{Beta, Gamma}, c};\n",
                "// use crate::d::Delta;\n",
                "/// ```\n/// use crate::d::Delta;\n/// ```\n",
                "pub struct Alpha;\n",
                "fn f() -> crate::Root { let _ = \"crate::d::Delta\"; c::see(); Root }\n",
            ),
        ),
        ("b.rs", "//! B.\nuse super::a::Alpha as A;\npub struct Beta; pub struct Gamma;"),
        // Through the root's re-export: `crate::Alpha` is a.rs's.
        ("c.rs", "//! C.\npub fn see() -> crate::Alpha { crate::Alpha }"),
        // Uses a.rs, and a.rs does not use it: no cycle. Its tests use `super` freely.
        (
            "d.rs",
            "//! D.\npub struct Delta(crate::a::Alpha);\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::d::Delta;\n}\n",
        ),
        // A parent and its child file: the child naming its parent is no arrow.
        ("engine.rs", "//! E.\nmod apply;\npub struct Engine;\nfn f() { apply::run(); }"),
        (
            "engine/apply.rs",
            "//! Apply.\nuse super::Engine;\npub(in crate::engine) fn run() -> crate::engine::Engine { Engine }",
        ),
    ]);
    assert_eq!(
        cycles("x", &tangled),
        [
            "  x: a.rs -> b.rs -> a.rs (a.rs -> b.rs: b::Beta, b::Gamma; b.rs -> a.rs: a::Alpha)",
            "  x: c.rs -> a.rs -> c.rs (c.rs -> a.rs: a::Alpha; a.rs -> c.rs: c, c::see)",
        ]
    );

    let three = files(&[
        ("main.rs", "//! root\nmod p;\nmod q;\nmod r;"),
        ("p.rs", "//! P.\nuse crate::q::Q;\npub struct P;"),
        ("q.rs", "//! Q.\npub struct Q;\npub fn f() { let _ = crate::r::R; }"),
        ("r.rs", "//! R.\npub struct R;\n#[cfg(test)]\nmod tests { use crate::p::P; }"),
    ]);
    assert_eq!(
        cycles("y", &three),
        ["  y: p.rs -> q.rs -> r.rs -> p.rs (p.rs -> q.rs: q::Q; q.rs -> r.rs: r::R; r.rs -> p.rs: p::P (tests))"]
    );

    let layered = files(&[
        ("lib.rs", "//! root\nmod a;\nmod b;\npub use b::Beta;"),
        ("a.rs", "//! A.\nuse crate::{b::{self, Beta}};\nfn f() -> Beta { b::make() }"),
        ("b.rs", "//! B.\npub struct Beta;\npub fn make() -> Beta { Beta }\n#[cfg(test)]\nmod tests { use super::*; }"),
    ]);
    assert_eq!(cycles("z", &layered), Vec::<String>::new());
}
