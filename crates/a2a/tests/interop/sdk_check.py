"""The A2A face checked with the official Python SDK (PyPI `a2a-sdk`, a client nobody here wrote)
against a running Clutch daemon. The SDK's resolver reads the Agent Card; its ClientFactory makes
the client for each interface the card names: for 1.0 its JSON-RPC client (`JsonRpcTransport`,
`A2A-Version: 1.0`, `SendMessage`...; the card read strictly has 1.0's fields only, and is cacheable),
for 0.3 (the 0.3 card, at `/.well-known/agent.json` or asked for with `A2A-Version: 0.3`: its
top-level `url`, `preferredTransport`, `protocolVersion`) its compatibility client
(`a2a.compat.v0_3.jsonrpc_transport.CompatJsonRpcTransport`, `A2A-Version: 0.3`, `message/send`...).
With each: a blocking send, a get, a send answered at once then polled, a cancel (and a second one,
refused), an unknown task, a streamed send and a subscription to a task cancelled meanwhile (when the
card says `streaming: true`; otherwise both must be refused with -32004), and a webhook for a task
(push notification config: create, get, list, then the cancel told at the webhook with the
credentials given, read by the SDK's types, then delete; the daemon must allow loopback targets). Then 1.0 over the HTTP+JSON
binding the card also names, through the SDK's `RestTransport`: send, get, an unknown task, a stream.

Every answer goes through the SDK's own types: the 1.0 ones are protobuf messages
(`a2a.types.a2a_pb2`, ProtoJSON), the 0.3 ones its pydantic models (`a2a.compat.v0_3.types`). The SDK
reads leniently (unknown fields ignored), so each raw result, and each event of a stream, is also read
strictly: 1.0 with `ParseDict(..., ignore_unknown_fields=False)`, 0.3 by validating it and finding no
member the model does not know. Errors must come back as the SDK's own exceptions
(`TaskNotFoundError` for -32001, `TaskNotCancelableError` for -32002).

Two agents work beside it over the HTTP API, in a thread: `agent:kim` (skill `skill:answer`) answers
every task with "42: " + its goal; `agent:slow` (skill `skill:slow`) never answers, so its tasks stay
open to be cancelled. A message names its skill in its metadata (`{"skill": "skill:answer"}`).

Usage: sdk_check.py --url http://127.0.0.1:PORT. Prints `NAME: ok` or `NAME: FAILED: why` per check
(what went over the wire on stderr when one fails) and exits non-zero when any failed.
"""

import argparse
import asyncio
import http.server
import json
import sys
import threading
import time
import traceback
import uuid

