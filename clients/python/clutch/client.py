"""The daemon's HTTP API, sync (`Client`) and async (`AsyncClient`), over httpx.

Each route is written once, in `_Routes`: a method builds the request and hands it to `_call`, which
the sync client answers with the decoded JSON and the async client with an awaitable of it. Answers are
plain dicts shaped as the models in `clutch.schemas` (e.g. `clutch.schemas.task_view.Task`); errors are
`ClutchError`. Requests are retried on what may succeed later (no answer, 5xx, `retryable` errors):
GETs, and messages, whose ids the client fills before the first try so a retry is stored once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import ssl
import time
from typing import Any, AsyncIterator, Callable, Iterator
from urllib.parse import quote

import httpx
import pydantic

from . import ids
from .errors import ClutchError
from .outcome import wait_for_end
from .schemas.agent_card import AgentCard
from .schemas.envelope import ClutchMessage
from .sign import Signer

DEFAULT_URL = "http://127.0.0.1:7700"
_LIST_KEYS = ("items", "events", "tasks", "workflows", "sessions", "pending", "servers")


def _path(value: str) -> str:
    return quote(value, safe=":@")


def _params(**values: Any) -> dict:
    """Query parameters without the unset ones; lists joined by commas, booleans as true/false."""
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        out[key] = value
    return out


def _field(loc: tuple) -> str:
    """A pydantic error location as the daemon names fields: `to[0].agent_id`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + ("from" if part == "from_" else str(part))
    return out


def prepare(message: dict | ClutchMessage, signer: Signer | None = None) -> dict:
    """The message as it will be sent: `v`, `id`, `ts` and the run, thread and task ids filled when
    absent, checked against the envelope's schema (a `ClutchError` VALIDATION_FAILED naming every field
    at fault, nothing sent), and signed when a signer is given."""
    if isinstance(message, ClutchMessage):
        message = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    elif not isinstance(message, dict):
        raise ClutchError("VALIDATION_FAILED", f"a message is a JSON object, not {type(message).__name__}")
    out = {k: v for k, v in message.items() if v is not None}
    out.setdefault("v", "clutch/0.1")
    out.setdefault("id", ids.new_id("msg"))
    out.setdefault("ts", ids.now())
    for key, prefix in (("run_id", "run"), ("thread_id", "thr"), ("task_id", "task")):
        out.setdefault(key, ids.new_id(prefix))
    out.setdefault("to", [])
    out.setdefault("payload", {})
    try:
        ClutchMessage.model_validate(out)
    except pydantic.ValidationError as e:
        problems = [{"path": _field(err["loc"]), "message": err["msg"]} for err in e.errors()]
        first = problems[0]
        raise ClutchError("VALIDATION_FAILED", f"{len(problems)} problem(s), first: {first['path']}: "
                          f"{first['message']}", field=first["path"], problems=problems,
                          hint="nothing was sent; fix the message") from None
    if signer is not None:
        out = signer.sign(out)
    return out


def card(agent_id: str, capabilities: list, **fields: Any) -> dict:
    """An AgentCard for `agent_id` (`agent:NAME`, or a bare NAME), checked against its schema.
    `capabilities` are ids (`skill:research`, `skill:research@1.2.0`) or capability objects."""
    if ":" not in agent_id:
        agent_id = f"agent:{agent_id}"
    caps = []
    for cap in capabilities:
        if isinstance(cap, str):
            cap_id, _, version = cap.partition("@")
            cap = {"id": cap_id, **({"version": version} if version else {})}
        caps.append(cap)
    out = {"v": "clutch/0.1", "agent_id": agent_id, "capabilities": caps,
           **{k: v for k, v in fields.items() if v is not None}}
    try:
        AgentCard.model_validate(out)
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        raise ClutchError("VALIDATION_FAILED", f"the agent card: {_field(err['loc'])}: {err['msg']}",
                          field=_field(err["loc"]), hint="nothing was sent; fix the card") from None
    return out


