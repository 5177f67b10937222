"""Microsoft Agent Framework and the hub over A2A, both ways (it installs beside ADK in this venv, so
its A2A tests live here): its `A2AAgent` calls Clutch agents through the hub's JSON-RPC endpoint, and
an Agent Framework agent behind its `A2AExecutor` (served by the A2A SDK's routes) works tasks the hub
routes to it. Each check reads the daemon's log back over the HTTP API."""

import asyncio

import pytest
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from agent_framework import BaseChatClient, ChatResponse, ChatResponseUpdate, Content, Message
from agent_framework.a2a import A2AAgent, A2AExecutor
from starlette.applications import Starlette

from clutch import Agent, AsyncClient, TaskFailed
from clutch.adapters import a2a

REVIEWER = "agent:reviewer"


class Echo(BaseChatClient):
    """An offline chat client: answers "maf says: " + the last message, streamed or not."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        self.seen.append(messages[-1].text)
        text = "maf says: " + messages[-1].text
        if stream:
            async def updates():
                yield ChatResponseUpdate(role="assistant", contents=[Content.from_text(text)])
            return self._build_response_stream(updates())

        async def response():
            return ChatResponse(messages=[Message(role="assistant", contents=[text])])
        return response()


def reviewer_app(port: int, chat: Echo, *, stream: bool = True) -> Starlette:
    """The Agent Framework agent as an A2A 1.0 server, its card at the root's well-known path."""
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="reviewer", description="Reviews changes", version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text"], default_output_modes=["text"],
        skills=[AgentSkill(id="review", name="review", description="Reviews changes", tags=["review"])],
    )
    agent = chat.as_agent(name="reviewer", instructions="Review what you are sent.")
    # stream=True: the executor sends the answer as an artifact, which the hub reads as the result; without,
    # the answer is only in the task's history, where the hub finds it.
    handler = DefaultRequestHandler(agent_executor=A2AExecutor(agent, stream=stream), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


def test_an_a2a_agent_reaches_a_clutch_agent_through_the_hub(hub):
    async def answer(task):
        return "42: " + task.goal

    async def main():
        async with Agent("kim", ["skill:answer"], answer, url=hub.url).running(), AsyncClient(hub.url) as client:
            remote = A2AAgent(name="hub", url=f"{hub.url}/a2a")
            # The skill goes as the A2A message's metadata, from the message's `a2a` property.
            response = await remote.run(Message(role="user", contents=["six times seven"],
                                                additional_properties={"a2a": {"skill": "skill:answer"}}))
            return response, (await client.tasks(agent="agent:kim"))["items"]

    response, tasks = asyncio.run(main())
    assert response.text == "42: six times seven"
    assert len(tasks) == 1
    assert (tasks[0]["state"], tasks[0]["requires"], tasks[0]["requester"]) == ("completed", ["skill:answer"], "user:a2a")


def test_a_question_from_the_clutch_agent_is_answered_in_the_a2a_session(hub):
    """The Clutch agent asks for input; the A2AAgent's answer is the question, its session keeps the
    waiting task, and the next message in the session answers it (a chat.message to the agent)."""

    async def convert(task):
        return f"42 {await task.input('Which unit?', timeout=30)}"

    def ask(text):
        return Message(role="user", contents=[text], additional_properties={"a2a": {"skill": "skill:answer"}})

    async def main():
        async with Agent("kim", ["skill:answer"], convert, url=hub.url).running(), AsyncClient(hub.url) as client:
            remote = A2AAgent(name="hub", url=f"{hub.url}/a2a")
            session = remote.create_session()
            asked = await asyncio.wait_for(remote.run(ask("convert 42"), session=session), 30)
            waiting = dict(session.service_session_id)
            answered = await asyncio.wait_for(remote.run(ask("metres"), session=session), 30)
            task = await client.task(waiting["task_id"])
            chats = (await client.events(task_id=waiting["task_id"], type="chat.message"))["events"]
            return asked.text, answered.text, task, chats, (await client.tasks())["items"]

    asked, answered, task, chats, tasks = asyncio.run(main())
    assert asked == "Which unit?"
    assert answered == "42 metres"
    assert task["state"] == "completed"
    assert [c["payload"]["text"] for c in chats] == ["metres"]
    assert len(tasks) == 1  # the answer went into the waiting task, not a new one


def test_the_hub_routes_a_task_to_an_agent_framework_agent(hub):
    chat = Echo()

    async def main():
        async with AsyncClient(hub.url) as client:
            async with a2a.serve(lambda port: reviewer_app(port, chat), agent_id=REVIEWER,
                                 capabilities=["skill:review"], url=hub.url):
                result = await client.run_task(requires=["skill:review"], goal="is this migration safe", timeout=30)
            task = (await client.tasks(agent=REVIEWER))["items"][0]
            return result, task, (await client.events(task_id=task["task_id"], type="task.result"))["events"]

    result, task, results = asyncio.run(main())
    assert chat.seen == ["is this migration safe"]
    assert result["text"] == "maf says: is this migration safe"
    assert task["state"] == "completed"
    assert [e["from"]["agent_id"] for e in results] == [REVIEWER]


def test_an_executor_that_does_not_stream_leaves_its_answer_in_the_history_where_the_hub_finds_it(hub):
    async def main():
        async with AsyncClient(hub.url) as client:
            async with a2a.serve(lambda port: reviewer_app(port, Echo(), stream=False), agent_id="agent:quiet",
                                 capabilities=["skill:quiet"], url=hub.url):
                return await client.run_task(requires=["skill:quiet"], goal="anything to add", timeout=30)

    assert asyncio.run(main())["text"] == "maf says: anything to add"


def test_an_agent_framework_failure_is_the_task_error(hub):
    class Broken(Echo):
        def _inner_get_response(self, **kwargs):
            raise RuntimeError("the model is down")

    async def main():
        async with AsyncClient(hub.url) as client:
            async with a2a.serve(lambda port: reviewer_app(port, Broken()), agent_id=REVIEWER,
                                 capabilities=["skill:review"], url=hub.url):
                with pytest.raises(TaskFailed) as failed:
                    await client.run_task(requires=["skill:review"], goal="anything", timeout=30)
            task = (await client.tasks(agent=REVIEWER))["items"][0]
            return failed.value, task, (await client.events(task_id=task["task_id"], type="task.error"))["events"]

    failed, task, errors = asyncio.run(main())
    assert task["state"] == "failed"
    assert (failed.code, failed.message) == ("A2A_FAILED", "the model is down")
    assert [e["from"]["agent_id"] for e in errors] == [REVIEWER]