import httpx
from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types.a2a_pb2 import (
    AgentCard,
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError

from hub_agents import ANSWER, KIM, SLOW, SLOW_SKILL, TIMEOUT, Agents, CheckFailed, expect


def state_name(state):
    return TaskState.Name(state)


# --- What went over the wire ---------------------------------------------------------------------


class Exchange:
    """One request of the SDK's httpx client and its answer, as the bytes arrive (a stream too)."""

    def __init__(self, request, response):
        try:
            self.sent = json.loads(request.content) if request.content else None
        except ValueError:
            self.sent = request.content.decode(errors="replace")
        self.method = request.method
        self.url = str(request.url)
        self.version = request.headers.get("a2a-version")
        self.status = response.status_code
        self.content_type = response.headers.get("content-type", "")
        self.raw = bytearray()

    @property
    def got(self):
        """The answer: its JSON, or for an event stream the JSON of each event's data."""
        text = self.raw.decode(errors="replace")
        if "text/event-stream" in self.content_type:
            events = []
            for block in text.replace("\r\n", "\n").split("\n\n"):
                data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
                if data:
                    try:
                        events.append(json.loads("\n".join(data)))
                    except ValueError:
                        events.append("\n".join(data))
            return events
        try:
            return json.loads(text)
        except ValueError:
            return text

    def as_dict(self):
        return {
            "method": self.method,
            "url": self.url,
            "a2a-version": self.version,
            "sent": self.sent,
            "status": self.status,
            "content-type": self.content_type,
            "got": self.got,
        }


class Tee(httpx.AsyncByteStream):
    def __init__(self, stream, exchange):
        self.stream, self.exchange = stream, exchange

    async def __aiter__(self):
        async for chunk in self.stream:
            self.exchange.raw.extend(chunk)
            yield chunk

    async def aclose(self):
        await self.stream.aclose()


class Wire(httpx.AsyncBaseTransport):
    """The SDK's httpx transport, keeping each exchange (streams still stream) for the strict reads
    and to show what went wrong."""

    def __init__(self):
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges = []

    async def handle_async_request(self, request):
        response = await self.inner.handle_async_request(request)
        exchange = Exchange(request, response)
        self.exchanges.append(exchange)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=Tee(response.stream, exchange),
            extensions=response.extensions,
        )

    async def aclose(self):
        await self.inner.aclose()

    def last(self):
        expect(self.exchanges, "nothing went over the wire")
        return self.exchanges[-1]

    def last_rpc(self, method):
        """The last JSON-RPC exchange calling `method`."""
        for x in reversed(self.exchanges):
            if isinstance(x.sent, dict) and x.sent.get("method") == method:
                return x
        called = [x.sent.get("method") for x in self.exchanges[-3:] if isinstance(x.sent, dict)]
        raise CheckFailed(f"the SDK did not call {method!r} (its last calls: {called})")

    def dump(self, count=2):
        for x in self.exchanges[-count:]:
            print("  wire: " + json.dumps(x.as_dict(), ensure_ascii=False), file=sys.stderr)


def strict_v10(raw, message_type):
    """`raw` read as the SDK's 1.0 protobuf `message_type`, unknown fields refused."""
    try:
        return json_format.ParseDict(raw, message_type(), ignore_unknown_fields=False)
    except json_format.ParseError as e:
        raise CheckFailed(f"not a strict 1.0 {message_type.__name__}: {e}") from e


def unknown_members(raw, model, path="result"):
    """Members of `raw` the SDK's 0.3 pydantic `model` (validated from it) does not know; metadata and
    data (free-form) are not looked into."""
    known = model.model_dump(mode="json", by_alias=True, exclude_none=False)
    out = []

    def walk(r, k, p):
        if isinstance(r, dict) and isinstance(k, dict):
            for key, value in r.items():
                if key not in k:
                    out.append(f"{p}.{key}")
                elif key not in ("metadata", "data"):
                    walk(value, k[key], f"{p}.{key}")
        elif isinstance(r, list) and isinstance(k, list) and len(r) == len(k):
            for i, (a, b) in enumerate(zip(r, k)):
                walk(a, b, f"{p}[{i}]")

    walk(raw, known, path)
    return out


def strict_v03(raw, model):
    """`raw` validated by the SDK's 0.3 pydantic `model`, with no member it does not know."""
    parsed = model.model_validate(raw)
    unknown = unknown_members(raw, parsed)
    expect(not unknown, f"members 0.3 {model.__name__} does not know: {unknown}")
    return parsed


# --- The checks ----------------------------------------------------------------------------------


class V10:
    name = "1.0"
    transport = JsonRpcTransport
    send, stream, get, cancel, subscribe = "SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "SubscribeToTask"
    push_set, push_get, push_list = "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs"

    @staticmethod
    def strict(raw, what):
        """A result read strictly by the SDK's 1.0 type for `what` (send, task or event)."""
        types = {"send": SendMessageResponse, "task": Task, "event": StreamResponse}
        strict_v10(raw, types[what])


