"""The seed's agent lifecycle driven through the official Python MCP SDK (PyPI `mcp`), a client
nobody here wrote, against a running Clutch daemon: over HTTP (`/mcp`) or stdio (`clutch mcp`), in
the `initialize` era (`--mode legacy`) or 2026-07-28's self-contained requests (`--mode 2026-07-28`).

The seven steps: register -> claim -> load context -> checkpoint -> heartbeat -> update status ->
unregister, on a workflow planned through MCP (coordinator profile) or the HTTP API (worker profile),
plus the error shape, unknown-argument refusal and the tool list. Prints one line per check and exits
non-zero when any fails.
"""

import argparse
import asyncio
import json
import sys
import urllib.request
import uuid

from mcp import Client
from mcp.client.stdio import StdioServerParameters

# The tools every profile lists.
LIFECYCLE_TOOLS = {
    "agent_register", "agent_heartbeat", "agent_unregister", "workflow_list", "workflow_get",
    "workflow_progress", "workflow_next_tasks", "task_claim", "task_release", "task_get", "task_set_plan",
    "task_update_status", "task_load_context", "checkpoint_add", "checkpoint_list", "workspace_create",
    "workspace_update",
}


def http_json(method, url, body):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


async def plan_workflow(client, checks, profile, base_url):
    """A workflow with two tasks, the second depending on the first; answers (workflow id, task ids)."""
    tasks = [{"name": "setup", "description": "passport config"}, {"name": "google", "depends_on": ["setup"]}]
    if profile == "coordinator":
        result = await client.call_tool("workflow_create", {"name": "OAuth", "source": "seed"})
        workflow_id = structured(result)["id"]
        result = await client.call_tool("workflow_set_plan", {"workflow_id": workflow_id, "tasks": tasks})
        plan = structured(result)
        checks.check("workflow_set_plan answers the task ids", not result.is_error and len(plan["tasks"]) == 2, str(plan))
    else:
        workflow_id = http_json("POST", f"{base_url}/v1/workflows", {"name": "OAuth"})["id"]
        plan = http_json("PUT", f"{base_url}/v1/workflows/{workflow_id}/plan", {"tasks": tasks})
    return workflow_id, [t["id"] for t in plan["tasks"]]


class Checks:
    def __init__(self, label):
        self.label = label
        self.failed = 0

    def check(self, name, ok, detail=""):
        status = "ok" if ok else "FAILED"
        print(f"{self.label}: {name}: {status}{'' if ok else ' ' + detail}", flush=True)
        if not ok:
            self.failed += 1


def structured(result):
    """The structured content, checked against its JSON text twin."""
    text = next((c.text for c in result.content if getattr(c, "type", None) == "text"), None)
    if text is not None and json.loads(text) != result.structured_content:
        raise AssertionError(f"text content differs from structuredContent: {text}")
    return result.structured_content


