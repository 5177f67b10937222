"""An AutoGen agentchat team served as a Clutch agent, against the real daemon: what a run writes to its
thread (chat messages by speaker, tool calls, usage, the result), a failing model as task.error, and a
task.cancel reaching the team."""

import asyncio
import importlib.util
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import BaseChatMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient
from conftest import cancel, of_type, run_task, thread_events

from clutch import AsyncClient, TaskFailed, prepare
from clutch.adapters.autogen import serve_team

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# ReplayChatCompletionClient says it cannot call functions unless told otherwise.
TOOL_MODEL = ModelInfo(vision=False, function_calling=True, json_output=False, family=ModelFamily.UNKNOWN,
                       structured_output=False)


def calls(name: str, arguments: str, call_id: str) -> CreateResult:
    """A scripted model turn that asks for one function call."""
    return CreateResult(finish_reason="function_calls",
                        content=[FunctionCall(id=call_id, name=name, arguments=arguments)],
                        usage=RequestUsage(prompt_tokens=0, completion_tokens=4), cached=False)


def word_count(text: str) -> int:
    """Counts the words of a text."""
    return len(text.split())


def writer_and_critic() -> RoundRobinGroupChat:
    """The writer counts words with its tool, then drafts; the critic approves, which ends the chat."""
    model = ReplayChatCompletionClient(
        [calls("word_count", '{"text": "otters hold hands"}', "call_1"), "Otters hold hands while they sleep."],
        model_info=TOOL_MODEL)
    writer = AssistantAgent("writer", tools=[word_count], reflect_on_tool_use=True, model_client=model)
    critic = AssistantAgent("critic", model_client=ReplayChatCompletionClient(["Clear and true. APPROVE"]))
    return RoundRobinGroupChat([writer, critic],
                               termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(8))


async def offline(factory, goal: str) -> TaskResult:
    """The same team run without Clutch: what the thread should show."""
    return await factory().run(task=goal, output_task_messages=False)


def test_a_team_run_writes_each_chat_message_tool_calls_usage_and_the_result_in_one_thread(daemon):
    goal = "Write one sentence about otters."
    expected = asyncio.run(offline(writer_and_critic, goal))
    agent = serve_team(writer_and_critic, "scribes", ["skill:write"], url=daemon.url)
    ids, result, task = asyncio.run(run_task(daemon.url, agent, ["skill:write"], goal))

    events = thread_events(daemon.url, ids["thread_id"])
    said = [(e["payload"]["speaker"], e["payload"]["text"]) for e in of_type(events, "chat.message")]
    team_messages = [(m.source, m.to_text()) for m in expected.messages if isinstance(m, BaseChatMessage)]
    assert said == team_messages == [("writer", "Otters hold hands while they sleep."),
                                     ("critic", "Clear and true. APPROVE")]
    assert all(e["task_id"] == ids["task_id"] and e["from"]["agent_id"] == "agent:scribes"
               for e in of_type(events, "chat.message"))

    [call] = of_type(events, "tool.call")
    [answer] = of_type(events, "tool.result")
    assert call["payload"]["tool"] == "tool:word_count" and call["payload"]["args"] == {"text": "otters hold hands"}
    assert answer["payload"]["call_id"] == call["id"]
    assert answer["payload"]["content"] == [{"type": "text", "text": "3"}]
    assert call["seq"] < answer["seq"] < of_type(events, "chat.message")[0]["seq"]
    # What the adapter wrote says so; the accept and the result are the agent helper's own.
    assert {e["type"] for e in events if e.get("meta", {}).get("framework") == "autogen"} == {
        "chat.message", "tool.call", "tool.result", "task.progress"}

    tokens = sum(m.models_usage.prompt_tokens + m.models_usage.completion_tokens
                 for m in expected.messages if m.models_usage)
    reported = [e["payload"]["usage"] for e in of_type(events, "task.progress") if "usage" in e["payload"]]
    assert len(reported) == 3  # the writer's two model calls and the critic's one
    assert sum(u["input_tokens"] + u["output_tokens"] for u in reported) == tokens > 0
    assert task["usage"]["tokens"] == tokens and task["usage"]["requests"] == 3

    assert task["state"] == "completed"
    assert result == {"text": "Clear and true. APPROVE", "speaker": "critic", "stop_reason": expected.stop_reason,
                      "messages": len(expected.messages)}
    assert "APPROVE" in result["stop_reason"] and result["messages"] == 4
    assert of_type(events, "task.result")[-1]["seq"] == events[-1]["seq"]


class BrokenModel(ReplayChatCompletionClient):
    """A model client whose service is down."""

    async def create(self, *args, **kwargs):
        raise ConnectionError("the model service is unreachable")


