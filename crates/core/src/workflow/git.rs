//! Workspaces as git worktrees, made and removed with the `git` executable (run as a child process,
//! never under the engine's lock). Each failure comes back as a refusal that says what git said:
//! not a repository and unknown bases are `VALIDATION_FAILED`; an existing branch, a path in the
//! way or a worktree with changes are `GIT_FAILED`.

use std::path::{Path, PathBuf};

use clutch_proto::ErrorCode;

use crate::Refusal;

/// Runs `git -C dir args...`; stdout on success, else (exit code, stderr).
async fn git(dir: &Path, args: &[&str]) -> Result<String, (Option<i32>, String)> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| (None, format!("cannot run git: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
    } else {
        Err((out.status.code(), String::from_utf8_lossy(&out.stderr).trim().to_owned()))
    }
}

fn failed(field: &str, what: String) -> Refusal {
    Refusal::new(ErrorCode::GitFailed, what).field(field)
}

/// The repository's top-level directory for any path inside it.
pub async fn toplevel(repo: &Path) -> Result<PathBuf, Refusal> {
    if !repo.is_dir() {
        return Err(Refusal::new(ErrorCode::ValidationFailed, format!("{} is not a directory", repo.display()))
            .field("repo_path"));
    }
    match git(repo, &["rev-parse", "--show-toplevel"]).await {
        Ok(top) => Ok(PathBuf::from(top)),
        Err((None, e)) => Err(failed("repo_path", e)),
        Err((_, e)) => Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!("{} is not inside a git repository ({e})", repo.display()),
        )
        .field("repo_path")),
    }
}

/// The worktree's default place: beside the repository, `<repo>/../<repo name>.worktrees/<branch>`
/// with `/` in the branch turned into `-` (outside the repository, so its own status stays clean).
pub fn default_path(top: &Path, branch: &str) -> PathBuf {
    let name = top.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "repo".into());
    let leaf: String = branch
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    top.parent().unwrap_or(top).join(format!("{name}.worktrees")).join(leaf)
}

/// The current branch (or commit) of the repository, as the default base.
pub async fn head(top: &Path) -> Result<String, Refusal> {
    match git(top, &["symbolic-ref", "--quiet", "--short", "HEAD"]).await {
        Ok(branch) => Ok(branch),
        Err(_) => git(top, &["rev-parse", "HEAD"])
            .await
            .map_err(|(_, e)| failed("base_branch", format!("the repository has no commit to start from: {e}"))),
    }
}

/// Checks the branch name and that it is new, and that `base` names a commit.
pub async fn check_branch(top: &Path, branch: &str, base: &str) -> Result<(), Refusal> {
    if git(top, &["check-ref-format", "--branch", branch]).await.is_err() || branch.starts_with('-') {
        return Err(
            Refusal::new(ErrorCode::ValidationFailed, format!("`{branch}` is not a valid branch name")).field("branch")
        );
    }
    if git(top, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")]).await.is_ok() {
        return Err(failed("branch", format!("branch `{branch}` already exists in {}", top.display()))
            .hint("choose another branch name, or delete the branch first"));
    }
    if base.starts_with('-')
        || git(top, &["rev-parse", "--verify", "--quiet", &format!("{base}^{{commit}}")]).await.is_err()
    {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!("`{base}` names no commit in {}", top.display()),
        )
        .field("base_branch"));
    }
    Ok(())
}

/// `git worktree add -b <branch> <path> <base>`.
pub async fn add(top: &Path, branch: &str, path: &Path, base: &str) -> Result<(), Refusal> {
    if path.exists() {
        return Err(failed("path", format!("{} already exists", path.display())));
    }
    let path_text = path.to_string_lossy();
    git(top, &["worktree", "add", "--quiet", "-b", branch, &path_text, base])
        .await
        .map(|_| ())
        .map_err(|(_, e)| failed("branch", format!("git worktree add failed: {e}")))
}

/// `git worktree remove <path>`, refused while the worktree has uncommitted changes.
pub async fn remove(top: &Path, path: &Path) -> Result<(), Refusal> {
    if path.is_dir() {
        let status = git(path, &["status", "--porcelain"])
            .await
            .map_err(|(_, e)| failed("cleanup_worktree", format!("cannot read the worktree's status: {e}")))?;
        if !status.is_empty() {
            let files: Vec<&str> = status.lines().take(5).map(|l| l.get(3..).unwrap_or(l)).collect();
            return Err(failed(
                "cleanup_worktree",
                format!("the worktree {} has uncommitted changes ({})", path.display(), files.join(", ")),
            )
            .hint("commit or discard the changes, then clean up again"));
        }
    }
    let path_text = path.to_string_lossy();
    git(top, &["worktree", "remove", &path_text])
        .await
        .map(|_| ())
        .map_err(|(_, e)| failed("cleanup_worktree", format!("git worktree remove failed: {e}")))
}

/// Undoes [`add`] after the workspace could not be recorded: removes the worktree and the branch.
pub async fn undo(top: &Path, branch: &str, path: &Path) {
    let path_text = path.to_string_lossy();
    if let Err((_, e)) = git(top, &["worktree", "remove", "--force", &path_text]).await {
        tracing::warn!(path = %path.display(), error = %e, "could not remove an unrecorded worktree");
    }
    if let Err((_, e)) = git(top, &["branch", "-D", branch]).await {
        tracing::warn!(branch, error = %e, "could not delete an unrecorded branch");
    }
}
