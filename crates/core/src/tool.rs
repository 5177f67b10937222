//! Tool names and what an allowlist entry covers. A tool an adapter serves is named
//! `<adapter>:<server>/<tool>` (`mcp:files/read_file`); the seed's allowlist entries name whole
//! servers (`mcp:browser`), which keep covering every tool of that server. Also what a tool does as
//! its server describes it ([`ToolAnnotations`]), which the policy (`config`) and the shapes (`view`)
//! both name, so it sits here, below them.

/// What a tool does, as its server describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToolAnnotations {
    /// It changes nothing.
    pub read_only: bool,
    /// It may destroy or overwrite (meaningful when not read-only).
    pub destructive: bool,
    /// Calling it again with the same arguments has no further effect.
    pub idempotent: bool,
    /// It reaches beyond the server (the web, other systems).
    pub open_world: bool,
}

impl ToolAnnotations {
    /// Making it again is safe when its outcome is unknown.
    pub fn retry_safe(self) -> bool {
        self.read_only || self.idempotent
    }
}

/// The server a tool belongs to: `mcp:files/read_file` → `mcp:files`; `None` for a name without one.
pub fn server_of(tool: &str) -> Option<&str> {
    let (prefix, rest) = tool.split_once(':')?;
    let (server, name) = rest.split_once('/')?;
    (!prefix.is_empty() && !server.is_empty() && !name.is_empty()).then(|| &tool[..prefix.len() + 1 + server.len()])
}

/// Whether an allowlist or card entry covers `tool`: the same name, or the whole server it is on.
pub fn covers(entry: &str, tool: &str) -> bool {
    entry == tool || server_of(tool) == Some(entry)
}

/// `mcp:files/read_file` → (`files`, `read_file`) for the adapter named `mcp`.
pub fn split<'a>(adapter: &str, tool: &'a str) -> Option<(&'a str, &'a str)> {
    let rest = tool.strip_prefix(adapter)?.strip_prefix(':')?;
    let (server, name) = rest.split_once('/')?;
    (!server.is_empty() && !name.is_empty()).then_some((server, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_cover_their_tools() {
        assert_eq!(server_of("mcp:files/read_file"), Some("mcp:files"));
        assert_eq!(server_of("mcp:files/a/b"), Some("mcp:files"));
        assert_eq!(server_of("mcp:browser"), None);
        assert_eq!(server_of("mcp:/x"), None);
        assert_eq!(server_of("files/x"), None);
        assert!(covers("mcp:files", "mcp:files/read_file"));
        assert!(covers("mcp:files/read_file", "mcp:files/read_file"));
        assert!(!covers("mcp:files/read_file", "mcp:files/write_file"));
        assert!(!covers("mcp:file", "mcp:files/read_file"));
        assert!(!covers("mcp:files/read", "mcp:files/read_file"));
        assert_eq!(split("mcp", "mcp:files/read_file"), Some(("files", "read_file")));
        assert_eq!(split("mcp", "hook:files/x"), None);
        assert_eq!(split("mcp", "mcp:files"), None);
    }
}
