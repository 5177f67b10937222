"""The agent helper: a Python function served as a Clutch agent.

`Agent(name, capabilities, handler)` registers an AgentCard, heartbeats on the interval the daemon asks
for, reads its inbox (the live stream filtered on `to=agent:NAME`, resumed after the last event seen
when the daemon restarts), and works each delivered `task.request`: `task.accept`, then the handler,
whose return value becomes the `task.result` and whose exception a `task.error`. Deliveries are
deduplicated by `task_id` + `attempt`; a `task.cancel` cancels the handler. Every message of a task has
an id fixed before its first send, so a send retried after a lost answer is stored once, and the
daemon being away (even killed) only delays the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import time
from typing import Any, Awaitable, Callable

from . import ids
from .client import DEFAULT_URL, AsyncClient, _backoff, card, prepare
from .errors import ClutchError, TaskFailed
from .outcome import wait_for_end
from .sign import Signer

ORCHESTRATOR = "agent:orchestrator"
log = logging.getLogger("clutch.agent")
_current: contextvars.ContextVar["Task | None"] = contextvars.ContextVar("clutch_task", default=None)


def current_task() -> "Task | None":
    """The task whose handler is running here (through any asyncio task it starts), or None."""
    return _current.get()


def is_async(handler: Any) -> bool:
    """A coroutine function, or an object whose `__call__` is one."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))


def _result_payload(value: Any) -> dict:
    if value is None:
        return {}
    if isinstance(value, str):
        return {"text": value}
    if isinstance(value, dict):
        return dict(value)
    raise TaskFailed("BAD_RESULT", f"a handler returns a str, a dict or None, not {type(value).__name__}")


async def persist(step: Callable[[], Awaitable[Any]], what: str, say: Callable[..., None],
                  stopping: Callable[[], bool] = lambda: False) -> Any:
    """`step()` until it succeeds: a retryable error, or no answer, waits (backing off) and tries again,
    said once; anything else, or `stopping()`, raises."""
    failures = 0
    while True:
        try:
            return await step()
        except ClutchError as e:
            if not e.retryable or stopping():
                raise
            if failures == 0:
                say("%s: %s; will keep trying", what, e.code)
        await asyncio.sleep(_backoff(min(failures, 6)))
        failures += 1


async def keep_alive(client: AsyncClient, agent_id: str, seconds: int, say: Callable[..., None]) -> None:
    """Heartbeats on the interval the daemon asks for, through outages (said once each); returns when
    the daemon no longer knows the agent (removed from the registry)."""
    down = False
    while True:
        await asyncio.sleep(seconds)
        try:
            answer = await client.heartbeat(agent_id)
            seconds = max(1, int(answer.get("next_heartbeat_sec", seconds)))
            if down:
                say("heartbeat: the daemon answers again")
            down = False
        except ClutchError as e:
            if e.code == "AGENT_NOT_FOUND":
                return
            if not down:
                say("heartbeat: %s; will keep trying", e.code)
            down = True


class _Recent:
    """A set that forgets its oldest members past `size`: the dedup memory of a long-lived agent stays
    bounded (a delivery older than the last 10,000 tasks is long ended on the daemon's side)."""

    def __init__(self, size: int = 10_000):
        self.size = size
        self._items: dict = {}

    def add(self, item: Any) -> None:
        self._items[item] = None
        if len(self._items) > self.size:
            del self._items[next(iter(self._items))]

    def __contains__(self, item: Any) -> bool:
        return item in self._items


