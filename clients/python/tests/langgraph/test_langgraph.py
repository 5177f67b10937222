"""A compiled LangGraph graph served as a Clutch agent, against the real daemon: what each run writes to
its thread, interrupts answered by a person, failures as task.error, and hub tools that delegate."""

import asyncio
import contextlib

import httpx
from lgtest import ScriptedModel, thread_events
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from clutch import Agent, AsyncClient, TaskFailed
from clutch.adapters.langgraph import hub_node, hub_tool, serve_graph
from clutch.ids import new_id


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def tool_agent(model, tools, *, finish=None):
    """The usual tool loop: the model, its tool calls run by a ToolNode, back to the model; then
    `finish` (a node) when given."""
    async def agent(state: MessagesState):
        return {"messages": [await model.bind_tools(tools).ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "finish" if finish else END})
    builder.add_edge("tools", "agent")
    if finish:
        builder.add_node("finish", finish)
        builder.add_edge("finish", END)
    return builder.compile()


def call(name, args, call_id, **usage):
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}],
                     usage_metadata=_usage(**usage))


def _usage(input_tokens=0, output_tokens=0):
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens}


async def run(url, agents, requires, goal, *, sender="user:ada", timeout=30):
    """Serves `agents` while a task for `requires` runs; its ids and its result (or TaskFailed)."""
    ids = {"task_id": new_id("task"), "thread_id": new_id("thr"), "run_id": new_id("run")}
    async with _serving(agents):
        async with AsyncClient(url) as client:
            try:
                result = await client.run_task(requires=requires, goal=goal, sender=sender, timeout=timeout, **ids)
            except TaskFailed as e:
                result = e
    return ids, result


@contextlib.asynccontextmanager
async def _serving(agents):
    async with contextlib.AsyncExitStack() as stack:
        for agent in agents:
            await stack.enter_async_context(agent.running())
        yield


def test_a_run_writes_progress_per_node_tool_calls_usage_and_the_result_in_one_thread(daemon):
    model = ScriptedModel(responses=[
        call("add", {"a": 2, "b": 3}, "call_1", input_tokens=10, output_tokens=5),
        AIMessage(content="2 + 3 = 5", usage_metadata=_usage(20, 4)),
    ])
    agent = serve_graph(tool_agent(model, [add]), "lg-calc", ["skill:calc"], url=daemon.url)
    ids, result = asyncio.run(run(daemon.url, [agent], ["skill:calc"], "What is 2 + 3?"))

    assert result["text"] == "2 + 3 = 5"
    events = thread_events(daemon.url, ids["thread_id"])
    mine = [e for e in events if e["from"]["agent_id"] == "agent:lg-calc"]
    assert [(e["type"], e["payload"].get("step") or e["payload"].get("tool")) for e in mine] == [
        ("task.accept", None),
        ("task.progress", "agent"),
        ("tool.call", "tool:add"),
        ("tool.result", "tool:add"),
        ("task.progress", "tools"),
        ("task.progress", "agent"),
        ("task.result", None),
    ]
    assert all(e["task_id"] == ids["task_id"] for e in mine)
    # What the adapter wrote says so; the accept and the result are the agent helper's own.
    assert {e["type"] for e in mine if e.get("meta", {}).get("framework") == "langgraph"} == {
        "task.progress", "tool.call", "tool.result"}
    progress = [e["payload"] for e in mine if e["type"] == "task.progress"]
    assert progress[0]["text"] == 'calls add(a=2, b=3)'
    assert progress[0]["usage"] == {"input_tokens": 10, "output_tokens": 5, "requests": 1}
    assert progress[1]["text"] == "add → 5" and "usage" not in progress[1]
    assert progress[2]["usage"] == {"input_tokens": 20, "output_tokens": 4, "requests": 1}
    tool_call, tool_result = (e for e in mine if e["type"].startswith("tool."))
    assert tool_call["payload"]["args"] == {"a": 2, "b": 3}
    assert tool_result["payload"]["call_id"] == tool_call["id"]
    assert tool_result["payload"]["content"] == [{"type": "text", "text": "5"}]
    # The usage counted once: per node, not again in the result.
    assert "usage" not in mine[-1]["payload"]
    usage = httpx.get(f"{daemon.url}/v1/tasks/{ids['task_id']}").json()["usage"]
    assert (usage["tokens"], usage["requests"]) == (39, 2)


class Review(MessagesState):
    decision: str


