"""Clutch's Python client: the daemon's HTTP API (`Client`, `AsyncClient`), the live stream, the agent
helper (`Agent`: a function served as a Clutch agent), the workflow worker helper (`Worker`), message
signing (`Signer`), and, as optional extras, adapters for agent frameworks (`clutch.adapters.*`)."""

from .agent import Agent, SyncTask, Task, current_task, tool_name
from .worker import Job, Worker
from .client import DEFAULT_URL, AsyncClient, Client, card, prepare
from .errors import ClutchError, TaskFailed
from .sign import Signer

__all__ = ["DEFAULT_URL", "Agent", "AsyncClient", "Client", "ClutchError", "Job", "Signer", "SyncTask", "Task", "TaskFailed", "Worker",
           "card", "current_task", "prepare", "tool_name"]
