"""An AutoGen team (a writer and a critic) served as the Clutch agent `agent:scribes` (capability `skill:write`).

Each task gets a fresh `RoundRobinGroupChat`: the writer drafts, the critic approves ("APPROVE" ends the
chat). Both speak in the task's thread (`chat.message`, speaker = writer / critic), their token usage is
counted on the task, and the writer's approved draft is the `task.result` (`result_from="writer"`). No
LLM: each member's model is AutoGen's own `ReplayChatCompletionClient`, scripted here from the task's
goal, so it runs anywhere; swap in `OpenAIChatCompletionClient(model=...)` for a real one.

    clutch serve                                                          # the daemon, on :7700
    python examples/autogen_team.py                                       # serve the team
    python examples/autogen_team.py --ask "Two sentences on book clubs"   # ... and send it one task

`--ask` sends one task as `--sender` (user:ada), prints its result and exits; without it the team serves
until Ctrl-C and takes `skill:write` tasks from anywhere: the web UI, `clutch`, or another agent
delegating through the hub (examples/langgraph_agent.py's planner, without `--with-writer`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient

from clutch import AsyncClient, current_task
from clutch.adapters.autogen import serve_team


def writer_and_critic() -> RoundRobinGroupChat:
    """The team for one task; the factory runs inside the task, so `current_task()` gives its goal."""
    task = current_task()
    goal = task.goal if task else "something"
    draft = (f"Draft for “{goal}”: start small, with three to five people and one short book; "
             "meet monthly and let the host choose the next one.")
    writer = AssistantAgent("writer", model_client=ReplayChatCompletionClient([draft]),
                            system_message="You write short, friendly texts.")
    critic = AssistantAgent("critic", model_client=ReplayChatCompletionClient(
        ["Clear, concrete and short enough. APPROVE"]), system_message="You review drafts; say APPROVE when done.")
    return RoundRobinGroupChat([writer, critic],
                               termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(6))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7700")
    parser.add_argument("--token", default=None)
    parser.add_argument("--name", default="scribes")
    parser.add_argument("--ask", metavar="GOAL", help="send one task, print its result, exit")
    parser.add_argument("--sender", default="user:ada")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    agent = serve_team(writer_and_critic, args.name, ["skill:write"], url=args.url, token=args.token,
                       result_from="writer", description="a writer and a critic (AutoGen)")
    async with agent.running():
        if args.ask is None:
            await asyncio.Event().wait()
        async with AsyncClient(args.url, token=args.token) as client:
            result = await client.run_task(requires=["skill:write"], goal=args.ask, sender=args.sender, timeout=60)
        print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
