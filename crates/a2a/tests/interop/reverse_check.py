"""The daemon as an A2A client, checked against a server nobody here wrote: the official Python SDK's
(sdk_server.py, PyPI `a2a-sdk`). On a running Clutch daemon (whose outbound guard lets it reach
loopback), `agent:sdk-echo` is registered with a card naming the SDK server's JSON-RPC endpoint
(`endpoints.a2a.url`); a task requiring `skill:echo` is sent to the orchestrator; the daemon's router
gives it to agent:sdk-echo, so the daemon sends it there (`SendMessage`, A2A 1.0), follows the remote
task (`GetTask`) and writes its outcome back as agent:sdk-echo's own events.

Checks: the task completes, worked by agent:sdk-echo; its `task.result` from agent:sdk-echo says the
SDK agent's artifact ("echo: " + the goal); the `task.accept` from agent:sdk-echo keeps the remote
task's id (the one the SDK server gave the message, the one the result names); the SDK server got the
message as the daemon means it (`A2A-Version: 1.0`, the skill in `metadata.skill`, the goal as its
text part, the whole payload as a data part, the thread as its context).

Usage: reverse_check.py --url http://127.0.0.1:PORT --a2a-url http://127.0.0.1:PORT2/a2a --record FILE
(FILE: what the SDK server saw, sdk_server.py --record). Prints `NAME: ok` or `NAME: FAILED: why` per
check (the task and its events on stderr when one fails) and exits non-zero when any failed.
"""

import argparse
import json
import os
import sys
import time

import httpx

