"""Helpers of the LangGraph adapter's tests (a module of its own name: every test directory has a
`conftest`): a scripted chat model, and a thread's events read back over HTTP."""

import httpx
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel


class ScriptedModel(FakeMessagesListChatModel):
    """LangChain's own fake chat model, answering its `responses` in turn; `bind_tools` is a no-op so
    that graphs written for a tool-calling model take it (the fake raises NotImplementedError)."""

    def bind_tools(self, tools, **kwargs):
        return self


def thread_events(url: str, thread_id: str) -> list[dict]:
    """Every event of a thread, in seq order: GET /v1/events?thread_id=, page by page."""
    events, after = [], 0
    while True:
        page = httpx.get(f"{url}/v1/events", params={"thread_id": thread_id, "after": after}).json()
        events += page["events"]
        if not page["events"] or page.get("next_after") in (None, after):
            return events
        after = page["next_after"]
