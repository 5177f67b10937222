"""LangGraph on Clutch: a compiled graph served as an agent, and tools and nodes that hand work to the hub.

`serve_graph` runs the graph once per delivered task (checkpointer thread = the task id) and writes what
it does into the task's thread: a `task.progress` per node update (with the models' token usage), a
`tool.call`/`tool.result` pair per tool run (named `tool:NAME`), a person's answer for each
`interrupt(...)`, and the final state as the `task.result`. The messages it writes itself (not the
accept and the result, which `clutch.Agent` sends) carry `meta.framework` "langgraph". `hub_tool` and
`hub_node` go the other way: a part of the graph's work routed by the hub to whichever agent has the
capabilities.

The only module of the client that imports LangGraph (the `langgraph` extra).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphBubbleUp, GraphRecursionError
from langgraph.types import Command

from clutch import Agent, AsyncClient, ClutchError, Task, TaskFailed, current_task, tool_name
from clutch.client import DEFAULT_URL

__all__ = ["GraphHandler", "serve_graph", "hub_tool", "hub_node"]

# Longest text of a progress line: enough to read what a node did, not a transcript.
PROGRESS_TEXT_CHARS = 200
# The envelope meta of every message the adapter writes: which framework wrote it.
META = {"framework": "langgraph"}

Person = str | Callable[[Task], "str | None"] | None


def serve_graph(graph: Any, name: str, capabilities: list[str], *, url: str = DEFAULT_URL,
                token: str | None = None, input_key: str = "messages", output_key: str | None = None,
                person: Person = None, ask_timeout: float | None = None, config: dict | None = None,
                **agent_options: Any) -> Agent:
    """A `clutch.Agent` named `name` that answers each task by running `graph` (a compiled LangGraph
    graph); `agent_options` go to `Agent` (`max_concurrency`, `description`, ...). See `GraphHandler`
    for the other arguments."""
    handler = GraphHandler(graph, input_key=input_key, output_key=output_key, person=person,
                           ask_timeout=ask_timeout, config=config)
    return Agent(name, capabilities=capabilities, handler=handler, url=url, token=token, **agent_options)


class GraphHandler:
    """Runs a compiled LangGraph graph for each task: `clutch.Agent(..., handler=GraphHandler(graph))`.

    - Input: every payload field the graph's input schema names; and, unless the payload gives it,
      the task's goal under `input_key` (as a `HumanMessage` when the key is `messages`).
    - `person`: who answers an `interrupt(...)`: a `user:` id, a function of the task, or (None)
      whoever asked for the task when that is a `user:`.
    - Output: the `task.result` is `{"text", "state"}`: the last message's text (or `output_key`'s value),
      and every JSON-able key of the final state.
    - `config`: the graph's run config (`recursion_limit`, `configurable`, ...); the thread id is the
      task id. A graph compiled without a checkpointer gets an in-memory one, so that an interrupt can
      resume and a redelivered task goes on from its last step instead of starting over.
    """

    def __init__(self, graph: Any, *, input_key: str = "messages", output_key: str | None = None,
                 person: Person = None, ask_timeout: float | None = None, config: dict | None = None):
        if graph.checkpointer is None:
            graph = graph.copy(update={"checkpointer": InMemorySaver()})
        self.graph = graph
        self.input_key = input_key
        self.output_key = output_key
        self.person = person
        self.ask_timeout = ask_timeout
        self.config = config or {}
        self._input_fields = set(graph.get_input_jsonschema().get("properties", {}))

    async def __call__(self, task: Task) -> dict:
        observer = _Observer(task)
        config = {**self.config,
                  "configurable": {**self.config.get("configurable", {}), "thread_id": task.id},
                  "callbacks": [*self.config.get("callbacks", []), observer]}
        try:
            graph_input = await self._first_input(task, config)
            while graph_input is not _DONE:
                async for update in self.graph.astream(graph_input, config, stream_mode="updates"):
                    await self._report(task, observer, update)
                await observer.drain()
                graph_input = await self._answers(task, config)
        except (TaskFailed, ClutchError, asyncio.CancelledError):
            # A node's own TaskFailed keeps its code; so does the hub refusing a message (a tool.call
            # its policy forbids: FORBIDDEN).
            raise
        except GraphRecursionError as e:
            raise TaskFailed("GRAPH_RECURSION_LIMIT", str(e).split("\n")[0]) from e
        except Exception as e:
            raise TaskFailed("GRAPH_ERROR", _describe(e)) from e
        finally:
            await observer.drain(quiet=True)
        values = (await self.graph.aget_state(config)).values
        return self._result(values)

    async def _first_input(self, task: Task, config: dict) -> Any:
        """The fresh input; or, when this task's thread already has checkpoints (a redelivery, a retry),
        what continues it: the answers to its open interrupts, None for its pending steps, or nothing."""
        snapshot = await self.graph.aget_state(config)
        if snapshot.next:
            return await self._answers(task, config) if snapshot.interrupts else None
        if snapshot.values:
            return _DONE
        graph_input = {k: v for k, v in task.payload.items() if k in self._input_fields}
        graph_input.setdefault(self.input_key, [HumanMessage(content=task.goal)] if self.input_key == "messages"
                               else task.goal)
        return graph_input

    async def _answers(self, task: Task, config: dict) -> Any:
        """Asks a person each open interrupt's question; the `Command` that resumes the graph with their
        replies, or `_DONE` when nothing waits."""
        interrupts = (await self.graph.aget_state(config)).interrupts
        if not interrupts:
            return _DONE
        person = self.person(task) if callable(self.person) else self.person
        if person is None:
            requester = await task.requester()
            if not requester.startswith("user:"):
                raise TaskFailed("GRAPH_INTERRUPT_NO_PERSON",
                                 f"the graph asks {_question(interrupts[0].value)!r} but task {task.id} came "
                                 f"from {requester}, not a person; pass person= to serve_graph")
            person = requester
        for interrupt in interrupts:
            await task.progress(f"asks {person}: {_clip(_question(interrupt.value))}", step="interrupt",
                                meta=META)
        # Parallel branches interrupted together are asked together.
        replies = await asyncio.gather(*(task.ask(person, _question(i.value), timeout=self.ask_timeout)
                                         for i in interrupts))
        texts = [reply.get("text", "") for reply in replies]
        # One open interrupt takes the bare reply; several take a map from interrupt id to reply.
        return Command(resume=texts[0] if len(texts) == 1 else
                       {i.id: text for i, text in zip(interrupts, texts)})

    async def _report(self, task: Task, observer: "_Observer", update: dict) -> None:
        # The tool calls a node made are written before the node's own update.
        await observer.drain()
        for node, values in update.items():
            if node == "__interrupt__":
                continue
            usage = observer.take_usage()
            await task.progress(_summary(values), step=node, usage=usage, meta=META)

    def _result(self, values: Any) -> dict:
        if not isinstance(values, dict):
            return {"text": str(values)}
        state = {k: v for k, v in values.items() if _jsonable(v)}
        if self.output_key is not None:
            text = _content_text(values.get(self.output_key, ""))
        else:
            text = _last_message_text(values.get("messages"))
        return {"text": text, "state": state}


_DONE = object()


class _Observer(AsyncCallbackHandler):
    """LangChain callbacks of one task's graph run, written to the task's thread: tool runs as
    `tool.call`/`tool.result`, model calls as usage for the next progress line.

    Callbacks from the graph's own event loop are awaited, so a tool's `tool.call` is in the log before
    the tool runs (and one the hub refuses stops it: `raise_error`). Sync code (a sync tool in a worker
    thread) reports through LangChain's own throwaway event loop; those messages are handed to the task's
    loop and waited for at the next node boundary (`drain`).
    """

    raise_error = True

    def __init__(self, task: Task):
        self.task = task
        self.loop = asyncio.get_running_loop()
        # run id → (tool, start, the future of its tool.call's message id)
        self._calls: dict[UUID, tuple[str, float, concurrent.futures.Future]] = {}
        self._pending: set[concurrent.futures.Future] = set()
        self._usage = {"input_tokens": 0, "output_tokens": 0, "requests": 0}
        self._lock = threading.Lock()  # over `_usage` and `_pending`

    async def on_tool_start(self, serialized: dict, input_str: str, *, run_id: UUID,
                            inputs: dict | None = None, **kwargs: Any) -> None:
        tool = tool_name(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        args = inputs if isinstance(inputs, dict) else {"input": input_str}
        call = self._spawn(self.task.tool_call(tool, args, meta=META))
        self._calls[run_id] = (tool, time.monotonic(), call)
        if self._on_loop():
            await asyncio.wrap_future(call)

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        error = isinstance(output, ToolMessage) and output.status == "error"
        content = output.content if isinstance(output, ToolMessage) else output
        await self._finish(run_id, _tool_output(content), error)

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        if isinstance(error, GraphBubbleUp):
            # An interrupt inside the tool: this run of it ends here, the resumed graph runs it again.
            await self._finish(run_id, "interrupted: waiting for a person's answer", True)
        else:
            await self._finish(run_id, f"{type(error).__name__}: {error}", True)

    async def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        with self._lock:
            self._usage["requests"] += 1
            for generations in response.generations:
                for generation in generations:
                    usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                    self._usage["input_tokens"] += usage.get("input_tokens", 0)
                    self._usage["output_tokens"] += usage.get("output_tokens", 0)

    def take_usage(self) -> dict | None:
        """The usage since the last call, or None when no model was called."""
        with self._lock:
            usage, self._usage = self._usage, {"input_tokens": 0, "output_tokens": 0, "requests": 0}
        return usage if usage["requests"] else None

    async def drain(self, *, quiet: bool = False) -> None:
        """Waits for every message handed to the task's loop; the first failure is raised unless
        `quiet` (the run already failed for a reason of its own)."""
        while True:
            with self._lock:
                pending, self._pending = list(self._pending), set()
            if not pending:
                return
            results = await asyncio.gather(*(asyncio.wrap_future(f) for f in pending), return_exceptions=True)
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures and not quiet:
                raise failures[0]

    async def _finish(self, run_id: UUID, result: Any, error: bool) -> None:
        tool, started, call = self._calls.pop(run_id, (None, 0.0, None))
        if call is None:
            return

        async def send() -> None:
            try:
                call_id = await asyncio.wrap_future(call)
            except ClutchError:
                return  # the hub refused the call (its failure is the call's, raised by `drain`)
            await self.task.tool_result(call_id, tool, result, error=error,
                                        duration_ms=int((time.monotonic() - started) * 1000), meta=META)

        done = self._spawn(send())
        if self._on_loop():
            await asyncio.wrap_future(done)

    def _spawn(self, coroutine: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        with self._lock:  # worker threads add while the loop drains
            self._pending.add(future)
        return future

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False


def hub_tool(requires: list[str], *, name: str = "ask_hub", description: str | None = None,
             prefers: list[str] | None = None, timeout: float | None = None,
             url: str = DEFAULT_URL, token: str | None = None,
             sender: str | None = None) -> BaseTool:
    """A LangChain tool that hands its `goal` to the hub, routed to an agent with `requires`, and returns
    that agent's answer as text. Inside a served task it is a subtask of it (`Task.delegate`); elsewhere
    a top-level task (`AsyncClient.run_task` at `url`, as `sender`)."""

    async def delegate(goal: str) -> str:
        return await _delegate(requires, goal, prefers=prefers, timeout=timeout, url=url, token=token,
                               sender=sender)

    description = description or f"Hands a request to an agent with {', '.join(requires)}; returns its answer."
    return StructuredTool.from_function(coroutine=delegate, name=name, description=description)


def hub_node(requires: list[str], *, input_key: str = "messages", output_key: str = "messages",
             name: str | None = None, prefers: list[str] | None = None, timeout: float | None = None,
             url: str = DEFAULT_URL, token: str | None = None,
             sender: str | None = None) -> Callable[[dict], Any]:
    """A graph node that hands `input_key` of the state (the last message's text, for `messages`) to the
    hub as `hub_tool` does, and writes the answer to `output_key` (as an `AIMessage` named `name` for
    `messages`)."""

    async def node(state: dict) -> dict:
        value = state.get(input_key)
        goal = _last_message_text(value) if input_key == "messages" else _content_text(value)
        text = await _delegate(requires, goal, prefers=prefers, timeout=timeout, url=url, token=token,
                               sender=sender)
        if output_key == "messages":
            return {"messages": [AIMessage(content=text, name=name)]}
        return {output_key: text}

    return node


async def _delegate(requires: list[str], goal: str, *, prefers: list[str] | None, timeout: float | None,
                    url: str, token: str | None, sender: str | None) -> str:
    task = current_task()
    if task is not None:
        result = await task.delegate(requires=requires, goal=goal, prefers=prefers, timeout=timeout, meta=META)
    else:
        client = AsyncClient(url, token=token)
        try:
            options = {"sender": sender} if sender else {}
            result = await client.run_task(requires=requires, goal=goal, timeout=timeout, meta=META, **options)
        finally:
            await client.aclose()
    text = result.get("text") if isinstance(result, dict) else None
    return text if isinstance(text, str) else json.dumps(result)


def _summary(values: Any) -> str:
    """One line about a node's update: its last message, or the keys it wrote."""
    if isinstance(values, dict) and values.get("messages"):
        messages = values["messages"]
        last = messages[-1] if isinstance(messages, list) else messages
        if isinstance(last, AIMessage) and last.tool_calls:
            return _clip("calls " + ", ".join(f"{c['name']}({_args(c['args'])})" for c in last.tool_calls))
        if isinstance(last, ToolMessage):
            return _clip(f"{last.name or 'tool'} → {_content_text(last.content)}")
        if isinstance(last, BaseMessage):
            return _clip(_content_text(last.content)) or f"{last.type} message"
    if isinstance(values, dict) and values:
        return _clip("updated " + ", ".join(values))
    return "done"


def _args(args: dict) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in args.items())


