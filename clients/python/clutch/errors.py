"""The one exception the client raises, and the one a task handler raises to fail its task."""

from __future__ import annotations

from typing import Any


class ClutchError(Exception):
    """An error from the daemon (its `{"error": {...}}` body) or about a request before it was sent.

    `code` is the daemon's stable code (`VALIDATION_FAILED`, `INVALID_TRANSITION`, ...), or one of the
    client's own: `DAEMON_UNREACHABLE` (no answer; retryable) and `UNEXPECTED_RESPONSE`. `field` names the
    part of the request at fault (`to[0].agent_id`), `retryable` says whether the same request may succeed
    later, `hint` what to do next, `problems` every problem when there are several. `status` is the HTTP
    status, or None when nothing was sent.
    """

    def __init__(self, code: str, message: str, *, status: int | None = None, field: str | None = None,
                 retryable: bool = False, hint: str | None = None, problems: list[dict] | None = None):
        self.code = code
        self.message = message
        self.status = status
        self.field = field
        self.retryable = retryable
        self.hint = hint
        self.problems = problems or []
        text = f"{code}: {message}"
        if field:
            text += f" (field `{field}`)"
        if hint:
            text += f"; {hint}"
        super().__init__(text)

    @classmethod
    def from_body(cls, status: int | None, body: Any) -> "ClutchError":
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return cls("UNEXPECTED_RESPONSE", f"HTTP {status}: {str(body)[:200]}", status=status,
                       retryable=status is not None and status >= 500)
        return cls(error.get("code", "UNEXPECTED_RESPONSE"), error.get("message", ""), status=status,
                   field=error.get("field"), retryable=bool(error.get("retryable", False)),
                   hint=error.get("hint"), problems=error.get("problems"))


class TaskFailed(Exception):
    """Raised by a task handler to end its task with a `task.error` of this code; raised by
    `Task.delegate` and `Client.run_task` when the task they waited for failed."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, details: Any = None):
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details
        super().__init__(f"{code}: {message}")

    def payload(self) -> dict:
        body = {"code": self.code, "message": self.message, "retryable": self.retryable}
        if self.details is not None:
            body["details"] = self.details
        return body
