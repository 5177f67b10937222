//! The positions that can be run: the six shipped in the binary, and the operator's own files
//! (`DIR/NAME.md`, `DIR/NAME/SKILL.md`), which override or add to them by name.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use super::error::{Error, Problem};
use super::model::Skill;
use super::parse::{MAX_BYTES, parse};

/// The six positions shipped in the binary, parsed.
pub fn shipped() -> Vec<Skill> {
    SHIPPED
        .iter()
        .map(|(name, text)| {
            let source = format!("shipped:{name}");
            // The shipped files are tested to parse (tests/it/skills.rs).
            parse(text, &source, name).unwrap_or_else(|e| panic!("a shipped position does not parse: {e}"))
        })
        .collect()
}

/// Every position file in `dir` (`DIR/NAME.md`, `DIR/NAME/SKILL.md`; hidden files and `README.md`
/// are skipped), parsed, in the order of their paths: the good ones and one error per bad file. Two
/// files naming the same position make the later one an error. Nothing shipped is included.
pub fn check_dir(dir: &Path) -> (Vec<Skill>, Vec<Error>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut errors = Vec::new();
    let files = match files(dir) {
        Ok(files) => files,
        Err(e) => {
            let error =
                Error { file: dir.display().to_string(), line: 0, expected: format!("a readable directory ({e})") };
            return (skills, vec![error]);
        }
    };
    for (path, default_name) in files {
        let file = path.display().to_string();
        let parsed = read(&path).and_then(|text| parse(&text, &file, &default_name).map_err(|e| (e.line, e.expected)));
        match parsed {
            Ok(skill) => match skills.iter().find(|s| s.name == skill.name) {
                Some(first) => errors.push(Error {
                    file,
                    line: 1,
                    expected: format!("a position name of its own: {:?} is also {}", skill.name, first.source),
                }),
                None => skills.push(skill),
            },
            Err((line, expected)) => errors.push(Error { file, line, expected }),
        }
    }
    (skills, errors)
}

/// The positions that can be run, by name: the shipped ones, overridden or added to by the
/// operator's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    skills: BTreeMap<String, Skill>,
}

impl Catalog {
    /// The shipped positions, then every position file in `dir` (see [`check_dir`]), which replaces
    /// a shipped one of the same name or adds one. A `dir` that does not exist adds nothing. Any bad
    /// file refuses the whole catalog, with one error per bad file.
    pub fn load(dir: Option<&Path>) -> Result<Catalog, Vec<Error>> {
        let mut skills: BTreeMap<String, Skill> = shipped().into_iter().map(|s| (s.name.clone(), s)).collect();
        if let Some(dir) = dir.filter(|dir| dir.exists()) {
            let (found, errors) = check_dir(dir);
            if !errors.is_empty() {
                return Err(errors);
            }
            skills.extend(found.into_iter().map(|s| (s.name.clone(), s)));
        }
        Ok(Catalog { skills })
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// Every position, by name.
    pub fn list(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }
}
/// The shipped positions: (name, file).
const SHIPPED: [(&str, &str); 6] = [
    ("contemplator", include_str!("../../positions/contemplator.md")),
    ("mirror", include_str!("../../positions/mirror.md")),
    ("relay", include_str!("../../positions/relay.md")),
    ("pyramid", include_str!("../../positions/pyramid.md")),
    ("swarm", include_str!("../../positions/swarm.md")),
    ("circle", include_str!("../../positions/circle.md")),
];

/// The position files of a directory: (path, default name), in the order of their paths.
fn files(dir: &Path) -> std::io::Result<Vec<(std::path::PathBuf, String)>> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    let mut files = Vec::new();
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') || name.eq_ignore_ascii_case("README.md") {
            continue;
        }
        if path.is_dir() {
            let skill = path.join("SKILL.md");
            if skill.is_file() {
                files.push((skill, name));
            }
        } else if let Some(stem) = name.strip_suffix(".md").filter(|_| path.is_file()) {
            files.push((path.clone(), stem.to_owned()));
        }
    }
    Ok(files)
}

/// A file's text, refused when larger than [`MAX_BYTES`] (without reading it all) or not UTF-8.
fn read(path: &Path) -> Result<String, Problem> {
    let file = std::fs::File::open(path).map_err(|e| (0, format!("a readable file ({e})")))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| (0, format!("a readable file ({e})")))?;
    if bytes.len() > MAX_BYTES {
        return Err((1, format!("a file of at most {} KiB", MAX_BYTES / 1024)));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        (1 + valid.iter().filter(|&&b| b == b'\n').count(), "UTF-8 text".to_owned())
    })
}
