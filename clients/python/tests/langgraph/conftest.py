"""The LangGraph adapter's tests: `tests/` on sys.path (for `daemon`), one real daemon per module."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from daemon import Daemon  # noqa: E402


@pytest.fixture(scope="module")
def daemon():
    with Daemon() as d:
        yield d
