"""`clutch bench clients`' outside client: the official MCP Python SDK (PyPI `mcp`), used as a new user
would (`mcp.Client`, default options), against a running daemon over Streamable HTTP or through the
stdio bridge (`clutch mcp`). Run as `python -c` by the bench, which reads the daemon's CPU around the
measured phase; this driver says on stdout when it starts and ends, one JSON object per line:

  {"phase": "start"}                            the clients are connected: the measurement begins
  {"phase": "end", "ops": N, "cpu": S, ...}     the measured operations, this process's CPU seconds and
                                                its bridges' in the phase (`bridges_cpu`, from /proc)
  {"phase": "closed", "children_cpu": S}         after the sessions closed: the bridges' CPU seconds, from
                                                their start to their exit

Modes: `calls` (each client loops `tools/call agent_heartbeat` for --duration seconds) and
`workflow` (each agent loops workflow_next_tasks -> task_claim -> task_update_status in_progress ->
checkpoint_add -> task_update_status completed until the workflow has no task left).
"""

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
import time

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def say(**fields):
    print(json.dumps(fields), flush=True)


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bridges_cpu():
    """The CPU seconds of this process's children (the stdio bridges) so far: the time on a CPU of each
    of their threads, in nanoseconds (/proc/PID/task/TID/schedstat), where /proc/PID/stat counts whole
    clock ticks."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids = f.read().split()
        for pid in pids:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                for thread in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{thread}/schedstat") as stat:
                        total += int(stat.read().split()[0])
    return total / 1e9


def structured(result, tool):
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return result.structured_content


async def register(clients, names):
    for client, name in zip(clients, names):
        structured(
            await client.call_tool("agent_register", {"name": name.removeprefix("agent:"), "runtime": "bench"}),
            "agent_register",
        )


async def calls(clients, names, duration):
    await register(clients, names)
    say(phase="start")
    start, bridges = cpu(), bridges_cpu()
    until = time.monotonic() + duration

    async def loop(client, name):
        n = 0
        while time.monotonic() < until:
            structured(await client.call_tool("agent_heartbeat", {"agent_id": name}), "agent_heartbeat")
            n += 1
        return n

    ops = sum(await asyncio.gather(*(loop(c, n) for c, n in zip(clients, names))))
    say(phase="end", ops=ops, cpu=cpu() - start, bridges_cpu=bridges_cpu() - bridges)


async def workflow(clients, names, workflow_id):
    await register(clients, names)
    say(phase="start")
    start, bridges = cpu(), bridges_cpu()

    async def loop(index, client, name):
        done = lost = 0
        while True:
            answer = structured(await client.call_tool("workflow_next_tasks", {"workflow_id": workflow_id}), "next")
            tasks = answer["tasks"]
            if not tasks:
                return done, lost
            task = tasks[(index * 7) % len(tasks)]["id"]
            claimed = await client.call_tool("task_claim", {"task_id": task, "agent_id": name})
            if claimed.is_error or not claimed.structured_content.get("success"):
                lost += 1
                continue
            await client.call_tool(
                "task_update_status", {"id": task, "agent_id": name, "status": "in_progress"}
            )
            structured(
                await client.call_tool(
                    "checkpoint_add",
                    {"task_id": task, "agent_id": name, "type": "progress", "summary": "half way: inputs read"},
                ),
                "checkpoint_add",
            )
            structured(
                await client.call_tool(
                    "task_update_status",
                    {"id": task, "agent_id": name, "status": "completed", "outcome": "done: output written"},
                ),
                "task_update_status",
            )
            done += 1

    tallies = await asyncio.gather(*(loop(i, c, n) for i, (c, n) in enumerate(zip(clients, names))))
    say(
        phase="end", ops=sum(d for d, _ in tallies), lost=sum(l for _, l in tallies), cpu=cpu() - start,
        bridges_cpu=bridges_cpu() - bridges,
    )


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["calls", "workflow"])
    parser.add_argument("--url", required=True, help="the daemon's base URL")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--workflow", help="the workflow to work (workflow mode)")
    parser.add_argument("--prefix", default="sdk", help="agents' names: PREFIX-0, PREFIX-1, ...")
    parser.add_argument("--stdio", metavar="CLUTCH", help="reach the daemon through `CLUTCH mcp` instead of HTTP")
    args = parser.parse_args()

    def server():
        if args.stdio:
            return StdioServerParameters(command=args.stdio, args=["mcp", "--url", args.url])
        return args.url.rstrip("/") + "/mcp"

    names = [f"agent:{args.prefix}-{i}" for i in range(args.clients)]
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(server())) for _ in names]
        for client in clients:
            await client.list_tools()
        if args.mode == "calls":
            await calls(clients, names, args.duration)
        else:
            await workflow(clients, names, args.workflow)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    say(phase="closed", children_cpu=children.ru_utime + children.ru_stime)


asyncio.run(main())
