"""The anchor of `clutch bench a2a`: a trivial A2A 1.0 agent served by the official Python SDK's own
server (PyPI `a2a-sdk`), the SDK's way: the JSON-RPC binding from `create_jsonrpc_routes` over its
`DefaultRequestHandler` (tasks kept in memory: nothing is durable) in uvicorn, and an `AgentExecutor`
that completes each task at once with one artifact whose single text part is "pong" (as the bench's
Clutch agent answers). Nothing is printed per message.

The bench runs it as `python -c <this file> --port 0` (the file is built into the binary). Prints
`listening on http://127.0.0.1:PORT a2a-sdk VERSION` on stdout once it serves; the JSON-RPC endpoint
is `/a2a`.
"""

import argparse
import asyncio
import socket
from importlib.metadata import version

import uvicorn
from starlette.applications import Starlette

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

SKILL = "skill:pong"
RPC_PATH = "/a2a"


class Pong(AgentExecutor):
    """Completes each task at once: the task, its one artifact, completed."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part("pong")], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(event_queue, context.task_id, task.context_id if task else context.context_id)
        await updater.cancel()


def card(base):
    return AgentCard(
        name="bench-pong",
        description="Completes each task at once (the a2a-sdk anchor of `clutch bench a2a`).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base + RPC_PATH, protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=SKILL, name="pong", description='Answers "pong".', tags=["bench"])],
    )


async def serve(sock, base):
    agent_card = card(base)
    handler = DefaultRequestHandler(agent_executor=Pong(), task_store=InMemoryTaskStore(), agent_card=agent_card)
    app = Starlette(routes=[*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, RPC_PATH)])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            await serving  # it failed to start: say why
            return
        await asyncio.sleep(0.05)
    print(f"listening on {base} a2a-sdk {version('a2a-sdk')}", flush=True)
    await serving


def main():
    parser = argparse.ArgumentParser(description="The a2a-sdk anchor of `clutch bench a2a`.")
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (0: a free one)")
    args = parser.parse_args()
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say so, as the
    # ones uvicorn makes itself do; without it every answer after a connection's first waits ~40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    asyncio.run(serve(sock, base))


if __name__ == "__main__":
    main()