class Task:
    """One delivered task, given to the handler: what was asked, and how to answer in its thread."""

    def __init__(self, agent: "Agent", request: dict):
        self._agent = agent
        self.request = request
        self.id: str = request["task_id"]
        self.run_id: str = request["run_id"]
        self.thread_id: str = request["thread_id"]
        self.attempt: int = request.get("attempt", 1)
        self.parent_task_id: str | None = request.get("parent_task_id")
        self.sender: str = request["from"]["agent_id"]
        self.payload: dict = request.get("payload") or {}
        self.goal: str = str(self.payload.get("goal") or self.payload.get("text") or "")
        self.cancelled = False
        self._usage: dict = {}
        self._accepted = asyncio.Event()
        self._requester: str | None = None

    @property
    def agent_id(self) -> str:
        return self._agent.agent_id

    @property
    def client(self) -> AsyncClient:
        return self._agent.client

    async def requester(self) -> str:
        """Who asked for the task: the sender of the request the daemon routed here (a routed delivery
        comes from agent:orchestrator and names the original in `meta.clutch_request_id`)."""
        if self._requester is None:
            self._requester = self.sender
            original = (self.request.get("meta") or {}).get("clutch_request_id")
            if self.sender == ORCHESTRATOR and original:
                self._requester = (await self.client.message(original))["from"]["agent_id"]
        return self._requester

    async def send(self, type: str, payload: dict, **envelope: Any) -> dict:
        """Any message in this task's run, thread and task, from this agent (to the requester unless
        `to` is given), retried until stored. Once the task is cancelled nothing more is sent (the
        daemon would refuse it): the answer is `{}`."""
        if self.cancelled:
            return {}
        envelope["meta"] = self._agent._meta(envelope.get("meta"))
        message = {"run_id": self.run_id, "thread_id": self.thread_id, "task_id": self.id,
                   "from": {"agent_id": self.agent_id}, "to": [{"agent_id": self.sender}], "type": type,
                   "payload": payload, "attempt": self.attempt, **envelope}
        return await self._agent._post(prepare(message, self._agent.signer))

    async def accept(self) -> None:
        """Takes the task (done for you before the handler runs, unless `auto_accept=False`)."""
        await self.send("task.accept", {})
        self._accepted.set()
        self._agent._say("task %s attempt %s: accepted", self.id, self.attempt)

    async def progress(self, text: str | None = None, *, percent: float | None = None,
                       usage: dict | None = None, meta: dict | None = None, **payload: Any) -> dict:
        """A `task.progress`; `usage` in it counts against budgets; `meta` goes on the envelope."""
        body = {k: v for k, v in dict(text=text, percent=percent, usage=usage, **payload).items() if v is not None}
        sent = await self.send("task.progress", body, meta=meta)
        self._agent._say("task %s attempt %s: progress %s", self.id, self.attempt, text or percent or "")
        return sent

    async def tool_call(self, tool: str, args: dict | None = None, *, meta: dict | None = None,
                        **payload: Any) -> str:
        """Records a call of a tool the agent runs itself (`tool.call`) and returns its id, the call_id.
        Name framework-local tools `tool:NAME` (see `tool_name`), so an operator's allowlist can name
        them; a tool the allowlists refuse is answered `FORBIDDEN` here, before it runs."""
        sent = await self.send("tool.call", {"tool": tool, "args": args or {}, **payload}, to=[], meta=meta)
        return sent.get("id", "")

    async def tool_result(self, call_id: str, tool: str, result: Any, *, error: bool = False,
                          duration_ms: int = 0, meta: dict | None = None) -> dict:
        """Records what the tool answered (`tool.result`), or its failure (`tool.error`)."""
        if error:
            return await self.send("tool.error", {"code": "TOOL_FAILED", "message": str(result)[:2000],
                                                  "retryable": False, "details": {"call_id": call_id,
                                                                                   "tool": tool}},
                                   to=[], meta=meta)
        text = result if isinstance(result, str) else None
        content = [{"type": "text", "text": text}] if text is not None else []
        body = {"tool": tool, "call_id": call_id, "content": content, "duration_ms": int(duration_ms)}
        if text is None:
            body["structured_content"] = result
        return await self.send("tool.result", body, to=[], meta=meta)

    async def chat(self, text: str, *, speaker: str | None = None, meta: dict | None = None,
                   **payload: Any) -> dict:
        """A `chat.message` in the task's thread, to everyone observing it; `speaker` names who in the
        agent's team said it."""
        body = {"text": text, **({"speaker": speaker} if speaker else {}), **payload}
        return await self.send("chat.message", body, to=[], meta=meta)

    def add_usage(self, *, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
                  requests: int = 0) -> None:
        """Usage summed into the task.result's `usage` (so budgets count it)."""
        for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens),
                           ("cost_usd", cost_usd), ("requests", requests)):
            if value:
                self._usage[key] = self._usage.get(key, 0) + value

    async def delegate(self, *, requires: list[str], goal: str | None = None, payload: dict | None = None,
                       prefers: list[str] | None = None, timeout: float | None = None, **envelope: Any) -> dict:
        """A subtask of this one (`parent_task_id`), in the same run and thread, routed by the hub to an
        agent with `requires`; returns its `task.result` payload, or raises `TaskFailed`."""
        body = dict(payload or {})
        if goal is not None:
            body.setdefault("goal", goal)
        return await self._subtask([{"agent_id": ORCHESTRATOR}], body, requires=requires, prefers=prefers,
                                   timeout=timeout, **envelope)

    async def ask(self, person: str, question: str, *, timeout: float | None = None, **payload: Any) -> dict:
        """A subtask given to a person (`user:NAME`), who answers in the web UI or with
        `POST /v1/tasks/{id}/reply`; returns their reply's payload (the text under `text`)."""
        if not person.startswith("user:"):
            person = f"user:{person}"
        return await self._subtask([{"agent_id": person}], {"goal": question, "text": question, **payload},
                                   timeout=timeout)

    async def input(self, prompt: str, *, timeout: float | None = None) -> str:
        """Asks whoever is in the task's thread for more input, and waits for it: a `task.progress` with
        `input_required` (an A2A caller sees the task's `input-required` state and its prompt), then the
        next `chat.message` about this task from anyone but this agent (the A2A caller's next message, or
        a person's in the web UI); returns its text. The task stays open meanwhile."""
        head = (await self.client.health())["head_seq"]
        await self.progress(prompt, input_required={"prompt": prompt})

        async def answer() -> str:
            async for event in self.client.stream(task_id=self.id, type="chat.message", after=head):
                if event["from"]["agent_id"] != self.agent_id:
                    return str((event.get("payload") or {}).get("text", ""))
            raise AssertionError("the stream never ends")

        try:
            return await asyncio.wait_for(answer(), timeout)
        except asyncio.TimeoutError:
            raise TaskFailed("INPUT_TIMEOUT", f"no answer to “{prompt}” within {timeout} s") from None

    async def _subtask(self, to: list, payload: dict, *, timeout: float | None, **envelope: Any) -> dict:
        envelope["meta"] = self._agent._meta(envelope.get("meta"))
        message = prepare({"run_id": self.run_id, "thread_id": self.thread_id, "task_id": ids.new_id("task"),
                           "parent_task_id": self.id, "from": {"agent_id": self.agent_id}, "to": to,
                           "type": "task.request", "payload": payload, **envelope}, self._agent.signer)
        head = (await self.client.health())["head_seq"]
        await self._agent._post(message)
        return await wait_for_end(self.client, message, after=head, timeout=timeout)