class V03:
    name = "0.3"
    transport = CompatJsonRpcTransport
    send, stream, get, cancel, subscribe = "message/send", "message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe"
    push_set, push_get, push_list = "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list"

    @staticmethod
    def strict(raw, what):
        """A result read strictly by the SDK's 0.3 model for `what` (send, task or event: by its kind)."""
        expect(isinstance(raw, dict), f"result {raw!r} is no object")
        kind = raw.get("kind")
        if what in ("send", "task"):
            expect(kind == "task", f"result kind {kind!r}, not 'task'")
        models = {
            "task": types_v03.Task,
            "message": types_v03.Message,
            "status-update": types_v03.TaskStatusUpdateEvent,
            "artifact-update": types_v03.TaskArtifactUpdateEvent,
        }
        expect(kind in models, f"result kind {kind!r} is none of {sorted(models)}")
        strict_v03(raw, models[kind])


OPEN = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


class Webhook(http.server.ThreadingHTTPServer):
    """A client's webhook on 127.0.0.1: keeps each POST's headers and JSON body."""

    def __init__(self):
        self.got = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                hook.got.append((self.path, dict(self.headers.items()), json.loads(body or b"null")))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    async def until(self, path, done):
        deadline = time.monotonic() + TIMEOUT
        while True:
            got = [g for g in self.got if g[0] == path]
            if got and done(got[-1]):
                return got
            expect(time.monotonic() < deadline, f"the webhook at {path} got {got}")
            await asyncio.sleep(0.1)


def new_message(text, skill):
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        metadata={"skill": skill},
    )


def artifact_text(task):
    texts = [p.text for a in task.artifacts for p in a.parts if p.text]
    return texts[0] if len(texts) == 1 else texts


def is_task(value):
    expect(isinstance(value, Task), f"{type(value)} is not the SDK's Task")
    return value


async def send(client, text, skill):
    """One message through the SDK's non-streaming client; answers the task its one response carries."""
    request = SendMessageRequest(message=new_message(text, skill))
    responses = [r async for r in client.send_message(request)]
    expect(len(responses) == 1, f"{len(responses)} responses, not one")
    expect(responses[0].HasField("task"), f"the response is no task: {responses[0]}")
    return is_task(responses[0].task)


def rpc_result(x, v, what):
    """The result of exchange `x`, read strictly; the JSON-RPC error when there is one."""
    got = x.got
    expect(isinstance(got, dict), f"the answer is no JSON-RPC object: {got!r}")
    expect("result" in got, f"the answer has no result: {got}")
    v.strict(got["result"], what)
    return got["result"]


def stream_results(x, v):
    """The results of event stream `x`, each read strictly."""
    events = x.got
    expect(isinstance(events, list), f"{x.content_type!r} is no event stream: {events!r}")
    results = []
    for i, event in enumerate(events):
        expect(isinstance(event, dict) and "result" in event, f"event {i} has no result: {event}")
        try:
            v.strict(event["result"], "event")
        except CheckFailed as e:
            raise CheckFailed(f"event {i}: {e}") from e
        results.append(event["result"])
    return results


def describe(event):
    which = event.WhichOneof("payload")
    if which == "task":
        return f"task {state_name(event.task.status.state)}"
    if which == "status_update":
        return f"status {state_name(event.status_update.status.state)}"
    if which == "artifact_update":
        return f"artifact {[p.text for p in event.artifact_update.artifact.parts]}"
    return str(which)


