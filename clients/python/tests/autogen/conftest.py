"""The AutoGen and Agent Framework adapters' tests: one real daemon for the module, scripted model clients
(AutoGen's ReplayChatCompletionClient, a BaseChatClient subclass for the Agent Framework), and the log
read back over HTTP."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from daemon import Daemon, thread_events  # noqa: E402,F401  (the tests import thread_events from here)

from clutch import AsyncClient, TaskFailed  # noqa: E402
from clutch.ids import new_id  # noqa: E402


@pytest.fixture(scope="module")
def daemon():
    with Daemon() as d:
        yield d


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


async def run_task(url: str, agent, requires: list[str], goal: str, *, timeout: float = 30):
    """Serves `agent` while one routed task runs: (its ids, its result payload or TaskFailed, the task as
    GET /v1/tasks/{id} shows it)."""
    ids = {"task_id": new_id("task"), "thread_id": new_id("thr"), "run_id": new_id("run")}
    async with AsyncClient(url) as client, agent.running():
        try:
            result = await client.run_task(requires=requires, goal=goal, sender="user:ada", timeout=timeout, **ids)
        except TaskFailed as e:
            result = e
        task = await client.task(ids["task_id"])
    return ids, result, task


async def cancel(client: AsyncClient, request: dict, agent_id: str) -> None:
    """The requester's task.cancel (README "The state machine": only the requester or a user may)."""
    await client.send({"run_id": request["run_id"], "thread_id": request["thread_id"],
                       "task_id": request["task_id"], "from": {"agent_id": "user:ada"},
                       "to": [{"agent_id": agent_id}], "type": "task.cancel",
                       "payload": {"reason": "no longer needed"}})
