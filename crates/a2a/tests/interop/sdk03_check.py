"""The A2A face checked with a real 0.3 client: the official Python SDK of the 0.3 line (PyPI
`a2a-sdk` 0.3.x, in a venv of its own), which sends no `A2A-Version` and reads everything with its
own 0.3 pydantic types, against a running Clutch daemon.

Discovery: the SDK's `A2ACardResolver` reads the 0.3 card at `/.well-known/agent.json`, and at the
default `/.well-known/agent-card.json` when it says `A2A-Version: 0.3`; naming neither, it gets what
the daemon's `[a2a] unversioned_card` says (`--unversioned`): the 0.3 card, or the 1.0 card, which
its 0.3 model refuses (the reason a 0.3 client of such a hub names the path or the version).

Talking: `message/send` with no `configuration` at all, through the SDK's `A2AClient` and its
`JsonRpcTransport`, is answered with the ended task (a 0.3 server blocks by default, as the SDK's
own does); then the SDK's `ClientFactory` client, blocking and polling; a cancel; a stream; an
unknown task (-32001); and a negative `historyLength`, refused (-32602, naming it). Every request
must go without `A2A-Version`.

The agents (hub_agents.py) work beside it over the HTTP API.

Usage: sdk03_check.py --url http://127.0.0.1:PORT [--unversioned 1.0|0.3]. Prints `NAME: ok` or
`NAME: FAILED: why` per check (what went over the wire on stderr when one fails) and exits non-zero
when any failed.
"""

import argparse
import asyncio
import json
import sys
import time
import traceback
import uuid

import httpx

from a2a.client import A2ACardResolver, A2AClient, A2AClientJSONError, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import (
    AgentCard,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TextPart,
)

from hub_agents import ANSWER, SLOW_SKILL, TIMEOUT, Agents, CheckFailed, expect


def new_message(text, skill):
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        metadata={"skill": skill},
    )


def artifact_text(task):
    return [p.root.text for a in task.artifacts or [] for p in a.parts if hasattr(p.root, "text")]