def test_an_interrupt_asks_the_person_and_the_graph_resumes_with_their_reply(daemon):
    def draft(state):
        return {"messages": [AIMessage(content="Draft: ship on Friday.")]}

    def review(state):
        decision = interrupt({"question": "Publish the draft?"})
        return {"decision": decision, "messages": [AIMessage(content=f"Published ({decision}).")]}

    builder = StateGraph(Review)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", END)
    agent = serve_graph(builder.compile(), "lg-editor", ["skill:edit"], url=daemon.url)

    async def person():
        """user:ada, answering the first task in her inbox."""
        async with httpx.AsyncClient(base_url=daemon.url, timeout=15) as http:
            for _ in range(6):
                inbox = (await http.get("/v1/inbox/user:ada", params={"wait_seconds": 5})).json()
                if inbox["tasks"]:
                    asked = inbox["tasks"][0]["task"]
                    answer = await http.post(f"/v1/tasks/{asked['task_id']}/reply",
                                             json={"agent_id": "user:ada", "status": "completed",
                                                   "text": "yes, go"})
                    assert answer.status_code < 300, answer.text
                    return asked

    async def both():
        answering = asyncio.create_task(person())
        ids, result = await run(daemon.url, [agent], ["skill:edit"], "Write the release note")
        return ids, result, await answering

    ids, result, asked = asyncio.run(both())

    assert not isinstance(result, TaskFailed), result
    assert result["text"] == "Published (yes, go)."
    assert result["state"] == {"decision": "yes, go"}
    events = thread_events(daemon.url, ids["thread_id"])
    ask = next(e for e in events if e["type"] == "task.request" and e["to"] == [{"agent_id": "user:ada"}])
    assert ask["task_id"] == asked["task_id"]
    assert ask["parent_task_id"] == ids["task_id"]
    assert ask["payload"]["text"] == "Publish the draft?"
    steps = [e["payload"].get("step") for e in events if e["type"] == "task.progress"]
    assert steps == ["draft", "interrupt", "review"]
    seqs = {e["type"]: e["seq"] for e in events if e["task_id"] == asked["task_id"]}
    assert seqs["task.request"] < seqs["task.result"] < events[-1]["seq"]
    assert events[-1]["type"] == "task.result" and events[-1]["task_id"] == ids["task_id"]


def test_a_node_that_raises_ends_the_task_with_a_graph_error(daemon):
    def broken(state):
        raise ValueError("the index is corrupt")

    builder = StateGraph(MessagesState)
    builder.add_node("lookup", broken)
    builder.add_edge(START, "lookup")
    agent = serve_graph(builder.compile(), "lg-broken", ["skill:broken"], url=daemon.url)
    ids, error = asyncio.run(run(daemon.url, [agent], ["skill:broken"], "Look it up"))

    assert isinstance(error, TaskFailed)
    assert error.code == "GRAPH_ERROR"
    assert error.message == "node 'lookup' raised ValueError: the index is corrupt"
    assert not error.retryable
    end = thread_events(daemon.url, ids["thread_id"])[-1]
    assert (end["type"], end["payload"]["code"]) == ("task.error", "GRAPH_ERROR")


def test_a_graph_that_loops_past_its_recursion_limit_fails_with_its_own_code(daemon):
    builder = StateGraph(MessagesState)
    builder.add_node("again", lambda state: {"messages": [AIMessage(content="once more")]})
    builder.add_edge(START, "again")
    builder.add_edge("again", "again")
    agent = serve_graph(builder.compile(), "lg-loop", ["skill:loop"], url=daemon.url,
                        config={"recursion_limit": 3})
    ids, error = asyncio.run(run(daemon.url, [agent], ["skill:loop"], "Go"))

    assert isinstance(error, TaskFailed) and error.code == "GRAPH_RECURSION_LIMIT"
    events = thread_events(daemon.url, ids["thread_id"])
    assert [e["payload"]["step"] for e in events if e["type"] == "task.progress"] == ["again"] * 3
    assert events[-1]["type"] == "task.error"


def test_an_interrupt_in_a_task_from_an_agent_fails_unless_a_person_is_named(daemon):
    builder = StateGraph(MessagesState)
    builder.add_node("confirm", lambda state: {"messages": [AIMessage(content=interrupt("Sure?"))]})
    builder.add_edge(START, "confirm")
    agent = serve_graph(builder.compile(), "lg-confirm", ["skill:confirm"], url=daemon.url)
    ids, error = asyncio.run(run(daemon.url, [agent], ["skill:confirm"], "Go", sender="agent:cron"))

    assert isinstance(error, TaskFailed) and error.code == "GRAPH_INTERRUPT_NO_PERSON"
    assert "Sure?" in error.message and "came from agent:cron" in error.message