def test_a_team_whose_model_raises_ends_the_task_with_team_error(daemon):
    def team():
        writer = AssistantAgent("writer", model_client=ReplayChatCompletionClient(["A first draft."]))
        critic = AssistantAgent("critic", model_client=BrokenModel([]))
        return RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(6))

    agent = serve_team(team, "fragile", ["skill:fragile"], url=daemon.url)
    ids, failed, task = asyncio.run(run_task(daemon.url, agent, ["skill:fragile"], "Draft it."))

    assert isinstance(failed, TaskFailed)
    assert failed.code == "TEAM_ERROR" and failed.message == "ConnectionError: the model service is unreachable"
    assert failed.details == {"exception": "ConnectionError"} and not failed.retryable
    assert task["state"] == "failed"
    events = thread_events(daemon.url, ids["thread_id"])
    assert [e["payload"]["speaker"] for e in of_type(events, "chat.message")] == ["writer"]
    [error] = of_type(events, "task.error")
    assert error["from"]["agent_id"] == "agent:fragile" and error["payload"]["code"] == "TEAM_ERROR"


def test_a_factory_that_raises_ends_the_task_with_team_error(daemon):
    def team():
        raise ValueError("no model configured")

    agent = serve_team(team, "unbuilt", ["skill:unbuilt"], url=daemon.url)
    _, failed, task = asyncio.run(run_task(daemon.url, agent, ["skill:unbuilt"], "Anything."))
    assert (failed.code, failed.message, task["state"]) == ("TEAM_ERROR", "no model configured", "failed")


def test_a_cancelled_task_cancels_the_team_even_inside_a_tool(daemon):
    started, stopped = asyncio.Event(), asyncio.Event()

    async def wait_forever() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    def team():
        waiter = AssistantAgent("waiter", tools=[wait_forever], model_client=ReplayChatCompletionClient(
            [calls("wait_forever", "{}", "call_1"), "unreachable"], model_info=TOOL_MODEL))
        return RoundRobinGroupChat([waiter], termination_condition=MaxMessageTermination(4))

    # AutoGen 0.7.5 never finishes a team cancelled inside a tool: the grace lets the adapter give up on it.
    agent = serve_team(team, "waiters", ["skill:waiting"], url=daemon.url, cancel_grace=0.5)

    async def scenario():
        async with AsyncClient(daemon.url) as client, agent.running():
            request = prepare({"from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
                               "type": "task.request", "requires": ["skill:waiting"], "payload": {"goal": "Wait."}})
            await client.send(request)
            await asyncio.wait_for(started.wait(), 20)
            # The tool runs as soon as the model asks for it; its tool.call is written as the stream reaches
            # the adapter: the requester cancels once it sees it.
            async for event in client.stream(thread_id=request["thread_id"], after=0):
                if event["type"] == "tool.call":
                    break
            await cancel(client, request, agent.agent_id)
            await asyncio.wait_for(stopped.wait(), 20)  # the token reached the tool
            for _ in range(100):  # the handler let go of the task (polling the agent's own table)
                if request["task_id"] not in agent.working:
                    break
                await asyncio.sleep(0.05)
            working = request["task_id"] in agent.working
            task = await client.task(request["task_id"])
        return request, task, working

    request, task, working = asyncio.run(scenario())
    assert not working
    assert task["state"] == "cancelled"
    kinds = [e["type"] for e in thread_events(daemon.url, request["thread_id"])]
    assert "tool.call" in kinds and "task.cancel" in kinds
    assert "task.result" not in kinds and "task.error" not in kinds and "tool.result" not in kinds


def test_the_example_team_answers_skill_write_with_the_writers_draft(daemon):
    spec = importlib.util.spec_from_file_location("autogen_team", EXAMPLES / "autogen_team.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    agent = serve_team(example.writer_and_critic, "scribes-example", ["skill:write-example"], url=daemon.url,
                       result_from="writer")
    ids, result, task = asyncio.run(run_task(daemon.url, agent, ["skill:write-example"], "Two sentences on book clubs"))

    speakers = [e["payload"]["speaker"] for e in of_type(thread_events(daemon.url, ids["thread_id"]), "chat.message")]
    assert speakers == ["writer", "critic"] and task["state"] == "completed" and task["usage"]["tokens"] > 0
    assert result["speaker"] == "writer" and result["text"].startswith("Draft for “Two sentences on book clubs”")
    assert result["messages"] == 2 and "APPROVE" in result["stop_reason"]


def test_a_tool_that_raises_is_a_tool_error_and_the_team_goes_on(daemon):
    def publish(text: str) -> str:
        """Publishes a text."""
        raise PermissionError("the press is closed")

    def team():
        writer = AssistantAgent("writer", tools=[publish], model_client=ReplayChatCompletionClient(
            [calls("publish", '{"text": "otters"}', "call_9")], model_info=TOOL_MODEL))
        return RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2))

    agent = serve_team(team, "publishers", ["skill:publish"], url=daemon.url)
    ids, result, task = asyncio.run(run_task(daemon.url, agent, ["skill:publish"], "Publish it."))

    events = thread_events(daemon.url, ids["thread_id"])
    [call], [error] = of_type(events, "tool.call"), of_type(events, "tool.error")
    assert error["payload"]["code"] == "TOOL_FAILED" and "the press is closed" in error["payload"]["message"]
    assert error["payload"]["details"] == {"call_id": call["id"], "tool": "tool:publish"}
    # Without reflection the writer's turn ends with the tool's output as its message.
    assert task["state"] == "completed" and "the press is closed" in result["text"]
