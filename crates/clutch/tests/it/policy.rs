//! The policy files through the binary: `clutch config check`, `serve --config-dir` refusing a bad
//! policy, and `clutch keys generate` whose output goes straight into `org.yaml` and signs messages the
//! configured key verifies.

use std::path::{Path, PathBuf};

use clutch_core::config::Policy;
use clutch_proto::id::{self, Kind};
use clutch_proto::sign::{self, SigningKey};
use serde_json::{Value, json};

use crate::support::{Daemon, Output, clutch, run};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config")
}

fn check(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = clutch();
    cmd.current_dir(cwd).args(["config", "check"]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(cmd, "")
}

#[test]
fn config_check_summarizes_a_good_policy() {
    let cwd = tempfile::tempdir().unwrap();
    let dir = examples();
    let out = check(cwd.path(), &[dir.to_str().unwrap()], &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{}: 2 roles, 2 agents (1 must sign), 4 tokens", dir.join("org.yaml").display()),
            format!(
                "{}: 1 workflow, 3 steps, 1 payload schema of its own (6 in all)",
                dir.join("workflows.yaml").display()
            ),
        ],
        "{out:?}"
    );

    // No files: both absent, and that is fine.
    let out = check(cwd.path(), &["."], &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stderr,
        "./org.yaml: absent (no roles, agents or tokens)\n./workflows.yaml: absent (no workflows; the 5 built-in payload schemas)\n"
    );

    // Without DIR, the directory `serve` would use: config_dir from the environment (or clutch.toml).
    let out = check(cwd.path(), &[], &[("CLUTCH_CONFIG_DIR", dir.to_str().unwrap())]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("2 roles, 2 agents"), "{out:?}");
    std::fs::write(cwd.path().join("clutch.toml"), format!("config_dir = {:?}\n", dir.to_str().unwrap())).unwrap();
    let out = check(cwd.path(), &[], &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("1 workflow, 3 steps"), "{out:?}");
}

#[test]
fn config_check_lists_every_error_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("org.yaml"),
        "agents:\n  agent:ken:\n    role: researcher\n    keys: [{kid: k, public_key: abc}]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("workflows.yaml"), "workflows:\n  - workflow: w\n    stepz: []\n").unwrap();
    let out = check(dir.path(), &["."], &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(
        out.stderr,
        "clutch: 3 errors in the policy files in .:\n\
         ./org.yaml:3:11: agents.agent:ken.role: unknown role `researcher` (no roles are defined)\n\
         ./org.yaml:4:33: agents.agent:ken.keys[0].public_key: not 32 bytes of base64url (it decodes to 2 bytes)\n\
         ./workflows.yaml:3:5: workflows[0].stepz: unknown field `stepz`, expected one of workflow, description, steps\n"
    );

    // Nothing to check at all is said, not silently passed.
    let empty = tempfile::tempdir().unwrap();
    let out = check(empty.path(), &[], &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("nothing to check: give DIR"), "{out:?}");
    let out = check(empty.path(), &["missing"], &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        "clutch: 1 error in the policy files in missing:\nmissing: does not exist (expected a directory of YAML files)\n"
    );
}

#[test]
fn serve_refuses_to_start_with_a_bad_policy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policy")).unwrap();
    std::fs::write(dir.path().join("policy/org.yaml"), "signatures: {require: maybe}\n").unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0", "--config-dir", "policy"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("policy/org.yaml:1:23: signatures.require: must be none or all, not `maybe`"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("listening"), "{out:?}");
    assert!(!dir.path().join(".clutch").exists(), "nothing was opened: {out:?}");

    // With the example policy it starts.
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]).env("CLUTCH_CONFIG_DIR", examples());
    let daemon = Daemon::spawn(cmd);
    let (status, stderr) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("read policy files"), "{stderr}");
}