class _Routes:
    """Every route of the API, once. `_call` is the transport's (sync or async), `_http_class` its httpx
    client."""

    _http_class: type

    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None, signer: Signer | None = None,
                 retries: int = 3, timeout: float = 30.0, transport: Any = None):
        self.url = url.rstrip("/")
        self.token = token
        self.signer = signer
        self.retries = retries
        self._http = self._http_class(base_url=self.url, headers=_headers(token), timeout=timeout,
                                      transport=transport, verify=_tls())

    def _unreachable(self, error: httpx.TransportError) -> ClutchError:
        return ClutchError("DAEMON_UNREACHABLE", f"no answer from {self.url}: {error}", retryable=True,
                           hint="is `clutch serve` running there?")

    def _call(self, method: str, path: str, *, params: dict | None = None, body: Any = None,
              retry: bool = False) -> Any:
        raise NotImplementedError

    # ---- messages and the log ----
    def send(self, message: dict | ClutchMessage):
        """Appends one message: `{id, seq, duplicate}`."""
        return self._call("POST", "/v1/messages", body=prepare(message, self.signer), retry=True)

    def send_batch(self, messages: list):
        """Appends several in one request: one answer per message, in order, each `{id, seq, duplicate}`
        or a `ClutchError` (a bad message does not spoil the others)."""
        prepared = [prepare(m, self.signer) for m in messages]
        return self._call("POST", "/v1/messages", body=prepared, retry=True)

    def message(self, message_id: str):
        return self._call("GET", f"/v1/messages/{_path(message_id)}", retry=True)

    def events(self, *, run_id=None, thread_id=None, task_id=None, agent_id=None, type=None, after=None,
               limit=None):
        """A page of events in seq order: `{events, next_after}`; pass `after=next_after` for the next."""
        return self._call("GET", "/v1/events", retry=True, params=_params(
            run_id=run_id, thread_id=thread_id, task_id=task_id, agent_id=agent_id, type=type, after=after,
            limit=limit))

    def health(self):
        """`{status, head_seq, version, protocol}`."""
        return self._call("GET", "/healthz", retry=True)

    # ---- lists: `{items, next?, as_of}`, pass `cursor=next` ----
    def runs(self, *, state=None, kind=None, agent=None, since=None, until=None, limit=None, cursor=None):
        return self._call("GET", "/v1/runs", retry=True, params=_params(
            state=state, kind=kind, agent=agent, since=since, until=until, limit=limit, cursor=cursor))

    def threads(self, *, run=None, agent=None, since=None, until=None, limit=None, cursor=None):
        return self._call("GET", "/v1/threads", retry=True, params=_params(
            run=run, agent=agent, since=since, until=until, limit=limit, cursor=cursor))

    def tasks(self, *, state=None, agent=None, capability=None, run=None, workflow=None, parent=None,
              thread=None, since=None, until=None, limit=None, cursor=None):
        return self._call("GET", "/v1/tasks", retry=True, params=_params(
            state=state, agent=agent, capability=capability, run=run, workflow=workflow, parent=parent,
            thread=thread, since=since, until=until, limit=limit, cursor=cursor))

    def search(self, q: str, *, run=None, workflow=None, thread=None, task=None, agent=None, since=None,
               until=None, limit=None, cursor=None):
        return self._call("GET", "/v1/search", retry=True, params=_params(
            q=q, run=run, workflow=workflow, thread=thread, task=task, agent=agent, since=since, until=until,
            limit=limit, cursor=cursor))

    # ---- tasks ----
    def task(self, task_id: str):
        """A task's state, agent, attempts, usage and history."""
        return self._call("GET", f"/v1/tasks/{_path(task_id)}", retry=True)

    def run_tasks(self, run_id: str):
        return self._call("GET", f"/v1/runs/{_path(run_id)}/tasks", retry=True)

    def inbox(self, agent_id: str, *, wait_seconds=None):
        """The tasks given to an agent or a person that have not ended, oldest first."""
        return self._call("GET", f"/v1/inbox/{_path(agent_id)}", retry=True,
                          params=_params(wait_seconds=wait_seconds))

    def reply(self, task_id: str, agent_id: str, status: str, *, text=None, result=None, error=None,
              retryable=None):
        """The holder's reply to a task it was given: status accepted, completed or failed."""
        body = {k: v for k, v in dict(agent_id=agent_id, status=status, text=text, result=result, error=error,
                                       retryable=retryable).items() if v is not None}
        return self._call("POST", f"/v1/tasks/{_path(task_id)}/reply", body=body)

    # ---- agents ----
    def register(self, agent_card: dict):
        """Registers (or updates) an agent: `{agent_id, seq, heartbeat_interval_sec, agent}`."""
        return self._call("POST", "/v1/agents", body=agent_card, retry=True)

    def heartbeat(self, agent_id: str):
        """`{status, next_heartbeat_sec}`."""
        return self._call("POST", f"/v1/agents/{_path(agent_id)}/heartbeat")

    def agents(self):
        return self._call("GET", "/v1/agents", retry=True)

    def agent(self, agent_id: str):
        return self._call("GET", f"/v1/agents/{_path(agent_id)}", retry=True)

    def remove_agent(self, agent_id: str):
        return self._call("DELETE", f"/v1/agents/{_path(agent_id)}")

    # ---- workflows ----
    def workflows(self, *, status=None):
        return self._call("GET", "/v1/workflows", retry=True, params=_params(status=status))

    def create_workflow(self, name: str, **fields: Any):
        return self._call("POST", "/v1/workflows", body={"name": name, **fields})

    def workflow(self, workflow_id: str):
        return self._call("GET", f"/v1/workflows/{_path(workflow_id)}", retry=True)

    def plan_workflow(self, workflow_id: str, tasks: list, **fields: Any):
        return self._call("PUT", f"/v1/workflows/{_path(workflow_id)}/plan", body={"tasks": tasks, **fields})

    def progress(self, workflow_id: str):
        return self._call("GET", f"/v1/workflows/{_path(workflow_id)}/progress", retry=True)

    def next_tasks(self, workflow_id: str, *, limit=None, cursor=None):
        """Tasks whose dependencies are done: `{tasks, next_cursor?}`."""
        return self._call("GET", f"/v1/workflows/{_path(workflow_id)}/next", retry=True,
                          params=_params(limit=limit, cursor=cursor))

    def claim(self, task_id: str, agent_id: str):
        return self._call("POST", f"/v1/tasks/{_path(task_id)}/claim", body={"agent_id": agent_id})

    def release(self, task_id: str, agent_id: str, **fields: Any):
        return self._call("POST", f"/v1/tasks/{_path(task_id)}/release", body={"agent_id": agent_id, **fields})

    def set_status(self, task_id: str, agent_id: str, status: str, **fields: Any):
        return self._call("POST", f"/v1/tasks/{_path(task_id)}/status",
                          body={"agent_id": agent_id, "status": status, **fields})

    def checkpoint(self, task_id: str, agent_id: str, type: str, summary: str, **fields: Any):
        return self._call("POST", f"/v1/tasks/{_path(task_id)}/checkpoints",
                          body={"agent_id": agent_id, "type": type, "summary": summary, **fields})

    def checkpoints(self, task_id: str):
        return self._call("GET", f"/v1/tasks/{_path(task_id)}/checkpoints", retry=True)

    def context(self, task_id: str, **request: Any):
        """The task's context, trimmed to `max_tokens`: `include`, `max_tokens` as in the README."""
        return self._call("POST", f"/v1/tasks/{_path(task_id)}/context", body=request, retry=True)

    # ---- sessions, tools, approvals ----
    def sessions(self):
        return self._call("GET", "/v1/sessions", retry=True)

    def session(self, session_id: str):
        return self._call("GET", f"/v1/sessions/{_path(session_id)}", retry=True)

    def session_messages(self, session_id: str):
        return self._call("GET", f"/v1/sessions/{_path(session_id)}/messages", retry=True)

    def tools(self):
        return self._call("GET", "/v1/tools", retry=True)

    def approvals(self):
        return self._call("GET", "/v1/approvals", retry=True)

    def approve(self, call_id: str, note: str | None = None):
        return self._call("POST", f"/v1/tool-calls/{_path(call_id)}/approve", body={"note": note} if note else {})

    def deny(self, call_id: str, note: str | None = None):
        return self._call("POST", f"/v1/tool-calls/{_path(call_id)}/deny", body={"note": note} if note else {})