async def write(task):
    """The second agent: a plain clutch.Agent that writes."""
    return {"text": f"A haiku about {task.goal}"}


def test_hub_tool_in_a_graph_delegates_a_subtask_and_folds_the_answer_in(daemon):
    writer = Agent("lg-writer", capabilities=["skill:write"], handler=write, url=daemon.url)
    model = ScriptedModel(responses=[
        call("write", {"goal": "autumn"}, "call_w"),
        AIMessage(content="Here is the plan, with a poem."),
    ])

    def fold(state):
        poem = next(m.content for m in reversed(state["messages"]) if isinstance(m, ToolMessage))
        return {"messages": [AIMessage(content=f"Plan: read it aloud. Poem: {poem}")]}

    graph = tool_agent(model, [hub_tool(["skill:write"], name="write", description="Writes a poem.")], finish=fold)
    planner = serve_graph(graph, "lg-planner", ["skill:plan"], url=daemon.url)
    ids, result = asyncio.run(run(daemon.url, [writer, planner], ["skill:plan"], "Plan an evening"))

    assert result["text"] == "Plan: read it aloud. Poem: A haiku about autumn"
    events = thread_events(daemon.url, ids["thread_id"])
    sub = next(e for e in events if e["type"] == "task.request" and e.get("parent_task_id") == ids["task_id"]
               and e["from"]["agent_id"] == "agent:lg-planner")
    assert sub["requires"] == ["skill:write"] and sub["payload"]["goal"] == "autumn"
    assert sub["meta"]["framework"] == "langgraph"
    delivered = [e for e in events if e["task_id"] == sub["task_id"]]
    assert delivered[-1]["type"] == "task.result" and delivered[-1]["from"]["agent_id"] == "agent:lg-writer"
    order = [(e["type"], e["task_id"]) for e in events if e["type"] in ("tool.call", "tool.result")
             or (e["type"] == "task.result")]
    assert order == [("tool.call", ids["task_id"]), ("task.result", sub["task_id"]),
                     ("tool.result", ids["task_id"]), ("task.result", ids["task_id"])]


def test_hub_tool_and_hub_node_outside_a_task_run_a_top_level_task(daemon):
    writer = Agent("lg-writer-2", capabilities=["skill:verse"], handler=write, url=daemon.url)
    ask = hub_tool(["skill:verse"], name="verse", url=daemon.url, sender="user:ada")
    node = hub_node(["skill:verse"], url=daemon.url, name="verse")

    async def main():
        async with _serving([writer]):
            text = await ask.ainvoke({"goal": "rain"})
            update = await node({"messages": [AIMessage(content="snow")]})
        return text, update

    text, update = asyncio.run(main())
    assert text == "A haiku about rain"
    assert update["messages"][0].content == "A haiku about snow" and update["messages"][0].name == "verse"
    tasks = httpx.get(f"{daemon.url}/v1/tasks", params={"agent": "agent:lg-writer-2"}).json()["items"]
    assert len(tasks) == 2 and all(t.get("parent_task_id") is None for t in tasks)


def test_a_retried_task_goes_on_from_its_last_checkpoint(daemon):
    ran = {"research": 0, "write": 0}

    def research(state):
        ran["research"] += 1
        return {"messages": [AIMessage(content="notes")]}

    def write_up(state):
        ran["write"] += 1
        if ran["write"] == 1:
            raise TaskFailed("FLAKY_BACKEND", "the backend hiccuped", retryable=True)
        return {"messages": [AIMessage(content="the write-up")]}

    builder = StateGraph(MessagesState)
    builder.add_node("research", research)
    builder.add_node("write", write_up)
    builder.add_edge(START, "research")
    builder.add_edge("research", "write")
    agent = serve_graph(builder.compile(), "lg-retry", ["skill:report"], url=daemon.url)
    ids, result = asyncio.run(run(daemon.url, [agent], ["skill:report"], "Report"))

    # run_task waited through the retryable task.error for the next attempt's result.
    assert not isinstance(result, TaskFailed), result
    assert result["text"] == "the write-up"
    assert ran == {"research": 1, "write": 2}
    events = thread_events(daemon.url, ids["thread_id"])
    ends = [(e["type"], e["from"]["agent_id"], e["attempt"], e["payload"].get("retryable"))
            for e in events if e["type"] in ("task.error", "task.result")]
    assert ends == [("task.error", "agent:lg-retry", 1, True), ("task.result", "agent:lg-retry", 2, None)]
    assert [e["payload"]["step"] for e in events if e["type"] == "task.progress"] == ["research", "write"]


