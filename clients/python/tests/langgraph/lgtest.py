"""Helpers of the LangGraph adapter's tests (a module of its own name: every test directory has a
`conftest`): a scripted chat model; a thread's events are `daemon.thread_events`."""

from daemon import thread_events  # noqa: F401  (the tests import it from here)
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel


class ScriptedModel(FakeMessagesListChatModel):
    """LangChain's own fake chat model, answering its `responses` in turn; `bind_tools` is a no-op so
    that graphs written for a tool-calling model take it (the fake raises NotImplementedError)."""

    def bind_tools(self, tools, **kwargs):
        return self