#[test]
fn generated_keys_go_into_org_yaml_and_sign_messages() {
    let mut cmd = clutch();
    cmd.args(["keys", "generate", "--agent", "agent:ken", "--kid", "ken-2026"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let secret: SigningKey = out.stdout.trim_end().parse().unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(out.stdout.lines().count(), 1, "{out:?}");
    let public = secret.public_key().to_string();
    assert!(out.stderr.contains(&format!("      - {{kid: ken-2026, public_key: {public}}}")), "{out:?}");
    assert!(!out.stderr.contains(out.stdout.trim_end()), "the secret stays off stderr: {out:?}");

    // The lines printed on stderr, pasted into org.yaml, make a policy that checks and knows the key.
    let dir = tempfile::tempdir().unwrap();
    let snippet: String = out.stderr.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("org.yaml"), format!("{snippet}signatures: {{require: all}}\n")).unwrap();
    let policy = Policy::load(dir.path()).unwrap_or_else(|e| panic!("{e}\n{snippet}"));
    let key = policy.key("agent:ken", "ken-2026").unwrap();

    // A message signed with the secret verifies with the configured key, and is refused when changed.
    let mut msg = json!({
        "v": "clutch/0.1",
        "id": id::generate(Kind::Message),
        "ts": "2026-02-01T13:20:11.123Z",
        "thread_id": id::generate(Kind::Thread),
        "run_id": id::generate(Kind::Run),
        "task_id": id::generate(Kind::Task),
        "from": {"agent_id": "agent:ken"},
        "to": [],
        "type": "chat.message",
        "payload": {"text": "hello"},
    });
    sign::sign(&mut msg, "ken-2026", &secret).unwrap();
    assert!(policy.requires_signature("agent:ken"));
    assert_eq!(sign::kid(&msg), Ok("ken-2026"));
    sign::verify(&msg, key).unwrap();
    msg["payload"]["text"] = Value::from("goodbye");
    assert!(sign::verify(&msg, key).is_err());

    // The JSON form, and a default kid.
    let mut cmd = clutch();
    cmd.args(["keys", "generate", "--json"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let secret: SigningKey = v["secret_key"].as_str().unwrap().parse().unwrap();
    let public = secret.public_key().to_string();
    assert_eq!(v["public_key"], public.as_str());
    assert_eq!(v["kid"], format!("key-{}", &public[..8]));
    assert_eq!(v["agent_id"], Value::Null);
    assert!(out.stderr.is_empty(), "{out:?}");

    // Bad arguments are usage errors.
    let mut cmd = clutch();
    cmd.args(["keys", "generate", "--agent", "ken"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("must look like `agent:NAME`"), "{out:?}");
    assert!(out.stdout.is_empty(), "no key printed: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_from_org_yaml_guard_the_api_and_allow_a_non_loopback_bind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policy")).unwrap();
    std::fs::write(
        dir.path().join("policy/org.yaml"),
        "tokens:\n  - {name: ops, role: admin, token: ops-secret}\n  - {name: dash, role: observer, token: dash-secret}\n  \
         - {name: ken, role: agent, agent_id: agent:ken, token: ken-secret}\n",
    )
    .unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "0.0.0.0:0", "--config-dir", "policy"]);
    let daemon = Daemon::spawn(cmd);
    let url = daemon.url.replace("0.0.0.0", "127.0.0.1");
    let http = reqwest::Client::new();
    let message = crate::support::message(&id::generate(Kind::Run), "hello");
    let r = http.post(format!("{url}/v1/messages")).json(&message).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http.post(format!("{url}/v1/messages")).bearer_auth("dash-secret").json(&message).send().await.unwrap();
    assert_eq!(r.status(), 403);
    // Who may call a route is decided before its body is read: a malformed body tells a caller
    // without the right nothing.
    for (token, body, field) in [
        ("dash-secret", "{not json", None),
        ("dash-secret", r#"{"from": "nobody", "bogus": 1}"#, None),
        ("ken-secret", r#"{"from": {"agent_id": "agent:eve"}, "bogus": 1}"#, Some("from.agent_id")),
    ] {
        let r = http
            .post(format!("{url}/v1/messages"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{token}: {body}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!((answer["error"]["code"].as_str(), answer["error"]["field"].as_str()), (Some("FORBIDDEN"), field));
    }
    let r = http
        .post(format!("{url}/v1/agents"))
        .bearer_auth("ken-secret")
        .json(&json!({"agent_id": "agent:eve", "capabilities": "not a list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http.post(format!("{url}/v1/messages")).bearer_auth("ops-secret").json(&message).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = http.get(format!("{url}/healthz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(body["head_seq"], 1);
    // The CLI carries a token from --token or CLUTCH_TOKEN.
    let mut cmd = clutch();
    cmd.args(["agents", "list", "--url", &url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("UNAUTHORIZED"), "{out:?}");
    let mut cmd = clutch();
    cmd.args(["agents", "list", "--json", "--url", &url]).env("CLUTCH_TOKEN", "dash-secret");
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let (status, stderr) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
}
