"""Any A2A server as a Clutch agent, in one call: the hub gives it tasks as it gives any agent's.

The hub is an A2A client of every agent whose card names an A2A endpoint (`endpoints.a2a.url`): it
sends each task routed there as an A2A message (the skill in `metadata.skill`, the goal as text,
the thread as the context), follows the remote task and writes its outcome as the agent's own
events. `card()` is that registration; `serve()` runs an ASGI A2A app (Google ADK's `to_a2a()`, an
A2A SDK app around Agent Framework's `A2AExecutor`, ...) on a free loopback port, registered for as
long as it runs.

The other way, an A2A client calling Clutch agents, needs nothing from here: point it at the hub's
card (`{hub}/.well-known/agent-card.json`) and name the capability as the message's `metadata.skill`.

`serve()` needs uvicorn (the `a2a` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any, AsyncIterator, Callable

import clutch
from clutch import AsyncClient, ClutchError
from clutch.client import DEFAULT_URL


def card(agent_id: str, a2a_url: str, capabilities: list, *, description: str | None = None,
         a2a_version: str | None = None, max_concurrency: int | None = None) -> dict:
    """The AgentCard that makes the A2A agent at `a2a_url` (its JSON-RPC endpoint) a Clutch agent;
    register it with `AsyncClient.register`.

    `capabilities` are ids (`"skill:write"`, `"skill:write@1.0.0"`) or capability objects. The hub
    speaks the version the server's card offers (1.0 when it can, else 0.3); `a2a_version="0.3"` pins
    0.3. The server's card must read at its origin's `/.well-known/agent-card.json`: the hub reads it
    there to heartbeat the agent, and one whose card does not read goes stale, then offline.
    """
    return clutch.card(
        agent_id, capabilities,
        endpoints={"a2a": {"url": a2a_url}},
        display={"name": agent_id.removeprefix("agent:"), "desc": description} if description else None,
        meta={"a2a_version": a2a_version} if a2a_version else None,
        limits={"max_concurrency": max_concurrency} if max_concurrency else None,
    )


@contextlib.asynccontextmanager
async def serve(app: Callable[[int], Any], *, agent_id: str, capabilities: list, url: str = DEFAULT_URL,
                token: str | None = None, host: str = "127.0.0.1", port: int = 0, path: str = "/",
                description: str | None = None, a2a_version: str | None = None,
                max_concurrency: int | None = None) -> AsyncIterator[str]:
    """Serves the ASGI app `app(port)` builds on `host:port` (0: a free port) and registers it with the
    hub at `url` as `agent_id`; yields its A2A endpoint's URL. On exit the agent is removed from the
    hub, then the server stopped.

    `app` is given the port because A2A servers write their own URL into their card
    (`lambda port: to_a2a(agent, host="127.0.0.1", port=port)`). `path` is where the app takes
    JSON-RPC (`/` for ADK's `to_a2a()` and the A2A SDK's usual routes).
    """
    import uvicorn  # only here: card() needs no server

    # Bound before the app is built, so that the app's card names the port it is served on.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app(port), log_level="warning"))
    except BaseException:
        sock.close()
        raise
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # uvicorn says so only by this flag
            if serving.done():
                await serving  # raises what stopped it, if anything did
                raise RuntimeError(f"the A2A server on {host}:{port} stopped before it started")
            await asyncio.sleep(0.02)
        endpoint = f"http://{host}:{port}{path}"
        agent_card = card(agent_id, endpoint, capabilities, description=description, a2a_version=a2a_version,
                          max_concurrency=max_concurrency)
        async with AsyncClient(url, token=token) as hub:
            await hub.register(agent_card)
            try:
                yield endpoint
            finally:
                # A hub gone meanwhile keeps the card, but its reads of our card fail once we stop,
                # so the agent goes stale there, then offline: nothing to raise over the block's own end.
                with contextlib.suppress(ClutchError):
                    await hub.remove_agent(agent_card["agent_id"])
    finally:
        server.should_exit = True
        await serving
        sock.close()
