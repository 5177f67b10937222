"""The OpenAI Agents SDK on Clutch: an SDK `Agent` served as a Clutch agent, and the SDK's traces as
envelopes.

`serve_agent` runs the agent once per delivered task (`Runner.run_streamed`, input = the task's goal) and
writes what it does into the task's thread from the SDK's run hooks, which the run loop awaits: each model
response as a `task.progress` with its `usage`, each local tool run as a `tool.call` (in the log before the
tool runs, so one the hub refuses never runs) and its `tool.result`, each handoff as a `task.progress`
naming both agents, the final output as the `task.result`. A tool that needs approval is asked of a person
(`task.ask`). What it writes itself carries `meta.framework` "openai-agents". Every way a run can fail
ends the task with a `task.error` of its own code (see `failure`); a `task.cancel` cancels the streamed
run.

`ClutchTracingProcessor` is a `TracingProcessor` that writes the SDK's traces (agent, model, function,
handoff, guardrail and custom spans) into the Clutch task whose handler runs them, or into a run of
their own (one per trace) outside any. It queues in the SDK's thread and posts batches from one of its
own.

The only module of the client that imports the Agents SDK (the `openai-agents` extra).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Any

import openai
import pydantic
from agents import (
    Agent as SdkAgent,
    AgentsException,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    ModelBehaviorError,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
    UserError,
)
from agents.exceptions import ModelRefusalError, ModelTimeoutError, ToolTimeoutError
from agents.items import ModelResponse
from agents.run_config import DEFAULT_MAX_TURNS
from agents.tool import Tool
from agents.tracing import Span, Trace, TracingProcessor

from clutch import Agent, AsyncClient, Client, ClutchError, Task, TaskFailed, current_task, prepare, tool_name
from clutch.client import DEFAULT_URL
from clutch.ids import new_id

__all__ = ["AgentHandler", "ClutchTracingProcessor", "failure", "flush_processors", "serve_agent"]

log = logging.getLogger("clutch.adapters.openai_agents")

# Longest text of a progress line or an error message: enough to read, not a transcript.
TEXT_CHARS = 2000
# Longest tool output kept in a record; the daemon stores a block over 32 KiB as an artifact anyway.
TOOL_OUTPUT_CHARS = 32_000
# The envelope meta of every message the adapter writes: which framework wrote it.
META = {"framework": "openai-agents"}
# Replies to an approval question that approve the tool call; anything else rejects it.
APPROVALS = {"yes", "y", "approve", "approved", "allow", "ok"}

# How many `group_id`s a processor remembers the thread of (the oldest is forgotten first: a
# conversation that comes back after that many others starts a new thread).
GROUPS_KEPT = 10_000
# How long a task's end waits for the trace records of its run (a daemon that is away delays the end
# anyway; this bounds how long records that will never be sent can hold it).
FLUSH_TIMEOUT = 10.0

Person = str | Callable[[Task], "str | None"] | None

# Set while `AgentHandler` runs a task: its hooks already write the model calls, tool calls and handoffs,
# so a `ClutchTracingProcessor` in the same run leaves those spans out instead of writing them twice.
_hooked: contextvars.ContextVar[bool] = contextvars.ContextVar("clutch_openai_agents_hooked", default=False)
# Every live processor, so that a handler can wait for their records before its task ends (after which
# the daemon refuses a task's progress).
_processors: "weakref.WeakSet[ClutchTracingProcessor]" = weakref.WeakSet()


def serve_agent(agent: SdkAgent, name: str, capabilities: list, *, url: str = DEFAULT_URL,
                token: str | None = None, run_config: RunConfig | None = None,
                max_turns: int | None = DEFAULT_MAX_TURNS, context: Callable[[Task], Any] | None = None,
                approver: Person = None, ask_timeout: float | None = None, **agent_options: Any) -> Agent:
    """A `clutch.Agent` named `name` that answers each task by running `agent`; `agent_options` go to
    `Agent` (`max_concurrency`, `description`, ...). See `AgentHandler` for the other arguments."""
    handler = AgentHandler(agent, run_config=run_config, max_turns=max_turns, context=context,
                           approver=approver, ask_timeout=ask_timeout)
    agent_options.setdefault("description", agent.handoff_description)
    return Agent(name, capabilities=capabilities, handler=handler, url=url, token=token, **agent_options)


class AgentHandler:
    """A task handler (for `clutch.Agent(handler=...)`) that runs an Agents SDK agent.

    - Input: the task's goal. `context(task)`, when given, makes the run's context object.
    - `run_config`, `max_turns`: as `Runner.run_streamed` takes them. Unless the config names its own
      `group_id`, the trace is grouped by the task's thread and its metadata names the Clutch run and
      task, so the SDK's traces can be found from Clutch and back.
    - `approver`: who decides on a tool that needs approval: a `user:` id, a function of the task, or
      (None) whoever asked for the task when that is a `user:`. They are asked with `task.ask`; a reply of
      "yes" (or approve, approved, allow, ok, y) approves, any other reply or a failed ask rejects.
    - Output: the final output as the `task.result`: a str as `{"text"}`, a pydantic model, dataclass or
      dict as its fields, anything else JSON-able as `{"output"}`.
    """

    def __init__(self, agent: SdkAgent, *, run_config: RunConfig | None = None,
                 max_turns: int | None = DEFAULT_MAX_TURNS, context: Callable[[Task], Any] | None = None,
                 approver: Person = None, ask_timeout: float | None = None):
        self.agent = agent
        self.run_config = run_config
        self.max_turns = max_turns
        self.context = context
        self.approver = approver
        self.ask_timeout = ask_timeout

    async def __call__(self, task: Task) -> dict:
        hooks = _TaskHooks(task)
        flag = _hooked.set(True)
        # One context for the task: a run resumed after an approval gets the same object back.
        context = self.context(task) if self.context else None
        run_config = _linked(self.run_config, task)
        run_input: Any = task.goal
        try:
            while True:
                result = Runner.run_streamed(self.agent, run_input, context=context, max_turns=self.max_turns,
                                             hooks=hooks, run_config=run_config)
                try:
                    async for _ in result.stream_events():
                        pass
                finally:
                    if not result.is_complete:
                        # The handler was cancelled (a task.cancel) while the run went on: stop it too.
                        result.cancel()
                if result.run_loop_exception is not None:
                    raise result.run_loop_exception
                if not result.interruptions:
                    return _result(result.final_output)
                run_input = await self._decide(task, result)
        except TaskFailed:
            raise
        except Exception as e:
            await hooks.fail_open_calls(e)
            raise failure(e) from e
        finally:
            _hooked.reset(flag)
            await flush_processors()

    async def _decide(self, task: Task, result: Any) -> Any:
        """Asks the approver about each tool call waiting for approval; the run state that resumes the
        run with their decisions."""
        person = self.approver(task) if callable(self.approver) else self.approver
        if person is None:
            requester = await task.requester()
            if not requester.startswith("user:"):
                item = result.interruptions[0]
                raise TaskFailed("TOOL_APPROVAL_REQUIRED",
                                 f"{_question(item)} The task came from {requester}, not a person; pass "
                                 f"approver= to serve_agent", details={"tool": tool_name(item.tool_name)})
            person = requester
        state = result.to_state()
        for item in result.interruptions:
            question = _question(item)
            await task.progress(f"asks {person}: {question}", step="approval", tool=tool_name(item.tool_name),
                                meta=META)
            try:
                reply = await task.ask(person, question, timeout=self.ask_timeout)
                approved = reply.get("approved") is True or \
                    str(reply.get("text", "")).strip().lower().rstrip(".!") in APPROVALS
            except TaskFailed:
                approved = False
            if approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=f"{person} did not approve this call")
            await task.progress(f"{person} {'approved' if approved else 'rejected'} {item.tool_name}",
                                step="approval", tool=tool_name(item.tool_name), approved=approved, meta=META)
        return state


def failure(error: BaseException) -> TaskFailed:
    """The `task.error` for what a run raised: a code per kind of failure, retryable when trying again
    may succeed (timeouts, rate limits, an unreachable or failing model service)."""
    message = _clip(str(error) or type(error).__name__)
    if isinstance(error, TaskFailed):
        return error
    cause = error.__cause__
    if isinstance(error, UserError) and cause is not None and not isinstance(cause, AgentsException):
        # The SDK wraps what a tool, or a hook around it, raised: ours (a refused tool.call, the daemon
        # away) keep their own codes, a tool's own exception is the tool's failure.
        if isinstance(cause, (TaskFailed, ClutchError)):
            return failure(cause)
        return TaskFailed("TOOL_FAILED", message, details={"exception": type(cause).__name__})
    if isinstance(error, MaxTurnsExceeded):
        return TaskFailed("MAX_TURNS_EXCEEDED", message)
    if isinstance(error, (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)):
        side = "INPUT" if isinstance(error, InputGuardrailTripwireTriggered) else "OUTPUT"
        guardrail = error.guardrail_result
        return TaskFailed(f"{side}_GUARDRAIL_TRIPPED", message,
                          details={"guardrail": guardrail.guardrail.get_name(),
                                   "output_info": _jsonable(guardrail.output.output_info)})
    if isinstance(error, (ToolInputGuardrailTripwireTriggered, ToolOutputGuardrailTripwireTriggered)):
        side = "INPUT" if isinstance(error, ToolInputGuardrailTripwireTriggered) else "OUTPUT"
        return TaskFailed(f"TOOL_{side}_GUARDRAIL_TRIPPED", message,
                          details={"guardrail": error.guardrail.get_name(),
                                   "output_info": _jsonable(error.output.output_info)})
    if isinstance(error, ModelRefusalError):
        return TaskFailed("MODEL_REFUSED", message)
    if isinstance(error, ModelTimeoutError):
        return TaskFailed("MODEL_TIMEOUT", message, retryable=True)
    if isinstance(error, ToolTimeoutError):
        return TaskFailed("TOOL_TIMEOUT", message, retryable=True, details={"tool": error.tool_name})
    if isinstance(error, ModelBehaviorError):
        return TaskFailed("MODEL_BEHAVIOR_ERROR", message)
    if isinstance(error, UserError):
        return TaskFailed("AGENT_MISCONFIGURED", message)
    if isinstance(error, openai.RateLimitError):
        return TaskFailed("MODEL_RATE_LIMITED", message, retryable=True)
    if isinstance(error, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return TaskFailed("MODEL_AUTH_FAILED", message)
    if isinstance(error, openai.APIConnectionError):  # APITimeoutError too
        return TaskFailed("MODEL_UNREACHABLE", message, retryable=True)
    if isinstance(error, openai.APIStatusError):
        retryable = error.status_code >= 500
        return TaskFailed("MODEL_UNAVAILABLE" if retryable else "MODEL_REQUEST_REJECTED", message,
                          retryable=retryable, details={"status": error.status_code})
    if isinstance(error, ClutchError):
        return TaskFailed(error.code, error.message, retryable=error.retryable)
    if isinstance(error, AgentsException):
        return TaskFailed("AGENT_SDK_ERROR", f"{type(error).__name__}: {message}",
                          details={"exception": type(error).__name__})
    return TaskFailed("AGENT_EXCEPTION", f"{type(error).__name__}: {message}",
                      details={"exception": type(error).__name__})


class _TaskHooks(RunHooks):
    """The run's lifecycle written to the task's thread. The run loop awaits each hook, so the records
    are in the order things happened, and a tool's `tool.call` is stored before the tool runs: a call
    the hub refuses (FORBIDDEN) fails the task instead of running."""

    def __init__(self, task: Task):
        self.task = task
        self._calls: dict[str, tuple[str, str, float]] = {}  # the SDK's call id → ours, tool, start

    async def on_llm_end(self, context: RunContextWrapper, agent: SdkAgent, response: ModelResponse) -> None:
        usage = response.usage
        await self.task.progress(f"{agent.name}: model response", step="model", agent=agent.name,
                                 usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                                        "requests": usage.requests}, meta=META)

    async def on_tool_start(self, context: RunContextWrapper, agent: SdkAgent, tool: Tool) -> None:
        name = tool_name(tool.name)
        try:
            call_id = await self.task.tool_call(name, _tool_args(context), meta=META)
        except ClutchError as e:
            if e.code == "FORBIDDEN":
                raise TaskFailed("FORBIDDEN", f"the hub refused {name}: {e.message}", details={"tool": name}) from e
            raise
        self._calls[_call_key(context, tool)] = (call_id, name, time.monotonic())

    async def on_tool_end(self, context: RunContextWrapper, agent: SdkAgent, tool: Tool, result: Any) -> None:
        call = self._calls.pop(_call_key(context, tool), None)
        if call is not None:
            call_id, name, started = call
            await self.task.tool_result(call_id, name, _tool_output(result),
                                        duration_ms=int((time.monotonic() - started) * 1000), meta=META)

    async def on_handoff(self, context: RunContextWrapper, from_agent: SdkAgent, to_agent: SdkAgent) -> None:
        await self.task.progress(f"handoff: {from_agent.name} → {to_agent.name}", step="handoff",
                                 from_agent=from_agent.name, to_agent=to_agent.name, meta=META)

    async def fail_open_calls(self, error: BaseException) -> None:
        """A tool that raised out of the run never reached `on_tool_end`: its call ends as a tool.error."""
        for call_id, name, started in self._calls.values():
            try:
                await self.task.tool_result(call_id, name, f"{type(error).__name__}: {error}", error=True,
                                            duration_ms=int((time.monotonic() - started) * 1000), meta=META)
            except ClutchError as e:
                log.warning("task %s: tool.error for %s not recorded: %s", self.task.id, name, e)
        self._calls.clear()


def _call_key(context: RunContextWrapper, tool: Tool) -> str:
    # Function tools get a ToolContext naming the model's call id; other local tools (shell, computer,
    # apply_patch) a plain context, so their runs are told apart by tool alone.
    return getattr(context, "tool_call_id", None) or f"tool:{tool.name}"


def _tool_args(context: RunContextWrapper) -> dict:
    raw = getattr(context, "tool_arguments", None)
    if not raw:
        return {}
    try:
        args = json.loads(raw)
    except ValueError:
        return {"arguments": raw}
    return args if isinstance(args, dict) else {"arguments": args}


def _tool_output(result: Any) -> Any:
    if isinstance(result, str):
        return result[:TOOL_OUTPUT_CHARS]
    value = _jsonable(result)
    return value if isinstance(value, (dict, list)) else str(value)[:TOOL_OUTPUT_CHARS]


def _question(item: Any) -> str:
    """What the approver is asked about a tool call waiting for approval."""
    return f"May {item.agent.name} call {item.tool_name}({_clip(_arguments(item.raw_item))})?"


def _arguments(raw_item: Any) -> str:
    raw = raw_item.get("arguments") if isinstance(raw_item, dict) else getattr(raw_item, "arguments", None)
    return raw if isinstance(raw, str) else json.dumps(_jsonable(raw))


def _linked(run_config: RunConfig | None, task: Task) -> RunConfig:
    config = run_config or RunConfig()
    if config.group_id is not None:
        return config
    metadata = {"clutch_run_id": task.run_id, "clutch_task_id": task.id, **(config.trace_metadata or {})}
    return dataclasses.replace(config, group_id=task.thread_id, trace_metadata=metadata)


def _result(output: Any) -> dict:
    if output is None:
        return {}
    if isinstance(output, str):
        return {"text": output}
    value = _jsonable(output)
    if isinstance(value, dict) and not isinstance(output, (list, tuple)):
        return value
    return {"output": value}


def _jsonable(value: Any) -> Any:
    """`value` as JSON: pydantic models and dataclasses by their fields, anything else unknown as text."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _clip(text: str, limit: int = TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def flush_processors(timeout: float = FLUSH_TIMEOUT) -> None:
    """Waits, without blocking the event loop, until every `ClutchTracingProcessor` has posted what it
    queued: for a task handler of your own that runs the SDK, before it returns (the daemon refuses a
    task's progress once the task has ended). `AgentHandler` does it for you."""
    for processor in list(_processors):
        await asyncio.to_thread(processor.force_flush, timeout)