@tool
def shout(text: str) -> str:
    """Upper-cases a text (a sync tool: LangGraph runs it in a worker thread)."""
    return text.upper()


@tool
def fetch(url: str) -> str:
    """Fails, as a tool sometimes does."""
    raise ConnectionError(f"{url} is unreachable")


def test_sync_tools_and_failing_tools_are_recorded_too(daemon):
    model = ScriptedModel(responses=[
        AIMessage(content="", tool_calls=[{"name": "shout", "args": {"text": "hi"}, "id": "c1"},
                                          {"name": "fetch", "args": {"url": "http://example.invalid"}, "id": "c2"}]),
        AIMessage(content="HI, and the page is down."),
    ])

    async def agent(state: MessagesState):
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    # handle_tool_errors: the failure goes back to the model as a ToolMessage instead of ending the run.
    builder.add_node("tools", ToolNode([shout, fetch], handle_tool_errors=True))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    agent_ = serve_graph(builder.compile(), "lg-tools", ["skill:tools"], url=daemon.url)
    ids, result = asyncio.run(run(daemon.url, [agent_], ["skill:tools"], "Shout and fetch"))

    assert result["text"] == "HI, and the page is down."
    events = thread_events(daemon.url, ids["thread_id"])
    calls = {e["payload"]["tool"]: e for e in events if e["type"] == "tool.call"}
    assert set(calls) == {"tool:shout", "tool:fetch"}
    shouted = next(e for e in events if e["type"] == "tool.result")
    assert shouted["payload"]["call_id"] == calls["tool:shout"]["id"]
    assert shouted["payload"]["content"] == [{"type": "text", "text": "HI"}]
    failed = next(e for e in events if e["type"] == "tool.error")
    assert failed["payload"]["details"]["call_id"] == calls["tool:fetch"]["id"]
    assert "ConnectionError: http://example.invalid is unreachable" in failed["payload"]["message"]
    tools_progress = next(e for e in events if e["type"] == "task.progress" and e["payload"]["step"] == "tools")
    assert max(shouted["seq"], failed["seq"]) < tools_progress["seq"]


def test_a_tool_call_the_hub_forbids_never_runs_and_fails_the_task(daemon):
    wiped = []

    @tool
    async def wipe(path: str) -> str:
        """Deletes a directory."""
        wiped.append(path)
        return "gone"

    model = ScriptedModel(responses=[call("add", {"a": 1, "b": 1}, "c1"), call("wipe", {"path": "/srv"}, "c2")])
    # The card names the tools its capability uses as the adapter names them in tool.calls: `tool:add` only.
    agent = serve_graph(tool_agent(model, [add, wipe]), "lg-guarded",
                        [{"id": "skill:guarded", "tools": ["tool:add"]}], url=daemon.url)
    ids, error = asyncio.run(run(daemon.url, [agent], ["skill:guarded"], "Clean up"))

    assert wiped == []
    assert isinstance(error, TaskFailed) and error.code == "FORBIDDEN", error
    events = thread_events(daemon.url, ids["thread_id"])
    # The tool the card names was called and ran; the other was refused before it ran.
    assert [(e["type"], e["payload"].get("tool")) for e in events if e["type"].startswith("tool.")] == [
        ("tool.call", "tool:add"), ("tool.result", "tool:add"), ("tool.error", None)]
    refusal = next(e for e in events if e["type"] == "tool.error")
    assert refusal["payload"]["code"] == "FORBIDDEN" and refusal["from"]["agent_id"] == "agent:orchestrator"
    assert "tool:wipe" in refusal["payload"]["message"]
    assert events[-1]["type"] == "task.error"


class Trip(MessagesState):
    hotel: str
    train: str


