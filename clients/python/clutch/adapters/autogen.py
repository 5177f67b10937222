"""AutoGen on Clutch: an agentchat team served as a Clutch agent.

`serve_team` builds a fresh team for each delivered task (the factory) and runs it with
`team.run_stream(task=goal)`, writing what the team does into the task's thread: a `chat.message` per
chat message of a member (speaker = the member's `source`), a `tool.call`/`tool.result` pair per tool
the members run (named `tool:NAME`), a `task.progress` carrying each model call's token usage
(`models_usage`), and the final `TaskResult` as the `task.result`. The messages it writes itself (not
the accept and the result, which `clutch.Agent` sends) carry `meta.framework` "autogen". A `task.cancel` cancels the team's `CancellationToken`; an exception inside the team
becomes a `task.error` (`TEAM_ERROR`).

The only module of the client that imports AutoGen (the `autogen` extra).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from autogen_agentchat.base import TaskResult, Team
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    ModelClientStreamingChunkEvent,
    StructuredMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)
from autogen_core import CancellationToken

from clutch import Agent, ClutchError, Task, TaskFailed, tool_name
from clutch.client import DEFAULT_URL

__all__ = ["TeamHandler", "serve_team"]

# Longest text of a progress line: enough to read what an event was, not a transcript.
PROGRESS_TEXT_CHARS = 200
# The envelope meta of every message the adapter writes: which framework wrote it.
META = {"framework": "autogen"}

TeamFactory = Callable[[], Team | Awaitable[Team]]


def serve_team(team_factory: TeamFactory, name: str, capabilities: list[str], *,
               url: str = DEFAULT_URL, token: str | None = None, result_from: str | None = None,
               cancel_grace: float = 5.0, **agent_options: Any) -> Agent:
    """A `clutch.Agent` named `name` that answers each task with a fresh team from `team_factory` (a
    function of no arguments returning an agentchat team, e.g. a `RoundRobinGroupChat`, or an awaitable
    of one); `agent_options` go to `Agent` (`max_concurrency`, `description`, ...). See `TeamHandler`."""
    handler = TeamHandler(team_factory, result_from=result_from, cancel_grace=cancel_grace)
    return Agent(name, capabilities=capabilities, handler=handler, url=url, token=token, **agent_options)


class TeamHandler:
    """Runs a fresh AutoGen team for each task: `clutch.Agent(..., handler=TeamHandler(factory))`.

    - Input: the task's goal, as `run_stream(task=goal)`; the task's echo is not written back (the thread
      has the `task.request`).
    - Output: the `task.result` is `{"text", "speaker", "stop_reason", "messages"}`: the last chat
      message's text and source (with `result_from`, that member's last message: a writer's draft
      rather than the critic's "APPROVE"), why the team stopped, and the length of its transcript.
    - Usage is reported in `task.progress` as each message arrives, so it is not repeated in the result
      (the daemon sums both).
    - `cancel_grace`: seconds a cancelled team gets to stop after its token is cancelled; past that its
      run is abandoned (AutoGen 0.7.5 never stops a team cancelled while a tool runs).
    """

    def __init__(self, team_factory: TeamFactory, *, result_from: str | None = None, cancel_grace: float = 5.0):
        self.team_factory = team_factory
        self.result_from = result_from
        self.cancel_grace = cancel_grace

    async def __call__(self, task: Task) -> dict:
        token = CancellationToken()
        runner = asyncio.ensure_future(self._run(task, token))
        try:
            # Shielded: the handler's cancellation (a task.cancel) must reach the team through its token,
            # then the runner gets its grace, instead of being torn down mid-send.
            result = await asyncio.shield(runner)
        except asyncio.CancelledError:
            token.cancel()
            await self._wind_down(runner)
            raise
        return result

    async def _run(self, task: Task, token: CancellationToken) -> dict:
        run = _Run(task)
        try:
            team = self.team_factory()
            if inspect.isawaitable(team):
                team = await team
            result: TaskResult | None = None
            # Once the task is cancelled, what the team still streams is dropped by `Task` (it sends
            # nothing for a cancelled task).
            async for item in team.run_stream(task=task.goal, cancellation_token=token, output_task_messages=False):
                if isinstance(item, TaskResult):
                    result = item
                else:
                    await run.report(item)
        except (TaskFailed, ClutchError, asyncio.CancelledError):  # the daemon's refusals keep their code
            raise
        except Exception as e:
            raise _team_error(e) from e
        if result is None:
            raise TaskFailed("TEAM_ERROR", "the team's stream ended without a TaskResult")
        return _result(result, self.result_from)

    async def _wind_down(self, runner: asyncio.Future) -> None:
        _, pending = await asyncio.wait({runner}, timeout=self.cancel_grace)
        if pending:
            runner.cancel()
            await asyncio.wait({runner}, timeout=1.0)
        if runner.done() and not runner.cancelled():
            runner.exception()  # retrieved, so that an error after the cancel is not logged as unhandled


class _Run:
    """One team run's writer: its stream's items as messages in the task's thread."""

    def __init__(self, task: Task):
        self.task = task
        # AutoGen's FunctionCall id → (the tool.call's message id, tool name, start time)
        self.calls: dict[str, tuple[str, str, float]] = {}

    async def report(self, item: BaseAgentEvent | BaseChatMessage) -> None:
        if isinstance(item, ModelClientStreamingChunkEvent):
            return  # the whole message follows as a chat message
        if item.models_usage is not None:
            usage = item.models_usage
            await self.task.progress(f"{item.source}: model call", step="model", agent=item.source,
                                     usage={"input_tokens": usage.prompt_tokens,
                                            "output_tokens": usage.completion_tokens, "requests": 1}, meta=META)
        if isinstance(item, ToolCallRequestEvent):
            for call in item.content:
                tool = tool_name(call.name)
                call_id = await self.task.tool_call(tool, _args(call.arguments), agent=item.source, meta=META)
                self.calls[call.id] = (call_id, tool, time.monotonic())
        elif isinstance(item, ToolCallExecutionEvent):
            for done in item.content:
                call_id, tool, started = self.calls.pop(done.call_id, (None, tool_name(done.name), time.monotonic()))
                if call_id is None:  # an execution whose request the stream did not show
                    call_id = await self.task.tool_call(tool, {}, agent=item.source, meta=META)
                await self.task.tool_result(call_id, tool, done.content, error=bool(done.is_error),
                                            duration_ms=int((time.monotonic() - started) * 1000), meta=META)
        elif isinstance(item, BaseChatMessage):
            extra = {"data": item.content.model_dump(mode="json")} if isinstance(item, StructuredMessage) else {}
            await self.task.chat(item.to_text(), speaker=item.source, message_type=item.type, meta=META, **extra)
        else:
            await self.task.progress(_clip(item.to_text()), step=item.type, agent=item.source, meta=META)