class Run:
    def __init__(self, base):
        self.base = base
        self.wire = Wire()
        self.http = httpx.AsyncClient(timeout=TIMEOUT, transport=self.wire)
        self.card = None
        self.card_v03 = None
        self.sent = {}  # version name -> the task its blocking send completed
        self.failed = 0
        self.passed = 0

    async def check(self, name, body, *args):
        try:
            await asyncio.wait_for(body(*args), TIMEOUT * 2)
        except Exception as e:
            self.failed += 1
            why = str(e) if isinstance(e, CheckFailed) else f"{type(e).__name__}: {e}"
            print(f"{name}: FAILED: {' '.join(why.split())}", flush=True)
            if not isinstance(e, CheckFailed):
                traceback.print_exc(file=sys.stderr)
            self.wire.dump()
        else:
            self.passed += 1
            print(f"{name}: ok", flush=True)

    # The card.

    async def card_check(self):
        resolver = A2ACardResolver(self.http, self.base)
        card = await resolver.get_agent_card()
        expect(isinstance(card, AgentCard), f"{type(card)} is not the SDK's AgentCard")
        # 1.0's fields only: read strictly, as a 1.0 reader that ignores nothing would.
        raw = self.wire.last().got
        strict_v10(raw, AgentCard)
        for legacy in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces", "supportsAuthenticatedExtendedCard"):
            expect(legacy not in raw, f"the 1.0 card carries 0.3's {legacy!r}")
        skills = {s.id: s for s in card.skills}
        expect(ANSWER in skills and SLOW_SKILL in skills, f"skills {sorted(skills)} lack {ANSWER} or {SLOW_SKILL}")
        expect(skills[ANSWER].name and skills[ANSWER].description and skills[ANSWER].tags, f"skill {skills[ANSWER]}")
        rpc = f"{self.base}/a2a"
        interfaces = {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
        for version in ("1.0", "0.3"):
            expect((rpc, "JSONRPC", version) in interfaces, f"no JSONRPC {version} interface at {rpc}: {interfaces}")
        expect(card.HasField("capabilities"), "no capabilities")
        expect(card.name and card.version and card.default_input_modes, "name, version or input modes missing")
        # The same card when the client names its version, as the SDK's ClientFactory does.
        again = await resolver.get_agent_card(http_kwargs={"headers": {"A2A-Version": "1.0"}})
        expect(again == card, "the card asked for with A2A-Version: 1.0 differs")
        # Cacheable, and revalidated by its ETag.
        x = self.wire.last()
        response = await self.http.get(x.url, headers={"A2A-Version": "1.0"})
        tag, cache = response.headers.get("etag"), response.headers.get("cache-control", "")
        expect(tag and "max-age=" in cache, f"ETag {tag!r}, Cache-Control {cache!r}")
        again = await self.http.get(x.url, headers={"A2A-Version": "1.0", "If-None-Match": tag})
        expect(again.status_code == 304, f"If-None-Match with its ETag answered {again.status_code}")
        self.card = card
        print(f"sdk_check: the card says streaming: {card.capabilities.streaming}", file=sys.stderr)

    async def card_v03_check(self):
        # The 0.3 card (0.3's path, or A2A-Version: 0.3): validated by the SDK's 0.3 pydantic
        # AgentCard with no member it does not know, and turned into one 0.3 interface by the SDK's
        # own compatibility code.
        rpc = f"{self.base}/a2a"
        cards = []
        for path, headers in (("/.well-known/agent.json", {}), ("/.well-known/agent-card.json", {"A2A-Version": "0.3"})):
            response = await self.http.get(f"{self.base}{path}", headers=headers)
            response.raise_for_status()
            raw = self.wire.last().got
            legacy = strict_v03(raw, types_v03.AgentCard)
            expect(legacy.url == rpc, f"0.3 url {legacy.url!r}, not {rpc!r}")
            expect(legacy.preferred_transport == "JSONRPC", f"0.3 preferredTransport {legacy.preferred_transport!r}")
            expect(legacy.protocol_version.startswith("0.3"), f"0.3 protocolVersion {legacy.protocol_version!r}")
            expect(ANSWER in {s.id for s in legacy.skills}, f"0.3 skills {legacy.skills}")
            expect("supportedInterfaces" not in raw, "the 0.3 card carries 1.0's supportedInterfaces")
            cards.append(raw)
        expect(cards[0] == cards[1], "the 0.3 card differs between its path and its version header")
        card = parse_agent_card(dict(cards[0]))
        interfaces = {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
        expect(interfaces == {(rpc, "JSONRPC", "0.3")}, f"the 0.3 card's interfaces: {interfaces}")
        self.card_v03 = card

    # Each version, through the client the SDK's ClientFactory makes for its interface: 1.0 from the
    # card, 0.3 from the card as a 0.3 reader sees it.

    def client(self, v, **config):
        card = self.card if v is V10 else self.card_v03
        expect(card is not None, "no card (its check failed)")
        client = ClientFactory(ClientConfig(httpx_client=self.http, **config)).create(card)
        transport = type(client._transport)
        expect(transport is v.transport, f"the SDK picked {transport.__name__}, not {v.transport.__name__}")
        return client

    async def send_blocking(self, v):
        client = self.client(v, streaming=False)
        text = f"what is six times seven? ({v.name})"
        task = await send(client, text, ANSWER)
        x = self.wire.last_rpc(v.send)
        expect(x.version == v.name, f"the SDK sent A2A-Version {x.version!r}")
        if v is V03:
            sent = x.sent["params"]
            expect(sent.get("configuration", {}).get("blocking") is True, f"the SDK sent configuration {sent}")
        rpc_result(x, v, "send")
        expect(task.id.startswith("task_"), f"task id {task.id!r}")
        expect(task.context_id, "no contextId")
        state = state_name(task.status.state)
        expect(task.status.state == TaskState.TASK_STATE_COMPLETED, f"state {state}, not TASK_STATE_COMPLETED")
        expect(task.status.HasField("timestamp"), "no status.timestamp")
        expect(artifact_text(task) == "42: " + text, f"artifact text {artifact_text(task)!r}")
        history = [p.text for m in task.history for p in m.parts]
        expect(text in history, f"history {history} lacks the message")
        self.sent[v.name] = task

    async def get(self, v):
        sent = self.sent.get(v.name)
        expect(sent is not None, "no task (the blocking send failed)")
        client = self.client(v, streaming=False)
        got = is_task(await client.get_task(GetTaskRequest(id=sent.id)))
        x = self.wire.last_rpc(v.get)
        expect(x.version == v.name, f"the SDK sent A2A-Version {x.version!r}")
        rpc_result(x, v, "task")
        expect(got.id == sent.id and got.context_id == sent.context_id, f"got task {got.id!r} in {got.context_id!r}")
        state = state_name(got.status.state)
        expect(got.status.state == TaskState.TASK_STATE_COMPLETED, f"state {state}, not completed")
        expect(artifact_text(got) == artifact_text(sent), f"artifact text {artifact_text(got)!r}")
        if v is V10:
            # historyLength 0: no messages.
            bare = await client.get_task(GetTaskRequest(id=sent.id, history_length=0))
            expect(self.wire.last_rpc(v.get).sent["params"].get("historyLength") == 0, "historyLength 0 not sent")
            expect(len(bare.history) == 0, f"{len(bare.history)} history messages with historyLength 0")

    async def send_polling(self, v):
        client = self.client(v, streaming=False, polling=True)
        text = f"and in a while? ({v.name})"
        task = await send(client, text, ANSWER)
        x = self.wire.last_rpc(v.send)
        sent = x.sent["params"].get("configuration", {})
        if v is V10:
            expect(sent.get("returnImmediately") is True, f"the SDK sent configuration {sent}")
        else:
            expect(sent.get("blocking") is False, f"the SDK sent configuration {sent}")
        rpc_result(x, v, "send")
        first = state_name(task.status.state)
        expect(task.status.state in OPEN + (TaskState.TASK_STATE_COMPLETED,), f"state {first} at once")
        deadline = time.monotonic() + TIMEOUT
        while True:
            done = is_task(await client.get_task(GetTaskRequest(id=task.id)))
            if done.status.state == TaskState.TASK_STATE_COMPLETED or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        rpc_result(self.wire.last_rpc(v.get), v, "task")
        state = state_name(done.status.state)
        expect(done.status.state == TaskState.TASK_STATE_COMPLETED, f"state {state} after polling, not COMPLETED")
        expect(done.id == task.id and done.context_id == task.context_id, "get_task answered another task")
        expect(artifact_text(done) == "42: " + text, f"artifact text {artifact_text(done)!r}")

    async def cancel(self, v):
        client = self.client(v, streaming=False, polling=True)
        task = await send(client, f"never answered ({v.name})", SLOW_SKILL)
        expect(task.status.state in OPEN, f"state {state_name(task.status.state)}, not open")
        canceled = is_task(await client.cancel_task(CancelTaskRequest(id=task.id)))
        rpc_result(self.wire.last_rpc(v.cancel), v, "task")
        state = state_name(canceled.status.state)
        expect(canceled.status.state == TaskState.TASK_STATE_CANCELED, f"state {state}, not TASK_STATE_CANCELED")
        got = await client.get_task(GetTaskRequest(id=task.id))
        expect(got.status.state == TaskState.TASK_STATE_CANCELED, f"get_task: {state_name(got.status.state)}")
        try:
            again = await client.cancel_task(CancelTaskRequest(id=task.id))
        except TaskNotCancelableError as e:
            error = self.wire.last_rpc(v.cancel).got.get("error", {})
            expect(error.get("code") == -32002, f"error {error}")
            expect(e.message, "no message")
            if v is V10:
                reasons = [d.get("reason") for d in error.get("data", []) if isinstance(d, dict)]
                expect(reasons == ["TASK_NOT_CANCELABLE"], f"ErrorInfo reasons {reasons}")
        else:
            raise CheckFailed(f"cancelling again answered {state_name(again.status.state)}, no TaskNotCancelableError")

    async def unknown(self, v):
        client = self.client(v, streaming=False)
        try:
            task = await client.get_task(GetTaskRequest(id="task_01NOSUCHTASK0000000000000"))
        except TaskNotFoundError:
            error = self.wire.last_rpc(v.get).got.get("error", {})
            expect(error.get("code") == -32001, f"error {error}")
            if v is V10:
                reasons = [d.get("reason") for d in error.get("data", []) if isinstance(d, dict)]
                expect(reasons == ["TASK_NOT_FOUND"], f"ErrorInfo reasons {reasons}")
        else:
            raise CheckFailed(f"an unknown task answered {task}, no TaskNotFoundError")

    async def push(self, v, hook):
        client = self.client(v, streaming=False, polling=True)
        task = await send(client, f"tell my webhook ({v.name})", SLOW_SKILL)
        path = f"/hook-{v.name}"
        secret = f"cred-{uuid.uuid4()}"
        config = TaskPushNotificationConfig(
            task_id=task.id,
            id=f"hook-{v.name.replace('.', '')}",
            url=hook.url(path),
            token=f"tok-{v.name}",
            authentication=AuthenticationInfo(scheme="Bearer", credentials=secret),
        )
        made = await client.create_task_push_notification_config(config)
        x = self.wire.last_rpc(v.push_set)
        if v is V10:
            strict_v10(x.got["result"], TaskPushNotificationConfig)
        else:
            strict_v03(x.got["result"], types_v03.TaskPushNotificationConfig)
        expect(made.id == config.id and made.url == config.url and made.task_id == task.id, f"created {made}")
        expect(made.authentication.scheme == "Bearer", f"authentication {made.authentication}")
        expect(secret not in json.dumps(x.got), "the credentials came back in the answer")
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=config.id)
        )
        expect(got.url == config.url and got.token == config.token, f"got {got}")
        listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
        expect([c.id for c in listed.configs] == [config.id], f"listed {listed}")
        # The cancel is told at the webhook, with the client's credentials.
        await client.cancel_task(CancelTaskRequest(id=task.id))
        if v is V10:
            ended = lambda g: g[2].get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_CANCELED"
        else:
            ended = lambda g: g[2].get("status", {}).get("state") == "canceled"
        got = await hook.until(path, ended)
        for _, headers, body in got:
            headers = {k.lower(): val for k, val in headers.items()}
            expect(headers.get("authorization") == f"Bearer {secret}", f"Authorization {headers.get('authorization')!r}")
            expect(headers.get("x-a2a-notification-token") == config.token, f"token {headers}")
            if v is V10:
                event = strict_v10(body, StreamResponse)
                update = event.status_update if event.HasField("status_update") else event.artifact_update
                expect(update.task_id == task.id, f"a notification about {update.task_id}")
            else:
                told = strict_v03(body, types_v03.Task)
                expect(told.id == task.id, f"a notification about {told.id}")
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=config.id)
        )
        listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
        expect(len(listed.configs) == 0, f"still listed after delete: {listed}")

    def streams(self):
        expect(self.card is not None, "no card (its check failed)")
        return self.card.capabilities.streaming

    async def unsupported(self, call):
        """A card without streaming: the daemon refuses the streaming method with -32004."""
        try:
            async for _ in call:
                pass
        except UnsupportedOperationError:
            return
        raise CheckFailed("the card says streaming: false, yet the streaming method raised no UnsupportedOperationError")

    async def stream(self, v):
        client = self.client(v)
        text = f"tell me as it goes ({v.name})"
        request = SendMessageRequest(message=new_message(text, ANSWER))
        if not self.streams():
            return await self.unsupported(client._transport.send_message_streaming(request))
        events = [e async for e in client.send_message(request)]
        x = self.wire.last_rpc(v.stream)
        expect(x.version == v.name, f"the SDK sent A2A-Version {x.version!r}")
        results = stream_results(x, v)
        said = [describe(e) for e in events]
        expect(len(events) == len(results), f"the SDK yielded {len(events)} events of {len(results)}: {said}")
        expect(events and events[0].HasField("task"), f"the stream does not begin with the task: {said}")
        task_id = events[0].task.id
        ids = {e.task.id if e.HasField("task") else getattr(e, e.WhichOneof("payload")).task_id for e in events}
        expect(ids == {task_id}, f"events of tasks {ids}")
        artifacts = [p.text for e in events if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts]
        expect(artifacts == ["42: " + text], f"artifact updates {artifacts}; events {said}")
        last = events[-1]
        expect(
            last.HasField("status_update") and last.status_update.status.state == TaskState.TASK_STATE_COMPLETED,
            f"the stream does not end with the completed status: {said}",
        )
        if v is V03:
            finals = [r.get("final") for r in results if r.get("kind") == "status-update"]
            expect(finals and finals[-1] is True and not any(finals[:-1]), f"status-update finals {finals}")

    async def resubscribe(self, v):
        plain = self.client(v, streaming=False, polling=True)
        task = await send(plain, f"followed, then cancelled ({v.name})", SLOW_SKILL)
        expect(task.status.state in OPEN, f"state {state_name(task.status.state)}, not open")
        following = self.client(v)
        request = SubscribeToTaskRequest(id=task.id)
        if not self.streams():
            return await self.unsupported(following._transport.subscribe(request))
        events, started = [], asyncio.Event()

        async def follow():
            async for event in following.subscribe(request):
                events.append(event)
                started.set()

        follower = asyncio.create_task(follow())
        try:
            await asyncio.wait({follower, asyncio.create_task(started.wait())}, timeout=TIMEOUT,
                               return_when=asyncio.FIRST_COMPLETED)
            if follower.done():
                follower.result()
            expect(started.is_set(), "no event within the time")
            await plain.cancel_task(CancelTaskRequest(id=task.id))
            await asyncio.wait_for(follower, TIMEOUT)
        finally:
            follower.cancel()
        x = self.wire.last_rpc(v.subscribe)
        expect(x.version == v.name, f"the SDK sent A2A-Version {x.version!r}")
        results = stream_results(x, v)
        said = [describe(e) for e in events]
        expect(len(events) == len(results), f"the SDK yielded {len(events)} events of {len(results)}: {said}")
        expect(events[0].HasField("task") and events[0].task.id == task.id, f"the stream does not begin with the task: {said}")
        last = events[-1]
        expect(
            last.HasField("status_update") and last.status_update.status.state == TaskState.TASK_STATE_CANCELED,
            f"the stream does not end with the canceled status: {said}",
        )

    async def rest(self):
        """1.0 over the HTTP+JSON binding the card also names: the SDK's RestTransport sends (blocking
        and streamed), gets, and misses a task; every answer strictly read as ProtoJSON."""
        expect(self.card is not None, "no card (its check failed)")
        rest = f"{self.base}/a2a/rest"
        interfaces = {(i.url, i.protocol_binding, i.protocol_version) for i in self.card.supported_interfaces}
        expect((rest, "HTTP+JSON", "1.0") in interfaces, f"no HTTP+JSON 1.0 interface at {rest}: {interfaces}")

        def client(streaming):
            config = ClientConfig(httpx_client=self.http, streaming=streaming, supported_protocol_bindings=["HTTP+JSON"])
            made = ClientFactory(config).create(self.card)
            expect(type(made._transport) is RestTransport, f"the SDK picked {type(made._transport).__name__}")
            return made

        text = "what is six times eight? (HTTP+JSON)"
        task = await send(client(False), text, ANSWER)
        x = self.wire.last()
        expect(x.version == "1.0", f"the SDK sent A2A-Version {x.version!r}")
        strict_v10(x.got, SendMessageResponse)
        expect(task.status.state == TaskState.TASK_STATE_COMPLETED, f"state {state_name(task.status.state)}")
        expect(artifact_text(task) == "42: " + text, f"artifact text {artifact_text(task)!r}")
        got = await client(False).get_task(GetTaskRequest(id=task.id))
        strict_v10(self.wire.last().got, Task)
        expect(got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED, f"got {got}")
        try:
            missing = await client(False).get_task(GetTaskRequest(id="task_01NOSUCHTASK0000000000000"))
        except TaskNotFoundError:
            pass
        else:
            raise CheckFailed(f"an unknown task answered {missing}, no TaskNotFoundError")
        if self.streams():
            request = SendMessageRequest(message=new_message(text + " streamed", ANSWER))
            events = [e async for e in client(True).send_message(request)]
            said = [describe(e) for e in events]
            expect(events and events[0].HasField("task"), f"the stream does not begin with the task: {said}")
            last = events[-1]
            expect(
                last.HasField("status_update") and last.status_update.status.state == TaskState.TASK_STATE_COMPLETED,
                f"the stream does not end with the completed status: {said}",
            )

    async def all(self):
        hook = Webhook()
        await self.check("card", self.card_check)
        await self.check("card, as 0.3 reads it", self.card_v03_check)
        for v in (V10, V03):
            await self.check(f"{v.name} send, blocking", self.send_blocking, v)
            await self.check(f"{v.name} get", self.get, v)
            await self.check(f"{v.name} send, not blocking, then get until completed", self.send_polling, v)
            await self.check(f"{v.name} cancel, then cancel again", self.cancel, v)
            await self.check(f"{v.name} get an unknown task", self.unknown, v)
            await self.check(f"{v.name} stream a send", self.stream, v)
            await self.check(f"{v.name} subscribe, cancelled meanwhile", self.resubscribe, v)
            await self.check(f"{v.name} push notification config, told at the webhook", self.push, v, hook)
        await self.check("1.0 over HTTP+JSON: send, get, miss, stream", self.rest)
        await self.http.aclose()
        hook.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the daemon's base URL, http://127.0.0.1:PORT")
    args = parser.parse_args()
    base = args.url.rstrip("/")

    agents = Agents(base)
    agents.register()
    agents.start()
    run = Run(base)
    try:
        asyncio.run(run.all())
    finally:
        agents.stop()
    print(f"sdk_check: {run.passed} passed, {run.failed} failed", file=sys.stderr)
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
