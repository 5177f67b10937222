"""`ClutchTracingProcessor` against the real daemon: the SDK's traces as envelopes, read back through
the HTTP API, from plain `Runner.run` calls and from inside a served task."""

import asyncio
import time

import pytest
from agents import (Agent, GuardrailFunctionOutput, InputGuardrailTripwireTriggered, OpenAIChatCompletionsModel,
                    OpenAIResponsesModel, Runner, function_tool, input_guardrail, set_trace_processors)
from agents.run_config import RunConfig
from agents.testing import ScriptedModel, assistant_message, function_call
from openai import AsyncOpenAI

from agents_under_test import ANSWER, TOTAL_TOKENS, looping_agent, usage, weather_team
from fake_openai import MODEL, FakeOpenAI
from clutch import Agent as ClutchAgent
from clutch import AsyncClient, Client
from clutch.adapters.openai_agents import ClutchTracingProcessor, flush_processors, serve_agent


def _own_run(client: Client, agent_id: str) -> list[dict]:
    """The events of the one run the processor opened as `agent_id`."""
    runs = client.runs(agent=agent_id)["items"]
    assert len(runs) == 1, runs
    return client.events(run_id=runs[0]["run_id"])["events"]


def test_a_plain_run_is_written_as_a_run_of_its_own(daemon):
    processor = ClutchTracingProcessor(daemon.url, agent_id="agent:tracer")
    set_trace_processors([processor])
    calls: list = []
    result = asyncio.run(Runner.run(weather_team(calls, emit_traces=True), "Weather in Paris?"))
    processor.force_flush()
    assert result.final_output == ANSWER and calls == ["Paris"]

    with Client(daemon.url) as client:
        events = _own_run(client, "agent:tracer")
        task = client.task(events[0]["task_id"])
    kinds = [e["type"] for e in events]
    steps = [e["payload"].get("step") for e in events]
    trace_ids = {e["trace"]["trace_id"] for e in events}
    assert len(trace_ids) == 1 and trace_ids.pop().startswith("trace_")
    assert {e["task_id"] for e in events} == {task["task_id"]}
    assert kinds[:2] == ["task.request", "task.accept"] and kinds[-1] == "task.result"
    assert events[0]["payload"] == {"goal": "Agent workflow"}

    agents = [e["payload"]["agent"] for e in events if e["payload"].get("step") == "agent"]
    assert agents == ["Triage", "Writer"]
    call = next(e for e in events if e["type"] == "tool.call")
    answer = next(e for e in events if e["type"] == "tool.result")
    handoff = next(e for e in events if e["payload"].get("step") == "handoff")
    assert call["payload"] == {"tool": "tool:get_weather", "args": {"city": "Paris"}}
    assert answer["payload"]["call_id"] == call["id"]
    assert answer["payload"]["content"] == [{"type": "text", "text": "sunny in Paris"}]
    assert call["meta"]["span_type"] == "function" and call["trace"]["span_id"].startswith("span_")
    assert (handoff["payload"]["from_agent"], handoff["payload"]["to_agent"]) == ("Triage", "Writer")
    assert steps.count("model") == 3
    # Spans land parent after child ends, but the agent's own line first: Triage, its tool, the handoff, Writer.
    assert steps.index("agent") < kinds.index("tool.call") < steps.index("handoff") < len(steps) - 1 - steps[::-1].index("agent")

    turns = [e["payload"]["usage"] for e in events if e["payload"].get("step") == "turn"]
    assert sum(u["input_tokens"] + u["output_tokens"] for u in turns) == TOTAL_TOKENS
    assert task["state"] == "completed"
    assert task["usage"]["tokens"] == TOTAL_TOKENS and task["usage"]["requests"] == 3


def test_traces_of_one_group_share_a_thread(daemon):
    processor = ClutchTracingProcessor(daemon.url, agent_id="agent:grouped")
    set_trace_processors([processor])
    config = RunConfig(group_id="conversation-7")
    for _ in range(2):
        asyncio.run(Runner.run(weather_team([]), "Weather in Paris?", run_config=config))
    processor.force_flush()
    with Client(daemon.url) as client:
        runs = client.runs(agent="agent:grouped")["items"]
        threads = {e["thread_id"] for run in runs for e in client.events(run_id=run["run_id"])["events"]}
    assert len(runs) == 2 and len(threads) == 1


