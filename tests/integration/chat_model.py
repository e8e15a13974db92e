"""A model behind a real OpenAI-compatible ``/v1/chat/completions`` endpoint, for ``--llm-base-url``.

It knows nothing of our harness: like a real model it reads only what the SDK sends over HTTP (the
task in the user message, the tool list, the tool results) and answers with native tool calls,
plainly or as a server-sent-event stream (``"stream": true``: ``chat.completion.chunk`` deltas with
the tool call split over several chunks, then ``[DONE]``). Its policy is a short plan per task,
each step naming the element it wants by a fragment of its ``browser_get_state`` line (an id, a
link text); the index comes from the latest state in the conversation, the answer from the page
text ``browser_get_content`` returned. Every request is kept in ``requests`` for the test to check.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatModel", "Step"]


@dataclass(frozen=True)
class Step:
    """One tool call. ``element`` names the element whose index goes into ``arguments["index"]`` as
    a model reading the state would: ``"a:Cast Iron"`` (a link whose text has "Cast Iron") or
    ``"select@Rating"`` (the first select after the label "Rating"). ``answer`` (a regular
    expression) finds ``finish``'s message in the latest tool result."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    element: str | None = None
    answer: str | None = None


_ORIGIN = re.compile(r"(https?://[^/\s\"']+)")


class ChatModel:
    """``with ChatModel(plans, api_key) as model: model.base_url``; ``plans`` maps a fragment of the
    task's text to its steps."""

    def __init__(self, plans: dict[str, list[Step]], api_key: str) -> None:
        self.plans = plans
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.refused = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                if self.headers.get("authorization") != f"Bearer {model.api_key}":
                    model.refused += 1
                    return self._json(401, {"error": {"message": "bad api key", "type": "auth"}})
                model.requests.append(body)
                call = model.next_call(body)
                if body.get("stream"):
                    self._stream(body, call)
                else:
                    self._json(200, _completion(body, call))

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], call: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in _chunks(body, call):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="chat-model", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def next_call(self, body: dict[str, Any]) -> dict[str, Any]:
        """The tool call answering this conversation: the plan's step after the tool results so far."""
        messages = body.get("messages", [])
        task = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        plan = next((steps for key, steps in self.plans.items() if key in task), [])
        done = sum(1 for m in messages if m.get("role") == "tool")
        if done >= len(plan):
            return _call(done, "finish", {"message": "I could not finish the task."})
        step = plan[done]
        arguments = dict(step.arguments)
        results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        if step.element is not None:
            index = _find(_latest_elements(results), step.element)
            if index is None:
                return _call(done, "finish", {"message": f"I cannot see {step.element!r} on the page."})
            arguments["index"] = index
        url = arguments.get("url")
        if isinstance(url, str) and url.startswith("/"):  # a path on the site of the current page
            origin = next((m for r in reversed(results) for m in _ORIGIN.findall(r)), "")
            arguments["url"] = origin + url
        if step.answer is not None:
            found = re.search(step.answer, results[-1] if results else "")
            arguments["message"] = found.group(0) if found else "not found"
        return _call(done, step.tool, arguments)


def _latest_elements(results: list[str]) -> list[dict[str, Any]]:
    """The interactive elements of the latest ``browser_get_state`` result (JSON)."""
    for result in reversed(results):
        try:
            state = json.loads(result)
        except ValueError:
            continue
        if isinstance(state, dict) and isinstance(state.get("interactive_elements"), list):
            return [e for e in state["interactive_elements"] if isinstance(e, dict)]
    return []


def _find(elements: list[dict[str, Any]], spec: str) -> int | None:
    if "@" in spec:
        tag, label = spec.split("@", 1)
        after = next((n for n, e in enumerate(elements) if str(e.get("text", "")).strip() == label), None)
        candidates = elements[after + 1 :] if after is not None else []
        return next((int(e["index"]) for e in candidates if e.get("tag") == tag), None)
    tag, text = spec.split(":", 1)
    return next(
        (int(e["index"]) for e in elements if e.get("tag") == tag and text in str(e.get("text", ""))), None
    )


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _call(number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{number}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _completion(body: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "chat-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020},
    }


def _chunks(body: dict[str, Any], call: dict[str, Any]) -> list[dict[str, Any]]:
    """The call as OpenAI streams it: role, then the call's id and name, then its arguments in pieces."""
    base: Callable[[dict[str, Any], str | None], dict[str, Any]] = lambda delta, finish: {  # noqa: E731
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "chat-model"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    arguments = call["function"]["arguments"]
    pieces = [arguments[i : i + 16] for i in range(0, len(arguments), 16)] or [""]
    chunks = [base({"role": "assistant", "content": None}, None)]
    chunks.append(
        base(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            },
            None,
        )
    )
    chunks += [base({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}, None) for p in pieces]
    last = base({}, "tool_calls")
    last["usage"] = {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}
    chunks.append(last)
    return chunks
