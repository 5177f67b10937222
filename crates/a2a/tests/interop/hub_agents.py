"""The agents the SDK checks (sdk_check.py, sdk03_check.py) give their tasks to, working beside the
daemon over its HTTP API in a thread (httpx only, so that either SDK's venv runs it): `agent:kim`
(skill `skill:answer`) answers every task with "42: " + its goal; `agent:slow` (skill `skill:slow`)
never answers, so its tasks stay open to be cancelled.
"""

import sys
import threading
import time

import httpx

KIM, SLOW = "agent:kim", "agent:slow"
ANSWER, SLOW_SKILL = "skill:answer", "skill:slow"
TIMEOUT = 30.0


class CheckFailed(Exception):
    pass


def expect(ok, why):
    """Fails the check with `why` unless `ok`."""
    if not ok:
        raise CheckFailed(why)


class Agents(threading.Thread):
    """agent:kim answers each task it is given; agent:slow only stays online."""

    def __init__(self, base):
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=base, timeout=TIMEOUT)
        self.stopping = threading.Event()
        self.answered = set()

    def register(self):
        for agent, skill in ((KIM, ANSWER), (SLOW, SLOW_SKILL)):
            card = {"v": "clutch/0.1", "agent_id": agent, "capabilities": [{"id": skill, "version": "1.0.0"}]}
            r = self.http.post("/v1/agents", json=card)
            r.raise_for_status()

    def heartbeat(self):
        for agent in (KIM, SLOW):
            self.http.post(f"/v1/agents/{agent}/heartbeat", json={}).raise_for_status()

    def run(self):
        last_beat = time.monotonic()
        while not self.stopping.is_set():
            try:
                if time.monotonic() - last_beat > 3:
                    self.heartbeat()
                    last_beat = time.monotonic()
                r = self.http.get(f"/v1/inbox/{KIM}", params={"wait_seconds": 1})
                r.raise_for_status()
                for item in r.json().get("tasks", []):
                    task_id = item["task"]["task_id"]
                    if task_id in self.answered:
                        continue
                    goal = item["request"]["goal"]
                    reply = {"agent_id": KIM, "status": "completed", "text": "42: " + goal}
                    r = self.http.post(f"/v1/tasks/{task_id}/reply", json=reply)
                    if r.status_code < 300:
                        self.answered.add(task_id)
                    else:
                        print(f"worker: reply to {task_id}: HTTP {r.status_code} {r.text}", file=sys.stderr)
            except Exception as e:  # the daemon going away ends the run anyway
                if not self.stopping.is_set():
                    print(f"worker: {e!r}", file=sys.stderr)
                    time.sleep(0.5)

    def stop(self):
        self.stopping.set()
        self.join(timeout=5)
        self.http.close()
