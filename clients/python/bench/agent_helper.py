"""The agent helper's cost against the bare minimum: the same calls made by a hand-written httpx loop.

One daemon (`--url`, or one started here from `--bin`), two agents in turn, each in a process of its own
so its CPU is its own: `helper` (clutch.Agent) and `bare` (an httpx AsyncClient reading the SSE inbox and
POSTing task.accept and task.result for each delivery, nothing else). A requester posts `--tasks` routed
task.requests in batches and waits for every result. Reported per agent: tasks/s (first request to
last result), the agent process's CPU seconds per task, and its peak RSS; then the memory of `--idle`
idle agent helpers in one process (RSS per helper beyond the first). Run it with the release binary:

    cargo build --release -p clutch
    .tools/venv/bin/python clients/python/bench/agent_helper.py --bin target/release/clutch --tasks 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "tests"))


def agent_process(kind: str, url: str, name: str, concurrency: int) -> None:
    """Runs one agent until stdin closes; prints `ready`, then at exit the CPU seconds it spent after
    `ready` (its work, not its imports and start) and its peak RSS."""
    import httpx

    import clutch

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    started: list[float] = []

    def ready() -> None:
        started.append(cpu())
        print("ready", flush=True)

    async def helper() -> None:
        async def work(task):
            return {"text": "ok"}
        agent = clutch.Agent(name, [f"skill:{name}"], work, url=url, max_concurrency=concurrency)
        async with agent.running():
            ready()
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    async def bare() -> None:
        agent_id = f"agent:{name}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            answer = (await http.post("/v1/agents", json={"v": "clutch/0.1", "agent_id": agent_id,
                      "capabilities": [{"id": f"skill:{name}"}], "limits": {"max_concurrency": concurrency}})).json()
            slots = asyncio.Semaphore(concurrency)

            async def reply(request: dict, kind: str) -> None:
                await http.post("/v1/messages", json={
                    "run_id": request["run_id"], "thread_id": request["thread_id"], "task_id": request["task_id"],
                    "from": {"agent_id": agent_id}, "to": [request["from"]], "type": kind,
                    "payload": {"text": "ok"} if kind == "task.result" else {}, "attempt": request["attempt"]})

            async def work(request: dict) -> None:
                async with slots:
                    await reply(request, "task.accept")
                    await reply(request, "task.result")

            async def inbox() -> None:
                params = {"to": agent_id, "after": answer["seq"]}
                async with http.stream("GET", "/v1/stream", params=params, headers={"accept": "text/event-stream"},
                                       timeout=httpx.Timeout(30, read=None)) as response:
                    ready()
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            event = json.loads(line[6:])
                            if event.get("type") == "task.request":
                                asyncio.create_task(work(event))
            reader = asyncio.create_task(inbox())
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
            reader.cancel()

    asyncio.run(helper() if kind == "helper" else bare())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"cpu_sec": cpu() - started[0], "max_rss_kb": usage.ru_maxrss}), flush=True)


async def drive(url: str, skill: str, tasks: int, batch: int) -> float:
    """Posts `tasks` requests routed to `skill` (one agent's own, so an agent measured before, gone but
    still registered, is never chosen) in batches; returns the seconds until every one has its result."""
    import clutch
    from clutch import ids

    async with clutch.AsyncClient(url) as hub:
        run = ids.new_id("run")
        head = (await hub.health())["head_seq"]
        started = time.perf_counter()
        for first in range(0, tasks, batch):
            await hub.send_batch([{"from": {"agent_id": "user:bench"}, "to": [{"agent_id": "agent:orchestrator"}],
                                   "run_id": run, "type": "task.request", "requires": [skill],
                                   "payload": {"goal": f"t{i}"}} for i in range(first, min(first + batch, tasks))])
        done = 0
        async for event in hub.stream(run_id=run, type="task.result", after=head):
            done += 1
            if done == tasks:
                return time.perf_counter() - started
    raise AssertionError("unreachable")


def measure(kind: str, url: str, name: str, tasks: int, batch: int, concurrency: int) -> dict:
    proc = subprocess.Popen([sys.executable, str(HERE), "--agent", kind, "--url", url, "--name", name,
                             "--concurrency", str(concurrency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    seconds = asyncio.run(drive(url, f"skill:{name}", tasks, batch))
    proc.stdin.close()
    stats = json.loads(proc.stdout.readlines()[-1])
    proc.wait()
    return {"agent": kind, "tasks": tasks, "seconds": round(seconds, 3), "tasks_per_sec": round(tasks / seconds, 1),
            "cpu_ms_per_task": round(stats["cpu_sec"] * 1000 / tasks, 3), "max_rss_mb": round(stats["max_rss_kb"] / 1024, 1)}


def idle_memory(url: str, count: int) -> dict:
    """RSS of `count` idle agent helpers in one process, beyond the first one's."""
    code = f"""
import asyncio, clutch, contextlib
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * 4096
async def main():
    async def work(task): return 'ok'
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(clutch.Agent('idle0', ['skill:idle'], work, url={url!r}).running())
        one = rss()
        for i in range(1, {count}):
            await stack.enter_async_context(clutch.Agent(f'idle{{i}}', ['skill:idle'], work, url={url!r}).running())
        await asyncio.sleep(1)
        print(one, rss())
asyncio.run(main())
"""
    one, many = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                        check=True).stdout.split())
    return {"idle_helpers": count, "first_rss_mb": round(one / 2**20, 1),
            "kb_per_extra_helper": round((many - one) / 1024 / (count - 1), 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running daemon (default: start one from --bin)")
    p.add_argument("--bin", help="the clutch binary to start (default: $CLUTCH_BIN or target/debug/clutch)")
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--batch", type=int, default=100, help="requests per POST")
    p.add_argument("--concurrency", type=int, default=16, help="each agent's max_concurrency")
    p.add_argument("--idle", type=int, default=50, help="idle agent helpers for the memory figure")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of helper and bare")
    p.add_argument("--agent", help=argparse.SUPPRESS)
    p.add_argument("--name", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.agent:
        agent_process(args.agent, args.url, args.name, args.concurrency)
        return
    if args.bin:
        os.environ["CLUTCH_BIN"] = str(Path(args.bin).resolve())
    from daemon import Daemon

    daemon = None
    url = args.url
    if url is None:
        daemon = Daemon(env={"CLUTCH_LOG": "warn"}).start()
        url = daemon.url
    try:
        results = []
        for round_ in range(args.rounds):
            for kind in ("helper", "bare"):
                results.append(measure(kind, url, f"{kind}{round_}", args.tasks, args.batch, args.concurrency))
                print(json.dumps(results[-1]), flush=True)
        best = {k: max(r["tasks_per_sec"] for r in results if r["agent"] == k) for k in ("helper", "bare")}
        cpu = {k: min(r["cpu_ms_per_task"] for r in results if r["agent"] == k) for k in ("helper", "bare")}
        print(json.dumps({"helper_vs_bare_tasks_per_sec": round(best["helper"] / best["bare"], 3),
                          "cpu_ms_per_task": cpu}), flush=True)
        if args.idle > 1:
            print(json.dumps(idle_memory(url, args.idle)), flush=True)
    finally:
        if daemon:
            daemon.stop()


if __name__ == "__main__":
    main()
