//! `clutch positions check DIR` through the binary: a line per good file, one per error, and the
//! exit codes 0, 1 and 2.

use std::path::Path;

use crate::support::{Output, clutch, run};

const GOOD: &str = "---
pattern: mirror
---
# Mirror Position

## Overview
Two agents independently analyze the same target and compare results.

## Agents
### Reflector
- **Personality**: Thorough
- **Responsibilities**:
  - Analyse

### Verifier
- **Personality**: Skeptical
- **Responsibilities**:
  - Verify

## Workflow
1. **ANALYSIS**: Independent parallel analysis
2. **COMPARISON**: Identify matches and discrepancies

## Communication Protocol
- RESULTS: Share analysis
- DISCREPANCY: Flag disagreement
- CONSENSUS: Agreement reached
- ESCALATE: Ask a human
";

fn check(dir: &Path) -> Output {
    let mut cmd = clutch();
    cmd.args(["positions", "check"]).arg(dir);
    run(cmd, "")
}

#[test]
fn positions_check_lists_good_files_and_every_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = |p: &str| dir.path().join(p).display().to_string();
    std::fs::write(dir.path().join("mirror.md"), GOOD).unwrap();
    let out = check(dir.path());
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, format!("ok  mirror  (mirror, 2 roles, 2 phases)  {}\n", path("mirror.md")));
    assert_eq!(out.stderr, "");

    // A bad file beside it, in the NAME/SKILL.md layout.
    std::fs::create_dir(dir.path().join("duo")).unwrap();
    std::fs::write(dir.path().join("duo/SKILL.md"), GOOD.replace("### Verifier", "### reflector")).unwrap();
    let out = check(dir.path());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stdout, format!("ok  mirror  (mirror, 2 roles, 2 phases)  {}\n", path("mirror.md")));
    assert_eq!(
        out.stderr,
        format!(
            "{}:15: expected a role name of its own: \"reflector\" is also at line 10\n\
             clutch: 1 of 2 position files in {} has errors\n",
            path("duo/SKILL.md"),
            dir.path().display()
        )
    );

    // The shipped positions, as they are in the source tree.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/positions");
    let out = check(&shipped);
    assert_eq!(out.code, Some(0), "{out:?}");
    let summaries: Vec<&str> =
        out.stdout.lines().map(|l| l.rsplit_once("  ").map_or(l, |(summary, _)| summary)).collect();
    assert_eq!(
        summaries,
        [
            "ok  circle  (circle, 3 roles, 5 phases)",
            "ok  contemplator  (solo, 1 role, 4 phases)",
            "ok  mirror  (mirror, 2 roles, 5 phases)",
            "ok  pyramid  (pyramid, 4 roles, 5 phases)",
            "ok  relay  (relay, 3 roles, 5 phases)",
            "ok  swarm  (swarm, 2 roles, 4 phases)",
        ],
        "{out:?}"
    );
}

#[test]
fn positions_check_without_position_files_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = check(&missing);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!((out.stdout.as_str(), out.stderr), ("", format!("clutch: {} does not exist\n", missing.display())));

    std::fs::write(dir.path().join("notes.txt"), "not a position").unwrap();
    let out = check(dir.path());
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(
        out.stderr,
        format!("clutch: no position files in {} (NAME.md or NAME/SKILL.md)\n", dir.path().display())
    );

    let out = check(&dir.path().join("notes.txt"));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.ends_with(" is not a directory\n"), "{out:?}");
}
