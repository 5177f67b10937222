"""An A2A 1.0 agent made with the official Python SDK's own server (PyPI `a2a-sdk`, nobody here wrote
it), for the reverse interop check (scripts/test-a2a, reverse_check.py): the daemon, as an A2A client,
gives it tasks. No protocol is written here: the card is served by `create_agent_card_routes`, the
JSON-RPC 1.0 binding by `create_jsonrpc_routes` over the SDK's `DefaultRequestHandler` (its task store
in memory), and the agent is an `AgentExecutor` that reports through a `TaskUpdater`.

The agent `sdk-echo` has one skill, `skill:echo`. Each message it is sent starts a task: submitted,
then working (with a status message, for `--delay` seconds, so that a client following the task sees
it work), then completed with one artifact whose single text part is "echo: " + the text parts of the
message joined by newlines. A cancel cancels it.

What each message carried (its task, its context, its text and data parts, its metadata and so the
skill it names in `metadata.skill`) is printed on stderr and, with `--record FILE`, appended to FILE
as one JSON object a line, for the check to read.

Usage: sdk_server.py [--port PORT] [--record FILE] [--delay SECONDS]. Port 0 (the default) takes a
free one. Prints `listening on http://127.0.0.1:PORT` on stdout once it serves; the JSON-RPC
endpoint is `http://127.0.0.1:PORT/a2a`, the card `/.well-known/agent-card.json`.
"""

import argparse
import asyncio
import json
import socket
import sys

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette

from a2a.helpers import get_data_parts, get_text_parts, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role

SKILL = "skill:echo"
RPC_PATH = "/a2a"


class Echo(AgentExecutor):
    """Answers each message with "echo: " + its text, as a task's one artifact."""

    def __init__(self, record, delay):
        self.record = record
        self.delay = delay

    def note(self, context):
        message = context.message
        metadata = json_format.MessageToDict(message.metadata) if message.HasField("metadata") else {}
        seen = {
            "task_id": context.task_id,
            "context_id": context.context_id,
            "message_id": message.message_id,
            "role": Role.Name(message.role),
            "texts": get_text_parts(message.parts),
            "data": get_data_parts(message.parts),
            "metadata": metadata,
            "skill": metadata.get("skill"),
            "a2a_version": context.call_context.state.get("headers", {}).get("a2a-version"),
        }
        line = json.dumps(seen, sort_keys=True)
        print(f"sdk_server: message {line}", file=sys.stderr, flush=True)
        if self.record:
            with open(self.record, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        self.note(context)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work(updater.new_agent_message([new_text_part("echoing")]))
        await asyncio.sleep(self.delay)
        text = "echo: " + "\n".join(get_text_parts(message.parts))
        await updater.add_artifact([new_text_part(text)], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        print(f"sdk_server: cancel {context.task_id}", file=sys.stderr, flush=True)
        updater = TaskUpdater(event_queue, context.task_id, task.context_id if task else context.context_id)
        await updater.cancel()


def card(base):
    return AgentCard(
        name="sdk-echo",
        description="Echoes what it is sent (the a2a-sdk server of Clutch's reverse interop check).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base + RPC_PATH, protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id=SKILL, name="echo", description='Answers "echo: " + the text it is sent.', tags=["echo"]),
        ],
    )


async def serve(sock, base, record, delay):
    agent_card = card(base)
    handler = DefaultRequestHandler(agent_executor=Echo(record, delay), task_store=InMemoryTaskStore(),
                                    agent_card=agent_card)
    app = Starlette(routes=[*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=True)])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            await serving  # it failed to start: say why
            return
        await asyncio.sleep(0.05)
    print(f"listening on {base}", flush=True)
    await serving


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--record", help="append what each message carried to this file (JSON lines)")
    parser.add_argument("--delay", type=float, default=1.5, help="seconds each task stays working")
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    asyncio.run(serve(sock, base, args.record, args.delay))


if __name__ == "__main__":
    main()
