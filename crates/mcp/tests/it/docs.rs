//! `docs/mcp.md` names only tools that exist: every tool-like name in backticks outside HTML
//! comments (where the lead's TODO lists the tools still to come) is in the coordinator's tools/list
//! or an argument of a tool listed there.

use std::collections::BTreeSet;

use crate::{Era, connect, start};

/// The prefixes of Clutch's tool names (the seed's families).
const FAMILIES: &[&str] = &["agent_", "workflow_", "task_", "checkpoint_", "workspace_"];

fn named_tools(markdown: &str) -> BTreeSet<String> {
    let mut text = String::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("<!--") {
        text.push_str(&rest[..start]);
        rest = rest[start..].split_once("-->").map_or("", |(_, after)| after);
    }
    text.push_str(rest);
    // `word` spans: a backtick, lower-case letters and underscores, a backtick (code fences and
    // other spans do not match).
    text.match_indices('`')
        .filter_map(|(i, _)| {
            let after = &text[i + 1..];
            let end = after.find(|c: char| !(c.is_ascii_lowercase() || c == '_'))?;
            let word = &after[..end];
            (after[end..].starts_with('`') && FAMILIES.iter().any(|f| word.starts_with(f))).then(|| word.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn every_tool_the_mcp_doc_names_exists() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/mcp.md")).unwrap();
    let named = named_tools(&doc);
    let daemon = start().await;
    let client = connect(&format!("{}/mcp", daemon.url), Era::Modern).await;
    let tools = client.list_all_tools().await.unwrap();
    let listed: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
    // An argument such as `agent_id` is no tool name.
    let arguments: BTreeSet<String> = tools
        .iter()
        .flat_map(|t| t.input_schema.get("properties").and_then(|p| p.as_object()).into_iter().flatten())
        .map(|(name, _)| name.clone())
        .collect();
    let missing: Vec<&String> = named.iter().filter(|n| !listed.contains(*n) && !arguments.contains(*n)).collect();
    assert!(named.iter().filter(|n| listed.contains(*n)).count() >= 3, "{named:?}");
    assert!(missing.is_empty(), "docs/mcp.md names tools that tools/list does not: {missing:?}");
    client.cancel().await.unwrap();
    daemon.stop().await;
}

#[test]
fn names_in_comments_do_not_count() {
    let named = named_tools("use `agent_register`, then `task_claim`.\n<!-- TODO: `workflow_get` -->\n`clutch mcp`");
    assert_eq!(named.into_iter().collect::<Vec<_>>(), ["agent_register", "task_claim"]);
}
