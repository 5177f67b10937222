"""The client against the real daemon: every route family, its errors as ClutchError with the daemon's
code/field/retryable/hint, paging, validation before sending, signatures, and the generated models
reading the daemon's answers."""

import asyncio
import textwrap
from pathlib import Path

import pytest

import clutch
from clutch import ClutchError, ids
from clutch.schemas import (agent_view, agents_view, approvals_view, envelope, heartbeat_view, inbox_view, runs_view,
                            search_view, sessions_view, task_view, tasks_view, threads_view, tools_view)
from clutch.sign import Signer, b64url, canonical
from daemon import Daemon

ADA = {"agent_id": "user:ada"}


def chat(text, **fields):
    return {"from": ADA, "to": [], "type": "chat.message", "payload": {"text": text}, **fields}


def test_send_fills_ids_and_a_repeat_is_a_duplicate(daemon):
    with clutch.Client(daemon.url) as c:
        message = clutch.prepare(chat("hello"))
        first = c.send(message)
        again = c.send(message)
        assert first["duplicate"] is False and again == {**first, "duplicate": True}
        stored = c.message(first["id"])
        envelope.ClutchMessage.model_validate({k: v for k, v in stored.items() if k != "seq"})
        assert stored["payload"] == {"text": "hello"} and stored["seq"] == first["seq"]


def test_a_batch_answers_each_message_and_a_bad_one_spoils_nothing(daemon):
    with clutch.Client(daemon.url) as c:
        run = ids.new_id("run")
        # The second breaks a rule only the daemon knows (a clutch.* payload type is the daemon's own).
        answers = c.send_batch([chat("one", run_id=run), chat("two", run_id=run, payload_type="clutch.budget.v1"),
                                chat("three", run_id=run)])
        assert [type(a) for a in answers] == [dict, ClutchError, dict]
        assert answers[1].code in ("FORBIDDEN", "VALIDATION_FAILED") and answers[1].field
        texts = [e["payload"]["text"] for e in c.events(run_id=run)["events"]]
        assert texts == ["one", "three"]


def test_an_invalid_envelope_is_refused_before_sending_naming_the_field(daemon):
    with clutch.Client(daemon.url) as c:
        head = c.health()["head_seq"]
        cases = [
            (chat("x", to=[{"agent_id": "ken"}]), "to[0].agent_id"),
            ({**chat("x"), "from": {"agent_id": "ada"}}, "from.agent_id"),
            (chat("x", type="task.nonsense"), "type"),
            (chat("x", run_id="run_1"), "run_id"),
            (chat("x", payload="text"), "payload"),
            (chat("x", colour="blue"), "colour"),
        ]
        for message, field in cases:
            with pytest.raises(ClutchError) as refused:
                c.send(message)
            assert refused.value.code == "VALIDATION_FAILED" and refused.value.status is None, message
            assert refused.value.field == field and refused.value.retryable is False
            assert "nothing was sent" in refused.value.hint
        assert c.health()["head_seq"] == head, "nothing reached the log"


