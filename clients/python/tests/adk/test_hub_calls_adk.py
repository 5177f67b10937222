"""The hub calling Google ADK: an ADK agent served by `to_a2a()` (uvicorn on a free loopback port) is
registered as a Clutch agent whose card names its A2A endpoint; tasks the hub routes to it are sent
there as A2A messages, worked by the ADK agent, and its answer lands as the agent's `task.result` in
the task's thread. Each check reads the daemon's log back over the HTTP API."""

import asyncio

import httpx
import pytest
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import LlmAgent

from clutch import Agent, AsyncClient, ClutchError, TaskFailed
from clutch.adapters import a2a
from daemon import Daemon
from scripted import Scripted, last_user_text

WRITER = "agent:writer"


def writer(reply=lambda request: "adk says: " + last_user_text(request)) -> tuple[LlmAgent, Scripted]:
    model = Scripted(reply=reply)
    return LlmAgent(name="writer", model=model, instruction="Write what is asked.", description="Writes"), model


def serve(agent, hub_url, **kwargs):
    return a2a.serve(lambda port: to_a2a(agent, host="127.0.0.1", port=port), agent_id=WRITER,
                     capabilities=["skill:write"], url=hub_url, **kwargs)


def test_a_routed_task_is_worked_by_the_adk_agent_and_its_answer_lands_in_the_thread(hub):
    agent, model = writer()

    async def main():
        async with AsyncClient(hub.url) as client:
            async with serve(agent, hub.url, description="an ADK agent") as endpoint:
                registered = await client.agent(WRITER)
                result = await client.run_task(requires=["skill:write"], goal="a haiku about logs", sender="user:ada",
                                               timeout=30)
                tasks = (await client.tasks(agent=WRITER))["items"]
            with pytest.raises(ClutchError) as gone:
                await client.agent(WRITER)
            log = (await client.events(task_id=tasks[0]["task_id"]))["events"]
            thread = (await client.events(thread_id=tasks[0]["thread_id"]))["events"]
            return endpoint, registered, result, log, thread, gone.value

    endpoint, registered, result, log, thread, gone = asyncio.run(main())
    assert registered["status"] == "online"
    assert registered["card"]["endpoints"] == {"a2a": {"url": endpoint}}
    assert registered["card"]["display"] == {"name": "writer", "desc": "an ADK agent"}
    # The ADK model was given the task's goal as the user's turn, and its answer is the result.
    assert last_user_text(model.requests[0]) == "a haiku about logs"
    assert result["text"] == "adk says: a haiku about logs"
    decision = next(e for e in log if e["type"] == "routing.decision")
    assert decision["payload"]["selected"] == WRITER
    # The hub wrote the remote task's acceptance and outcome as the agent's own events, in the thread.
    accept = next(e for e in log if e["type"] == "task.accept")
    assert accept["from"]["agent_id"] == WRITER
    assert accept["payload"]["a2a"]["url"] == endpoint
    results = [e for e in thread if e["type"] == "task.result"]
    assert [(e["from"]["agent_id"], e["payload"]["text"]) for e in results] == [(WRITER, result["text"])]
    assert results[0]["payload"]["a2a"]["task_id"] == accept["payload"]["a2a"]["task_id"]
    # On leaving serve(), the agent is removed from the hub.
    assert gone.code == "AGENT_NOT_FOUND"


def test_a_clutch_agent_delegates_a_subtask_to_the_adk_agent(hub):
    agent, _ = writer()

    async def lead(task):
        draft = await task.delegate(requires=["skill:write"], goal="a title for " + task.goal, timeout=30)
        return "lead chose: " + draft["text"]

    async def main():
        async with AsyncClient(hub.url) as client, serve(agent, hub.url):
            async with Agent("lead", ["skill:lead"], lead, url=hub.url).running():
                result = await client.run_task(requires=["skill:lead"], goal="the launch post", timeout=30)
            parent = (await client.tasks(agent="agent:lead"))["items"][0]
            tree = await client.run_tasks(parent["run_id"])
            return result, parent, tree

    result, parent, tree = asyncio.run(main())
    assert result["text"] == "lead chose: adk says: a title for the launch post"
    # The subtask hangs under the lead's task in the run's tree, worked by the ADK agent.
    flat = []

    def walk(nodes):
        for node in nodes:
            flat.append(node)
            walk(node.get("children", []))

    walk(tree["tasks"])
    sub = [t for t in flat if t["agent"] == WRITER]
    assert len(sub) == 1
    assert sub[0]["parent_task_id"] == parent["task_id"]
    assert sub[0]["state"] == "completed"


def test_an_adk_failure_is_the_task_error(hub):
    def broken(request):
        raise RuntimeError("the model is down")

    agent, _ = writer(broken)

    async def main():
        async with AsyncClient(hub.url) as client, serve(agent, hub.url):
            with pytest.raises(TaskFailed) as failed:
                await client.run_task(requires=["skill:write"], goal="anything", timeout=30)
            task = (await client.tasks(agent=WRITER))["items"][0]
            errors = (await client.events(task_id=task["task_id"], type="task.error"))["events"]
            return failed.value, task, errors

    failed, task, errors = asyncio.run(main())
    assert task["state"] == "failed"
    assert [e["from"]["agent_id"] for e in errors] == [WRITER]
    assert "the model is down" in failed.message


def test_a_message_sent_by_url_through_the_hub(hub):
    """`POST /v1/a2a/send`: the hub registers the endpoint as a remote agent of its own and sends it the
    message as a task, so the exchange is in the log though no card was registered by hand."""
    agent, _ = writer()

    async def main():
        async with a2a.serve(lambda port: to_a2a(agent, host="127.0.0.1", port=port), agent_id="agent:unused",
                             capabilities=["skill:unused"], url=hub.url) as endpoint:
            async with httpx.AsyncClient(base_url=hub.url, timeout=60) as http:
                r = await http.post("/v1/a2a/send", json={"url": endpoint, "text": "two lines on rain"})
            async with AsyncClient(hub.url) as client:
                sent = r.json()
                return r.status_code, sent, await client.events(task_id=sent["task_id"], type="task.result")

    status, sent, results = asyncio.run(main())
    assert status == 200, sent
    assert sent["state"] == "completed"
    assert sent["text"] == "adk says: two lines on rain"
    assert sent["agent_id"].startswith("agent:a2a-")
    assert [e["from"]["agent_id"] for e in results["events"]] == [sent["agent_id"]]


def test_serving_on_loopback_needs_the_hub_to_allow_it():
    """A hub whose outbound guard refuses loopback refuses the registration, naming the setting; the
    server serve() started is stopped again."""
    agent, _ = writer()

    async def main():
        with pytest.raises(ClutchError) as refused:
            async with serve(agent, strict.url):
                pass
        return refused.value

    with Daemon() as strict:
        refused = asyncio.run(main())
    assert refused.code == "TARGET_NOT_ALLOWED"
    assert refused.field == "endpoints.a2a.url"
    assert "allow_loopback" in refused.message
