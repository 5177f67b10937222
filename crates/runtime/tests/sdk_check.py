#!/usr/bin/env python3
"""Checks the fake LLM provider's wire format with the official `anthropic` and `openai` Python SDKs.

The runtime's tests start the fake (scripted by the prompt: "text", "tool", "overload", "ratelimit")
and run this with its base URL. Each SDK parses the fake's answers, whole and streamed, into its
typed objects; any drift from the real APIs makes an SDK raise or a check below fail. Prints one
line per check and exits non-zero on the first failure.
"""

import json
import sys

import anthropic
import openai

TOOL_INPUT = {"message": 'a "tricky" \\ input ✓', "n": [1, 2, {"deep": None}]}
TEXT = 'Hello — wörld, in pieces: "quoted" and \\ escaped.'
TOOLS_A = [{"name": "echo", "description": "Echoes", "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}}}]
TOOLS_O = [{"type": "function", "function": {"name": "echo", "description": "Echoes", "parameters": TOOLS_A[0]["input_schema"]}}]


def check(name, ok, detail=""):
    if not ok:
        print(f"FAIL {name}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok {name}", flush=True)


def anthropic_checks(url):
    client = anthropic.Anthropic(base_url=url, api_key="sk-fake", max_retries=0)
    ask = lambda text: [{"role": "user", "content": text}]

    m = client.messages.create(model="fake-model-1", max_tokens=100, messages=ask("text"))
    check("anthropic whole text", m.content[0].type == "text" and m.content[0].text == TEXT and m.stop_reason == "end_turn", m)
    check("anthropic whole usage", m.usage.input_tokens > 0 and m.usage.output_tokens > 0, m.usage)

    with client.messages.stream(model="fake-model-1", max_tokens=100, messages=ask("text")) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    check("anthropic streamed text", streamed == TEXT and final.content[0].text == TEXT, (streamed, final))
    check("anthropic streamed usage", final.usage.output_tokens > 1 and final.usage.input_tokens > 0, final.usage)

    with client.messages.stream(model="fake-model-1", max_tokens=100, messages=ask("tool"), tools=TOOLS_A) as s:
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    check("anthropic streamed tool use", final.stop_reason == "tool_use" and len(uses) == 1 and uses[0].input == TOOL_INPUT, final)

    m = client.messages.create(model="fake-model-1", max_tokens=100, messages=ask("tool"), tools=TOOLS_A)
    uses = [b for b in m.content if b.type == "tool_use"]
    check("anthropic whole tool use", len(uses) == 1 and uses[0].name == "echo" and uses[0].input == TOOL_INPUT, m)

    try:
        with client.messages.stream(model="fake-model-1", max_tokens=100, messages=ask("overload")) as s:
            s.get_final_message()
        check("anthropic error mid-stream", False, "no error raised")
    except anthropic.APIStatusError as e:
        check("anthropic error mid-stream", "overloaded" in str(e).lower(), repr(e))

    try:
        client.messages.create(model="fake-model-1", max_tokens=100, messages=ask("ratelimit"))
        check("anthropic 429", False, "no error raised")
    except anthropic.RateLimitError as e:
        check("anthropic 429", e.status_code == 429 and e.response.headers.get("retry-after") == "1", repr(e))


def openai_checks(url):
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-fake", max_retries=0)
    ask = lambda text: [{"role": "user", "content": text}]

    c = client.chat.completions.create(model="fake-model-1", messages=ask("text"))
    check("openai whole text", c.choices[0].message.content == TEXT and c.choices[0].finish_reason == "stop", c)
    check("openai whole usage", c.usage.prompt_tokens > 0 and c.usage.completion_tokens > 0, c.usage)

    chunks = list(client.chat.completions.create(model="fake-model-1", messages=ask("text"), stream=True, stream_options={"include_usage": True}))
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check("openai streamed text", streamed == TEXT, streamed)
    check("openai usage in the last chunk", chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0, chunks[-1])

    with client.chat.completions.stream(model="fake-model-1", messages=ask("tool"), tools=TOOLS_O, stream_options={"include_usage": True}) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    check(
        "openai streamed tool call",
        final.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and calls[0].function.name == "echo"
        and json.loads(calls[0].function.arguments) == TOOL_INPUT and calls[0].id.startswith("call_"),
        final,
    )

    c = client.chat.completions.create(model="fake-model-1", messages=ask("tool"), tools=TOOLS_O)
    calls = c.choices[0].message.tool_calls
    check("openai whole tool call", calls[0].type == "function" and json.loads(calls[0].function.arguments) == TOOL_INPUT, c)

    try:
        for _ in client.chat.completions.create(model="fake-model-1", messages=ask("overload"), stream=True):
            pass
        check("openai error mid-stream", False, "no error raised")
    except openai.APIError as e:
        check("openai error mid-stream", "overloaded" in str(e).lower(), repr(e))

    try:
        client.chat.completions.create(model="fake-model-1", messages=ask("ratelimit"))
        check("openai 429", False, "no error raised")
    except openai.RateLimitError as e:
        check("openai 429", e.status_code == 429, repr(e))


if __name__ == "__main__":
    base = sys.argv[1]
    anthropic_checks(base)
    openai_checks(base)
    print("all checks passed", flush=True)