class Run:
    def __init__(self, base, unversioned):
        self.base = base
        self.unversioned = unversioned
        self.sent = []  # each request: (method, url, a2a-version header, JSON body)
        self.http = httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"request": [self.record]})
        self.card = None
        self.passed = 0
        self.failed = 0

    async def record(self, request):
        try:
            body = json.loads(request.content) if request.content else None
        except ValueError:
            body = None
        self.sent.append((request.method, str(request.url), request.headers.get("a2a-version"), body))

    def last_rpc(self, method):
        for x in reversed(self.sent):
            if isinstance(x[3], dict) and x[3].get("method") == method:
                return x
        raise CheckFailed(f"the SDK did not call {method!r}")

    async def check(self, name, body, *args):
        try:
            await asyncio.wait_for(body(*args), TIMEOUT * 2)
        except Exception as e:
            self.failed += 1
            why = str(e) if isinstance(e, CheckFailed) else f"{type(e).__name__}: {e}"
            print(f"{name}: FAILED: {' '.join(why.split())}", flush=True)
            if not isinstance(e, CheckFailed):
                traceback.print_exc(file=sys.stderr)
            for x in self.sent[-2:]:
                print("  wire: " + json.dumps(x, ensure_ascii=False), file=sys.stderr)
        else:
            self.passed += 1
            print(f"{name}: ok", flush=True)

    # Discovery.

    def is_03_card(self, card):
        rpc = f"{self.base}/a2a"
        expect(isinstance(card, AgentCard), f"{type(card)} is not the SDK's AgentCard")
        expect(card.url == rpc, f"url {card.url!r}, not {rpc!r}")
        expect(card.preferred_transport == "JSONRPC", f"preferredTransport {card.preferred_transport!r}")
        expect(card.protocol_version.startswith("0.3"), f"protocolVersion {card.protocol_version!r}")
        expect(ANSWER in {s.id for s in card.skills}, f"skills {card.skills}")
        return card

    async def card_at_its_path(self):
        resolver = A2ACardResolver(self.http, self.base, agent_card_path="/.well-known/agent.json")
        self.card = self.is_03_card(await resolver.get_agent_card())

    async def card_by_version(self):
        resolver = A2ACardResolver(self.http, self.base)
        card = await resolver.get_agent_card(http_kwargs={"headers": {"A2A-Version": "0.3"}})
        expect(self.is_03_card(card) == self.card, "the card asked for with A2A-Version: 0.3 differs from agent.json's")

    async def card_unversioned(self):
        resolver = A2ACardResolver(self.http, self.base)
        if self.unversioned == "0.3":
            card = await resolver.get_agent_card()
            expect(self.is_03_card(card) == self.card, "the unversioned card differs from agent.json's")
            return
        try:
            card = await resolver.get_agent_card()
        except A2AClientJSONError as e:
            expect("url" in str(e), f"refused for another reason: {e}")
        else:
            raise CheckFailed(f"the 0.3 model read the 1.0 card: {card}")

    # Talking.

    def card_or_fail(self):
        expect(self.card is not None, "no card (its check failed)")
        return self.card

    def sent_as_0_3(self, method):
        x = self.last_rpc(method)
        expect(x[2] is None, f"the SDK sent A2A-Version {x[2]!r}")
        return x

    def completed(self, task, text):
        expect(isinstance(task, Task), f"{type(task).__name__} is not the SDK's Task: {task}")
        expect(task.status.state == TaskState.completed, f"state {task.status.state}, not completed")
        expect(artifact_text(task) == ["42: " + text], f"artifacts {artifact_text(task)}")
        return task

    async def send_no_configuration_a2aclient(self):
        client = A2AClient(self.http, agent_card=self.card_or_fail())
        text = "six times seven, with no configuration (A2AClient)"
        request = SendMessageRequest(id=str(uuid.uuid4()), params=MessageSendParams(message=new_message(text, ANSWER)))
        response = await client.send_message(request)
        x = self.sent_as_0_3("message/send")
        expect("configuration" not in x[3]["params"], f"the SDK sent a configuration: {x[3]['params']}")
        expect(hasattr(response.root, "result"), f"an error: {response.root}")
        self.completed(response.root.result, text)

    async def send_no_configuration_transport(self):
        transport = JsonRpcTransport(self.http, agent_card=self.card_or_fail())
        text = "six times seven, with no configuration (JsonRpcTransport)"
        task = await transport.send_message(MessageSendParams(message=new_message(text, ANSWER)))
        x = self.sent_as_0_3("message/send")
        expect("configuration" not in x[3]["params"], f"the SDK sent a configuration: {x[3]['params']}")
        self.completed(task, text)
        got = await transport.get_task(TaskQueryParams(id=task.id))
        self.sent_as_0_3("tasks/get")
        expect(got.id == task.id and artifact_text(got) == artifact_text(task), f"got {got}")

    def client(self, **config):
        return ClientFactory(ClientConfig(httpx_client=self.http, **config)).create(self.card_or_fail())

    async def last_task(self, events):
        tasks = [e[0] if isinstance(e, tuple) else e for e in events]
        expect(tasks and isinstance(tasks[-1], Task), f"no task among {events}")
        return tasks[-1]

    async def send_blocking(self):
        text = "and six times eight? (blocking)"
        events = [e async for e in self.client(streaming=False).send_message(new_message(text, ANSWER))]
        x = self.sent_as_0_3("message/send")
        expect(x[3]["params"].get("configuration", {}).get("blocking") is True, f"configuration {x[3]['params']}")
        self.completed(await self.last_task(events), text)

    async def send_polling(self):
        text = "and six times nine? (polling)"
        client = self.client(streaming=False, polling=True)
        task = await self.last_task([e async for e in client.send_message(new_message(text, ANSWER))])
        x = self.sent_as_0_3("message/send")
        expect(x[3]["params"].get("configuration", {}).get("blocking") is False, f"configuration {x[3]['params']}")
        deadline = time.monotonic() + TIMEOUT
        while task.status.state != TaskState.completed and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            task = await client.get_task(TaskQueryParams(id=task.id))
        self.completed(task, text)

    async def cancel(self):
        client = self.client(streaming=False, polling=True)
        task = await self.last_task([e async for e in client.send_message(new_message("never answered", SLOW_SKILL))])
        expect(task.status.state in (TaskState.submitted, TaskState.working), f"state {task.status.state}")
        canceled = await client.cancel_task(TaskIdParams(id=task.id))
        self.sent_as_0_3("tasks/cancel")
        expect(canceled.status.state == TaskState.canceled, f"state {canceled.status.state}, not canceled")

    async def stream(self):
        card = self.card_or_fail()
        if not card.capabilities.streaming:
            return
        text = "tell me as it goes"
        events = [e async for e in self.client(streaming=True).send_message(new_message(text, ANSWER))]
        self.sent_as_0_3("message/stream")
        self.completed(await self.last_task(events), text)

    async def rpc_error(self, call, code):
        try:
            got = await call
        except A2AClientJSONRPCError as e:
            expect(e.error.code == code, f"error {e.error}, not {code}")
            return e.error
        raise CheckFailed(f"answered {got}, no error {code}")

    async def unknown(self):
        transport = JsonRpcTransport(self.http, agent_card=self.card_or_fail())
        await self.rpc_error(transport.get_task(TaskQueryParams(id="task_01NOSUCHTASK0000000000000")), -32001)

    async def negative_history(self):
        transport = JsonRpcTransport(self.http, agent_card=self.card_or_fail())
        text = "keep my history"
        task = await transport.send_message(MessageSendParams(message=new_message(text, ANSWER)))
        error = await self.rpc_error(transport.get_task(TaskQueryParams(id=task.id, history_length=-1)), -32602)
        expect(error.message.startswith("historyLength: "), f"the error does not name the field: {error.message}")
        config = MessageSendConfiguration(history_length=-1)
        params = MessageSendParams(message=new_message(text, ANSWER), configuration=config)
        error = await self.rpc_error(transport.send_message(params), -32602)
        expect(error.message.startswith("configuration.historyLength: "), f"not named: {error.message}")

    async def run(self):
        await self.check("0.3 card at /.well-known/agent.json", self.card_at_its_path)
        await self.check("0.3 card asked for with A2A-Version: 0.3", self.card_by_version)
        await self.check(f"the card naming no version ({self.unversioned})", self.card_unversioned)
        await self.check("send with no configuration (A2AClient): the ended task", self.send_no_configuration_a2aclient)
        await self.check(
            "send with no configuration (JsonRpcTransport): the ended task", self.send_no_configuration_transport
        )
        await self.check("send, blocking (ClientFactory)", self.send_blocking)
        await self.check("send, polling, then get until completed", self.send_polling)
        await self.check("cancel", self.cancel)
        await self.check("stream a send", self.stream)
        await self.check("get an unknown task", self.unknown)
        await self.check("a negative historyLength is refused, named", self.negative_history)
        await self.http.aclose()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--unversioned", choices=["1.0", "0.3"], default="1.0")
    args = parser.parse_args()
    base = args.url.rstrip("/")
    agents = Agents(base)
    agents.register()
    agents.start()
    run = Run(base, args.unversioned)
    try:
        asyncio.run(run.run())
    finally:
        agents.stop()
    print(f"sdk03_check: {run.passed} passed, {run.failed} failed", file=sys.stderr)
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
