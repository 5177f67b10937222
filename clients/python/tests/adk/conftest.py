"""The A2A interop tests: frameworks that speak A2A (Google ADK, Microsoft Agent Framework) joining
the real daemon through its A2A face, both ways. Each test has a daemon of its own whose outbound
guard lets it reach loopback, where the frameworks' A2A servers listen."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from daemon import Daemon  # noqa: E402


def pytest_configure(config):
    # ADK marks all of its A2A code experimental and says so on every call.
    config.addinivalue_line("filterwarnings", r"ignore:\[EXPERIMENTAL\]:UserWarning")


@pytest.fixture
def hub():
    with Daemon(env={"CLUTCH_OUTBOUND_ALLOW_LOOPBACK": "true"}) as d:
        yield d