def _question(value: Any) -> str:
    """What an interrupt asks: its value when a string, else its `question`/`text`, else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("question", "text", "message"):
            if isinstance(value.get(key), str):
                return value[key]
    return json.dumps(value, default=str)


def _describe(error: BaseException) -> str:
    """The exception, and the node it came from (LangGraph notes "During task with name 'x'")."""
    nodes = re.findall(r"During task with name '([^']+)'", "\n".join(getattr(error, "__notes__", [])))
    where = f"node {nodes[0]!r} raised " if nodes else ""
    return f"{where}{type(error).__name__}: {error}"


def _last_message_text(messages: Any) -> str:
    if isinstance(messages, list) and messages:
        messages = messages[-1]
    return _content_text(messages.content) if isinstance(messages, BaseMessage) else _content_text(messages)


def _content_text(content: Any) -> str:
    """A message's content as text: a string as is, the text blocks of a list joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text", "") for b in content
                 if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")]
        return "".join(parts)
    return json.dumps(content, default=str) if _jsonable(content) else str(content)


def _tool_output(content: Any) -> Any:
    """A tool's output as `Task.tool_result` takes it: text as text (a list of text blocks joined), a
    JSON-able value as structured content, anything else as its `str`."""
    if isinstance(content, list) and all(isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
                                         for b in content):
        return _content_text(content)
    return content if isinstance(content, str) or _jsonable(content) else str(content)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _clip(text: str, limit: int = PROGRESS_TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
