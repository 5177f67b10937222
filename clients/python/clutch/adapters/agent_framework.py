"""Microsoft Agent Framework on Clutch: an agent or a workflow served as a Clutch agent.

`serve_agent` builds a fresh agent for each delivered task (the factory) and streams
`agent.run(goal, stream=True)`; `serve_workflow` does the same with a workflow's `run(goal, stream=True)`.
What they do goes into the task's thread: one `chat.message` per message the streamed updates spell out
(speaker = the update's author, else the agent's name or the executor's id), a `task.progress` with the
token usage as it grows, a `tool.call`/`tool.result` pair per function invoked (named `tool:NAME`; the
`ToolEvents` function middleware), and the final response as the `task.result`. The messages it writes
itself (not the accept and the result, which `clutch.Agent` sends) carry `meta.framework`
"agent-framework". An exception in the run becomes a `task.error`
(`AGENT_ERROR`, `WORKFLOW_ERROR`); a `task.cancel` cancels the run.

The only module of the client that imports the Agent Framework (the `agent-framework` extra).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agent_framework import (
    AgentResponse,
    AgentResponseUpdate,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    SupportsAgentRun,
    Workflow,
)
from pydantic import BaseModel

from clutch import Agent, ClutchError, Task, TaskFailed, current_task, tool_name
from clutch.client import DEFAULT_URL

__all__ = ["AgentHandler", "ToolEvents", "WorkflowHandler", "serve_agent", "serve_workflow"]

# Set in a function call's middleware metadata by the first ToolEvents that reports it, so that a second
# one (on the agent and on its run) does not report it again.
_REPORTED = "clutch.tool_call_reported"
# The envelope meta of every message the adapter writes: which framework wrote it.
META = {"framework": "agent-framework"}


def serve_agent(agent_factory: Callable[[], Any], name: str, capabilities: list[str], *,
                url: str = DEFAULT_URL, token: str | None = None, **agent_options: Any) -> Agent:
    """A `clutch.Agent` named `name` that answers each task with a fresh agent from `agent_factory` (no
    arguments; an `agent_framework.Agent` or any `SupportsAgentRun`, or an awaitable of one);
    `agent_options` go to `Agent` (`max_concurrency`, `description`, ...). See `AgentHandler`."""
    return Agent(name, capabilities=capabilities, handler=AgentHandler(agent_factory), url=url, token=token,
                 **agent_options)


def serve_workflow(workflow_factory: Callable[[], Any], name: str, capabilities: list[str], *,
                   url: str = DEFAULT_URL, token: str | None = None, **agent_options: Any) -> Agent:
    """A `clutch.Agent` named `name` that answers each task with a fresh workflow from `workflow_factory`
    (no arguments; a built `Workflow`, or an awaitable of one). See `WorkflowHandler`."""
    return Agent(name, capabilities=capabilities, handler=WorkflowHandler(workflow_factory), url=url, token=token,
                 **agent_options)


class ToolEvents(FunctionMiddleware):
    """Function middleware that records each function an agent invokes in the current Clutch task:
    a `tool.call` before it runs, its `tool.result` (or `tool.error`) after. Outside a task it does
    nothing. `serve_agent` adds it to every run; in a workflow, give it to each agent:
    `Agent(..., middleware=[ToolEvents()])`."""

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        task = current_task()
        if task is None or context.metadata.get(_REPORTED):
            await call_next()
            return
        context.metadata[_REPORTED] = True
        tool = tool_name(context.function.name)
        call_id = await task.tool_call(tool, _arguments(context.arguments), meta=META)
        started = time.monotonic()
        try:
            await call_next()
        except Exception as e:
            await task.tool_result(call_id, tool, f"{type(e).__name__}: {e}", error=True,
                                   duration_ms=int((time.monotonic() - started) * 1000), meta=META)
            raise
        await task.tool_result(call_id, tool, _tool_output(context.result),
                               duration_ms=int((time.monotonic() - started) * 1000), meta=META)


class AgentHandler:
    """Runs a fresh Agent Framework agent for each task: `clutch.Agent(..., handler=AgentHandler(f))`.

    - Input: the task's goal, as `agent.run(goal, stream=True)`; runs that take middleware get `ToolEvents`.
    - Output: the `task.result` is `{"text", "speaker", "messages", "finish_reason"}`: the text of the final
      response's last message, the agent's name, how many messages the response holds (tool calls and
      results included), and why the model stopped.
    """

    def __init__(self, agent_factory: Callable[[], Any]):
        self.agent_factory = agent_factory

    async def __call__(self, task: Task) -> dict:
        try:
            agent: SupportsAgentRun = await _build(self.agent_factory)
            speaker = agent.name or agent.id
            options = {"middleware": [ToolEvents()]} if "middleware" in inspect.signature(agent.run).parameters else {}
            stream = agent.run(task.goal, stream=True, **options)
            updates = _Updates(task)
            async for update in stream:
                await updates.add(update, speaker)
            await updates.flush()
            final: AgentResponse = await stream.get_final_response()
            await updates.usage(speaker, final.usage_details)
        except (TaskFailed, ClutchError, asyncio.CancelledError):  # the daemon's refusals keep their code
            raise
        except Exception as e:
            raise _failure("AGENT_ERROR", e) from e
        last = next((m.text for m in reversed(final.messages) if m.text), "")
        return {"text": last, "speaker": speaker, "messages": len(final.messages),
                "finish_reason": _plain(final.finish_reason)}


class WorkflowHandler:
    """Runs a fresh Agent Framework workflow for each task: `clutch.Agent(..., handler=WorkflowHandler(f))`.

    - Input: the task's goal, as `workflow.run(goal, stream=True)`.
    - What is written: the `output` and `intermediate` events the workflow emits (its builder's
      `output_from` / `intermediate_output_from` choose which executors are seen): streamed agent updates
      as chat messages, any other output as one chat message of its text; each `executor_invoked` as a
      `task.progress`.
    - Output: the `task.result` is `{"text", "speaker", "messages"}`: the last chat message written, who
      said it, and how many chat messages the run wrote.
    - A workflow that stops to ask for outside input (`request_info`) fails the task with `INPUT_REQUIRED`:
      nothing here answers it.
    """

    def __init__(self, workflow_factory: Callable[[], Any]):
        self.workflow_factory = workflow_factory

    async def __call__(self, task: Task) -> dict:
        try:
            workflow: Workflow = await _build(self.workflow_factory)
            stream = workflow.run(task.goal, stream=True)
            updates = _Updates(task)
            async for event in stream:
                await self._report(task, updates, event)
            await updates.flush()
        except (TaskFailed, ClutchError, asyncio.CancelledError):  # the daemon's refusals keep their code
            raise
        except Exception as e:
            raise _failure("WORKFLOW_ERROR", e) from e
        return {"text": updates.last_text, "speaker": updates.last_speaker, "messages": updates.said}

    async def _report(self, task: Task, updates: "_Updates", event: Any) -> None:
        if event.type == "executor_invoked":
            await updates.flush()
            updates.new_run(event.executor_id)
            await task.progress(f"{event.executor_id}: started", step=event.executor_id, meta=META)
        elif event.type == "request_info":
            raise TaskFailed("INPUT_REQUIRED", f"the workflow asks for input ({type(event.data).__name__}) from "
                                               f"{event.source_executor_id}, which a served workflow cannot answer")
        elif event.type in ("output", "intermediate"):
            data = event.data
            if isinstance(data, AgentResponseUpdate):
                await updates.add(data, event.executor_id)
            elif data is not None:  # an executor's own output; an AgentResponse's str() is its text
                await updates.flush()
                await updates.say(event.executor_id, str(data))


class _Updates:
    """Streamed updates into messages: text is gathered into one `chat.message` per author and message
    (a new author or message id, a function call or result, or the end closes it), and usage contents,
    read as running totals of a run (as the function-invocation layer of every shipped client writes
    them), become a `task.progress` with what they added."""

    def __init__(self, task: Task):
        self.task = task
        self.key: tuple | None = None
        self.text: list[str] = []
        self.last_text = ""
        self.last_speaker: str | None = None
        self.said = 0
        self.reported: dict[str, tuple[int, int]] = {}  # run source → (input, output) tokens reported

    def new_run(self, source: str) -> None:
        """`source` (an executor) starts another run: its usage totals start again from zero."""
        self.reported.pop(source, None)

    async def add(self, update: AgentResponseUpdate, source: str) -> None:
        """One update of the run of `source` (an agent's name, an executor's id)."""
        speaker = update.author_name or source
        for content in update.contents:
            if content.type == "text" and content.text:
                key = (speaker, update.message_id)
                if key != self.key:
                    await self.flush()
                    self.key = key
                self.text.append(content.text)
            elif content.type == "usage" and content.usage_details:
                await self.usage(source, content.usage_details)
            elif content.type in ("function_call", "function_result"):
                await self.flush()

    async def flush(self) -> None:
        if self.key is not None and "".join(self.text).strip():
            await self.say(self.key[0], "".join(self.text))
        self.key, self.text = None, []

    async def say(self, speaker: str, text: str) -> None:
        await self.task.chat(text, speaker=speaker, meta=META)
        self.last_text, self.last_speaker = text, speaker
        self.said += 1

    async def usage(self, source: str, totals: dict | None) -> None:
        """The run's usage so far (a streamed snapshot, or its final response's): what it adds to what
        was already reported."""
        if not totals:
            return
        seen = (totals.get("input_token_count") or 0, totals.get("output_token_count") or 0)
        before = self.reported.get(source, (0, 0))
        added = (max(0, seen[0] - before[0]), max(0, seen[1] - before[1]))
        self.reported[source] = (max(seen[0], before[0]), max(seen[1], before[1]))
        if added != (0, 0):
            await self.task.progress(f"{source}: model usage", step="model", agent=source,
                                     usage={"input_tokens": added[0], "output_tokens": added[1]}, meta=META)


async def _build(factory: Callable[[], Any]) -> Any:
    built = factory()
    return await built if inspect.isawaitable(built) else built


def _arguments(arguments: Any) -> dict:
    if isinstance(arguments, BaseModel):
        return arguments.model_dump(mode="json")
    return dict(arguments or {})


def _tool_output(result: Any) -> Any:
    """A function's result as the middleware sees it (Content items): text when it is all text, else
    the items as JSON."""
    if isinstance(result, list) and all(isinstance(c, Content) for c in result):
        if all(c.type == "text" for c in result):
            return "\n".join(c.text or "" for c in result)
        return {"contents": [c.to_dict() for c in result]}
    return str(result)


def _plain(value: Any) -> Any:
    """A finish reason (a str or a str enum) as plain JSON."""
    return None if value is None else str(getattr(value, "value", value))


def _failure(code: str, e: Exception) -> TaskFailed:
    return TaskFailed(code, f"{type(e).__name__}: {e}"[:2000], details={"exception": type(e).__name__})
