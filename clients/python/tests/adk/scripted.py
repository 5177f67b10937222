"""Offline models for the ADK tests: a `BaseLlm` whose answers the test writes, recording what it was
asked (ADK's own MockModel lives in a module that imports pytest's internals and is not public API)."""

from __future__ import annotations

from typing import AsyncGenerator, Callable

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


class Scripted(BaseLlm):
    """Answers each call with `reply(request)`: a text, or a `types.Part` (a function call, say)."""

    model: str = "scripted"
    reply: Callable[[LlmRequest], "str | types.Part"]
    requests: list = []

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        answer = self.reply(llm_request)
        part = types.Part(text=answer) if isinstance(answer, str) else answer
        yield LlmResponse(content=types.Content(role="model", parts=[part]),
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=12, candidates_token_count=5, total_token_count=17))


def last_user_text(request: LlmRequest) -> str:
    """The text of the newest user turn the model is given."""
    for content in reversed(request.contents):
        if content.role == "user":
            return " ".join(p.text for p in content.parts if p.text)
    return ""


def transfer(agent_name: str) -> types.Part:
    """The function call with which an LLM agent hands the turn to one of its sub-agents."""
    return types.Part(function_call=types.FunctionCall(name="transfer_to_agent", args={"agent_name": agent_name}))
