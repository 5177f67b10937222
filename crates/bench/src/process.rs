//! Server processes the drivers measure from outside (`clutch serve`, `redis-server`), so that
//! their CPU is read from `/proc` apart from the load driver's own.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;

/// A server process being measured: `clutch serve` or `redis-server`.
pub(super) struct Server {
    child: tokio::process::Child,
    pid: u32,
    /// `host:port`.
    pub(super) addr: String,
}

impl Server {
    pub(super) async fn clutch(dir: &std::path::Path) -> anyhow::Result<Server> {
        Server::clutch_with(dir, &[]).await
    }

    /// `clutch serve` on `dir` with these environment variables (its configuration) set.
    pub(super) async fn clutch_with(dir: &std::path::Path, env: &[(&str, String)]) -> anyhow::Result<Server> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env_remove("CLUTCH_TOKEN")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run `clutch serve`")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let addr = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("clutch: listening on http://") {
                    return Ok::<_, std::io::Error>(Some(url.trim().to_owned()));
                }
            }
            Ok(None)
        })
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
        .context("the daemon did not become ready")?;
        // Keep draining its stderr so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let pid = child.id().context("the daemon has no pid")?;
        Ok(Server { child, pid, addr })
    }

    pub(super) async fn redis(binary: &str) -> anyhow::Result<Server> {
        Server::redis_with(binary, &["--appendonly", "no"]).await
    }

    /// `redis-server` writing an append-only file in `dir` and fsyncing it before each reply
    /// (`appendfsync always`): Redis as durable as a Clutch append.
    pub(super) async fn redis_durable(binary: &str, dir: &std::path::Path) -> anyhow::Result<Server> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let dir = dir.to_str().context("the directory is not UTF-8")?;
        Server::redis_with(binary, &["--appendonly", "yes", "--appendfsync", "always", "--dir", dir]).await
    }

    async fn redis_with(binary: &str, args: &[&str]) -> anyhow::Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = tokio::process::Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {binary:?}"))?;
        let pid = child.id().context("redis-server has no pid")?;
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&addr).await.is_err() {
            if Instant::now() > deadline {
                bail!("redis-server did not listen on {addr}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Server { child, pid, addr })
    }

    pub(super) async fn stop(mut self) {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }

    /// Its resident memory, in bytes, from `/proc/PID/status`.
    pub(super) fn rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }

    /// Pulls the plug: SIGKILL, nothing saved on the way out.
    pub(super) async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    pub(super) fn cpu(&self) -> Option<Duration> {
        super::process_cpu_of(&format!("/proc/{}/stat", self.pid))
    }

    /// The CPU time it used since it had used `from`.
    pub(super) fn cpu_since(&self, from: Option<Duration>) -> Option<Duration> {
        Some(self.cpu()?.saturating_sub(from?))
    }
}
