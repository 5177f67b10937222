//! `clutch config dump` and the config layers: clutch.toml < CLUTCH_* < flags, and precise errors.

use crate::support::{clutch, run};

fn dump(dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> crate::support::Output {
    let mut cmd = clutch();
    cmd.current_dir(dir).args(["config", "dump"]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(cmd, "")
}

#[test]
fn flags_beat_env_beats_file_beats_defaults() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("clutch.toml"),
        "listen = \"127.0.0.1:7801\"\ndata_dir = \"from-file\"\n\n[limits]\nbody_bytes = 1000\n\n[log_service]\nqueue = 10\n",
    )
    .unwrap();
    let out = dump(
        dir.path(),
        &[("CLUTCH_LISTEN", "127.0.0.1:7802"), ("CLUTCH_DATA_DIR", "from-env"), ("CLUTCH_LIMITS_BODY_BYTES", "2000")],
        &["--listen", "127.0.0.1:7803"],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let config: toml::Table = toml::from_str(&out.stdout).unwrap_or_else(|e| panic!("TOML on stdout: {e}\n{out:?}"));
    assert_eq!(config["listen"].as_str(), Some("127.0.0.1:7803"), "flag wins: {out:?}");
    assert_eq!(config["data_dir"].as_str(), Some("from-env"), "env beats file: {out:?}");
    assert_eq!(config["limits"]["body_bytes"].as_integer(), Some(2000), "{out:?}");
    assert_eq!(config["log_service"]["queue"].as_integer(), Some(10), "file beats default: {out:?}");
    assert_eq!(config["log_service"]["batch_max"].as_integer(), Some(1024), "default: {out:?}");
    assert_eq!(config["stream"]["keepalive"].as_str(), Some("15s"), "default: {out:?}");

    // An explicit --config file, and a default config with nothing at all.
    let other = dir.path().join("other.toml");
    std::fs::write(&other, "[stream]\nkeepalive = \"3s\"\n").unwrap();
    let out = dump(dir.path(), &[], &["--config", other.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let config: toml::Table = toml::from_str(&out.stdout).unwrap();
    assert_eq!(config["stream"]["keepalive"].as_str(), Some("3s"));
    assert_eq!(config["listen"].as_str(), Some("127.0.0.1:7700"), "not ./clutch.toml as well: {out:?}");
}

#[test]
fn bad_config_is_a_precise_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("clutch.toml"), "[limits]\nbody_byte = 1\n").unwrap();
    let out = dump(dir.path(), &[], &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("body_byte") && out.stderr.contains("clutch.toml"), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");

    // `serve` validates the same way, before opening anything.
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("body_byte"), "{out:?}");

    let empty = tempfile::tempdir().unwrap();
    let out = dump(empty.path(), &[("CLUTCH_LOG_SERVICE_QUEUE", "lots")], &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("CLUTCH_LOG_SERVICE_QUEUE"), "{out:?}");

    let out = dump(empty.path(), &[], &["--db", "mysql://localhost/x"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("unsupported scheme `mysql`"), "{out:?}");

    let out = dump(empty.path(), &[], &["--config", "missing.toml"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("missing.toml"), "{out:?}");
}