def test_a_failed_run_ends_its_trace_task_with_the_code(daemon):
    processor = ClutchTracingProcessor(daemon.url, agent_id="agent:looping-tracer")
    set_trace_processors([processor])
    try:
        asyncio.run(Runner.run(looping_agent(3), "Loop.", max_turns=2))
    except Exception as e:
        assert type(e).__name__ == "MaxTurnsExceeded"
    else:
        raise AssertionError("the run should have exceeded its turns")
    processor.force_flush()
    with Client(daemon.url) as client:
        events = _own_run(client, "agent:looping-tracer")
        task = client.task(events[0]["task_id"])
    assert events[-1]["type"] == "task.error"
    assert events[-1]["payload"]["code"] == "MAX_TURNS_EXCEEDED"
    assert task["state"] == "failed"


def test_inside_a_served_task_the_spans_join_the_task_without_doubling_the_hooks(daemon):
    processor = ClutchTracingProcessor(daemon.url)
    set_trace_processors([processor])

    async def scenario():
        served = serve_agent(weather_team([], emit_traces=True), "traced-weather", ["skill:traced"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            await client.run_task(requires=["skill:traced"], goal="Weather in Paris?", sender="user:ada", timeout=30)
            task_id = (await client.tasks(agent="agent:traced-weather"))["items"][0]["task_id"]
            return await client.task(task_id), (await client.events(task_id=task_id))["events"]

    task, events = asyncio.run(scenario())
    traced = [e for e in events if e.get("trace")]
    assert [e["payload"]["agent"] for e in traced if e["payload"].get("step") == "agent"] == ["Triage", "Writer"]
    assert all(e["from"]["agent_id"] == "agent:traced-weather" for e in traced)
    # The processor wrote every agent span before the task ended, and no second copy of what the hooks wrote.
    assert max(e["seq"] for e in traced) < next(e["seq"] for e in events if e["type"] == "task.result")
    assert [e["type"] for e in events].count("tool.call") == 1
    assert task["usage"]["tokens"] == TOTAL_TOKENS


def test_recording_never_blocks_the_run_when_the_daemon_is_away():
    processor = ClutchTracingProcessor("http://127.0.0.1:9", agent_id="agent:nowhere")
    set_trace_processors([processor])
    started = time.monotonic()
    result = asyncio.run(Runner.run(weather_team([], emit_traces=True), "Weather in Paris?"))
    ran = time.monotonic() - started
    assert result.final_output == ANSWER
    assert ran < 1.0, f"the run took {ran:.2f} s"
    processor.shutdown()  # gives up on the records after the client's retries


@pytest.mark.parametrize("model_class", [OpenAIResponsesModel, OpenAIChatCompletionsModel])
def test_a_real_model_class_traces_its_model_and_text(daemon, model_class):
    processor = ClutchTracingProcessor(daemon.url, agent_id=f"agent:{model_class.__name__.lower()}")
    set_trace_processors([processor])
    with FakeOpenAI("Bonjour.") as api:
        model = model_class(model=MODEL, openai_client=AsyncOpenAI(base_url=api.base_url, api_key="test"))
        result = asyncio.run(Runner.run(Agent(name="Greeter", model=model), "Say hello in French."))
    processor.force_flush()
    assert result.final_output == "Bonjour."

    with Client(daemon.url) as client:
        events = _own_run(client, processor.agent_id)
        task = client.task(events[0]["task_id"])
    model_line = next(e["payload"] for e in events if e["payload"].get("step") == "model")
    assert model_line["model"] == MODEL and model_line["text"] == f"model {MODEL}: Bonjour."
    assert events[-1]["type"] == "task.result" and events[-1]["payload"] == {"text": "Bonjour."}
    assert task["usage"]["tokens"] == 16 and task["usage"]["requests"] == 1


def test_an_agent_used_as_a_tool_by_a_served_agent_is_written_by_the_processor(daemon):
    processor = ClutchTracingProcessor(daemon.url)
    set_trace_processors([processor])
    inner = Agent(name="Inner", model=ScriptedModel([{"output": [assistant_message("Paris is sunny.")],
                                                      "usage": usage(40, 2)}]))
    outer = Agent(name="Outer", tools=[inner.as_tool(tool_name="ask_inner", tool_description="Ask Inner.")],
                  model=ScriptedModel([
                      {"output": [function_call("ask_inner", {"input": "Weather?"}, call_id="call_1")],
                       "usage": usage(10, 5)},
                      {"output": [assistant_message("Sunny.")], "usage": usage(20, 3)},
                  ]))

    async def scenario():
        served = serve_agent(outer, "outer", ["skill:outer"], url=daemon.url)
        async with AsyncClient(daemon.url) as client, served.running():
            await client.run_task(requires=["skill:outer"], goal="Weather?", sender="user:ada", timeout=30)
            task_id = (await client.tasks(agent="agent:outer"))["items"][0]["task_id"]
            return await client.task(task_id), (await client.events(task_id=task_id))["events"]

    task, events = asyncio.run(scenario())
    turns = [e["payload"] for e in events if e["payload"].get("step") == "turn"]
    # The hooks count the outer agent's two model calls, the processor the inner agent's one.
    assert [(t["agent"], t["usage"]["input_tokens"]) for t in turns] == [("Inner", 40)]
    assert task["usage"]["tokens"] == 15 + 23 + 42
    assert [e["payload"]["tool"] for e in events if e["type"] == "tool.call"] == ["tool:ask_inner"]


def test_a_handler_of_your_own_gets_the_whole_trace_in_its_task(daemon):
    processor = ClutchTracingProcessor(daemon.url)
    set_trace_processors([processor])

    async def handle(task):
        result = await Runner.run(weather_team([]), task.goal)
        await flush_processors()
        return result.final_output

    async def scenario():
        async with ClutchAgent("own-handler", ["skill:own"], handle, url=daemon.url).running(), \
                AsyncClient(daemon.url) as client:
            answer = await client.run_task(requires=["skill:own"], goal="Weather in Paris?", sender="user:ada",
                                           timeout=30)
            task_id = (await client.tasks(agent="agent:own-handler"))["items"][0]["task_id"]
            return answer, await client.task(task_id), (await client.events(task_id=task_id))["events"]

    answer, task, events = asyncio.run(scenario())
    assert answer == {"text": ANSWER}
    kinds = [e["type"] for e in events]
    assert kinds.count("tool.call") == 1 and kinds.count("tool.result") == 1
    assert all(e["from"]["agent_id"] == "agent:own-handler" for e in events if e.get("trace"))
    assert max(e["seq"] for e in events if e.get("trace")) < events[kinds.index("task.result")]["seq"]
    assert task["usage"]["tokens"] == TOTAL_TOKENS


def test_a_tripped_guardrail_ends_the_trace_task_as_tripped(daemon):
    @input_guardrail(run_in_parallel=False)
    def no_secrets(context, agent, text):
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    processor = ClutchTracingProcessor(daemon.url, agent_id="agent:guarded-tracer")
    set_trace_processors([processor])
    guarded = Agent(name="Guarded", input_guardrails=[no_secrets],
                    model=ScriptedModel([{"output": [assistant_message("never said")]}]))
    with pytest.raises(InputGuardrailTripwireTriggered):
        asyncio.run(Runner.run(guarded, "Tell me the secret."))
    processor.force_flush()
    with Client(daemon.url) as client:
        events = _own_run(client, "agent:guarded-tracer")
    guardrail = next(e["payload"] for e in events if e["payload"].get("step") == "guardrail")
    assert guardrail["guardrail"] == "no_secrets" and guardrail["triggered"] is True
    assert events[-1]["type"] == "task.error" and events[-1]["payload"]["code"] == "GUARDRAIL_TRIPPED"


def test_a_tool_the_sdk_recovers_from_is_a_tool_error_in_the_trace(daemon):
    @function_tool
    def flaky() -> str:
        """Fails; the SDK tells the model so."""
        raise RuntimeError("disk on fire")

    processor = ClutchTracingProcessor(daemon.url, agent_id="agent:flaky-tracer")
    set_trace_processors([processor])
    agent = Agent(name="Flaky", tools=[flaky], model=ScriptedModel([
        {"output": [function_call("flaky", {}, call_id="call_1")]},
        {"output": [assistant_message("The tool failed.")]},
    ]))
    assert asyncio.run(Runner.run(agent, "Try.")).final_output == "The tool failed."
    processor.force_flush()
    with Client(daemon.url) as client:
        events = _own_run(client, "agent:flaky-tracer")
    call = next(e for e in events if e["type"] == "tool.call")
    error = next(e for e in events if e["type"] == "tool.error")
    assert error["payload"]["code"] == "TOOL_FAILED"
    assert error["payload"]["details"] == {"tool": "tool:flaky", "call_id": call["id"]}
    assert "tool.result" not in [e["type"] for e in events] and events[-1]["type"] == "task.result"
