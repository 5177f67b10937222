import sys
from pathlib import Path

import pytest
from agents import set_trace_processors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from daemon import Daemon  # noqa: E402


@pytest.fixture(scope="module")
def daemon():
    with Daemon() as d:
        yield d


@pytest.fixture(autouse=True)
def no_trace_upload():
    # No test may reach OpenAI's trace uploader; a test that traces sets its own processors.
    set_trace_processors([])
    yield
    set_trace_processors([])