def test_parallel_interrupts_are_asked_together_and_resumed_with_both_replies(daemon):
    def hotel(state):
        return {"hotel": interrupt("Which hotel?")}

    def train(state):
        return {"train": interrupt("Which train?")}

    def book(state):
        return {"messages": [AIMessage(content=f"Booked {state['hotel']} and {state['train']}.")]}

    builder = StateGraph(Trip)
    for name, node in (("hotel", hotel), ("train", train), ("book", book)):
        builder.add_node(name, node)
    builder.add_edge(START, "hotel")
    builder.add_edge(START, "train")
    builder.add_edge(["hotel", "train"], "book")
    agent = serve_graph(builder.compile(), "lg-trip", ["skill:trip"], url=daemon.url, person="user:bo")

    async def person():
        """user:bo, who answers once both questions are in the inbox (asked one after the other,
        the second would never come, and the wait would time out)."""
        answers = {"Which hotel?": "the Ritz", "Which train?": "the 9:15"}
        async with httpx.AsyncClient(base_url=daemon.url, timeout=15) as http:
            while True:
                inbox = (await http.get("/v1/inbox/user:bo", params={"wait_seconds": 5})).json()
                if len(inbox["tasks"]) == 2:
                    break
                await asyncio.sleep(0.05)
            for entry in inbox["tasks"]:
                await http.post(f"/v1/tasks/{entry['task']['task_id']}/reply",
                                json={"agent_id": "user:bo", "status": "completed",
                                      "text": answers[entry["request"]["text"]]})
        return [entry["task"]["task_id"] for entry in inbox["tasks"]]

    async def both():
        answering = asyncio.create_task(asyncio.wait_for(person(), 30))
        ids, result = await run(daemon.url, [agent], ["skill:trip"], "Book a trip", sender="agent:planner")
        return ids, result, await answering

    ids, result, answered = asyncio.run(both())
    assert not isinstance(result, TaskFailed), result
    assert result["text"] == "Booked the Ritz and the 9:15."
    assert result["state"] == {"hotel": "the Ritz", "train": "the 9:15"}
    events = thread_events(daemon.url, ids["thread_id"])
    asks = [e["task_id"] for e in events if e["type"] == "task.request" and e["to"] == [{"agent_id": "user:bo"}]]
    assert sorted(asks) == sorted(answered)


def test_a_person_who_declines_ends_the_graph_task_with_their_reason(daemon):
    builder = StateGraph(MessagesState)
    builder.add_node("confirm", lambda state: {"messages": [AIMessage(content=interrupt("Deploy now?"))]})
    builder.add_edge(START, "confirm")
    agent = serve_graph(builder.compile(), "lg-deploy", ["skill:deploy"], url=daemon.url)

    async def person():
        async with httpx.AsyncClient(base_url=daemon.url, timeout=15) as http:
            for _ in range(6):
                inbox = (await http.get("/v1/inbox/user:cy", params={"wait_seconds": 5})).json()
                if inbox["tasks"]:
                    await http.post(f"/v1/tasks/{inbox['tasks'][0]['task']['task_id']}/reply",
                                    json={"agent_id": "user:cy", "status": "failed", "error": "not on a Friday"})
                    return

    async def both():
        answering = asyncio.create_task(person())
        outcome = await run(daemon.url, [agent], ["skill:deploy"], "Deploy", sender="user:cy")
        await answering
        return outcome

    ids, error = asyncio.run(both())
    assert isinstance(error, TaskFailed), error
    assert (error.code, error.message) == ("TASK_FAILED", "not on a Friday")
    assert thread_events(daemon.url, ids["thread_id"])[-1]["type"] == "task.error"


def test_a_tool_that_interrupts_is_closed_and_runs_again_on_resume(daemon):
    @tool
    async def pay(amount: int) -> str:
        """Pays, once a person approves."""
        approval = interrupt(f"Pay {amount} EUR?")
        return f"paid ({approval})"

    model = ScriptedModel(responses=[call("pay", {"amount": 40}, "c1"), AIMessage(content="Paid.")])
    agent = serve_graph(tool_agent(model, [pay]), "lg-pay", ["skill:pay"], url=daemon.url)

    async def person():
        async with httpx.AsyncClient(base_url=daemon.url, timeout=15) as http:
            for _ in range(6):
                inbox = (await http.get("/v1/inbox/user:di", params={"wait_seconds": 5})).json()
                if inbox["tasks"]:
                    await http.post(f"/v1/tasks/{inbox['tasks'][0]['task']['task_id']}/reply",
                                    json={"agent_id": "user:di", "status": "completed", "text": "approved"})
                    return

    async def both():
        answering = asyncio.create_task(person())
        outcome = await run(daemon.url, [agent], ["skill:pay"], "Pay the invoice", sender="user:di")
        await answering
        return outcome

    ids, result = asyncio.run(both())
    assert not isinstance(result, TaskFailed), result
    assert result["text"] == "Paid."
    events = [e for e in thread_events(daemon.url, ids["thread_id"]) if e["type"].startswith("tool.")]
    assert [e["type"] for e in events] == ["tool.call", "tool.error", "tool.call", "tool.result"]
    assert events[1]["payload"]["message"] == "interrupted: waiting for a person's answer"
    assert events[1]["payload"]["details"]["call_id"] == events[0]["id"]
    assert events[3]["payload"]["call_id"] == events[2]["id"]
    assert events[3]["payload"]["content"] == [{"type": "text", "text": "paid (approved)"}]
