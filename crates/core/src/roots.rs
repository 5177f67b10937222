//! Paths a caller names (a workspace's repository and worktree) stay inside the directories the
//! operator declared: a path is resolved as the file system would (`..` and symlinks followed, the
//! part that does not exist yet taken as written, with no `..` in it) and must land inside a root.
//! Callers check again just before a path is used and after something is made there, so that a
//! symlink swapped in meanwhile cannot lead out.

use std::path::{Component, Path, PathBuf};

use clutch_proto::ErrorCode;

use crate::Refusal;

/// The config key that declares the roots (named in refusals).
pub const KEY: &str = "workspaces.roots";

/// The declared directories, resolved. None declared: every path is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots(Vec<PathBuf>);

impl Roots {
    /// Resolves each directory (it must exist).
    pub fn new(dirs: &[PathBuf]) -> std::io::Result<Roots> {
        let mut resolved = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let canonical =
                dir.canonicalize().map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
            if !canonical.is_dir() {
                return Err(std::io::Error::other(format!("{} is not a directory", dir.display())));
            }
            resolved.push(canonical);
        }
        Ok(Roots(resolved))
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.0
    }

    /// `path` resolved, when it lies inside a root; a relative path is taken from the first root.
    /// Refused with `PATH_NOT_ALLOWED` at `field` otherwise.
    pub fn check(&self, path: &Path, field: &str) -> Result<PathBuf, Refusal> {
        let Some(first) = self.0.first() else {
            return Err(Refusal::new(
                ErrorCode::PathNotAllowed,
                format!("{field}: no directory is open to workspaces"),
            )
            .field(field)
            .hint(format!("the operator declares them with `{KEY}` in clutch.toml")));
        };
        let absolute = if path.is_absolute() { path.to_path_buf() } else { first.join(path) };
        let resolved = resolve(&absolute).map_err(|why| {
            Refusal::new(ErrorCode::PathNotAllowed, format!("{field}: `{}` {why}", shown(path))).field(field)
        })?;
        if self.0.iter().any(|root| resolved.starts_with(root)) {
            return Ok(resolved);
        }
        Err(self.outside(path, field))
    }

    /// The refusal for `path`, which leads outside every root.
    pub fn outside(&self, path: &Path, field: &str) -> Refusal {
        let roots: Vec<String> = self.0.iter().map(|r| r.display().to_string()).collect();
        Refusal::new(
            ErrorCode::PathNotAllowed,
            format!(
                "{field}: `{}` leads outside the directories open to workspaces ({})",
                shown(path),
                roots.join(", ")
            ),
        )
        .field(field)
        .hint(format!("give a path inside them; the operator declares others with `{KEY}` in clutch.toml"))
    }
}

/// A path as quoted in a refusal: at most a short prefix.
fn shown(path: &Path) -> String {
    clutch_proto::error::quote(&path.to_string_lossy()).into_owned()
}

/// Where `path` (absolute) leads: its longest existing part resolved by the file system, then the
/// rest as written, which may not step up (`..`).
fn resolve(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path;
    let mut rest = Vec::new();
    while existing.symlink_metadata().is_err() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.components().next_back()) else {
            return Err("does not exist".into());
        };
        rest.push(name);
        existing = parent;
    }
    let mut resolved = existing.canonicalize().map_err(|e| format!("cannot be resolved ({e}): a dangling symlink?"))?;
    for component in rest.into_iter().rev() {
        match component {
            Component::Normal(name) => resolved.push(name),
            Component::CurDir => {}
            _ => return Err("steps up (`..`) below a directory that does not exist".into()),
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_roots() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("repo")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).unwrap();
        let roots = Roots::new(std::slice::from_ref(&root)).unwrap();
        let real = root.canonicalize().unwrap();
        assert_eq!(roots.check(&root.join("repo"), "repo_path").unwrap(), real.join("repo"));
        assert_eq!(roots.check(&root.join("repo/new/deeper"), "path").unwrap(), real.join("repo/new/deeper"));
        assert_eq!(roots.check(Path::new("repo"), "path").unwrap(), real.join("repo"), "relative: from the first root");
        assert_eq!(roots.check(&root.join("repo/../repo"), "path").unwrap(), real.join("repo"));
        for bad in [
            outside.clone(),
            root.join("../outside"),
            root.join("repo/../../outside/x"),
            root.join("link"),
            root.join("link/new"),
            root.join("new/../../outside"),
            root.join("dangling/x"),
            PathBuf::from("../outside"),
            PathBuf::from("/"),
        ] {
            let refusal = roots.check(&bad, "path").unwrap_err();
            assert_eq!((refusal.code, refusal.field.as_deref()), (ErrorCode::PathNotAllowed, Some("path")), "{bad:?}");
        }
        let refusal = roots.check(&outside, "repo_path").unwrap_err();
        assert!(refusal.message.contains(&real.display().to_string()), "names the roots: {}", refusal.message);
        assert!(Roots::default().check(&root, "path").is_err(), "no roots: nothing");
        assert!(Roots::new(&[dir.path().join("missing")]).is_err());
    }
}
