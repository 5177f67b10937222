"""An agent killed mid-task, and another that recovers its work, both driven through the official
Python MCP SDK (PyPI `mcp`) against a running Clutch daemon whose agents go offline after a few
seconds of silence (scripts/test-mcp starts it so).

`--role doomed`: registers over stdio (`clutch mcp`, as Claude Code would), creates a one-task
workflow, claims the task, records a plan and two checkpoints, prints `READY <task id>` and waits for
the SIGKILL that scripts/test-mcp sends it: no unregister, no release, no goodbye.

`--role rescuer --task ID`: registers over HTTP, waits until the daemon has given the dead agent's
task back (its lease expired: pending, a recovery checkpoint naming the dead agent), follows the
seed's recovery flow (workflow_list -> workflow_progress -> task_load_context with
all_checkpoints), checks that every checkpoint the dead agent recorded is in the context, claims
the task and completes it. Prints one line per check and exits non-zero when any fails.
"""

import argparse
import asyncio
import json
import sys
import time
import uuid

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lifecycle import Checks, structured

PLAN = "1. read the passport config 2. add the Google strategy 3. write the callback test"
CHECKPOINTS = [
    ("decision", "Chose passport-google-oauth20 over a hand-written flow"),
    ("progress", "Google strategy added; callback test still to write"),
]


def register(name):
    return {"name": name, "runtime": "claude_code", "capabilities": ["typescript"], "workspace_path": "/tmp/project"}


async def doomed(args):
    server = StdioServerParameters(command=args.clutch, args=["mcp", "--url", args.url, "--profile", "coordinator"])
    async with Client(server, mode="2026-07-28") as client:

        async def call(tool, arguments):
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                print(f"doomed: {tool} failed: {structured(result)}", flush=True)
                sys.exit(1)
            return structured(result)

        name = f"doomed-{uuid.uuid4().hex[:8]}"
        agent_id = (await call("agent_register", register(name)))["id"]
        workflow_id = (await call("workflow_create", {"name": f"crash {name}"}))["id"]
        tasks = [{"name": "google", "description": "Google OAuth login"}]
        task_id = (await call("workflow_set_plan", {"workflow_id": workflow_id, "tasks": tasks}))["tasks"][0]["id"]
        for tool, arguments in [
            ("task_claim", {"task_id": task_id, "agent_id": agent_id}),
            ("task_set_plan", {"task_id": task_id, "plan": PLAN, "agent_id": agent_id}),
            ("task_update_status", {"id": task_id, "status": "in_progress", "agent_id": agent_id}),
        ] + [
            ("checkpoint_add", {"task_id": task_id, "type": kind, "summary": summary, "agent_id": agent_id})
            for kind, summary in CHECKPOINTS
        ]:
            await call(tool, arguments)
        print(f"READY {task_id} {agent_id} {workflow_id}", flush=True)
        await asyncio.sleep(3600)


async def rescuer(args):
    checks = Checks("crash rescuer")
    async with Client(args.url.rstrip("/") + "/mcp", mode="2026-07-28") as client:
        result = await client.call_tool("agent_register", register(f"rescuer-{uuid.uuid4().hex[:8]}"))
        body = structured(result)
        checks.check("the rescuer registers", not result.is_error, str(body))
        agent_id = body["id"]

        # Before the lease expires the task is the dead agent's: a claim is refused as data.
        body = structured(await client.call_tool("task_claim", {"task_id": args.task, "agent_id": agent_id}))
        checks.check(
            "a claim while the dead agent's lease lasts names its holder",
            body.get("success") is False and body.get("already_claimed_by") == args.dead,
            str(body),
        )

        # The daemon notices the silence and gives the task back.
        deadline = time.monotonic() + 60
        task = {}
        while time.monotonic() < deadline:
            task = structured(await client.call_tool("task_get", {"task_id": args.task}))
            if task.get("status") == "pending":
                break
            await asyncio.sleep(0.2)
        checks.check("the task returns to pending once the dead agent goes offline", task.get("status") == "pending", str(task))

        # The seed's recovery flow.
        listed = structured(await client.call_tool("workflow_list", {}))
        checks.check("workflow_list shows the workflow", args.workflow in json.dumps(listed), str(listed)[:500])
        progress = structured(await client.call_tool("workflow_progress", {"workflow_id": args.workflow}))
        checks.check(
            "workflow_progress offers the task again",
            args.task in [t["id"] for t in progress.get("available", [])],
            str(progress),
        )
        result = await client.call_tool("task_claim", {"task_id": args.task, "agent_id": agent_id})
        body = structured(result)
        checks.check("the rescuer claims the task", not result.is_error and body.get("success") is True, str(body))
        result = await client.call_tool(
            "task_load_context",
            {"task_id": args.task, "include": {"all_checkpoints": True}, "max_tokens": 8000},
        )
        context = structured(result)
        text = json.dumps(context)
        checks.check("task_load_context answers", not result.is_error, text[:500])
        checks.check("the context holds the dead agent's plan", PLAN in text, text[:1000])
        for kind, summary in CHECKPOINTS:
            checks.check(f"the context holds the dead agent's {kind} checkpoint", summary in text, text[:1000])
        checks.check(
            "the context holds the daemon's recovery note naming the dead agent",
            "recovery" in text and f"{args.dead} went offline" in text,
            text[:1000],
        )

        # The dead agent's late writes would be refused; the rescuer finishes the work.
        result = await client.call_tool(
            "checkpoint_add",
            {"task_id": args.task, "type": "progress", "summary": "late write", "agent_id": args.dead},
        )
        body = structured(result)
        checks.check("a write in the dead agent's name is LEASE_LOST", result.is_error and body.get("code") == "LEASE_LOST", str(body))
        for tool, arguments in [
            ("task_update_status", {"id": args.task, "status": "in_progress", "agent_id": agent_id}),
            ("checkpoint_add", {"task_id": args.task, "type": "recovery", "summary": "Resumed from the progress checkpoint", "agent_id": agent_id}),
            ("task_update_status", {"id": args.task, "status": "completed", "outcome": "Google OAuth login works", "agent_id": agent_id}),
        ]:
            result = await client.call_tool(tool, arguments)
            checks.check(f"{tool} by the rescuer", not result.is_error, str(structured(result)))
        progress = structured(await client.call_tool("workflow_progress", {"workflow_id": args.workflow}))
        checks.check("the workflow is complete", progress.get("percent") == 100.0, str(progress))
    sys.exit(1 if checks.failed else 0)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["doomed", "rescuer"], required=True)
    parser.add_argument("--url", required=True, help="the daemon's base URL")
    parser.add_argument("--clutch", help="the clutch binary (doomed: stdio)")
    parser.add_argument("--task", help="rescuer: the dead agent's task")
    parser.add_argument("--dead", help="rescuer: the dead agent's id")
    parser.add_argument("--workflow", help="rescuer: the task's workflow")
    args = parser.parse_args()
    await (doomed(args) if args.role == "doomed" else rescuer(args))


if __name__ == "__main__":
    asyncio.run(main())