def test_the_daemons_errors_carry_code_field_retryable_and_hint(daemon):
    with clutch.Client(daemon.url) as c:
        sent = c.send(chat("hi"))
        conflicting = {**c.message(sent["id"]), "payload": {"text": "changed"}}
        conflicting.pop("seq")

        def error(call):
            with pytest.raises(ClutchError) as e:
                call()
            return e.value

        e = error(lambda: c.send(conflicting))
        assert (e.code, e.status, e.retryable) == ("ID_CONFLICT", 409, False)
        e = error(lambda: c.message(ids.new_id("msg")))
        assert (e.code, e.status) == ("MESSAGE_NOT_FOUND", 404)
        e = error(lambda: c.task(ids.new_id("task")))
        assert (e.code, e.status) == ("TASK_NOT_FOUND", 404)
        e = error(lambda: c.agent("agent:nobody"))
        assert (e.code, e.status) == ("AGENT_NOT_FOUND", 404)
        e = error(lambda: c.heartbeat("agent:nobody"))
        assert e.code == "AGENT_NOT_FOUND"
        e = error(lambda: c.session("sess_nothing"))
        assert e.code in ("SESSION_NOT_FOUND", "VALIDATION_FAILED")
        e = error(lambda: c.runs(limit=0))
        assert (e.code, e.field) == ("VALIDATION_FAILED", "limit")
        e = error(lambda: c.register({"v": "clutch/0.1", "agent_id": "agent:k", "capabilities": "all"}))
        assert e.code in ("VALIDATION_FAILED", "INVALID_JSON") and e.status == 400
        # A task's state machine: a result from an agent the task was never given.
        task = c.send({"from": ADA, "to": [{"agent_id": "agent:ken"}], "type": "task.request",
                       "payload": {"goal": "g"}})
        request = c.message(task["id"])
        e = error(lambda: c.send({"from": {"agent_id": "agent:tom"}, "to": [ADA], "type": "task.result",
                                  "run_id": request["run_id"], "thread_id": request["thread_id"],
                                  "task_id": request["task_id"], "payload": {}}))
        assert (e.code, e.status) == ("INVALID_TRANSITION", 409)
        # Workflows: a claim of a task held by another, and a cycle in a plan.
        wf = c.create_workflow("w")
        e = error(lambda: c.plan_workflow(wf["id"], [{"name": "a", "depends_on": ["b"]},
                                                     {"name": "b", "depends_on": ["a"]}]))
        assert e.code == "VALIDATION_FAILED" and e.hint is None or isinstance(e.hint, str)
        plan = c.plan_workflow(wf["id"], [{"name": "a"}])
        task_id = plan["tasks"][0]["id"]
        c.register(clutch.card("ken", ["skill:x"]))
        c.register(clutch.card("tom", ["skill:x"]))
        assert c.claim(task_id, "agent:ken")["success"] is True
        assert c.claim(task_id, "agent:tom")["success"] is False
        e = error(lambda: c.set_status(task_id, "agent:tom", "completed", outcome="mine"))
        assert e.code == "LEASE_LOST"
        e = error(lambda: c.set_status(task_id, "agent:ken", "planning"))
        assert e.code in ("INVALID_TRANSITION", "VALIDATION_FAILED") and e.message


def test_no_daemon_is_a_retryable_daemon_unreachable():
    with clutch.Client("http://127.0.0.1:9", retries=1) as c:
        with pytest.raises(ClutchError) as e:
            c.health()
    assert (e.value.code, e.value.retryable, e.value.status) == ("DAEMON_UNREACHABLE", True, None)
    assert "clutch serve" in e.value.hint


def test_tokens_unauthorized_and_forbidden(tmp_path):
    (tmp_path / "org.yaml").write_text(textwrap.dedent("""
        tokens:
          - {name: ops, role: admin, token: "ops-secret-0123456789abcdef"}
          - {name: dash, role: observer, token: "dash-secret-0123456789abcdef"}
    """))
    with Daemon(config_dir=str(tmp_path)) as d:
        with clutch.Client(d.url, retries=0) as anonymous:
            with pytest.raises(ClutchError) as e:
                anonymous.runs()
            assert (e.value.code, e.value.status) == ("UNAUTHORIZED", 401)
        with clutch.Client(d.url, token="dash-secret-0123456789abcdef") as observer:
            assert "items" in observer.runs()
            with pytest.raises(ClutchError) as e:
                observer.send(chat("hi"))
            assert (e.value.code, e.value.status) == ("FORBIDDEN", 403)
        with clutch.Client(d.url, token="ops-secret-0123456789abcdef") as admin:
            assert admin.send(chat("hi"))["seq"] >= 1


def test_every_list_pages_with_its_cursor_and_the_views_read_as_models(daemon):
    async def go():
        async with clutch.AsyncClient(daemon.url) as c:
            await c.register(clutch.card("ken", ["skill:research"], display={"name": "Ken"}))
            runs = [ids.new_id("run") for _ in range(5)]
            for run in runs:
                await c.send(chat(f"in {run}", run_id=run))
            listed = [r["run_id"] async for r in c.pages(c.runs, limit=2)]
            assert set(runs) <= set(listed) and len(listed) == len(set(listed))
            threads = [t async for t in c.pages(c.threads, limit=2)]
            assert len(threads) >= 5
            events = [e async for e in c.pages(c.events, limit=2)]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            found = [h async for h in c.pages(c.search, q="in", limit=2)]
            assert len(found) >= 5
            # Each answer reads strictly as the model generated from the daemon's published schema.
            for model, answer in ((runs_view.RunSummaryPage, await c.runs()),
                                  (threads_view.ThreadSummaryPage, await c.threads()),
                                  (tasks_view.TaskListingPage, await c.tasks()),
                                  (search_view.SearchHitPage, await c.search("in")),
                                  (agents_view.Agents, await c.agents()),
                                  (agent_view.Agent, await c.agent("agent:ken")),
                                  (heartbeat_view.Heartbeat, await c.heartbeat("agent:ken")),
                                  (inbox_view.Inbox, await c.inbox("agent:ken")),
                                  (tools_view.Tools, await c.tools()),
                                  (approvals_view.Approvals, await c.approvals()),
                                  (sessions_view.Sessions, await c.sessions())):
                model.model_validate(answer)
            assert isinstance((await c.workflows())["workflows"], list)
    asyncio.run(go())


