"""Answers recorded during a live evaluator run, looked up the way vcrpy plays a cassette.

``CallBook`` holds the ``EvaluatorCall``s of one run, keyed by what identifies the question: the
page's URL, the expressions already evaluated on it since its navigation, the operation and its
argument. Repeated identical questions get their answers in recorded order (the last one repeats).
``replay_http`` answers the run's HTTP calls (REST helpers, LLM judge) from its ``HttpCall``s; a
request with no recorded answer is refused and remembered, so the caller can report a
``ReplayMissError`` naming the closest recorded requests instead of a wrong score.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cdp_integration.errors import ReplayMissError
from cdp_integration.interception import HttpRequest, HttpResponse, intercept_http
from cdp_integration.session.models import EvaluatorCall, HttpCall
from cdp_integration.session.placeholder import PLACEHOLDER_PATTERN

__all__ = ["CallBook", "HttpReplay", "nearest", "replay_http"]

CallKey = tuple[str, tuple[str, ...], str, str | None]


def nearest(wanted: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """The recorded entries most similar to ``wanted`` (for replay-miss messages)."""
    pool = list(dict.fromkeys(candidates))
    close = difflib.get_close_matches(wanted, pool, n=limit, cutoff=0.0)
    return close or pool[:limit]


class CallBook:
    """The recorded page calls of one evaluator run."""

    def __init__(self, calls: Iterable[EvaluatorCall] = ()) -> None:
        self._answers: dict[CallKey, deque[EvaluatorCall]] = defaultdict(deque)
        self._last: dict[CallKey, EvaluatorCall] = {}
        self.calls = tuple(calls)
        for call in self.calls:
            self._answers[self.key(call.url, call.history, call.op, call.arg)].append(call)

    @staticmethod
    def key(url: str, history: Iterable[str], op: str, arg: str | None) -> CallKey:
        return (url, tuple(history), op, arg)

    def answer(
        self, url: str, history: Iterable[str], op: str, arg: str | None = None
    ) -> EvaluatorCall | None:
        key = self.key(url, history, op, arg)
        queue = self._answers.get(key)
        if queue:
            self._last[key] = queue.popleft()
        return self._last.get(key)

    def urls(self) -> list[str]:
        return [c.result for c in self.calls if c.op == "goto" and isinstance(c.result, str)] + [
            c.url for c in self.calls
        ]

    def describe(self, op: str, url: str, arg: str | None) -> list[str]:
        """Short descriptions of the recorded calls closest to ``op(arg)`` on ``url``."""
        entries = [
            f"{c.op}({c.arg!r}) on {c.url}" if c.arg is not None else f"{c.op}() on {c.url}"
            for c in self.calls
        ]
        wanted = f"{op}({arg!r}) on {url}" if arg is not None else f"{op}() on {url}"
        return nearest(wanted, entries)


def _normalized_body(body: str | None) -> Any:
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body


def _same(recorded: Any, actual: Any) -> bool:
    """Equal, except that a redaction placeholder in the recording stands for any value.

    A redacted session (``cdp-session redact``) still replays the evaluator's own sign-in (WebArena's
    REST helpers post the admin password): the recorded body holds a placeholder where it held the
    password, and the request made offline carries whatever the evaluator module knows.
    """
    if isinstance(recorded, str) and isinstance(actual, str):
        if PLACEHOLDER_PATTERN.search(recorded) is None:
            return recorded == actual
        parts = PLACEHOLDER_PATTERN.split(recorded)
        return re.fullmatch(".*?".join(re.escape(part) for part in parts), actual, re.DOTALL) is not None
    if isinstance(recorded, dict) and isinstance(actual, dict):
        return recorded.keys() == actual.keys() and all(_same(recorded[k], actual[k]) for k in recorded)
    if isinstance(recorded, list) and isinstance(actual, list):
        return len(recorded) == len(actual) and all(
            _same(r, a) for r, a in zip(recorded, actual, strict=True)
        )
    return bool(recorded == actual)


def _path(url: str) -> str:
    """Origins are left out of the match: the same recorded site may be served on another port now."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


@dataclass
class HttpReplay:
    calls: list[HttpCall]
    misses: list[str] = field(default_factory=list)
    used: set[int] = field(default_factory=set)

    def answer(self, request: HttpRequest) -> HttpCall | None:
        body = _normalized_body(request.body)
        matching = [
            i
            for i, call in enumerate(self.calls)
            if call.method == request.method
            and _same(_path(call.url), _path(request.url))
            and _same(_normalized_body(call.request_body), body)
        ]
        if not matching:
            return None
        fresh = [i for i in matching if i not in self.used]
        chosen = fresh[0] if fresh else matching[-1]
        self.used.add(chosen)
        return self.calls[chosen]

    def __call__(self, request: HttpRequest, forward: Any) -> HttpResponse:
        call = self.answer(request)
        if call is None or call.status is None:
            recorded = [f"{c.method} {_path(c.url)}" for c in self.calls]
            closest = nearest(f"{request.method} {_path(request.url)}", recorded)
            why = "it failed when recorded" if call is not None else "no recorded request matches"
            miss = f"{request.method} {request.url} ({why}; closest recorded: {', '.join(closest) or 'none'})"
            self.misses.append(miss)
            if request.client == "requests":  # raised through requests as is: the caller sees why
                raise ReplayMissError(f"no recorded HTTP answer for {miss}")
            # The openai client would retry an exception with back-off; 418 it neither retries nor
            # mistakes for an answer. The miss is reported after the evaluation.
            return HttpResponse(418, {"content-type": "text/plain"}, "cdp-integration: no recorded response")
        return HttpResponse(call.status, dict(call.response_headers), call.response_body or "")


@contextlib.contextmanager
def replay_http(calls: Iterable[HttpCall]) -> Iterator[HttpReplay]:
    """In this block, ``requests``/``httpx`` calls are answered from ``calls``; nothing goes out."""
    replay = HttpReplay(list(calls))
    with intercept_http(replay):
        yield replay
