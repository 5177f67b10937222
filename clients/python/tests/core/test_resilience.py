"""What a client must survive: the daemon killed (-9) and restarted under it. The live stream resumes
without a gap or a repeat; the agent helper carries on and never answers a task twice; the workflow
worker claims, checkpoints and completes."""

import asyncio
import collections
import threading
import time

import clutch
from clutch import ids

ADA = {"agent_id": "user:ada"}


def chat(text, run):
    return {"from": ADA, "to": [], "type": "chat.message", "run_id": run, "payload": {"text": text}}


def test_the_stream_resumes_across_a_daemon_restart_without_gap_or_repeat(daemon):
    run = ids.new_id("run")
    seen = []
    got_all = threading.Event()

    def follow():
        with clutch.Client(daemon.url) as c:
            for event in c.stream(run_id=run, after=0):
                seen.append((event["seq"], event["payload"]["text"]))
                if len(seen) == 40:
                    got_all.set()
                    return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    with clutch.Client(daemon.url) as c:
        for i in range(20):
            c.send(chat(f"before {i}", run))
    deadline = time.monotonic() + 20
    while len(seen) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon.kill9()
    daemon.start()
    with clutch.Client(daemon.url) as c:
        for i in range(20):
            c.send(chat(f"after {i}", run))
    assert got_all.wait(30), f"the stream got {len(seen)} of 40 events"
    texts = [t for _, t in seen]
    assert texts == [f"before {i}" for i in range(20)] + [f"after {i}" for i in range(20)]
    seqs = [s for s, _ in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == 40


def test_the_agent_helper_survives_the_daemons_kill_and_answers_each_task_once(daemon):
    worked = collections.Counter()

    async def work(task):
        worked[task.id] += 1
        await task.progress("working", usage={"input_tokens": 1, "output_tokens": 1})
        await asyncio.sleep(0.3)
        return f"done {task.goal}"

    async def go():
        agent = clutch.Agent("ken", ["skill:research"], work, url=daemon.url, max_concurrency=8)
        async with agent.running():
            async with clutch.AsyncClient(daemon.url) as c:
                run = ids.new_id("run")
                sent = []
                for i in range(6):
                    m = clutch.prepare({"from": ADA, "to": [{"agent_id": "agent:orchestrator"}], "run_id": run,
                                        "type": "task.request", "requires": ["skill:research"],
                                        "payload": {"goal": f"g{i}"}})
                    await c.send(m)
                    sent.append(m["task_id"])
                # Kill the daemon while the tasks are being worked, and bring it back.
                await asyncio.sleep(0.2)
                daemon.kill9()
                await asyncio.sleep(1.0)
                daemon.start()
                for i in range(6, 9):
                    m = clutch.prepare({"from": ADA, "to": [{"agent_id": "agent:orchestrator"}], "run_id": run,
                                        "type": "task.request", "requires": ["skill:research"],
                                        "payload": {"goal": f"g{i}"}})
                    await c.send(m)
                    sent.append(m["task_id"])
                deadline = time.monotonic() + 90
                states = {}
                while time.monotonic() < deadline:
                    states = {t: (await c.task(t))["state"] for t in sent}
                    if all(s == "completed" for s in states.values()):
                        break
                    await asyncio.sleep(0.3)
                assert all(s == "completed" for s in states.values()), states
                events = [e async for e in c.pages(c.events, run_id=run)]
                results = collections.Counter(e["task_id"] for e in events
                                              if e["type"] == "task.result" and e["from"]["agent_id"] == "agent:ken")
                assert results == {t: 1 for t in sent}, "each task answered exactly once"
        # A task the daemon redelivered (its accept lost in the kill) was still worked once.
        assert all(n == 1 for n in worked.values()), worked
    asyncio.run(go())


def test_the_workflow_worker_claims_checkpoints_and_completes(daemon):
    async def go():
        async with clutch.AsyncClient(daemon.url) as c:
            wf = await c.create_workflow("ship")
            plan = await c.plan_workflow(wf["id"], [{"name": "setup", "description": "install"},
                                                    {"name": "build", "depends_on": ["setup"]},
                                                    {"name": "fail", "depends_on": ["setup"]}])
            by_name = {t["name"]: t["id"] for t in plan["tasks"]}

            async def handle(job):
                if job.name == "fail":
                    raise clutch.TaskFailed("BROKEN", "it broke")
                assert job.context["current_task"]["id"] == job.id
                await job.checkpoint(f"{job.name} halfway")
                return f"{job.name} done"

            worker = clutch.Worker("wally", handle, url=daemon.url, workflows=[wf["id"]], poll_seconds=0.1)
            serving = asyncio.create_task(worker.serve())
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                tasks = {t["name"]: t for t in (await c.workflow(wf["id"]))["tasks"]}
                if all(t["status"] in ("completed", "failed") for t in tasks.values()):
                    break
                await asyncio.sleep(0.2)
            worker.stop()
            await asyncio.wait_for(serving, 10)
            assert {n: t["status"] for n, t in tasks.items()} == {"setup": "completed", "build": "completed",
                                                                  "fail": "failed"}
            assert tasks["setup"]["outcome"] == "setup done" and tasks["setup"]["agent_id"] == "agent:wally"
            checkpoints = await c.checkpoints(by_name["build"])
            assert [cp["summary"] for cp in checkpoints["checkpoints"]] == ["build halfway"]
    asyncio.run(go())


def test_the_agent_helper_benchmark_runs():
    """The load driver of docs/benchmarks.md (bench/agent_helper.py), small, so it does not rot: both
    agents work every task and the figures come out. Its speed is measured by hand, never here."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench" / "agent_helper.py"
    out = subprocess.run([sys.executable, str(bench), "--tasks", "30", "--batch", "10", "--rounds", "1", "--idle", "3"],
                         capture_output=True, text=True, timeout=180, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(r["agent"], r["tasks"]) for r in lines[:2]] == [("helper", 30), ("bare", 30)]
    assert lines[2]["helper_vs_bare_tasks_per_sec"] > 0 and lines[3]["idle_helpers"] == 3
