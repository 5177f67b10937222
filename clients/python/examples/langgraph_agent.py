"""A LangGraph planner served as the Clutch agent `agent:planner` (capability `skill:plan`).

It takes a person's question, hands the writing to whichever agent the hub finds with `skill:write`
(a `hub_tool`, so a subtask in the same thread), optionally asks the person to confirm (an
`interrupt`), and folds the writer's answer into its plan. No LLM: the planning step is a plain
function standing where a chat model would (`model.bind_tools([write])`), so it runs anywhere.

    clutch serve                                                   # the daemon, on :7700
    python examples/langgraph_agent.py --with-writer               # serve the planner (and a writer)
    python examples/langgraph_agent.py --with-writer --ask "How do I run a book club?"

`--ask` sends one task as `--sender` (user:ada), prints its result and exits; without it the agents
serve until Ctrl-C, and tasks come from anywhere (the web UI, `clutch`, another agent). `--confirm`
makes the planner ask the person before it answers: reply in the web UI or with
`POST /v1/tasks/{id}/reply` ({"agent_id": "user:ada", "status": "completed", "text": "yes"}).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from clutch import Agent, AsyncClient, Task
from clutch.adapters.langgraph import hub_tool, serve_graph


class Plan(MessagesState):
    review: str


def planner_graph(url: str, *, confirm: bool):
    write = hub_tool(["skill:write"], name="write", url=url,
                     description="Hands a writing job to the team's writer and returns the text.")

    def plan(state: Plan):
        """Where a chat model would decide; here: ask the writer once, then go on."""
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"messages": [AIMessage(content="The writer has answered.")]}
        question = next(m.content for m in state["messages"] if isinstance(m, HumanMessage))
        return {"messages": [AIMessage(content="", tool_calls=[{
            "name": "write", "id": "write-1",
            "args": {"goal": f"Write two friendly sentences answering: {question}"}}])]}

    def review(state: Plan):
        return {"review": interrupt({"question": f"Send this answer? {_last_tool_text(state)}"})}

    def answer(state: Plan):
        question = next(m.content for m in state["messages"] if isinstance(m, HumanMessage))
        text = (f"Plan for “{question}”: 1. pick a date and a place; 2. invite people; 3. follow up. "
                f"From the writer: {_last_tool_text(state)}")
        if state.get("review"):
            text += f" (Reviewed: {state['review']})"
        return {"messages": [AIMessage(content=text)]}

    builder = StateGraph(Plan)
    builder.add_node("plan", plan)
    builder.add_node("tools", ToolNode([write]))
    builder.add_node("answer", answer)
    builder.add_edge(START, "plan")
    after_plan = "review" if confirm else "answer"
    builder.add_conditional_edges("plan", tools_condition, {"tools": "tools", END: after_plan})
    builder.add_edge("tools", "plan")
    if confirm:
        builder.add_node("review", review)
        builder.add_edge("review", "answer")
    builder.add_edge("answer", END)
    return builder.compile()


def _last_tool_text(state: Plan) -> str:
    return next((str(m.content) for m in reversed(state["messages"]) if isinstance(m, ToolMessage)), "")


async def writer(task: Task) -> str:
    """A stand-in writer (`--with-writer`), for a hub that has no `skill:write` agent of its own."""
    return f"Start small: three to five people and one short book. Meet monthly, and let the host choose."


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7700")
    parser.add_argument("--token", default=None)
    parser.add_argument("--name", default="planner")
    parser.add_argument("--confirm", action="store_true", help="ask the person before answering")
    parser.add_argument("--with-writer", action="store_true", help="also serve agent:writer (skill:write)")
    parser.add_argument("--ask", metavar="QUESTION", help="send one task, print its result, exit")
    parser.add_argument("--sender", default="user:ada")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    agents = [serve_graph(planner_graph(args.url, confirm=args.confirm), args.name, ["skill:plan"],
                          url=args.url, token=args.token, description="plans, with a writer's help (LangGraph)")]
    if args.with_writer:
        agents.append(Agent("writer", capabilities=["skill:write"], handler=writer, url=args.url,
                            token=args.token, description="writes short texts"))
    async with contextlib.AsyncExitStack() as stack:
        for agent in agents:
            await stack.enter_async_context(agent.running())
        if args.ask is None:
            await asyncio.Event().wait()
        async with AsyncClient(args.url, token=args.token) as client:
            result = await client.run_task(requires=["skill:plan"], goal=args.ask, sender=args.sender)
        print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