class SyncTask:
    """A `Task` for a handler that is a plain function (run in a thread): the same methods, blocking."""

    def __init__(self, task: Task, loop: asyncio.AbstractEventLoop):
        self._task = task
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._task, name)
        if inspect.iscoroutinefunction(value):
            def blocking(*args: Any, **kwargs: Any) -> Any:
                return asyncio.run_coroutine_threadsafe(value(*args, **kwargs), self._loop).result()
            return blocking
        return value


def tool_name(name: str) -> str:
    """How a framework-local tool is named in `tool.call`s: `tool:NAME` (as a card's `tool:` capability
    ids and org.yaml allowlists name it); a name already in a namespace (`tool:`, `mcp:`) is kept."""
    return name if name.startswith(("tool:", "mcp:")) else f"tool:{name}"


Handler = Callable[[Task], Awaitable[Any]] | Callable[[Any], Any]


class Agent:
    """A Clutch agent served by a handler; see the module's docs. `name` is `agent:NAME` or NAME."""

    def __init__(self, name: str, capabilities: list, handler: Handler, *, url: str = DEFAULT_URL,
                 token: str | None = None, signer: Signer | None = None, max_concurrency: int = 4,
                 description: str | None = None, auto_accept: bool = True, card_fields: dict | None = None,
                 meta: dict | None = None, client: AsyncClient | None = None):
        self.card = card(name, capabilities, display={"name": name.split(":")[-1], "desc": description or
                                                      "a Python agent (clutch-client)"},
                         limits={"max_concurrency": max_concurrency}, **(card_fields or {}))
        self.agent_id: str = self.card["agent_id"]
        self.handler = handler
        self.meta = dict(meta or {})  # envelope meta on every message of its tasks (a message's own wins)
        self.url = url
        self.token = token
        self.signer = signer
        self.auto_accept = auto_accept
        self.max_concurrency = max_concurrency
        self.client: AsyncClient = client  # type: ignore[assignment]
        self.heartbeat_sec = 10
        self.seen = _Recent()  # (task_id, attempt) of the deliveries taken
        self.working: dict[str, tuple[Task, asyncio.Task]] = {}
        self.ended = _Recent()  # ids of the tasks it answered or saw cancelled
        self.ready = asyncio.Event()
        self._stopping = False
        self._slots: asyncio.Semaphore | None = None

    def _meta(self, own: dict | None) -> dict | None:
        return {**self.meta, **own} if self.meta and own else (own or self.meta or None)

    def _say(self, text: str, *args: Any) -> None:
        """One line about what it does (logger `clutch.agent`, INFO), formatted only when shown."""
        if log.isEnabledFor(logging.INFO):
            log.info("%s " + text, self.agent_id, *args)

    async def _post(self, message: dict) -> dict:
        """Sends until stored (the message's id is fixed, so a retry of one that was stored is answered
        as a duplicate)."""
        return await persist(lambda: self.client._call("POST", "/v1/messages", body=message),
                             f"send {message['type']}", self._say, lambda: self._stopping)

    async def _register(self) -> int:
        answer = await persist(lambda: self.client.register(self.card), "register", self._say)
        self.heartbeat_sec = max(1, int(answer.get("heartbeat_interval_sec", 10)))
        self._say("registered at seq %s; heartbeat every %s s", answer["seq"], self.heartbeat_sec)
        return answer["seq"]

    async def _heartbeats(self) -> None:
        await keep_alive(self.client, self.agent_id, self.heartbeat_sec, self._say)
        self._say("was removed from the registry; stopping")
        self._stopping = True

    async def serve(self) -> None:
        """Registers and works tasks until `stop()` (or cancellation, or removal from the registry)."""
        own_client = self.client is None
        if own_client:
            self.client = AsyncClient(self.url, token=self.token, signer=self.signer)
        self._slots = asyncio.Semaphore(self.max_concurrency)
        loops: list[asyncio.Task] = []
        try:
            cursor = await self._register()
            loops = [asyncio.create_task(self._heartbeats()), asyncio.create_task(self._inbox(cursor))]
            done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if not t.cancelled() and t.exception() and not self._stopping:
                    raise t.exception()
        finally:
            # Everything that uses the client stops before the client closes.
            pending = loops + [work for _, work in self.working.values()]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if own_client:
                await self.client.aclose()

    async def _inbox(self, cursor: int) -> None:
        def connected(after: int) -> None:
            self._say("reading its inbox after seq %s", after)
            self.ready.set()

        async for event in self.client.stream(to=self.agent_id, after=cursor, on_connect=connected):
            self._handle(event)

    def _handle(self, event: dict) -> None:
        kind, task_id = event.get("type"), event.get("task_id")
        if kind == "task.cancel":
            entry = self.working.get(task_id)
            if entry:
                entry[0].cancelled = True
                entry[1].cancel()
                self._say("task %s attempt %s: stopped (cancelled)", task_id, entry[0].attempt)
            self.ended.add(task_id)
            return
        if kind != "task.request" or not any(r.get("agent_id") == self.agent_id for r in event.get("to", [])):
            return
        attempt = event.get("attempt", 1)
        if (task_id, attempt) in self.seen or task_id in self.ended:
            self._say("task %s attempt %s: duplicate delivery ignored", task_id, attempt)
            return
        self.seen.add((task_id, attempt))
        if task_id in self.working:
            # A redelivery of a task in hand (our accept was lost): take it again under the new attempt.
            task = self.working[task_id][0]
            task.attempt = attempt
            self._say("task %s attempt %s: redelivered while in hand", task_id, attempt)
            if self.auto_accept:
                asyncio.create_task(self._quietly(task.accept()))
            return
        task = Task(self, event)
        self._say("task %s attempt %s: received", task_id, attempt)
        work = asyncio.create_task(self._work(task))
        self.working[task_id] = (task, work)

    async def _quietly(self, step: Awaitable[Any]) -> None:
        with contextlib.suppress(ClutchError):
            await step

    async def _work(self, task: Task) -> None:
        assert self._slots is not None
        token = _current.set(task)
        try:
            async with self._slots:
                if self.auto_accept:
                    await task.accept()
                started = time.monotonic()
                try:
                    if is_async(self.handler):
                        value = await self.handler(task)
                    else:
                        loop = asyncio.get_running_loop()
                        value = await asyncio.to_thread(self.handler, SyncTask(task, loop))
                    payload = _result_payload(value)
                    kind = "task.result"
                except TaskFailed as e:
                    payload, kind = e.payload(), "task.error"
                except asyncio.CancelledError:
                    if task.cancelled or self._stopping:
                        return
                    raise
                except ClutchError as e:
                    payload = {"code": e.code, "message": e.message, "retryable": e.retryable}
                    kind = "task.error"
                except Exception as e:  # a bug or a framework's failure: the task fails, it never hangs
                    log.exception("%s task %s: the handler raised", self.agent_id, task.id)
                    payload = {"code": "AGENT_EXCEPTION", "message": f"{type(e).__name__}: {e}"[:2000],
                               "retryable": False, "details": {"exception": type(e).__name__}}
                    kind = "task.error"
                if kind == "task.result" and task._usage and "usage" not in payload:
                    payload["usage"] = task._usage
                if not task._accepted.is_set() and kind == "task.result" and not self.auto_accept:
                    await task.accept()
                await task.send(kind, payload)
                if kind == "task.result" or not payload.get("retryable"):
                    # A retryable failure may be routed back here as a new attempt: only this one is done.
                    self.ended.add(task.id)
                self._say("task %s attempt %s: %s in %.2f s", task.id, task.attempt,
                          "completed" if kind == "task.result" else f"failed {payload['code']}",
                          time.monotonic() - started)
        except ClutchError as e:
            self._say("task %s attempt %s: %s", task.id, task.attempt, e)
        finally:
            _current.reset(token)
            self.working.pop(task.id, None)

    def stop(self) -> None:
        self._stopping = True
        for _, work in list(self.working.values()):
            work.cancel()

    @contextlib.asynccontextmanager
    async def running(self):
        """Serves in the background: registered and reading its inbox inside the block, stopped after."""
        served = asyncio.create_task(self.serve())
        ready = asyncio.create_task(self.ready.wait())
        done, _ = await asyncio.wait({served, ready}, return_when=asyncio.FIRST_COMPLETED)
        if served in done:
            ready.cancel()
            served.result()
        try:
            yield self
        finally:
            self.stop()
            served.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await served

    def run(self) -> None:
        """Serves until Ctrl-C: for scripts. With no logging configured, its lines go to stderr."""
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.WARNING, format="%(message)s")
            log.setLevel(logging.INFO)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(self.serve())