def test_a_task_view_reads_as_its_model(daemon):
    async def go():
        async def work(task):
            await task.progress("half", percent=50, usage={"input_tokens": 7, "output_tokens": 3})
            return "ok"
        async with clutch.Agent("ken", ["skill:research"], work, url=daemon.url).running():
            async with clutch.AsyncClient(daemon.url) as c:
                assert await c.run_task(requires=["skill:research"], goal="g", timeout=30) == {"text": "ok"}
                [listing] = [t async for t in c.pages(c.tasks, agent="agent:ken")]
                view = await c.task(listing["task_id"])
                task_view.Task.model_validate(view)
                assert view["state"] == "completed" and view["usage"]["tokens"] == 10
    asyncio.run(go())


# The known answer of crates/proto/tests/it/sign.rs: a key, a message and its signature.
SIGN_VECTOR = Path(__file__).resolve().parents[4] / "crates" / "proto" / "tests" / "it" / "sign.rs"


def test_jcs_matches_rfc8785_examples():
    assert canonical({"b": [1, 2.5, 1e30, -0.0, 4.50], "a": "é\u2028", "\u20ac": 1, "\U0001f600": 2}) == \
        '{"a":"é\u2028","b":[1,2.5,1e+30,0,4.5],"\u20ac":1,"\U0001f600":2}'
    assert canonical(0.000001) == "0.000001" and canonical(1e-7) == "1e-7" and canonical(1e21) == "1e+21"


