"""The examples of docs/frameworks/openai-agents.md run as written (the daemon's address aside) and do
what the page says."""

import os
import re
import subprocess
import sys
from pathlib import Path

from clutch import Client
from daemon import REPO, Daemon

PAGE = REPO / "docs" / "frameworks" / "openai-agents.md"
URL = "http://127.0.0.1:7700"


def _examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    return [b for b in blocks if URL in b]


def _run(code: str, url: str, tmp_path: Path) -> str:
    script = tmp_path / "example.py"
    script.write_text(code.replace(URL, url))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_pages_examples_run_as_written(tmp_path):
    served, traced = _examples()
    with Daemon() as d:
        assert _run(served, d.url, tmp_path).strip() == "{'text': 'Sunny in Paris.'}"
        assert _run(traced, d.url, tmp_path).strip() == "Bonjour."
        with Client(d.url) as client:
            runs = client.runs(agent="agent:openai-agents-traces")["items"]
    assert [(r["title"], r["state"]) for r in runs] == [("Agent workflow", "completed")]
