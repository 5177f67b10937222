//! `clutch keys generate`: a new ed25519 key pair for an agent to sign its messages with. The secret
//! goes to stdout, the `org.yaml` entry with the public key to stderr (or both as JSON on stdout).

use std::io::Write;

use crate::cli::KeysGenerateArgs;

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
