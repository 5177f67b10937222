"""Google ADK calling the hub: an ADK agent whose sub-agent is the hub (a `RemoteA2aAgent` at the hub's
agent card) hands it a turn; the hub routes it as a Clutch task to a registered `clutch.Agent`, and the
agent's answer comes back into the ADK run. Each check reads the daemon's log back over the HTTP API."""

import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.runners import InMemoryRunner
from google.genai import types

from clutch import Agent, AsyncClient, TaskFailed
from clutch.adapters.adk import hub_agent
from scripted import Scripted, transfer

APP, USER = "adk-calls-hub", "ada"


async def answer(task):
    # ADK sends the user's words first, then its quoted transcript of the other agents' turns.
    question = task.goal.splitlines()[0]
    if question.startswith("fail"):
        raise TaskFailed("NO_ANSWER", "cannot answer that")
    if question.startswith("convert"):
        return f"42 {await task.input('Which unit?', timeout=30)}"
    return f"42: {question}"


class Run:
    """An ADK root agent that transfers every turn to its sub-agent `hub`, in one session."""

    def __init__(self, hub: RemoteA2aAgent):
        root = LlmAgent(name="root", model=Scripted(reply=lambda request: transfer("hub")),
                        instruction="Hand every question to hub.", sub_agents=[hub])
        self.runner = InMemoryRunner(agent=root, app_name=APP)
        self.session = None

    async def turn(self, part: types.Part) -> list:
        if self.session is None:
            self.session = await self.runner.session_service.create_session(app_name=APP, user_id=USER)
        message = types.Content(role="user", parts=[part])
        events = []
        async for event in self.runner.run_async(user_id=USER, session_id=self.session.id, new_message=message):
            events.append(event)
        return events


def said(events, author="hub") -> list[str]:
    return [p.text for e in events if e.author == author and e.content for p in e.content.parts if p.text]


def remote_task_id(events) -> str:
    ids = {e.custom_metadata["a2a:task_id"] for e in events if e.custom_metadata and "a2a:task_id" in e.custom_metadata}
    assert len(ids) == 1, ids
    return ids.pop()


def test_a_sub_agent_turn_is_a_task_routed_to_a_clutch_agent(hub):
    async def main():
        async with Agent("kim", ["skill:answer"], answer, url=hub.url).running(), AsyncClient(hub.url) as client:
            events = await Run(hub_agent("hub", "skill:answer", url=hub.url)).turn(types.Part(text="six times seven"))
            task_id = remote_task_id(events)
            return events, await client.task(task_id), (await client.events(task_id=task_id))["events"]

    events, task, log = asyncio.run(main())
    assert said(events) == ["42: six times seven"]
    # The A2A task is the Clutch task: same id, routed by the skill named in the request's metadata.
    assert task["state"] == "completed"
    assert task["agent"] == "agent:kim"
    assert task["requires"] == ["skill:answer"]
    decision = next(e for e in log if e["type"] == "routing.decision")
    assert decision["payload"]["selected"] == "agent:kim"
    result = next(e for e in log if e["type"] == "task.result")
    assert result["from"]["agent_id"] == "agent:kim"
    assert result["payload"]["text"] == "42: six times seven"


def test_the_next_turn_continues_the_thread(hub):
    async def main():
        async with Agent("kim", ["skill:answer"], answer, url=hub.url).running(), AsyncClient(hub.url) as client:
            run = Run(hub_agent("hub", "skill:answer", url=hub.url))
            first = await run.turn(types.Part(text="one"))
            second = await run.turn(types.Part(text="two"))
            return said(first) + said(second), [await client.task(remote_task_id(e)) for e in (first, second)]

    answers, tasks = asyncio.run(main())
    assert answers == ["42: one", "42: two"]
    # ADK sends the context the hub gave its first task (the task's thread), so the second lands there too.
    assert tasks[0]["task_id"] != tasks[1]["task_id"]
    assert tasks[0]["thread_id"] == tasks[1]["thread_id"]


def test_a_failed_task_reaches_adk_as_a_failed_a2a_task(hub):
    async def main():
        async with Agent("kim", ["skill:answer"], answer, url=hub.url).running(), AsyncClient(hub.url) as client:
            events = await Run(hub_agent("hub", "skill:answer", url=hub.url)).turn(types.Part(text="fail, please"))
            return events, await client.events(task_id=remote_task_id(events), type="task.error")

    events, errors = asyncio.run(main())
    assert [e["payload"]["code"] for e in errors["events"]] == ["NO_ANSWER"]
    # ADK has no error event for a failed remote task: it relays the status message as the answer, and
    # the A2A task it keeps in the event's metadata says it failed.
    last = [e for e in events if e.author == "hub" and e.custom_metadata][-1]
    assert last.custom_metadata["a2a:response"]["status"]["state"] == "TASK_STATE_FAILED"
    assert said(events) == ["NO_ANSWER: cannot answer that"]


def test_a_question_from_the_clutch_agent_pauses_the_turn_until_the_user_answers(hub):
    async def main():
        async with Agent("kim", ["skill:answer"], answer, url=hub.url).running(), AsyncClient(hub.url) as client:
            run = Run(hub_agent("hub", "skill:answer", url=hub.url))
            asked = await asyncio.wait_for(run.turn(types.Part(text="convert 42")), 30)
            task_id = remote_task_id(asked)
            waiting = await client.task(task_id)
            # ADK turns the hub's input-required task into a long-running function call to answer.
            call = next(p.function_call for e in asked if e.content for p in e.content.parts if p.function_call
                        and p.function_call.name != "transfer_to_agent")
            reply = types.Part(function_response=types.FunctionResponse(id=call.id, name=call.name,
                                                                        response={"result": "metres"}))
            answered = await asyncio.wait_for(run.turn(reply), 30)
            chats = await client.events(task_id=task_id, type="chat.message")
            return call, waiting, said(answered), await client.task(task_id), chats["events"]

    call, waiting, answers, task, chats = asyncio.run(main())
    assert call.args == {"input_required": "Which unit?"}
    assert waiting["state"] == "running"
    assert answers == ["42 metres"]
    assert task["state"] == "completed"
    # The answer reached the Clutch agent as a chat.message in its task, from the A2A caller.
    assert [(c["payload"]["text"], c["to"][0]["agent_id"]) for c in chats] == [("metres", "agent:kim")]


def test_a_plain_remote_a2a_agent_reaches_the_hub_too(hub):
    """Without the helper: ADK's own RemoteA2aAgent at the hub's card, streaming, the skill in the
    request's metadata. Enough for tasks that never ask for input."""

    async def main():
        async with Agent("kim", ["skill:answer"], answer, url=hub.url).running(), AsyncClient(hub.url) as client:
            plain = RemoteA2aAgent(name="hub", agent_card=f"{hub.url}/.well-known/agent-card.json",
                                   a2a_request_meta_provider=lambda ctx, message: {"skill": "skill:answer"})
            events = await Run(plain).turn(types.Part(text="six times seven"))
            return events, await client.task(remote_task_id(events))

    events, task = asyncio.run(main())
    assert said(events) == ["42: six times seven"]
    assert (task["state"], task["agent"]) == ("completed", "agent:kim")
