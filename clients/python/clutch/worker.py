"""The workflow worker helper: seed 001's loop for agents that pull their work.

`Worker(name, handler)` registers its card and heartbeats (which keeps its claims' leases alive), then,
again and again: finds the tasks of open workflows whose dependencies are done, claims one (a task
claimed by another worker first is passed over), loads its context, hands the `Job` to the handler
(which may checkpoint), and marks the task completed with the handler's outcome, or failed with its
error. A lease lost meanwhile (the worker was offline too long and another took the task) is logged
and the job dropped: the other holder's work wins.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .agent import SyncTask, is_async, keep_alive, persist
from .client import DEFAULT_URL, AsyncClient, card
from .errors import ClutchError, TaskFailed
from .sign import Signer

log = logging.getLogger("clutch.worker")


class Job:
    """A claimed workflow task: `task` (its plan entry), `context` (the daemon's token-budgeted context)."""

    def __init__(self, worker: "Worker", task: dict, context: dict):
        self._worker = worker
        self.task = task
        self.id: str = task["id"]
        self.workflow_id: str = task["workflow_id"]
        self.name: str = task.get("name", "")
        self.description: str = task.get("description", "")
        self.context = context

    async def checkpoint(self, summary: str, *, type: str = "progress", **fields: Any) -> dict:
        """A checkpoint the next holder resumes from if this one fails (`type`: progress, decision, ...)."""
        return await self._worker.client.checkpoint(self.id, self._worker.agent_id, type, summary, **fields)


class Worker:
    """Claims and works workflow tasks; see the module's docs. `workflows`: only these ids (default: any
    open workflow). `context` is the body of the context request (default: all checkpoints, 8000 tokens)."""

    def __init__(self, name: str, handler, *, capabilities: list | None = None, url: str = DEFAULT_URL,
                 token: str | None = None, signer: Signer | None = None, workflows: list[str] | None = None,
                 poll_seconds: float = 1.0, context: dict | None = None, client: AsyncClient | None = None):
        self.card = card(name, capabilities or ["skill:workflow"],
                         display={"name": name.split(":")[-1], "desc": "a workflow worker (clutch-client)"})
        self.agent_id: str = self.card["agent_id"]
        self.handler = handler
        self.url, self.token, self.signer = url, token, signer
        self.workflows = workflows
        self.poll_seconds = poll_seconds
        self.context_request = context or {"include": {"all_checkpoints": True}, "max_tokens": 8000}
        self.client: AsyncClient = client  # type: ignore[assignment]
        self.heartbeat_sec = 10
        self.done = 0
        self._stopping = False

    async def serve(self) -> None:
        own = self.client is None
        if own:
            self.client = AsyncClient(self.url, token=self.token, signer=self.signer)
        beats = None
        try:
            answer = await persist(lambda: self.client.register(self.card), "register", self._say)
            self.heartbeat_sec = max(1, int(answer.get("heartbeat_interval_sec", 10)))
            beats = asyncio.create_task(keep_alive(self.client, self.agent_id, self.heartbeat_sec, self._say))
            while not self._stopping:
                if not await persist(self.work_one, "work", self._say):
                    await asyncio.sleep(self.poll_seconds)
        finally:
            if beats:
                beats.cancel()
            if own:
                await self.client.aclose()

    def stop(self) -> None:
        self._stopping = True

    def _say(self, text: str, *args: Any) -> None:
        log.info("%s " + text, self.agent_id, *args)

    async def _open_workflows(self) -> list[str]:
        if self.workflows is not None:
            return list(self.workflows)
        listing = await self.client.workflows(status=["in_progress"])
        return [w["id"] for w in listing.get("workflows", [])]

    async def work_one(self) -> bool:
        """Claims and works one ready task; False when none could be claimed."""
        for workflow_id in await self._open_workflows():
            async for task in self.client.pages(self.client.next_tasks, workflow_id=workflow_id):
                claim = await self.client.claim(task["id"], self.agent_id)
                if not claim.get("success"):
                    continue
                await self._work(task)
                return True
        return False

    async def _work(self, task: dict) -> None:
        context = (await self.client.context(task["id"], **self.context_request)).get("context", {})
        await self.client.set_status(task["id"], self.agent_id, "in_progress")
        job = Job(self, task, context)
        log.info("%s claimed %s (%s)", self.agent_id, job.id, job.name)
        try:
            if is_async(self.handler):
                outcome = await self.handler(job)
            else:
                outcome = await asyncio.to_thread(self.handler, SyncTask(job, asyncio.get_running_loop()))
            await self.client.set_status(job.id, self.agent_id, "completed",
                                         outcome=outcome if isinstance(outcome, str) else str(outcome or "done"))
            self.done += 1
            log.info("%s completed %s", self.agent_id, job.id)
        except ClutchError as e:
            if e.code == "LEASE_LOST":
                log.info("%s lost the lease on %s: another holder has it", self.agent_id, job.id)
                return
            raise
        except Exception as e:  # the task fails with the error; the worker goes on
            error = e.message if isinstance(e, TaskFailed) else f"{type(e).__name__}: {e}"
            log.info("%s failed %s: %s", self.agent_id, job.id, error)
            await self.client.set_status(job.id, self.agent_id, "failed", error=error[:2000])
