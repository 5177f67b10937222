#!/usr/bin/env python3
"""An example Clutch worker agent, written against the HTTP API with the standard library only.

It registers its AgentCard (POST /v1/agents), heartbeats on the interval the daemon answers, reads
its inbox as Server-Sent Events (GET /v1/stream?to=agent:NAME), and works each task the
orchestrator routes to it: task.accept, then a task.progress, then a task.result. Deliveries are
deduplicated by (task_id, attempt); a task.cancel stops the work. With --never-accept it registers
and heartbeats but never accepts (the tests use it to watch redelivery and failover).

The integration tests start it as an external program. By hand, against a running daemon:

    python3 crates/clutch/tests/workers/worker.py --url http://127.0.0.1:7700 --name ken --skill skill:research

It prints one line per thing it does on stdout; Ctrl-C stops it.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

ORCHESTRATOR = "agent:orchestrator"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7700", help="the daemon's base URL")
    parser.add_argument("--name", required=True, help="the agent's name: it registers as agent:NAME")
    parser.add_argument(
        "--skill",
        action="append",
        required=True,
        help="a capability it offers, e.g. skill:research or skill:research@1.2.0; repeat for several",
    )
    parser.add_argument("--max-concurrency", type=int, default=4, help="tasks it works on at once")
    parser.add_argument("--work-seconds", type=float, default=0.1, help="how long each task takes")
    parser.add_argument("--never-accept", action="store_true", help="receive tasks but never accept them")
    parser.add_argument("--token", default=os.environ.get("CLUTCH_TOKEN"), help="API token (or CLUTCH_TOKEN)")
    args = parser.parse_args()

    worker = Worker(args)
    try:
        worker.run()
    except KeyboardInterrupt:
        worker.say("stopped")
    except NoDaemon as e:
        print(f"worker: no Clutch daemon at {e}: start one with `clutch serve`", file=sys.stderr, flush=True)
        sys.exit(1)
    except ApiError as e:
        print(f"worker: {e}", file=sys.stderr, flush=True)
        sys.exit(1)


class NoDaemon(Exception):
    pass


class ApiError(Exception):
    def __init__(self, status, body):
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = error.get("code", "UNEXPECTED_RESPONSE")
        super().__init__(f"{self.code}: {error.get('message', body)} (HTTP {status})")


class Worker:
    def __init__(self, args):
        self.url = args.url.rstrip("/")
        self.agent_id = f"agent:{args.name}"
        self.skills = args.skill
        self.max_concurrency = args.max_concurrency
        self.work_seconds = args.work_seconds
        self.never_accept = args.never_accept
        self.seen = set()  # (task_id, attempt) of every delivery handled
        self.cancels = {}  # task id -> threading.Event, set when the task is cancelled
        self.slots = threading.BoundedSemaphore(args.max_concurrency)
        self.lock = threading.Lock()
        self.heartbeat_sec = 10
        self.auth = {"authorization": f"Bearer {args.token}"} if args.token else {}

    def say(self, text):
        print(f"{self.agent_id} {text}", flush=True)

    # ---- HTTP ----

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("content-type", "application/json")
        for name, value in self.auth.items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                body = json.loads(e.read() or b"{}")
            except ValueError:
                body = {}
            raise ApiError(e.code, body) from None
        except (urllib.error.URLError, ConnectionError) as e:
            raise NoDaemon(self.url) from e

    def post_message(self, request, kind, payload):
        """Answers a delivered task.request as this agent: same run, thread, task and attempt."""
        message = {
            "thread_id": request["thread_id"],
            "run_id": request["run_id"],
            "task_id": request["task_id"],
            "from": {"agent_id": self.agent_id},
            "to": [{"agent_id": ORCHESTRATOR}],
            "type": kind,
            "payload": payload,
            "attempt": request.get("attempt", 1),
            # A POST repeated after a lost answer is then stored once.
            "idempotency_key": f"{self.agent_id}:{request['task_id']}:{request.get('attempt', 1)}:{kind}",
        }
        return self.request("POST", "/v1/messages", message)

    # ---- lifecycle ----

    def card(self):
        capabilities = []
        for skill in self.skills:
            capability_id, _, version = skill.partition("@")
            capabilities.append({"id": capability_id, **({"version": version} if version else {})})
        return {
            "v": "clutch/0.1",
            "agent_id": self.agent_id,
            "display": {"name": self.agent_id.split(":", 1)[1], "desc": "example worker (worker.py)"},
            "capabilities": capabilities,
            "limits": {"max_concurrency": self.max_concurrency},
        }

    def run(self):
        answer = self.request("POST", "/v1/agents", self.card())
        self.heartbeat_sec = max(1, int(answer.get("heartbeat_interval_sec", 10)))
        cursor = answer["seq"]
        self.say(f"registered at seq {cursor}; heartbeat every {self.heartbeat_sec} s")
        threading.Thread(target=self.heartbeats, daemon=True).start()
        self.inbox(cursor)

    def heartbeats(self):
        path = f"/v1/agents/{urllib.parse.quote(self.agent_id, safe=':')}/heartbeat"
        down = False
        while True:
            time.sleep(self.heartbeat_sec)
            try:
                answer = self.request("POST", path)
                self.heartbeat_sec = max(1, int(answer.get("next_heartbeat_sec", self.heartbeat_sec)))
                down = False
            except ApiError as e:
                if e.code == "AGENT_NOT_FOUND":
                    self.say("was removed from the registry; stopping")
                    os._exit(0)
                self.say(f"heartbeat refused: {e}")
            except NoDaemon:
                if not down:
                    self.say("heartbeat: the daemon does not answer; will keep trying")
                down = True

    def inbox(self, cursor):
        """Follows the inbox from after `cursor`, resuming after the last event seen on reconnect."""
        backoff = 0.2
        while True:
            query = urllib.parse.urlencode({"to": self.agent_id, "after": cursor})
            req = urllib.request.Request(f"{self.url}/v1/stream?{query}", headers={"accept": "text/event-stream", **self.auth})
            try:
                with urllib.request.urlopen(req, timeout=60) as response:
                    self.say(f"reading its inbox after seq {cursor}")
                    backoff = 0.2
                    for name, data in sse_events(response):
                        if name == "end":
                            frame = json.loads(data)
                            cursor = frame.get("last_seq", cursor)
                            self.say(f"stream ended ({frame.get('frame')}); resuming after seq {cursor}")
                            break
                        event = json.loads(data)
                        cursor = event.get("seq", cursor)
                        self.handle(event)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                self.say(f"inbox: {e}; reconnecting")
            time.sleep(backoff)
            backoff = min(backoff * 2, 5)

    # ---- tasks ----

    def handle(self, event):
        kind = event.get("type")
        task_id = event.get("task_id")
        if kind == "task.cancel":
            self.cancel_event(task_id).set()
            self.say(f"task {task_id}: cancelled")
            return
        if kind != "task.request" or event.get("from", {}).get("agent_id") != ORCHESTRATOR:
            return
        if not any(r.get("agent_id") == self.agent_id for r in event.get("to", [])):
            return
        attempt = event.get("attempt", 1)
        key = (task_id, attempt)
        with self.lock:
            if key in self.seen:
                self.say(f"task {task_id} attempt {attempt}: duplicate delivery ignored")
                return
            self.seen.add(key)
        if self.never_accept:
            self.say(f"task {task_id} attempt {attempt}: received, not accepting")
            return
        self.say(f"task {task_id} attempt {attempt}: received")
        threading.Thread(target=self.work, args=(event,), daemon=True).start()

    def cancel_event(self, task_id):
        with self.lock:
            return self.cancels.setdefault(task_id, threading.Event())

    def work(self, request):
        task_id, attempt = request["task_id"], request.get("attempt", 1)
        cancelled = self.cancel_event(task_id)
        with self.slots:
            steps = [
                ("task.accept", {}, "accepted"),
                ("task.progress", {"percent": 50, "usage": {"tokens": 10}}, "progress 50%"),
                ("task.result", {"text": f"done by {self.agent_id}", "usage": {"tokens": 5}}, "completed"),
            ]
            for i, (kind, payload, done) in enumerate(steps):
                # The work between steps; a cancel ends it at once.
                if cancelled.wait(self.work_seconds / 2 if i > 0 else 0):
                    self.say(f"task {task_id} attempt {attempt}: stopped (cancelled)")
                    return
                try:
                    self.post_message(request, kind, payload)
                except (ApiError, NoDaemon) as e:
                    self.say(f"task {task_id} attempt {attempt}: {kind} refused: {e}")
                    return
                self.say(f"task {task_id} attempt {attempt}: {done}")


def sse_events(response):
    """Yields (event name, data) for each Server-Sent Event read from `response`, line by line."""
    name, data = "message", []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)


if __name__ == "__main__":
    main()
