//! `clutch keys generate`: a new ed25519 key pair for an agent to sign its messages with. The secret
//! goes to stdout, the `org.yaml` entry with the public key to stderr (or both as JSON on stdout).

use std::io::Write;

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Generate an ed25519 key pair for signing messages: the secret key (base64url) on stdout, the
    /// `org.yaml` entry with the public key on stderr.
    #[command(after_help = EXAMPLES)]
    Generate(KeysGenerateArgs),
}

#[derive(Debug, Args)]
pub struct KeysGenerateArgs {
    /// The agent the key is for, `agent:NAME` (used in the `org.yaml` entry).
    #[arg(long, value_name = "AGENT", value_parser = agent_id)]
    pub agent: Option<String>,
    /// The key id the agent will name in `security.auth.kid` [default: `key-` and the start of the
    /// public key].
    #[arg(long, value_name = "KID", value_parser = kid)]
    pub kid: Option<String>,
    /// Print one JSON object `{agent_id, kid, public_key, secret_key}` on stdout instead.
    #[arg(long)]
    pub json: bool,
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch keys generate --agent agent:ken --kid ken-2026 > ken.key
  clutch keys generate --json

  The secret key goes to stdout (keep it with the agent); the lines to paste under
  `agents:` in org.yaml, with the public key, go to stderr.";

pub fn generate(args: KeysGenerateArgs) -> anyhow::Result<()> {
    let secret = clutch_proto::sign::generate();
    let public = secret.public_key().to_string();
    let kid = args.kid.unwrap_or_else(|| format!("key-{}", &public[..8]));
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let out = serde_json::json!({
            "agent_id": args.agent,
            "kid": kid,
            "public_key": public,
            "secret_key": secret.to_base64url(),
        });
        writeln!(stdout, "{out}")?;
    } else {
        writeln!(stdout, "{}", secret.to_base64url())?;
        let agent = args.agent.as_deref().unwrap_or("agent:NAME");
        eprintln!(
            "# The secret key is on stdout: keep it with the agent, out of any config. In org.yaml:\n\
             agents:\n  {agent}:\n    keys:\n      - {{kid: {}, public_key: {public}}}",
            yaml_scalar(&kid)
        );
    }
    stdout.flush()?;
    Ok(())
}

/// `kid` as a YAML flow scalar: plain when that reads back the same, else double-quoted (JSON string
/// syntax is valid YAML).
fn yaml_scalar(s: &str) -> String {
    let plain = s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && !matches!(s, "true" | "false" | "null" | "yes" | "no" | "on" | "off")
        && s.parse::<f64>().is_err();
    if plain { s.to_owned() } else { serde_json::Value::from(s).to_string() }
}

fn agent_id(s: &str) -> Result<String, String> {
    match s.strip_prefix("agent:") {
        Some(name) => clutch_proto::id::check_name(name).map(|()| s.to_owned()),
        None => Err("must look like `agent:NAME`".into()),
    }
}

fn kid(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().count() > 128 || s.chars().any(char::is_control) {
        return Err("must be 1 to 128 characters without control characters".into());
    }
    Ok(s.to_owned())
}