# ---------------------------------------------------------------------------------------------------
# Traces


@dataclasses.dataclass
class _Place:
    """Where one trace's records go: a served task's run, thread and task (`own` False), or a task of
    the trace's own that the processor opened and ends at the trace's end."""

    run_id: str
    thread_id: str
    task_id: str
    sender: str
    requester: str
    attempt: int = 1
    own: bool = False
    hooked: bool = False
    failed: tuple[str, str] | None = None  # the first failure seen: code, message
    last_text: str | None = None
    spans: dict[str, tuple[str | None, str]] = dataclasses.field(default_factory=dict)  # id → parent, type

    def seen_by_hooks(self, span: Span[Any]) -> bool:
        """Whether `AgentHandler`'s hooks already wrote this span: one of the served run's own, not of a
        run nested in one of its tools (an agent used as a tool runs with hooks of its own, or none)."""
        if not self.hooked:
            return False
        parent = span.parent_id
        while parent is not None:
            grandparent, kind = self.spans.get(parent, (None, ""))
            if kind == "task":
                return grandparent is None
            parent = grandparent
        return True


class ClutchTracingProcessor(TracingProcessor):
    """Writes the Agents SDK's traces into Clutch (`add_trace_processor(ClutchTracingProcessor(url))`,
    or `set_trace_processors([...])` to drop the SDK's uploader to OpenAI).

    - Inside a task handler (`clutch.current_task()` when the trace starts) the records go into that
      task, from its agent. Elsewhere each trace gets a run, thread and task of its own, from `agent_id`:
      a `task.request` to itself named after the workflow, accepted at once, ended by a `task.result`
      (the last model text) or a `task.error` (the first failure a span recorded) when the trace ends.
      Traces of one `group_id` share a thread.
    - Spans: an agent span is a `task.progress` (step `agent`) when it starts; at their end, a function
      span a `tool.call` and its `tool.result` (`tool.error` when it failed), a handoff span a
      `task.progress` naming both agents, a turn span a `task.progress` with the turn's `usage` (what
      budgets count: once per model call, whatever the model class), a generation or response span a
      `task.progress` naming the model (and its text, when traced), a guardrail span whether it
      triggered, any other span its type and data. Each carries the span's ids in the envelope's
      `trace` and its times in `meta`.
    - In a run `AgentHandler` serves, its hooks already wrote the model calls, tool calls, handoffs
      and usage: those spans are left out and the rest (agents, guardrails, custom spans) written.
      A run nested in one of its tools (`Agent.as_tool`) has no such hooks and is written whole.
    - The SDK calls a processor synchronously: records are queued (at most `max_queue`; past it they are
      dropped with a warning rather than block the agent) and posted by a thread of the processor's
      own in batches of up to `max_batch` (`POST /v1/messages` with an array). `force_flush()` waits
      until everything queued is posted.

    `client_or_url` is the daemon's URL, a `clutch.Client` (used from the processor's thread), or an
    `AsyncClient` (its URL, token and signer). `agent_id` must not be an agent that reads its inbox: the
    trace tasks are addressed to it.
    """

    def __init__(self, client_or_url: str | Client | AsyncClient = DEFAULT_URL, *, token: str | None = None,
                 agent_id: str = "agent:openai-agents-traces", max_queue: int = 10_000, max_batch: int = 100):
        if isinstance(client_or_url, Client):
            self._client = client_or_url
        elif isinstance(client_or_url, AsyncClient):
            self._client = Client(client_or_url.url, token=client_or_url.token, signer=client_or_url.signer)
        else:
            self._client = Client(client_or_url, token=token)
        self.agent_id = agent_id if agent_id.startswith(("agent:", "user:")) else f"agent:{agent_id}"
        self.max_batch = max_batch
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._places: dict[str, _Place] = {}
        self._groups: dict[str, str] = {}  # the SDK's group_id → the thread its traces share
        self._lock = threading.Lock()
        self._dropped = 0
        self._closed = False
        self._thread = threading.Thread(target=self._export, name="clutch-trace-export", daemon=True)
        self._thread.start()
        _processors.add(self)

    # ---- the SDK's side: quick, never raising, never blocking ----

    def on_trace_start(self, trace: Trace) -> None:
        self._guard(self._place, trace.trace_id, trace)

    def on_trace_end(self, trace: Trace) -> None:
        self._guard(self._end_trace, trace)

    def on_span_start(self, span: Span[Any]) -> None:
        self._guard(self._span_started, span)

    def on_span_end(self, span: Span[Any]) -> None:
        self._guard(self._span_ended, span)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Waits until every record queued so far is posted (or given up on: the client retries, then
        the batch is dropped with a warning); False when `timeout` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        # Queue.join() with a deadline: the same condition and counter join() waits on.
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def shutdown(self, timeout: float | None = None) -> None:
        self._closed = True
        self.force_flush(timeout)
        self._queue.put(None)
        self._thread.join(timeout=timeout)
        self._client.close()

    def _guard(self, step: Callable, *args: Any) -> None:
        # A processor's failure must not become the agent's: log it and go on.
        try:
            step(*args)
        except Exception:
            log.exception("openai-agents trace processor: a record was lost")

    # ---- where records go ----

    def _place(self, trace_id: str, trace: Trace | None = None) -> _Place:
        with self._lock:
            place = self._places.get(trace_id)
            if place is not None:
                return place
            task = current_task()
            if task is not None:
                place = _Place(task.run_id, task.thread_id, task.id, task.agent_id, task.sender,
                               attempt=task.attempt, hooked=_hooked.get())
                self._places[trace_id] = place
                return place
            group = getattr(trace, "group_id", None)
            thread_id = self._groups.setdefault(group, new_id("thr")) if group else new_id("thr")
            if len(self._groups) > GROUPS_KEPT:
                del self._groups[next(iter(self._groups))]
            place = _Place(new_id("run"), thread_id, new_id("task"), self.agent_id, self.agent_id, own=True)
            self._places[trace_id] = place
            # Queued under the lock, so no span of the trace (from another thread) goes before its request.
            name = trace.name if trace is not None else "Agent workflow"
            meta = {**META, "trace_id": trace_id, "group_id": group,
                    "metadata": _jsonable(getattr(trace, "metadata", None))}
            me = [{"agent_id": self.agent_id}]
            self._put(self._message(place, "task.request", {"goal": name}, to=me, meta=meta,
                                    trace={"trace_id": trace_id}))
            self._put(self._message(place, "task.accept", {}, to=me, trace={"trace_id": trace_id}))
            return place

    def _end_trace(self, trace: Trace) -> None:
        with self._lock:
            place = self._places.pop(trace.trace_id, None)
        if place is None or not place.own:
            return
        me = [{"agent_id": self.agent_id}]
        if place.failed:
            code, message = place.failed
            self._put(self._message(place, "task.error", {"code": code, "message": message, "retryable": False},
                                    to=me, trace={"trace_id": trace.trace_id}))
        else:
            text = place.last_text or f"{trace.name}: done"
            self._put(self._message(place, "task.result", {"text": text}, to=me,
                                    trace={"trace_id": trace.trace_id}))

    # ---- spans as records ----

    def _span_started(self, span: Span[Any]) -> None:
        place = self._place(span.trace_id)
        data = span.span_data
        place.spans[span.span_id] = (span.parent_id, data.type)
        if data.type == "agent":
            self._put(self._record(place, span, "task.progress",
                                   {"text": f"agent {data.name}", "step": "agent", "agent": data.name}))

    def _span_ended(self, span: Span[Any]) -> None:
        place = self._place(span.trace_id)
        data = span.span_data
        kind = data.type
        error = span.error
        hooked = place.seen_by_hooks(span)
        if error and place.failed is None and kind in ("agent", "task", "generation", "response"):
            code = "MAX_TURNS_EXCEEDED" if error.get("message") == "Max turns exceeded" else \
                "MODEL_ERROR" if kind in ("generation", "response") else "AGENT_RUN_FAILED"
            place.failed = (code, _clip(_error_text(error)))
        if kind == "function":
            if not hooked:
                self._function(place, span)
        elif kind == "handoff":
            if not hooked:
                self._put(self._record(place, span, "task.progress",
                                       {"text": f"handoff: {data.from_agent} → {data.to_agent}", "step": "handoff",
                                        "from_agent": data.from_agent, "to_agent": data.to_agent}))
        elif kind in ("generation", "response"):
            if not hooked:
                self._model(place, span)
        elif kind == "guardrail":
            if data.triggered and place.failed is None:
                place.failed = ("GUARDRAIL_TRIPPED", f"guardrail {data.name} triggered its tripwire")
            self._put(self._record(place, span, "task.progress",
                                   {"text": f"guardrail {data.name}: {'triggered' if data.triggered else 'passed'}",
                                    "step": "guardrail", "guardrail": data.name, "triggered": data.triggered}))
        elif kind in ("task", "turn"):
            # The SDK's own bookkeeping spans: a turn carries the usage of its model call (no usage: no
            # call); the task span the whole run's, already counted turn by turn, so it is not written.
            usage = data.usage if kind == "turn" else None
            if usage and not hooked:
                self._put(self._record(place, span, "task.progress",
                                       {"text": f"turn {data.turn} ({data.agent_name})", "step": "turn",
                                        "agent": data.agent_name,
                                        "usage": {"input_tokens": usage.get("input_tokens", 0),
                                                  "output_tokens": usage.get("output_tokens", 0),
                                                  "requests": usage.get("requests", 1)}}))
        elif kind == "agent":
            if error:
                self._put(self._record(place, span, "task.progress",
                                       {"text": _clip(f"agent {data.name} failed: {_error_text(error)}"),
                                        "step": "agent", "agent": data.name}))
        else:
            exported = data.export()
            body = {"text": _clip(f"{kind} {getattr(data, 'name', '')}".strip()), "step": kind,
                    "data": _jsonable(exported.get("data", exported))}
            self._put(self._record(place, span, "task.progress", body))

    def _function(self, place: _Place, span: Span[Any]) -> None:
        data = span.span_data
        call_id = new_id("msg")
        args: Any = {}
        if data.input:
            try:
                args = json.loads(data.input)
            except ValueError:
                args = {"arguments": data.input}
        if not isinstance(args, dict):
            args = {"arguments": args}
        if data.mcp_data:
            args = {**args, "mcp": _jsonable(data.mcp_data)}
        name = tool_name(data.name)
        self._put(self._record(place, span, "tool.call", {"tool": name, "args": args}, id=call_id))
        if span.error:
            body = {"code": "TOOL_FAILED", "message": _clip(_error_text(span.error)), "retryable": False,
                    "details": {"tool": name, "call_id": call_id}}
            self._put(self._record(place, span, "tool.error", body))
            return
        output = "" if data.output is None else str(data.output)[:TOOL_OUTPUT_CHARS]
        self._put(self._record(place, span, "tool.result",
                               {"tool": name, "call_id": call_id, "content": [{"type": "text", "text": output}],
                                "duration_ms": _duration_ms(span)}))

    def _model(self, place: _Place, span: Span[Any]) -> None:
        data = span.span_data
        response = getattr(data, "response", None)
        model = getattr(data, "model", None) or getattr(response, "model", None)
        text = _model_text(data)
        if text:
            place.last_text = text
        body: dict[str, Any] = {"text": _clip(f"model {model or ''}".rstrip() + (f": {text}" if text else "")),
                                "step": "model"}
        if model:
            body["model"] = model
        if response is not None:
            body["response_id"] = response.id
        self._put(self._record(place, span, "task.progress", body))

    # ---- envelopes ----

    def _record(self, place: _Place, span: Span[Any], kind: str, payload: dict, **envelope: Any) -> dict:
        if span.error and kind == "task.progress":
            payload = {**payload, "error": _jsonable(span.error)}
        trace = {"trace_id": span.trace_id, "span_id": span.span_id, "parent_span_id": span.parent_id}
        meta = {**META, "span_type": span.span_data.type,
                "started_at": span.started_at, "ended_at": span.ended_at}
        return self._message(place, kind, payload, trace=trace, meta=meta, **envelope)

    def _message(self, place: _Place, kind: str, payload: dict, *, to: list | None = None,
                 meta: dict | None = None, **envelope: Any) -> dict:
        if to is None:
            # Progress goes to whoever asked for the task, as the agent helper sends it; the rest to the thread.
            to = [{"agent_id": place.requester}] if kind == "task.progress" else []
        return {"run_id": place.run_id, "thread_id": place.thread_id, "task_id": place.task_id,
                "from": {"agent_id": place.sender}, "to": to, "type": kind, "payload": payload,
                "attempt": place.attempt, "meta": meta or META, **envelope}

    def _put(self, message: dict) -> None:
        if self._closed:
            return
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 1000 == 0:
                log.warning("openai-agents trace processor: queue full, %d record(s) dropped", self._dropped)

    # ---- the processor's thread ----

    def _export(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = None in batch
            try:
                self._post([m for m in batch if m is not None])
            finally:
                for _ in batch:
                    self._queue.task_done()
            if stop:
                return

    def _post(self, batch: list[dict]) -> None:
        ready = []
        for message in batch:
            try:
                ready.append(prepare(message, self._client.signer))
            except ClutchError as e:
                log.warning("openai-agents trace processor: %s not sent: %s", message["type"], e)
        if not ready:
            return
        try:
            answers = self._client.send_batch(ready)
        except ClutchError as e:
            log.warning("openai-agents trace processor: %d record(s) not sent: %s", len(ready), e)
            return
        for message, answer in zip(ready, answers):
            if isinstance(answer, ClutchError):
                log.warning("openai-agents trace processor: %s refused: %s", message["type"], answer)


def _error_text(error: dict) -> str:
    data = error.get("data")
    detail = data.get("error") if isinstance(data, dict) else None
    return f"{error.get('message', 'error')}: {detail}" if detail else str(error.get("message", "error"))


def _duration_ms(span: Span[Any]) -> int:
    if not (span.started_at and span.ended_at):
        return 0
    delta = datetime.fromisoformat(span.ended_at) - datetime.fromisoformat(span.started_at)
    return max(0, int(delta.total_seconds() * 1000))


def _model_text(data: Any) -> str | None:
    """The assistant text of a generation span (Chat Completions: message dicts) or a response span
    (Responses: the response's output items), when the SDK traced it."""
    texts = []
    response = getattr(data, "response", None)
    if response is not None:
        for item in response.output or []:
            for part in getattr(item, "content", None) or []:
                if getattr(part, "type", None) == "output_text":
                    texts.append(part.text)
    for message in getattr(data, "output", None) or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
    text = "\n".join(t for t in texts if t)
    return text or None