def _args(arguments: str) -> dict:
    """A FunctionCall's JSON arguments as an object (a model's malformed JSON is kept as text, under
    `arguments` as the OpenAI Agents adapter keeps it)."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def _result(result: TaskResult, result_from: str | None) -> dict:
    chat = [m for m in result.messages if isinstance(m, BaseChatMessage)
            and (result_from is None or m.source == result_from)]
    last = chat[-1] if chat else None
    return {"text": last.to_text() if last else "", "speaker": last.source if last else None,
            "stop_reason": result.stop_reason, "messages": len(result.messages)}


def _team_error(e: Exception) -> TaskFailed:
    """AutoGen re-raises a member's exception as a RuntimeError whose text is "Type: message" followed by
    the traceback: the first line is the message, the type goes to the details."""
    first = (str(e) or type(e).__name__).strip().split("\n")[0]
    named = re.match(r"([A-Za-z_][\w.]*): ", first) if isinstance(e, RuntimeError) else None
    inner = named.group(1) if named else type(e).__name__
    return TaskFailed("TEAM_ERROR", first[:2000], details={"exception": inner})


def _clip(text: str) -> str:
    return text if len(text) <= PROGRESS_TEXT_CHARS else text[:PROGRESS_TEXT_CHARS - 1] + "…"