def _next_params(page: dict) -> dict | None:
    """How to ask for the page after `page`, or None when it was the last."""
    if page.get("next"):
        return {"cursor": page["next"]}
    if page.get("next_cursor"):
        return {"cursor": page["next_cursor"]}
    if "next_after" in page and page.get("events"):
        return {"after": page["next_after"]}
    return None


def _items(page: dict) -> list:
    for key in _LIST_KEYS:
        if key in page:
            return page[key]
    return []


def _decode(response: httpx.Response) -> Any:
    try:
        body = response.json() if response.content else {}
    except ValueError:
        body = response.text
    if response.status_code >= 400:
        raise ClutchError.from_body(response.status_code, body)
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        return [ClutchError.from_body(None, r) if isinstance(r, dict) and "error" in r else r
                for r in body["results"]]
    return body


def _backoff(attempt: int) -> float:
    return min(5.0, 0.1 * 2 ** attempt) * (0.5 + random.random() / 2)


@functools.lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """One TLS context for every client of the process: httpx would build one per client (certificates
    loaded each time, most of an idle client's memory)."""
    return httpx.create_ssl_context()


def _headers(token: str | None) -> dict:
    headers = {"user-agent": "clutch-client-python/0.1"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


class Client(_Routes):
    """The API, blocking. `Client(url, token=None, signer=None, retries=3, timeout=30)`."""

    _http_class = httpx.Client

    def _call(self, method, path, *, params=None, body=None, retry=False):
        attempt = 0
        while True:
            try:
                return _decode(self._http.request(method, path, params=params, json=body))
            except httpx.TransportError as e:
                error = self._unreachable(e)
            except ClutchError as e:
                error = e
            if not (retry and error.retryable and attempt < self.retries):
                raise error
            time.sleep(_backoff(attempt))
            attempt += 1

    def pages(self, route: Callable[..., dict], **params: Any) -> Iterator[Any]:
        """Every item of a paged list, page after page: `for run in client.pages(client.runs, state="failed")`."""
        while True:
            page = route(**params)
            yield from _items(page)
            more = _next_params(page)
            if more is None:
                return
            params.update(more)

    def stream(self, *, after: int | None = None, on_connect: Callable[[int], Any] | None = None,
               **filters: Any) -> Iterator[dict]:
        """The live stream (`GET /v1/stream`, SSE) as events: what is stored after `after` (None: from now),
        then live; `filters` as `events` takes, plus `to=AGENT` (an inbox). It resumes after the last event
        seen when the connection drops or the daemon restarts, so no event is skipped or repeated;
        `on_connect(after)` is called at each (re)connection."""
        if after is None:
            after = self.health()["head_seq"]
        failures = 0
        while True:
            try:
                with self._http.stream("GET", "/v1/stream", **_stream_request(after, filters)) as response:
                    if response.status_code >= 400:
                        response.read()
                        _decode(response)
                    failures = 0
                    if on_connect:
                        on_connect(after)
                    for name, data in _sse(response.iter_lines()):
                        event = json.loads(data)
                        if name == "end":
                            after = event.get("last_seq", after)
                            break
                        after = event.get("seq", after)
                        yield event
            except httpx.TransportError:
                pass
            except ClutchError as e:
                if not e.retryable:
                    raise
            time.sleep(_backoff(failures))
            failures += 1

    def run_task(self, **request: Any) -> dict:
        """As `AsyncClient.run_task`, blocking: asks for work and waits for its end (on an event loop of
        its own, so not from inside a running one: there, use `AsyncClient`)."""
        async def ask() -> dict:
            async with AsyncClient(self.url, token=self.token, signer=self.signer, retries=self.retries) as hub:
                return await hub.run_task(**request)
        return asyncio.run(ask())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncClient(_Routes):
    """The API, async: every route returns an awaitable. `AsyncClient(url, token=None, signer=None)`."""

    _http_class = httpx.AsyncClient

    async def _call(self, method, path, *, params=None, body=None, retry=False):
        attempt = 0
        while True:
            try:
                return _decode(await self._http.request(method, path, params=params, json=body))
            except httpx.TransportError as e:
                error = self._unreachable(e)
            except ClutchError as e:
                error = e
            if not (retry and error.retryable and attempt < self.retries):
                raise error
            await asyncio.sleep(_backoff(attempt))
            attempt += 1

    async def pages(self, route: Callable[..., Any], **params: Any) -> AsyncIterator[Any]:
        """Every item of a paged list: `async for run in client.pages(client.runs)`."""
        while True:
            page = await route(**params)
            for item in _items(page):
                yield item
            more = _next_params(page)
            if more is None:
                return
            params.update(more)

    async def stream(self, *, after: int | None = None, on_connect: Callable[[int], Any] | None = None,
                     **filters: Any) -> AsyncIterator[dict]:
        """As `Client.stream`, async."""
        if after is None:
            after = (await self.health())["head_seq"]
        failures = 0
        while True:
            try:
                async with self._http.stream("GET", "/v1/stream", **_stream_request(after, filters)) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        _decode(response)
                    failures = 0
                    if on_connect:
                        on_connect(after)
                    lines = response.aiter_lines()
                    async for name, data in _asse(lines):
                        event = json.loads(data)
                        if name == "end":
                            after = event.get("last_seq", after)
                            break
                        after = event.get("seq", after)
                        yield event
            except httpx.TransportError:
                pass
            except ClutchError as e:
                if not e.retryable:
                    raise
            await asyncio.sleep(_backoff(failures))
            failures += 1

    async def run_task(self, *, requires: list[str], goal: str | None = None, payload: dict | None = None,
                       sender: str = "user:clutch-client", prefers: list[str] | None = None,
                       timeout: float | None = None, **envelope: Any) -> dict:
        """Asks the hub for work: a `task.request` routed by `requires`/`prefers`; waits for its end and
        returns the `task.result` payload, or raises `TaskFailed` (its `task.error`, or TIMEOUT)."""
        body = dict(payload or {})
        if goal is not None:
            body.setdefault("goal", goal)
        message = prepare({"from": {"agent_id": sender}, "to": [{"agent_id": "agent:orchestrator"}],
                           "type": "task.request", "requires": requires, "prefers": prefers, "payload": body,
                           **envelope}, self.signer)
        head = (await self.health())["head_seq"]
        await self._call("POST", "/v1/messages", body=message, retry=True)
        return await wait_for_end(self, message, after=head, timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


def _stream_request(after: int, filters: dict) -> dict:
    """The live stream's request from `after`: SSE, no read timeout (the daemon pings an idle stream)."""
    return {"params": _params(after=after, **filters), "headers": {"accept": "text/event-stream"},
            "timeout": httpx.Timeout(30.0, read=None)}


def _sse_step(state: list, line: str):
    """One line of Server-Sent Events into `state` ([name, data lines]); an event when one ends."""
    if not line:
        if state[1]:
            event = (state[0], "\n".join(state[1]))
            state[0], state[1] = "message", []
            return event
        state[0] = "message"
        return None
    if line.startswith(":"):
        return None
    field, _, value = line.partition(":")
    value = value[1:] if value.startswith(" ") else value
    if field == "event":
        state[0] = value
    elif field == "data":
        state[1].append(value)
    return None


def _sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    state: list = ["message", []]
    for line in lines:
        event = _sse_step(state, line.rstrip("\r"))
        if event:
            yield event


async def _asse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    state: list = ["message", []]
    async for line in lines:
        event = _sse_step(state, line.rstrip("\r"))
        if event:
            yield event
