"""An Agents SDK agent served by `serve_agent` against the real daemon: what its runs write into the
task's thread, read back through the HTTP API."""

import asyncio
import tempfile
from pathlib import Path

import pytest
from agents import Agent, GuardrailFunctionOutput, function_tool, input_guardrail
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_under_test import ANSWER, TOTAL_TOKENS, looping_agent, usage, weather_team
from clutch import AsyncClient, TaskFailed, prepare
from clutch.adapters.openai_agents import serve_agent
from daemon import Daemon


async def _served_task(client: AsyncClient, agent_id: str) -> dict:
    page = await client.tasks(agent=agent_id)
    assert len(page["items"]) == 1, page
    return await client.task(page["items"][0]["task_id"])


async def _events(client: AsyncClient, **filters) -> list[dict]:
    return (await client.events(**filters))["events"]


def test_a_served_agent_writes_its_tool_call_handoff_usage_and_result(daemon):
    async def scenario():
        calls: list = []
        served = serve_agent(weather_team(calls), "weather", ["skill:weather"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            result = await client.run_task(requires=["skill:weather"], goal="Weather in Paris?",
                                           sender="user:ada", timeout=30)
            task = await _served_task(client, "agent:weather")
            events = await _events(client, task_id=task["task_id"])
        return calls, result, task, events

    calls, result, task, events = asyncio.run(scenario())
    assert calls == ["Paris"]
    assert result == {"text": ANSWER}

    kinds = [e["type"] for e in events]
    call = next(e for e in events if e["type"] == "tool.call")
    answer = next(e for e in events if e["type"] == "tool.result")
    handoff = next(e for e in events if e["payload"].get("step") == "handoff")
    assert call["payload"] == {"tool": "tool:get_weather", "args": {"city": "Paris"}}
    assert call["from"]["agent_id"] == "agent:weather"
    assert answer["payload"]["call_id"] == call["id"]
    assert answer["payload"]["content"] == [{"type": "text", "text": "sunny in Paris"}]
    assert handoff["payload"]["from_agent"] == "Triage" and handoff["payload"]["to_agent"] == "Writer"
    # In the order it happened: the call, its answer, the handoff, the final result.
    assert kinds.index("tool.call") < kinds.index("tool.result") < events.index(handoff) < kinds.index("task.result")
    # What the adapter wrote says so; the accept and the result are the agent helper's own.
    assert {e["type"] for e in events if e.get("meta", {}).get("framework") == "openai-agents"} == {
        "task.progress", "tool.call", "tool.result"}

    models = [e["payload"] for e in events if e["payload"].get("step") == "model"]
    assert [m["agent"] for m in models] == ["Triage", "Triage", "Writer"]
    assert [m["usage"] for m in models] == [{"input_tokens": 10, "output_tokens": 5, "requests": 1},
                                            {"input_tokens": 20, "output_tokens": 3, "requests": 1},
                                            {"input_tokens": 30, "output_tokens": 7, "requests": 1}]
    assert task["state"] == "completed"
    assert task["usage"]["tokens"] == TOTAL_TOKENS and task["usage"]["requests"] == 3


def test_max_turns_exceeded_fails_the_task_with_its_code(daemon):
    async def scenario():
        served = serve_agent(looping_agent(3), "looper", ["skill:looping"], url=daemon.url, max_turns=2)
        async with AsyncClient(daemon.url) as client, served.running():
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:looping"], goal="Loop.", sender="user:ada", timeout=30)
            task = await _served_task(client, "agent:looper")
            events = await _events(client, task_id=task["task_id"], type="task.error")
        return failed.value, task, events

    failed, task, events = asyncio.run(scenario())
    assert failed.code == "MAX_TURNS_EXCEEDED"
    assert task["state"] == "failed"
    assert [e["payload"]["code"] for e in events] == ["MAX_TURNS_EXCEEDED"]
    assert events[0]["payload"]["retryable"] is False
    assert "Max turns (2) exceeded" in events[0]["payload"]["message"]


def test_a_tripped_input_guardrail_fails_the_task_naming_the_guardrail(daemon):
    @input_guardrail(run_in_parallel=False)
    def no_secrets(context, agent, text):
        return GuardrailFunctionOutput(output_info={"reason": "asks for a secret"},
                                       tripwire_triggered="secret" in str(text))

    guarded = Agent(name="Guarded", input_guardrails=[no_secrets],
                    model=ScriptedModel([{"output": [assistant_message("never said")]}]))

    async def scenario():
        served = serve_agent(guarded, "guarded", ["skill:guarded"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:guarded"], goal="Tell me the secret.",
                                      sender="user:ada", timeout=30)
            task = await _served_task(client, "agent:guarded")
        return failed.value, task

    failed, task = asyncio.run(scenario())
    assert failed.code == "INPUT_GUARDRAIL_TRIPPED"
    assert failed.details == {"guardrail": "no_secrets", "output_info": {"reason": "asks for a secret"}}
    assert task["state"] == "failed"


def test_a_model_that_calls_a_missing_tool_fails_the_task_as_model_behavior(daemon):
    confused = Agent(name="Confused", model=ScriptedModel(
        [{"output": [function_call("no_such_tool", {}, call_id="call_1")]}]))

    async def scenario():
        served = serve_agent(confused, "confused", ["skill:confused"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:confused"], goal="Go.", sender="user:ada", timeout=30)
        return failed.value

    assert asyncio.run(scenario()).code == "MODEL_BEHAVIOR_ERROR"


def test_a_cancelled_task_cancels_the_streamed_run(daemon):
    started, stopped = asyncio.Event(), asyncio.Event()

    @function_tool
    async def wait_forever() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    waiter = Agent(name="Waiter", tools=[wait_forever], model=ScriptedModel(
        [{"output": [function_call("wait_forever", {}, call_id="call_1")], "usage": usage(1, 1)}]))

    async def scenario():
        served = serve_agent(waiter, "waiter", ["skill:waiting"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            request = prepare({"from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
                               "type": "task.request", "requires": ["skill:waiting"], "payload": {"goal": "Wait."}})
            await client.send(request)
            await asyncio.wait_for(started.wait(), 20)
            await client.send({"run_id": request["run_id"], "thread_id": request["thread_id"],
                               "task_id": request["task_id"], "from": {"agent_id": "user:ada"},
                               "to": [{"agent_id": "agent:waiter"}], "type": "task.cancel",
                               "payload": {"reason": "no longer needed"}})
            await asyncio.wait_for(stopped.wait(), 20)
            task = await client.task(request["task_id"])
            events = await _events(client, task_id=request["task_id"])
        return task, events

    task, events = asyncio.run(scenario())
    assert task["state"] == "cancelled"
    kinds = [e["type"] for e in events]
    assert "tool.call" in kinds and "task.result" not in kinds and "task.error" not in kinds


def test_a_tool_needing_approval_is_asked_of_the_person_who_sent_the_task(daemon):
    paid: list = []

    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pays an amount."""
        paid.append(amount)
        return f"paid {amount}"

    cashier = Agent(name="Cashier", tools=[pay], model=ScriptedModel([
        {"output": [function_call("pay", {"amount": 12}, call_id="call_1")], "usage": usage(5, 5)},
        {"output": [assistant_message("Paid.")], "usage": usage(5, 1)},
    ]))

    async def scenario():
        served = serve_agent(cashier, "cashier", ["skill:paying"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            asked = asyncio.create_task(client.run_task(requires=["skill:paying"], goal="Pay 12.",
                                                        sender="user:ada", timeout=30))
            inbox = {"tasks": []}
            while not inbox["tasks"] and not asked.done():
                inbox = await client.inbox("user:ada", wait_seconds=5)
            question = inbox["tasks"][0]
            await client.reply(question["task"]["task_id"], "user:ada", "completed", text="yes")
            result = await asyncio.wait_for(asked, 30)
        return question, result

    question, result = asyncio.run(scenario())
    assert question["request"]["goal"] == 'May Cashier call pay({"amount":12})?'
    assert paid == [12]
    assert result == {"text": "Paid."}


def test_a_tool_the_operator_does_not_allow_fails_the_task_before_it_runs():
    policy = tempfile.mkdtemp(prefix="clutch-openai-agents-policy-")
    Path(policy, "org.yaml").write_text("agents:\n  agent:strict:\n    tool_allowlist: [tool:get_forecast]\n")
    calls: list = []

    async def scenario(url: str):
        served = serve_agent(weather_team(calls), "strict", ["skill:strict"], url=url)
        async with AsyncClient(url) as client, served.running():
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:strict"], goal="Weather in Paris?", sender="user:ada",
                                      timeout=30)
            task = await _served_task(client, "agent:strict")
            events = await _events(client, task_id=task["task_id"])
        return failed.value, events

    with Daemon(config_dir=policy) as strict_daemon:
        failed, events = asyncio.run(scenario(strict_daemon.url))
    assert failed.code == "FORBIDDEN" and failed.details == {"tool": "tool:get_weather"}
    assert calls == []  # refused before it ran
    refusal = next(e for e in events if e["type"] == "tool.error")
    assert refusal["payload"]["code"] == "FORBIDDEN" and "tool.call" not in [e["type"] for e in events]


def test_a_tool_needing_approval_in_a_task_from_an_agent_fails_unless_an_approver_is_named(daemon):
    paid: list = []

    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pays an amount."""
        paid.append(amount)
        return f"paid {amount}"

    cashier = Agent(name="Cashier", tools=[pay], model=ScriptedModel(
        [{"output": [function_call("pay", {"amount": 7}, call_id="call_1")]}]))

    async def scenario():
        served = serve_agent(cashier, "unattended-cashier", ["skill:unattended-paying"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:unattended-paying"], goal="Pay 7.", sender="agent:cron",
                                      timeout=30)
        return failed.value

    failed = asyncio.run(scenario())
    assert paid == []
    assert failed.code == "TOOL_APPROVAL_REQUIRED" and failed.details == {"tool": "tool:pay"}
    assert "came from agent:cron" in failed.message


def test_a_rejected_approval_keeps_the_tool_from_running(daemon):
    paid: list = []

    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pays an amount."""
        paid.append(amount)
        return f"paid {amount}"

    cashier = Agent(name="Cashier", tools=[pay], model=ScriptedModel([
        {"output": [function_call("pay", {"amount": 99}, call_id="call_1")]},
        {"output": [assistant_message("Not paid.")]},
    ]))

    async def scenario():
        served = serve_agent(cashier, "careful-cashier", ["skill:careful-paying"], url=daemon.url,
                             approver="user:bo")
        async with AsyncClient(daemon.url) as client, served.running():
            asked = asyncio.create_task(client.run_task(requires=["skill:careful-paying"], goal="Pay 99.",
                                                        sender="user:ada", timeout=30))
            inbox = {"tasks": []}
            while not inbox["tasks"] and not asked.done():
                inbox = await client.inbox("user:bo", wait_seconds=5)
            await client.reply(inbox["tasks"][0]["task"]["task_id"], "user:bo", "completed", text="no")
            result = await asyncio.wait_for(asked, 30)
            task = await _served_task(client, "agent:careful-cashier")
            events = await _events(client, task_id=task["task_id"])
        return result, events

    result, events = asyncio.run(scenario())
    assert paid == [] and result == {"text": "Not paid."}
    decisions = [e["payload"] for e in events if e["payload"].get("step") == "approval" and "approved" in e["payload"]]
    assert decisions == [{"text": "user:bo rejected pay", "step": "approval", "tool": "tool:pay", "approved": False}]


def test_a_tool_that_raises_fails_the_task_and_ends_its_call_as_a_tool_error(daemon):
    @function_tool(failure_error_function=None)
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("the fuse was lit")

    bomber = Agent(name="Bomber", tools=[explode], model=ScriptedModel(
        [{"output": [function_call("explode", {}, call_id="call_1")]}]))

    async def scenario():
        served = serve_agent(bomber, "bomber", ["skill:exploding"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:exploding"], goal="Go.", sender="user:ada", timeout=30)
            task = await _served_task(client, "agent:bomber")
            events = await _events(client, task_id=task["task_id"])
        return failed.value, events

    failed, events = asyncio.run(scenario())
    assert failed.code == "TOOL_FAILED" and failed.details == {"exception": "RuntimeError"}
    assert "the fuse was lit" in failed.message
    call = next(e for e in events if e["type"] == "tool.call")
    error = next(e for e in events if e["type"] == "tool.error")
    assert error["payload"]["details"] == {"call_id": call["id"], "tool": "tool:explode"}
    assert [e["type"] for e in events].index("tool.error") < [e["type"] for e in events].index("task.error")
