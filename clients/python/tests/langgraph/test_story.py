"""Seed 000 §10, end to end: a person asks; a LangGraph planner (examples/langgraph_agent.py, its own
process) takes the task and delegates the writing to the hub; the router gives it to an AutoGen team
(examples/autogen_team.py, another process, another venv); the team's result comes back into the graph,
the planner asks the person to confirm, and answers. Everything is one thread, and the run replays.

The person's request is the message the web UI's composer posts (a `task.request` to the orchestrator
with `requires`); crates/gateway/tests/ui/story.test.mjs does the same from the page itself.
"""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import clutch
from clutch import ids
from daemon import REPO

EXAMPLES = REPO / "clients" / "python" / "examples"
AUTOGEN_PYTHON = REPO / ".tools" / "venv-autogen" / "bin" / "python"


class Process:
    """An example agent as a process; `wait_for(text)` reads its log (stderr) until a line has it."""

    def __init__(self, python: Path, script: str, *args: str):
        if not python.exists():
            raise RuntimeError(f"{python} is missing: the story runs the AutoGen team in its own venv; "
                               "run scripts/test-python (it makes every suite's venv) first")
        self.lines: list[str] = []
        self.proc = subprocess.Popen([str(python), str(EXAMPLES / script), *args], stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True)
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self.changed:
                self.lines.append(line.rstrip())
                self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        with self.changed:
            ok = self.changed.wait_for(lambda: any(text in line for line in self.lines), timeout)
        assert ok, f"no {text!r} in:\n" + "\n".join(self.lines)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def test_a_person_asks_a_langgraph_planner_which_delegates_to_an_autogen_team(daemon):
    team = Process(AUTOGEN_PYTHON, "autogen_team.py", "--url", daemon.url)
    planner = Process(Path(sys.executable), "langgraph_agent.py", "--url", daemon.url, "--confirm")
    try:
        team.wait_for("agent:scribes reading its inbox")
        planner.wait_for("agent:planner reading its inbox")
        with clutch.Client(daemon.url) as hub:
            # What the composer posts when Ada asks for work in a new thread.
            run, thread, task = ids.new_id("run"), ids.new_id("thr"), ids.new_id("task")
            hub.send({"type": "task.request", "run_id": run, "thread_id": thread, "task_id": task,
                      "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
                      "requires": ["skill:plan"], "payload": {"goal": "How do I start a book club?"}})
            # The planner asks Ada to confirm the team's draft: she answers from her inbox.
            deadline = time.monotonic() + 60
            asked = []
            while not asked and time.monotonic() < deadline:
                asked = hub.inbox("user:ada", wait_seconds=5)["tasks"]
            assert asked, "the planner never asked the person"
            question = asked[0]
            assert "Send this answer?" in json.dumps(question) and "Draft for" in json.dumps(question)
            hub.reply(question["task"]["task_id"], "user:ada", "completed", text="yes, send it")
            while hub.task(task)["state"] not in ("completed", "failed") and time.monotonic() < deadline:
                time.sleep(0.2)
            view = hub.task(task)
            assert view["state"] == "completed", view

            events = list(hub.pages(hub.events, run_id=run))
            assert {e["thread_id"] for e in events} == {thread}, "one thread holds the whole story"
            result = [e for e in events if e["type"] == "task.result" and e["task_id"] == task
                      and e["from"]["agent_id"] == "agent:planner"]
            assert len(result) == 1
            text = result[0]["payload"]["text"]
            assert "From the writer: Draft for “Write two friendly sentences" in text and "yes, send it" in text

            # The delegation: a subtask of the planner's, routed to the AutoGen team by its skill.
            sub = [e for e in events if e["type"] == "task.request" and e.get("parent_task_id") == task
                   and e.get("requires") == ["skill:write"] and e["from"]["agent_id"] == "agent:planner"]
            assert len(sub) == 1
            sub_id = sub[0]["task_id"]
            decisions = [e for e in events if e["type"] == "routing.decision" and e["task_id"] == sub_id]
            assert decisions[0]["payload"]["selected"] == "agent:scribes"
            speakers = [e["payload"].get("speaker") for e in events
                        if e["type"] == "chat.message" and e["task_id"] == sub_id]
            assert speakers == ["writer", "critic"]
            assert hub.task(sub_id)["state"] == "completed" and hub.task(sub_id)["agent"] == "agent:scribes"
            # The graph's own steps and its hub tool call are in the thread too.
            assert any(e["type"] == "tool.call" and e["task_id"] == task for e in events)
            assert any(e["type"] == "task.progress" and e["task_id"] == task for e in events)

            # Replayable: the run as NDJSON is the same events in the same order.
            replay = [json.loads(line) for line in hub._http.get(f"/v1/runs/{run}/events").text.splitlines()]
            assert [e["seq"] for e in replay] == [e["seq"] for e in events]
            # The task tree: Ada's task, with the planner's two subtasks (the writing, the question) under it,
            # and the team's usage counted on the run.
            tree = hub.run_tasks(run)
            [root] = tree["tasks"]
            assert root["task_id"] == task and root["agent"] == "agent:planner"
            assert sorted(child["agent"] for child in root["children"]) == ["agent:scribes", "user:ada"]
            assert tree["counts"]["completed"] == 3 and tree["usage"]["tokens"] > 0
    finally:
        planner.stop()
        team.stop()
