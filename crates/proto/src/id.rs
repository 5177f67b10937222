//! Identifiers: prefixed, time-sortable ids (`msg_`, `run_`, `task_`, `thr_` followed by a ULID) and
//! the reserved `prefix:name` references of the protocol's Appendix B (`agent:ken`, `skill:research`).

use std::time::SystemTime;

/// The kinds of generated id, each with its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Message,
    Run,
    Task,
    Thread,
    /// A workflow's git workspace (`ws_`).
    Workspace,
}

impl Kind {
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Message => "msg_",
            Kind::Run => "run_",
            Kind::Task => "task_",
            Kind::Thread => "thr_",
            Kind::Workspace => "ws_",
        }
    }
}

/// A new id of `kind`: its prefix and a ULID (48-bit millisecond time, 80 random bits), so ids sort by
/// creation time.
pub fn generate(kind: Kind) -> String {
    generate_at(kind, SystemTime::now())
}

/// A new id of `kind` whose time part is `at`.
pub fn generate_at(kind: Kind, at: SystemTime) -> String {
    format!("{}{}", kind.prefix(), ulid::Ulid::from_datetime(at))
}

/// The id of `kind` that `seed` always gives: for ids that a repeated input must repeat (a webhook
/// delivered twice lands in the same run, so its idempotency key dedups it).
pub fn derive(kind: Kind, seed: u128) -> String {
    format!("{}{}", kind.prefix(), ulid::Ulid(seed))
}

/// Checks that `s` is an id of `kind`: the prefix, then 26 Crockford base-32 characters (upper case)
/// whose value fits 128 bits. Returns why not.
pub fn check(kind: Kind, s: &str) -> Result<(), String> {
    let Some(body) = s.strip_prefix(kind.prefix()) else {
        return Err(format!("must start with `{}` followed by a ULID", kind.prefix()));
    };
    if body.len() != 26 {
        return Err(format!(
            "the part after `{}` must be a 26-character ULID, got {} characters",
            kind.prefix(),
            body.len()
        ));
    }
    if let Some(c) = body.chars().find(|c| !is_crockford(*c)) {
        return Err(format!("`{c}` is not a Crockford base-32 character (0-9, A-Z without I, L, O, U)"));
    }
    // 26 base-32 digits hold 130 bits; the first digit may be at most 7 for the value to fit 128.
    if body.as_bytes()[0] > b'7' {
        return Err("the ULID overflows 128 bits (its first character must be 0-7)".into());
    }
    Ok(())
}

/// The 128-bit value of an id of `kind` (its ULID), or `None` when `s` is not one (see [`check`]).
/// Its top 48 bits are the id's creation time in milliseconds.
pub fn value(kind: Kind, s: &str) -> Option<u128> {
    check(kind, s).ok()?;
    ulid::Ulid::from_string(&s[kind.prefix().len()..]).ok().map(|u| u.0)
}

fn is_crockford(c: char) -> bool {
    matches!(c, '0'..='9' | 'A'..='H' | 'J' | 'K' | 'M' | 'N' | 'P'..='T' | 'V'..='Z')
}

/// Who can appear in `from` and `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    /// A sender: `agent:<name>`, or `user:<name>` for a human.
    Sender,
    /// A recipient: a sender, or `group:<name>`.
    Recipient,
}

/// Checks a party reference such as `agent:ken`, `user:ada` or (as a recipient) `group:reviewers`.
pub fn check_party(party: Party, s: &str) -> Result<(), String> {
    let allowed: &[&str] = match party {
        Party::Sender => &["agent:", "user:"],
        Party::Recipient => &["agent:", "user:", "group:"],
    };
    let Some(prefix) = allowed.iter().find(|p| s.starts_with(**p)) else {
        return Err(format!("must start with one of {}", allowed.join(", ")));
    };
    check_name(&s[prefix.len()..])
}

/// Checks the name part of a reference: 1 to 128 characters of `A-Z a-z 0-9 . _ -`, starting with a
/// letter or digit.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err("the name must have 1 to 128 characters".into());
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return Err("the name must start with a letter or digit".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("`{c}` is not allowed in a name (use letters, digits, `.`, `_`, `-`)"));
    }
    Ok(())
}

/// Prefixes a capability id may have in `requires`, `prefers` and AgentCard capabilities.
pub const CAPABILITY_PREFIXES: &[&str] = &["skill:", "tool:", "mcp:"];
/// Further prefixes `prefers` accepts: a domain or a tag to favour.
pub const PREFERENCE_PREFIXES: &[&str] = &["domain:", "tag:"];

/// Checks a capability reference `skill:research`, optionally with a version constraint after `@`
/// (`skill:research@^1.2`). `extra` lists further accepted prefixes.
pub fn check_capability(s: &str, extra: &[&str]) -> Result<(), String> {
    let (name, constraint) = match s.split_once('@') {
        Some((n, c)) => (n, Some(c)),
        None => (s, None),
    };
    let Some(prefix) = CAPABILITY_PREFIXES.iter().chain(extra).find(|p| name.starts_with(**p)) else {
        let all: Vec<&str> = CAPABILITY_PREFIXES.iter().chain(extra).copied().collect();
        return Err(format!("must start with one of {}", all.join(", ")));
    };
    check_name(&name[prefix.len()..])?;
    if let Some(c) = constraint
        && (c.is_empty() || c.len() > 64 || !c.chars().all(|c| c.is_ascii_alphanumeric() || "^~=<>*., -+".contains(c)))
    {
        return Err("the version constraint after `@` must be a semver requirement such as `^1.2`".into());
    }
    Ok(())
}

