"""Google ADK agents calling Clutch agents through the hub's A2A face, in one call.

`hub_agent(name, skill)` is an ADK `RemoteA2aAgent` whose remote is the hub: put it among an ADK
agent's `sub_agents` (or run it alone) and each turn it takes becomes a Clutch task routed to an agent
with `skill`; the answer comes back as the remote agent's event. What it sets, that a bare
`RemoteA2aAgent(name, agent_card=f"{hub}/.well-known/agent-card.json")` lacks:

- the skill, as the request's `metadata.skill` (the hub routes by it; without one, any agent may get it);
- blocking sends rather than a stream: the hub keeps an A2A 1.0 stream open while its task waits for
  input, where ADK expects the stream to end, so a streamed turn would never end; a blocking send
  stops there, ADK turns the question into a long-running function call, and the user's function
  response goes back to the waiting Clutch agent as a `chat.message` in its task;
- the hub's token as a bearer token, on an HTTP client that names the A2A version (a2a-sdk's factory
  adds `A2A-Version: 1.0` only to a client it is given).

The other way, the hub giving tasks to an ADK agent, is `clutch.adapters.a2a.serve` around `to_a2a()`.
"""

from __future__ import annotations

from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent

from clutch.client import DEFAULT_URL


def hub_agent(name: str, skill: str, *, url: str = DEFAULT_URL, token: str | None = None,
              description: str | None = None, timeout: float = 600.0, **kwargs: Any) -> RemoteA2aAgent:
    """An ADK agent named `name` whose every turn is a task the hub at `url` gives to an agent with
    `skill`. `description` is what a parent LLM agent reads to decide to transfer to it (default: the
    hub's card's). The hub answers a blocking send within two minutes; a task still working then ends
    the turn with ADK's "ended before a terminal state" error. Other keyword arguments go to
    `RemoteA2aAgent` (`context_builder`, `config`, ...)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(timeout=timeout, headers=headers)
    factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http,
                                         supported_protocol_bindings=["JSONRPC"]))
    return RemoteA2aAgent(
        name=name,
        agent_card=f"{url.rstrip('/')}/.well-known/agent-card.json",
        description=description or "",
        a2a_client_factory=factory,
        a2a_request_meta_provider=lambda ctx, message: {"skill": skill},
        timeout=timeout,
        **kwargs,
    )
