"""Microsoft Agent Framework agents and workflows served as Clutch agents, against the real daemon: the
streamed updates as chat messages, function calls as tool.call/tool.result, usage, failures as
task.error, and a task.cancel stopping the run."""

import asyncio
import json

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    tool,
)
from conftest import cancel, of_type, run_task, thread_events

from clutch import AsyncClient, TaskFailed, prepare
from clutch.adapters.agent_framework import ToolEvents, serve_agent, serve_workflow


def turn(*parts, usage=(0, 0)):
    """One scripted model turn: each part one streamed update (a text chunk, or (call_id, name, args) for
    a function call), then the turn's usage."""
    return list(parts), usage


class ScriptedChatClient(FunctionInvocationLayer, BaseChatClient):
    """BaseChatClient's docstring recipe (implement `_inner_get_response`), under the function-invocation
    layer every shipped client has, so that scripted function calls are run."""

    def __init__(self, turns, **kwargs):
        super().__init__(**kwargs)
        self.turns = list(turns)

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        parts, (prompt, completion) = self.turns.pop(0)
        contents = [Content.from_text(text=p) if isinstance(p, str)
                    else Content.from_function_call(call_id=p[0], name=p[1], arguments=json.dumps(p[2]))
                    for p in parts]
        usage = {"input_token_count": prompt, "output_token_count": completion}
        if stream:
            async def updates():
                for content in contents:
                    yield ChatResponseUpdate(role="assistant", contents=[content])
                yield ChatResponseUpdate(role="assistant", contents=[Content.from_usage(usage_details=usage)])
            return self._build_response_stream(updates())

        async def response():
            return ChatResponse(messages=[Message(role="assistant", contents=contents)], usage_details=usage)
        return response()


class BrokenChatClient(ScriptedChatClient):
    """A model client whose service is down."""

    def _inner_get_response(self, **kwargs):
        raise ConnectionError("the model service is unreachable")


@tool
def word_count(text: str) -> int:
    """Counts the words of a text."""
    return len(text.split())


def counting_writer(**options):
    return Agent(client=ScriptedChatClient([
        turn("Let me count ", "first.", ("call_1", "word_count", {"text": "otters hold hands"}), usage=(7, 3)),
        turn("Otters hold ", "hands while ", "they sleep.", usage=(12, 6)),
    ]), name="writer", tools=[word_count], **options)


def test_an_agent_run_writes_its_messages_tool_calls_usage_and_result_in_one_thread(daemon):
    agent = serve_agent(counting_writer, "maf-writer", ["skill:maf-write"], url=daemon.url)
    ids, result, task = asyncio.run(run_task(daemon.url, agent, ["skill:maf-write"], "Write about otters."))

    events = thread_events(daemon.url, ids["thread_id"])
    said = [(e["payload"]["speaker"], e["payload"]["text"]) for e in of_type(events, "chat.message")]
    assert said == [("writer", "Let me count first."), ("writer", "Otters hold hands while they sleep.")]
    [call], [answer] = of_type(events, "tool.call"), of_type(events, "tool.result")
    assert call["payload"]["tool"] == "tool:word_count" and call["payload"]["args"] == {"text": "otters hold hands"}
    assert answer["payload"]["call_id"] == call["id"]
    assert answer["payload"]["content"] == [{"type": "text", "text": "3"}]
    chats = of_type(events, "chat.message")
    assert chats[0]["seq"] < call["seq"] < answer["seq"] < chats[1]["seq"]
    # What the adapter wrote says so; the accept and the result are the agent helper's own.
    assert {e["type"] for e in events if e.get("meta", {}).get("framework") == "agent-framework"} == {
        "chat.message", "tool.call", "tool.result", "task.progress"}

    reported = [e["payload"]["usage"] for e in of_type(events, "task.progress") if "usage" in e["payload"]]
    assert sum(u["input_tokens"] for u in reported) == 19 and sum(u["output_tokens"] for u in reported) == 9
    assert task["usage"]["tokens"] == 28 and task["state"] == "completed"
    assert result == {"text": "Otters hold hands while they sleep.", "speaker": "writer", "messages": 3,
                      "finish_reason": None}


def test_a_workflow_writes_each_agents_messages_and_its_tool_calls(daemon):
    def workflow():
        writer = counting_writer(middleware=[ToolEvents()])
        critic = Agent(client=ScriptedChatClient([turn("Clear ", "and true.", usage=(20, 3))]), name="critic")
        return WorkflowBuilder(start_executor=writer, output_from=[critic], intermediate_output_from="all_other") \
            .add_edge(writer, critic).build()

    agent = serve_workflow(workflow, "maf-scribes", ["skill:maf-review"], url=daemon.url)
    ids, result, task = asyncio.run(run_task(daemon.url, agent, ["skill:maf-review"], "Write about otters."))

    events = thread_events(daemon.url, ids["thread_id"])
    said = [(e["payload"]["speaker"], e["payload"]["text"]) for e in of_type(events, "chat.message")]
    assert said == [("writer", "Let me count first."), ("writer", "Otters hold hands while they sleep."),
                    ("critic", "Clear and true.")]
    [call], [answer] = of_type(events, "tool.call"), of_type(events, "tool.result")
    assert call["payload"]["tool"] == "tool:word_count" and answer["payload"]["call_id"] == call["id"]
    steps = [e["payload"].get("step") for e in of_type(events, "task.progress") if "usage" not in e["payload"]]
    assert steps == ["writer", "critic"]
    assert task["usage"]["tokens"] == 28 + 23 and task["state"] == "completed"
    assert result == {"text": "Clear and true.", "speaker": "critic", "messages": 3}