async def lifecycle(client, checks, profile, base_url):
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    checks.check("tools/list is sorted", names == sorted(names), str(names))
    checks.check("lifecycle tools listed", LIFECYCLE_TOOLS <= set(names), str(names))
    checks.check(
        "profile decides agent_list",
        ("agent_list" in names) == (profile == "coordinator"),
        str(names),
    )
    for tool in listed.tools:
        checks.check(f"{tool.name} has an outputSchema", tool.output_schema is not None)
        checks.check(
            f"{tool.name} has annotations",
            tool.annotations is not None and tool.annotations.read_only_hint is not None,
        )

    name = f"py-{uuid.uuid4().hex[:10]}"
    # Step 1: register.
    result = await client.call_tool(
        "agent_register",
        {
            "name": name,
            "runtime": "claude_code",
            "capabilities": ["typescript", "testing"],
            "workspace_path": "/tmp/project",
        },
    )
    body = structured(result)
    checks.check("agent_register succeeds", not result.is_error, str(body))
    agent_id = body.get("id")
    checks.check("agent_register answers {id, name, status}", body == {"id": f"agent:{name}", "name": name, "status": "online"}, str(body))

    # Step 2: find work and claim it.
    workflow_id, (setup, google) = await plan_workflow(client, checks, profile, base_url)
    body = structured(await client.call_tool("workflow_next_tasks", {"workflow_id": workflow_id}))
    checks.check("workflow_next_tasks offers the first task only", [t["id"] for t in body["tasks"]] == [setup], str(body))
    result = await client.call_tool("task_claim", {"task_id": setup, "agent_id": agent_id})
    body = structured(result)
    checks.check("task_claim succeeds with a lease", not result.is_error and body.get("success") is True and body["lease"]["agent_id"] == agent_id, str(body))

    # Step 3: load context.
    result = await client.call_tool(
        "task_load_context",
        {"task_id": setup, "include": {"workflow_plan": True, "prior_task_outcomes": True, "dependency_outcomes": True, "recent_checkpoints": 5}, "max_tokens": 8000},
    )
    body = structured(result)
    checks.check("task_load_context answers the task", not result.is_error and "passport config" in json.dumps(body), str(body))

    # Step 4: checkpoints.
    result = await client.call_tool(
        "checkpoint_add",
        {"task_id": setup, "type": "progress", "summary": "Installed OAuth dependencies", "files_changed": ["package.json"], "agent_id": agent_id},
    )
    checks.check("checkpoint_add succeeds", not result.is_error, str(structured(result)))

    # Step 5: heartbeat.
    result = await client.call_tool("agent_heartbeat", {"agent_id": agent_id, "status": "busy"})
    body = structured(result)
    checks.check(
        "agent_heartbeat answers {success, next_heartbeat_ms}",
        not result.is_error and body.get("success") is True and isinstance(body.get("next_heartbeat_ms"), int) and body["next_heartbeat_ms"] > 0,
        str(body),
    )

    # Step 6: update status (in progress, then completed with its outcome).
    result = await client.call_tool("task_update_status", {"id": setup, "status": "in_progress", "agent_id": agent_id})
    checks.check("task_update_status in_progress", not result.is_error, str(structured(result)))
    result = await client.call_tool("task_update_status", {"id": setup, "status": "completed", "agent_id": agent_id})
    body = structured(result)
    checks.check("completed without outcome is refused", result.is_error and body.get("code") == "VALIDATION_FAILED", str(body))
    result = await client.call_tool(
        "task_update_status",
        {"id": setup, "status": "completed", "outcome": "OAuth infrastructure set up", "outcome_detail": {"files_created": ["src/auth.ts"]}, "agent_id": agent_id},
    )
    checks.check("task_update_status completed", not result.is_error, str(structured(result)))
    body = structured(await client.call_tool("workflow_progress", {"workflow_id": workflow_id}))
    checks.check("workflow_progress counts it", body.get("percent") == 50.0 and [t["id"] for t in body["available"]] == [google], str(body))
    result = await client.call_tool("task_update_status", {"id": setup, "status": "in_progress", "agent_id": agent_id})
    body = structured(result)
    checks.check("a move from completed is INVALID_TRANSITION", result.is_error and body.get("code") == "INVALID_TRANSITION", str(body))

    # Unknown arguments are refused, not ignored.
    result = await client.call_tool("agent_heartbeat", {"agent_id": agent_id, "mood": "happy"})
    body = structured(result)
    checks.check(
        "unknown argument refused",
        result.is_error and body.get("code") == "VALIDATION_FAILED" and "mood" in body.get("message", "") and body.get("recoverable") is True,
        str(body),
    )

    # Step 7: unregister.
    result = await client.call_tool("agent_unregister", {"id": agent_id})
    body = structured(result)
    checks.check("agent_unregister succeeds", not result.is_error and body == {"success": True}, str(body))

    # The error shape: {code, message, recoverable, suggestion}.
    result = await client.call_tool("agent_heartbeat", {"agent_id": agent_id})
    body = structured(result)
    checks.check(
        "heartbeat after unregister is AGENT_NOT_FOUND",
        result.is_error
        and body.get("code") == "AGENT_NOT_FOUND"
        and isinstance(body.get("message"), str)
        and isinstance(body.get("recoverable"), bool)
        and isinstance(body.get("suggestion"), str),
        str(body),
    )


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["http", "stdio"], required=True)
    parser.add_argument("--mode", choices=["legacy", "2026-07-28"], required=True)
    parser.add_argument("--url", required=True, help="the daemon's base URL")
    parser.add_argument("--clutch", help="the clutch binary (stdio)")
    parser.add_argument("--profile", choices=["worker", "coordinator"], default="coordinator")
    args = parser.parse_args()

    if args.transport == "http":
        path = "/mcp" if args.profile == "coordinator" else "/mcp/worker"
        server = args.url.rstrip("/") + path
    else:
        server = StdioServerParameters(
            command=args.clutch, args=["mcp", "--url", args.url, "--profile", args.profile]
        )
    checks = Checks(f"{args.transport} {args.mode} {args.profile}")
    async with Client(server, mode=args.mode) as client:
        checks.check("negotiated the era asked for", (client.protocol_version == "2026-07-28") == (args.mode == "2026-07-28"), client.protocol_version)
        await lifecycle(client, checks, args.profile, args.url.rstrip("/"))
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    asyncio.run(main())
