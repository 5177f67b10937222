"""The real daemon for the Python tests: `clutch serve` on a free port, its data in a directory of its own.

Every test directory (`tests/core`, `tests/langgraph`, ...) imports this module (its conftest puts
`tests/` on `sys.path`). The binary is `$CLUTCH_BIN`, else the workspace's `target/debug/clutch`
(built by `cargo build -p clutch`; scripts/test-python builds it first).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def binary() -> str:
    path = os.path.abspath(os.environ.get("CLUTCH_BIN") or str(REPO / "target" / "debug" / "clutch"))
    if not os.path.isfile(path):
        raise RuntimeError(f"no clutch binary at {path}: run `cargo build -p clutch` or set CLUTCH_BIN")
    return path


def pg_url() -> str | None:
    """The PostgreSQL server to test against, as the Rust tests read it: `$CLUTCH_TEST_PG_URL`."""
    url = os.environ.get("CLUTCH_TEST_PG_URL") or None
    if url is None and os.environ.get("CI"):
        raise RuntimeError("CLUTCH_TEST_PG_URL must be set in CI")
    return url


class FreshDatabase:
    """A PostgreSQL database of the test's own, dropped by `drop()`; made with `psql`."""

    def __init__(self, admin_url: str):
        self.admin_url = admin_url
        self.name = f"clutch_py_{os.getpid()}_{uuid.uuid4().hex[:12]}"
        self._psql(f"CREATE DATABASE {self.name}")
        self.url = re.sub(r"/[^/?]*(\?|$)", f"/{self.name}\\1", admin_url.split("://", 1)[1], count=1)
        self.url = admin_url.split("://", 1)[0] + "://" + self.url

    def _psql(self, sql: str) -> None:
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", self.admin_url, "-c", sql], check=True,
                       stdout=subprocess.DEVNULL)

    def drop(self) -> None:
        self._psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


class Daemon:
    """`clutch serve` on 127.0.0.1, a free port; `url` once it listens. `kill9()` and `start()` again keep
    its data (and its port, so clients reconnect to the same address)."""

    def __init__(self, db: str | None = None, config_dir: str | None = None, env: dict | None = None,
                 args: list[str] | None = None):
        self.dir = tempfile.mkdtemp(prefix="clutch-py-")
        self.db = db
        self.config_dir = config_dir
        self.env = env or {}
        self.args = args or []
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self.listen = "127.0.0.1:0"
        self.log_path = os.path.join(self.dir, "daemon.log")

    def start(self) -> "Daemon":
        cmd = [binary(), "serve", "--listen", self.listen, "--data-dir", os.path.join(self.dir, "data")]
        if self.db:
            cmd += ["--db", self.db]
        if self.config_dir:
            cmd += ["--config-dir", self.config_dir]
        cmd += self.args
        env = {k: v for k, v in os.environ.items() if k not in ("CLUTCH_URL", "CLUTCH_TOKEN")}
        env.update(self.env)
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=self.dir)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"clutch serve exited with {self.proc.returncode}:\n{self.log()}")
            found = re.findall(r"clutch: listening on (http://\S+)", self.log())
            if found:
                self.url = found[-1]
                self.listen = self.url.removeprefix("http://")
                return self
            time.sleep(0.05)
        raise RuntimeError(f"clutch serve did not start in 60 s:\n{self.log()}")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()

    def __enter__(self) -> "Daemon":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def thread_events(url: str, thread_id: str) -> list[dict]:
    """Every event of a thread, in seq order, read back with the client's own paging."""
    import clutch

    with clutch.Client(url) as client:
        return list(client.pages(client.events, thread_id=thread_id))
