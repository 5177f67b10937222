"""A task's outcome, waited for on the live stream: what `AsyncClient.run_task` and `Task.delegate`
share. It imports neither the client nor the agent helper, so both can import it."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Protocol

from .errors import TaskFailed

_ENDS = ("task.result", "task.error", "task.timeout", "task.cancel")


class _Client(Protocol):
    """What `wait_for_end` asks of its client: `AsyncClient`'s live stream and task view."""

    def stream(self, *, task_id: str, after: int) -> AsyncIterator[dict]: ...

    def task(self, task_id: str) -> Any: ...


def _failure(event: dict) -> TaskFailed:
    payload = event.get("payload") or {}
    if event["type"] == "task.timeout":
        return TaskFailed("TIMEOUT", payload.get("message", "the task timed out"), retryable=True)
    if event["type"] == "task.cancel":
        return TaskFailed("CANCELLED", payload.get("reason", "the task was cancelled"))
    return TaskFailed(payload.get("code", "TASK_FAILED"), payload.get("message", ""),
                      retryable=bool(payload.get("retryable", False)), details=payload.get("details"))


async def wait_for_end(client: _Client, request: dict, *, after: int, timeout: float | None) -> dict:
    """Follows `request`'s task from `after` (a seq before it was sent) to its end: the `task.result`
    payload, or `TaskFailed`. Only the ends its assignee (or the daemon) sent count."""
    async def follow() -> dict:
        async for event in client.stream(task_id=request["task_id"], after=after):
            if event["type"] not in _ENDS or event["id"] == request["id"]:
                continue
            if event["type"] == "task.result":
                return event.get("payload") or {}
            if event["type"] == "task.error" and (event.get("payload") or {}).get("retryable"):
                # The daemon may route it again (up to engine.max_routings): wait on unless it ended.
                state = (await client.task(request["task_id"]))["state"]
                if state not in ("failed", "cancelled", "timed_out", "completed"):
                    continue
            raise _failure(event)
        raise AssertionError("the stream never ends")

    try:
        return await asyncio.wait_for(follow(), timeout)
    except asyncio.TimeoutError:
        raise TaskFailed("TIMEOUT", f"no end of task {request['task_id']} within {timeout} s",
                         retryable=True) from None