def test_a_signed_message_verifies_on_the_daemon_and_a_changed_one_does_not(tmp_path):
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = Ed25519PrivateKey.generate()
    secret = b64url(key.private_bytes_raw())
    public = b64url(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    (tmp_path / "org.yaml").write_text(textwrap.dedent(f"""
        agents:
          agent:ken:
            keys:
              - {{kid: ken-1, public_key: {public}}}
            require_signature: true
    """))
    with Daemon(config_dir=str(tmp_path)) as d:
        ken = {"agent_id": "agent:ken"}
        with clutch.Client(d.url, signer=Signer("ken-1", secret)) as signed:
            sent = signed.send({"from": ken, "to": [], "type": "chat.message", "payload": {"text": "signed", "n": 4.5}})
            assert signed.message(sent["id"])["security"]["auth"]["kid"] == "ken-1"
        with clutch.Client(d.url) as plain:
            with pytest.raises(ClutchError) as e:
                plain.send({"from": ken, "to": [], "type": "chat.message", "payload": {"text": "unsigned"}})
            assert (e.value.code, e.value.field) == ("UNAUTHORIZED", "security.auth")
            tampered = Signer("ken-1", secret).sign(clutch.prepare(
                {"from": ken, "to": [], "type": "chat.message", "payload": {"text": "mine"}}))
            tampered["payload"]["text"] = "not mine"
            with pytest.raises(ClutchError) as e:
                plain.send(tampered)
            assert (e.value.code, e.value.field) == ("UNAUTHORIZED", "security.auth.sig")


def test_a_body_over_the_daemons_limit_is_payload_too_large():
    with Daemon(env={"CLUTCH_LIMITS_BODY_BYTES": "4096"}) as d, clutch.Client(d.url) as c:
        with pytest.raises(ClutchError) as e:
            c.send(chat("x" * 10_000))
        assert (e.value.code, e.value.status, e.value.retryable) == ("PAYLOAD_TOO_LARGE", 413, False)
        assert c.send(chat("small"))["seq"] >= 1


def test_an_answer_that_is_not_the_daemons_is_unexpected_response_and_a_5xx_is_retried():
    """What a proxy in front of the daemon may answer: an HTML error page. A real HTTP server stands in
    for the proxy: two 502 pages, then the daemon's answer."""
    import http.server
    import json as json_
    import threading

    hits = []

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            if len(hits) <= 2 or self.path.startswith("/v1/runs"):
                body, status, kind = b"<html>502 Bad Gateway</html>", 502, "text/html"
            else:
                body, status, kind = json_.dumps({"status": "ok", "head_seq": 7}).encode(), 200, "application/json"
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with clutch.Client(f"http://127.0.0.1:{server.server_port}", retries=3) as c:
            assert c.health()["head_seq"] == 7 and len(hits) == 3, "two 502s retried, the third answer taken"
            with pytest.raises(ClutchError) as e:
                c.runs()
        assert (e.value.code, e.value.status, e.value.retryable) == ("UNEXPECTED_RESPONSE", 502, True)
        assert "502 Bad Gateway" in e.value.message
        assert len([h for h in hits if h.startswith("/v1/runs")]) == 4, "retried 3 times, then raised"
    finally:
        server.shutdown()


def test_a_plain_function_handler_gets_a_blocking_task(daemon):
    def work(task):  # runs in a thread: the Task's methods block there
        task.progress("halfway", percent=50)
        call = task.tool_call(clutch.tool_name("count"), {"text": task.goal})
        task.tool_result(call, "tool:count", "3")
        return {"text": f"{len(task.goal.split())} words"}

    async def go():
        async with clutch.Agent("sam", ["skill:count"], work, url=daemon.url).running():
            async with clutch.AsyncClient(daemon.url) as c:
                assert await c.run_task(requires=["skill:count"], goal="one two three", timeout=30) == \
                    {"text": "3 words"}
                # The blocking client asks too (from a thread: this one runs the agent's loop).
                with clutch.Client(daemon.url) as blocking:
                    assert await asyncio.to_thread(blocking.run_task, requires=["skill:count"], goal="a b",
                                                   timeout=30) == {"text": "2 words"}
                [listing, _] = [t async for t in c.pages(c.tasks, agent="agent:sam")][::-1]
                kinds = [e["type"] for e in (await c.events(task_id=listing["task_id"]))["events"]
                         if e["from"]["agent_id"] == "agent:sam"]
                assert kinds == ["task.accept", "task.progress", "tool.call", "tool.result", "task.result"]
    asyncio.run(go())


def test_an_agent_with_an_agent_token_and_a_signing_key_works_a_task(tmp_path):
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = Ed25519PrivateKey.generate()
    public = b64url(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    (tmp_path / "org.yaml").write_text(textwrap.dedent(f"""
        agents:
          agent:ken:
            keys:
              - {{kid: ken-1, public_key: {public}}}
            require_signature: true
        tokens:
          - {{name: ken, role: agent, agent_id: "agent:ken", token: "ken-secret-0123456789abcdef"}}
          - {{name: ada, role: admin, token: "ada-secret-0123456789abcdef"}}
    """))

    async def work(task):
        await task.progress("signed progress")
        return "signed result"

    async def go():
        with Daemon(config_dir=str(tmp_path)) as d:
            signer = Signer("ken-1", b64url(key.private_bytes_raw()))
            agent = clutch.Agent("ken", ["skill:research"], work, url=d.url, token="ken-secret-0123456789abcdef",
                                 signer=signer)
            async with agent.running():
                async with clutch.AsyncClient(d.url, token="ada-secret-0123456789abcdef") as ada:
                    result = await ada.run_task(requires=["skill:research"], goal="g", sender="user:ada", timeout=30)
                    assert result == {"text": "signed result"}
                    [listing] = [t async for t in ada.pages(ada.tasks, agent="agent:ken")]
                    mine = [e for e in (await ada.events(task_id=listing["task_id"]))["events"]
                            if e["from"]["agent_id"] == "agent:ken"]
                    assert [e["type"] for e in mine] == ["task.accept", "task.progress", "task.result"]
                    assert all(e["security"]["auth"]["kid"] == "ken-1" for e in mine)
            # The agent's token acts only as agent:ken.
            async with clutch.AsyncClient(d.url, token="ken-secret-0123456789abcdef") as ken:
                with pytest.raises(ClutchError) as e:
                    await ken.send(chat("pretending"))
                assert e.value.code == "FORBIDDEN"
    asyncio.run(go())


def test_an_agents_meta_goes_on_every_message_of_its_tasks(daemon):
    async def work(task):
        await task.progress("step", meta={"step": 1})
        return "done"

    async def go():
        agent = clutch.Agent("mia", ["skill:meta"], work, url=daemon.url, meta={"framework": "mine"})
        async with agent.running(), clutch.AsyncClient(daemon.url) as c:
            await c.run_task(requires=["skill:meta"], goal="g", timeout=30)
            [listing] = [t async for t in c.pages(c.tasks, agent="agent:mia")]
            mine = [e for e in (await c.events(task_id=listing["task_id"]))["events"]
                    if e["from"]["agent_id"] == "agent:mia"]
            assert [(e["type"], e.get("meta")) for e in mine] == [
                ("task.accept", {"framework": "mine"}), ("task.progress", {"framework": "mine", "step": 1}),
                ("task.result", {"framework": "mine"})]
    asyncio.run(go())
