"""A local stand-in for the OpenAI API speaking its real wire format (the openai SDK's own types,
serialised), for tests of what the Agents SDK's real model classes trace: `POST /v1/responses` and
`POST /v1/chat/completions`, each answering one assistant message, not streamed."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from openai.types.chat import ChatCompletion
from openai.types.responses import Response

MODEL = "gpt-fake-1"


def _response(text: str) -> dict:
    return Response.model_validate({
        "id": "resp_fake_1", "object": "response", "created_at": time.time(), "model": MODEL,
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"type": "message", "id": "msg_fake_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 12, "output_tokens": 4, "total_tokens": 16,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }).model_dump(mode="json")


def _completion(text: str) -> dict:
    return ChatCompletion.model_validate({
        "id": "chatcmpl_fake_1", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    }).model_dump(mode="json")


class FakeOpenAI:
    """`with FakeOpenAI("the answer") as api: api.base_url`."""

    def __init__(self, text: str):
        answers = {"/v1/responses": _response(text), "/v1/chat/completions": _completion(text)}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                body = answers.get(self.path)
                data = json.dumps(body or {"error": {"message": f"no route {self.path}"}}).encode()
                self.send_response(200 if body else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