/// Checks a payload type such as `research.summary.v1`: at most 128 characters of dotted words
/// (`a-z 0-9 _`, 1 to 64 each), the last one a version `v<N>`.
pub fn check_payload_type(s: &str) -> Result<(), String> {
    let parts: Vec<&str> = s.split('.').collect();
    let word = |w: &&str| {
        !w.is_empty() && w.len() <= 64 && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    let version = parts
        .last()
        .and_then(|v| v.strip_prefix('v'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if s.len() <= 128 && parts.len() >= 2 && parts[..parts.len() - 1].iter().all(word) && version {
        Ok(())
    } else {
        Err("must look like `research.summary.v1`: dotted lower-case words ending in `.v<N>`".into())
    }
}

/// The prefix of content-addressed artifact references.
pub const ARTIFACT_PREFIX: &str = "artifact:sha256:";

/// Checks an artifact reference `artifact:sha256:<64 lower-case hex digits>`.
pub fn check_artifact_ref(s: &str) -> Result<(), String> {
    let Some(hex) = s.strip_prefix(ARTIFACT_PREFIX) else {
        return Err(format!("must be `{ARTIFACT_PREFIX}` followed by 64 hex digits"));
    };
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err("the SHA-256 digest must be 64 lower-case hex digits".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn generated_ids_check_and_sort_by_time() {
        let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_000);
        let t1 = t0 + std::time::Duration::from_millis(1);
        for kind in [Kind::Message, Kind::Run, Kind::Task, Kind::Thread, Kind::Workspace] {
            let a = generate_at(kind, t0);
            let b = generate_at(kind, t1);
            check(kind, &a).unwrap();
            assert!(a < b, "{a} should sort before {b}");
            assert_eq!(value(kind, &a).map(|v| (v >> 80) as u64), Some(1_700_000_000_000), "{a}");
            assert!(value(kind, &a) < value(kind, &b));
        }
    }

    #[test]
    fn bad_ids_say_why() {
        assert!(check(Kind::Run, "msg_01HX0000000000000000000000").unwrap_err().contains("run_"));
        assert!(check(Kind::Run, "run_01HX").unwrap_err().contains("26-character"));
        assert!(check(Kind::Run, "run_01HX00000000000000000000IL").unwrap_err().contains("Crockford"));
        assert!(check(Kind::Run, "run_81HX000000000000000000000A").unwrap_err().contains("128 bits"));
        assert!(check(Kind::Run, "run_01hx000000000000000000000a").is_err());
        assert_eq!(value(Kind::Task, "run_01HX0000000000000000000000"), None);
    }

    #[test]
    fn references() {
        check_party(Party::Sender, "agent:ken").unwrap();
        check_party(Party::Sender, "user:ada.l").unwrap();
        assert!(check_party(Party::Sender, "group:x").is_err());
        check_party(Party::Recipient, "group:reviewers").unwrap();
        assert!(check_party(Party::Sender, "agent:").is_err());
        assert!(check_party(Party::Sender, "agent:a b").is_err());
        check_capability("skill:research@^1.2", &[]).unwrap();
        assert!(check_capability("domain:fintech", &[]).is_err());
        check_capability("domain:fintech", PREFERENCE_PREFIXES).unwrap();
        assert!(check_capability("skill:research@", &[]).is_err());
        check_artifact_ref(&format!("artifact:sha256:{}", "a".repeat(64))).unwrap();
        assert!(check_artifact_ref("artifact:report_456").is_err());
        check_payload_type("research.summary.v1").unwrap();
        check_payload_type("summary.v12").unwrap();
        for bad in ["v1", "research.summary", "research.summary.v", "Research.summary.v1", "a..v1", "a.b.v1x"] {
            assert!(check_payload_type(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn any_generated_id_checks(ms in 0u64..(1 << 48), kind in 0usize..4) {
            let kind = [Kind::Message, Kind::Run, Kind::Task, Kind::Thread][kind];
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            let id = generate_at(kind, at);
            prop_assert!(check(kind, &id).is_ok());
            prop_assert_eq!(id.len(), kind.prefix().len() + 26);
        }

        #[test]
        fn ids_sort_like_their_times(a in 0u64..(1 << 48), b in 0u64..(1 << 48)) {
            prop_assume!(a != b);
            let at = |ms| SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            let (x, y) = (generate_at(Kind::Task, at(a)), generate_at(Kind::Task, at(b)));
            prop_assert_eq!(a < b, x < y);
        }

        #[test]
        fn check_never_panics(s in "\\PC{0,40}") {
            let _ = check(Kind::Message, &s);
            let _ = check_party(Party::Recipient, &s);
            let _ = check_capability(&s, PREFERENCE_PREFIXES);
            let _ = check_artifact_ref(&s);
            let _ = check_payload_type(&s);
        }
    }
}