AGENT = "agent:sdk-echo"
SKILL = "skill:echo"
GOAL = "hello from clutch"
TIMEOUT = 30.0
FINAL = ("completed", "failed", "cancelled", "timed_out")
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(prefix):
    """`prefix` and a ULID: 48 bits of milliseconds, 80 random bits, 26 Crockford base-32 digits."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    digits = []
    for _ in range(26):
        digits.append(CROCKFORD[value & 31])
        value >>= 5
    return prefix + "".join(reversed(digits))


class CheckFailed(Exception):
    pass


def expect(ok, why):
    if not ok:
        raise CheckFailed(why)


class Run:
    def __init__(self, base, a2a_url, record, version):
        self.http = httpx.Client(base_url=base, timeout=TIMEOUT)
        self.version = version
        self.a2a_url = a2a_url
        self.record = record
        self.passed = 0
        self.failed = 0
        self.thread_id, self.run_id, self.task_id = new_id("thr_"), new_id("run_"), new_id("task_")
        self.payload = {"goal": GOAL, "detail": {"lang": "en"}}
        self.task = None
        self.events = []
        self.shown = False

    def check(self, name, fn):
        try:
            fn()
        except Exception as e:  # a failed check, or one that could not run
            self.failed += 1
            why = str(e) if isinstance(e, CheckFailed) else repr(e)
            print(f"{name}: FAILED: {why}", flush=True)
            self.show()
        else:
            self.passed += 1
            print(f"{name}: ok", flush=True)

    def show(self):
        """What the daemon and the SDK server know, for the first failure."""
        if self.shown:
            return
        self.shown = True
        print(f"  the task: {json.dumps(self.task, indent=2)}", file=sys.stderr)
        for e in self.events[-20:]:
            print(f"  event: {json.dumps(e)}", file=sys.stderr)
        print(f"  the SDK server saw: {json.dumps(self.seen())}", file=sys.stderr)

    def seen(self):
        """What the SDK server recorded of this run's task (it serves other runs too)."""
        try:
            with open(self.record, encoding="utf-8") as f:
                records = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [r for r in records if r.get("metadata", {}).get("clutch", {}).get("task_id") == self.task_id]

    def of_agent(self, kind):
        return [e for e in self.events if e.get("type") == kind and e.get("from", {}).get("agent_id") == AGENT]

    # --- The steps -----------------------------------------------------------------------------

    def register(self):
        card = {
            "v": "clutch/0.1", "agent_id": AGENT,
            "capabilities": [{"id": SKILL, "version": "1.0.0"}],
            "endpoints": {"a2a": {"url": self.a2a_url}},
        }
        if self.version == "0.3":
            # The operator pins the version: the daemon speaks 0.3 to it, as to an older agent.
            card["meta"] = {"a2a_version": "0.3"}
        r = self.http.post("/v1/agents", json=card)
        expect(r.status_code < 300, f"POST /v1/agents: HTTP {r.status_code} {r.text}")

    def send(self):
        message = {
            "v": "clutch/0.1", "thread_id": self.thread_id, "run_id": self.run_id, "task_id": self.task_id,
            "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
            "type": "task.request", "requires": [SKILL], "payload": self.payload,
        }
        r = self.http.post("/v1/messages", json=message)
        expect(r.status_code == 201, f"POST /v1/messages: HTTP {r.status_code} {r.text}")

    def read_events(self):
        events, after = [], 0
        while True:
            r = self.http.get("/v1/events", params={"task_id": self.task_id, "after": after, "limit": 500})
            r.raise_for_status()
            page = r.json()
            events += page["events"]
            if not page["events"]:
                break
            after = page["next_after"]
        self.events = events

    def completes(self):
        self.register()
        self.send()
        deadline = time.monotonic() + TIMEOUT
        while True:
            r = self.http.get(f"/v1/tasks/{self.task_id}")
            if r.status_code == 200:
                self.task = r.json()
                if self.task.get("state") in FINAL:
                    break
            expect(time.monotonic() < deadline,
                   f"the task is still {self.task.get('state') if self.task else 'unknown'} after {TIMEOUT:.0f} s")
            time.sleep(0.2)
        self.read_events()
        expect(self.task.get("state") == "completed", f"the task ended {self.task.get('state')}")
        expect(self.task.get("agent") == AGENT, f"the task was worked by {self.task.get('agent')}, not {AGENT}")

    def result(self):
        results = self.of_agent("task.result")
        expect(len(results) == 1, f"{len(results)} task.result from {AGENT}")
        text = results[0].get("payload", {}).get("text")
        expect(text == "echo: " + GOAL, f"the result's text is {text!r}, not {'echo: ' + GOAL!r}")

    def accept(self):
        accepts = self.of_agent("task.accept")
        expect(accepts, f"no task.accept from {AGENT}")
        remote = accepts[-1].get("payload", {}).get("a2a", {}).get("task_id")
        expect(isinstance(remote, str) and remote, f"the accept has no payload.a2a.task_id: {accepts[-1]}")
        seen = [m["task_id"] for m in self.seen()]
        expect(seen == [remote], f"the accept says remote task {remote!r}; the SDK server made {seen}")
        said = self.of_agent("task.result")[0].get("payload", {}).get("a2a", {}).get("task_id")
        expect(said == remote, f"the result names remote task {said!r}, the accept {remote!r}")

    def message(self):
        seen = self.seen()
        expect(len(seen) == 1, f"the SDK server got {len(seen)} messages, not 1")
        m = seen[0]
        expect(m["skill"] == SKILL, f"metadata.skill is {m['skill']!r}, not {SKILL!r}")
        expect(m["a2a_version"] == self.version, f"A2A-Version is {m['a2a_version']!r}, not {self.version!r}")
        expect(m["role"] in ("ROLE_USER", "user"), f"the role is {m['role']}")
        expect(m["texts"] == [GOAL], f"the text parts are {m['texts']}, not [{GOAL!r}]")
        expect(m["data"] == [self.payload], f"the data parts are {m['data']}, not [{self.payload}]")
        expect(m["context_id"] == self.thread_id, f"the context is {m['context_id']!r}, not the thread")
        clutch = m["metadata"].get("clutch", {})
        expect(clutch.get("task_id") == self.task_id, f"metadata.clutch is {clutch}")

    def all(self):
        self.check(f"a task requiring {SKILL} completes, worked by {AGENT}", self.completes)
        self.check(f"the task.result from {AGENT} is the SDK agent's artifact text", self.result)
        self.check(f"the task.accept from {AGENT} keeps the remote task id", self.accept)
        self.check(f"the SDK server got A2A {self.version} with metadata.skill, the goal and the payload", self.message)
        progress = [e.get("payload", {}).get("message") for e in self.of_agent("task.progress")]
        print(f"reverse_check: the remote's news as task.progress: {progress}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the daemon's base URL, http://127.0.0.1:PORT")
    parser.add_argument("--a2a-url", required=True, help="the SDK server's JSON-RPC endpoint")
    parser.add_argument("--record", required=True, help="the file where the SDK server records messages")
    parser.add_argument("--version", default="1.0", choices=["1.0", "0.3"],
                        help="the version the daemon is to speak to the SDK server (0.3: pinned on the agent card)")
    args = parser.parse_args()
    run = Run(args.url.rstrip("/"), args.a2a_url, args.record, args.version)
    run.all()
    print(f"reverse_check: {run.passed} passed, {run.failed} failed", file=sys.stderr)
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