def test_an_agent_whose_model_raises_ends_the_task_with_agent_error(daemon):
    agent = serve_agent(lambda: Agent(client=BrokenChatClient([]), name="fragile"), "maf-fragile",
                        ["skill:maf-fragile"], url=daemon.url)
    _, failed, task = asyncio.run(run_task(daemon.url, agent, ["skill:maf-fragile"], "Anything."))
    assert isinstance(failed, TaskFailed) and task["state"] == "failed"
    assert (failed.code, failed.message) == ("AGENT_ERROR", "ConnectionError: the model service is unreachable")
    assert failed.details == {"exception": "ConnectionError"}


def test_a_workflow_whose_agent_raises_ends_the_task_with_workflow_error(daemon):
    def workflow():
        writer = Agent(client=ScriptedChatClient([turn("A draft.")]), name="writer")
        critic = Agent(client=BrokenChatClient([]), name="critic")
        return WorkflowBuilder(start_executor=writer, intermediate_output_from="all").add_edge(writer, critic).build()

    agent = serve_workflow(workflow, "maf-fragile-flow", ["skill:maf-fragile-flow"], url=daemon.url)
    ids, failed, task = asyncio.run(run_task(daemon.url, agent, ["skill:maf-fragile-flow"], "Anything."))
    assert (failed.code, failed.message) == ("WORKFLOW_ERROR", "ConnectionError: the model service is unreachable")
    assert task["state"] == "failed"
    assert [e["payload"]["speaker"] for e in of_type(thread_events(daemon.url, ids["thread_id"]), "chat.message")] \
        == ["writer"]


def test_a_cancelled_task_cancels_the_agent_run_inside_its_tool(daemon):
    started, stopped = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    def waiter():
        return Agent(client=ScriptedChatClient([turn(("call_1", "wait_forever", {})), turn("unreachable")]),
                     name="waiter", tools=[wait_forever])

    agent = serve_agent(waiter, "maf-waiter", ["skill:maf-waiting"], url=daemon.url)

    async def scenario():
        async with AsyncClient(daemon.url) as client, agent.running():
            request = prepare({"from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
                               "type": "task.request", "requires": ["skill:maf-waiting"], "payload": {"goal": "Wait."}})
            await client.send(request)
            await asyncio.wait_for(started.wait(), 20)
            await cancel(client, request, agent.agent_id)
            await asyncio.wait_for(stopped.wait(), 20)
            task = await client.task(request["task_id"])
        return request, task

    request, task = asyncio.run(scenario())
    assert task["state"] == "cancelled"
    kinds = [e["type"] for e in thread_events(daemon.url, request["thread_id"])]
    assert "tool.call" in kinds and "task.cancel" in kinds
    assert "task.result" not in kinds and "task.error" not in kinds and "tool.result" not in kinds


def test_a_workflow_asking_for_outside_input_fails_the_task_after_writing_its_outputs(daemon):
    @executor(id="drafter")
    async def drafter(goal: str, ctx: WorkflowContext[str, str]) -> None:
        await ctx.yield_output(f"Draft for: {goal}")
        await ctx.send_message(goal)

    @executor(id="gate")
    async def gate(draft: str, ctx: WorkflowContext[str]) -> None:
        await ctx.request_info("May this be published?", str)

    def workflow():
        return WorkflowBuilder(start_executor=drafter, output_from=[drafter]).add_edge(drafter, gate).build()

    agent = serve_workflow(workflow, "maf-gated", ["skill:maf-gated"], url=daemon.url)
    ids, failed, task = asyncio.run(run_task(daemon.url, agent, ["skill:maf-gated"], "otters"))
    assert failed.code == "INPUT_REQUIRED" and "from gate" in failed.message and task["state"] == "failed"
    said = [(e["payload"]["speaker"], e["payload"]["text"])
            for e in of_type(thread_events(daemon.url, ids["thread_id"]), "chat.message")]
    assert said == [("drafter", "Draft for: otters")]


def test_a_function_that_raises_is_one_tool_error_even_with_tool_events_on_the_agent_too(daemon):
    @tool
    def publish(text: str) -> str:
        """Publishes a text."""
        raise PermissionError("the press is closed")

    def publisher():
        script = [turn(("call_1", "publish", {"text": "otters"})), turn("Not published.")]
        return Agent(client=ScriptedChatClient(script),
                     name="publisher", tools=[publish], middleware=[ToolEvents()])

    agent = serve_agent(publisher, "maf-publisher", ["skill:maf-publish"], url=daemon.url)
    ids, result, task = asyncio.run(run_task(daemon.url, agent, ["skill:maf-publish"], "Publish it."))

    events = thread_events(daemon.url, ids["thread_id"])
    [call], [error] = of_type(events, "tool.call"), of_type(events, "tool.error")
    assert call["payload"] == {"tool": "tool:publish", "args": {"text": "otters"}}
    assert error["payload"]["code"] == "TOOL_FAILED"
    assert error["payload"]["message"] == "PermissionError: the press is closed"
    assert error["payload"]["details"] == {"call_id": call["id"], "tool": "tool:publish"}
    assert not of_type(events, "tool.result")
    assert task["state"] == "completed" and result["text"] == "Not published."
