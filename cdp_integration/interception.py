"""One seam for the HTTP calls evaluation code makes on its own: ``requests`` and ``httpx``.

WebArena's REST helpers (``shopping_get_latest_order_url``, ...) call ``requests``; its LLM judge
(``llm_fuzzy_match``, ``llm_ua_match``) goes through the ``openai`` client, which calls ``httpx``.
``intercept_http(handler)`` routes both libraries' transports through ``handler`` for the duration
of a block: capture passes each call on and records it, replay answers it from the recording.
The evaluator code itself is untouched; only the transports' ``send`` is swapped, as vcrpy does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["HttpRequest", "HttpResponse", "intercept_http"]

_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Bodies are kept decoded, so these would no longer describe them."""


@dataclass(frozen=True)
class HttpRequest:
    client: Literal["requests", "httpx"]
    method: str
    url: str
    body: str | None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


Forward = Callable[[], HttpResponse]
Handler = Callable[[HttpRequest, Forward], HttpResponse]

_lock = threading.Lock()
_handlers: list[Handler] = []
_originals: dict[str, Any] = {}


def _text(data: bytes | str | None) -> str | None:
    if data is None:
        return None
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _headers(items: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items if str(k).lower() not in _DROPPED_HEADERS}


def _requests_send(adapter: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
    import requests

    outgoing = HttpRequest("requests", request.method or "GET", request.url or "", _text(request.body))

    def forward() -> HttpResponse:
        real = _originals["requests"](adapter, request, *args, **kwargs)
        return HttpResponse(real.status_code, _headers(real.headers.items()), _text(real.content) or "")

    answer = _handlers[-1](outgoing, forward)
    response = requests.Response()
    response.status_code = answer.status
    response.headers = requests.structures.CaseInsensitiveDict(answer.headers)
    response._content = answer.body.encode()
    response.encoding = "utf-8"
    response.url = outgoing.url
    response.request = request
    response.reason = "recorded"
    return response


def _httpx_handle(transport: Any, request: Any) -> Any:
    import httpx

    body = request.read()
    outgoing = HttpRequest("httpx", request.method, str(request.url), _text(body) if body else None)

    def forward() -> HttpResponse:
        real = _originals["httpx"](transport, request)
        content = real.read()
        real.close()
        return HttpResponse(real.status_code, _headers(real.headers.multi_items()), _text(content) or "")

    answer = _handlers[-1](outgoing, forward)
    return httpx.Response(
        answer.status, headers=answer.headers, content=answer.body.encode(), request=request
    )


def _install() -> None:
    import httpx
    import requests.adapters

    _originals["requests"] = requests.adapters.HTTPAdapter.send
    _originals["httpx"] = httpx.HTTPTransport.handle_request
    requests.adapters.HTTPAdapter.send = _requests_send  # type: ignore[method-assign, assignment]
    httpx.HTTPTransport.handle_request = _httpx_handle  # type: ignore[method-assign, assignment]


def _uninstall() -> None:
    import httpx
    import requests.adapters

    requests.adapters.HTTPAdapter.send = _originals.pop("requests")  # type: ignore[method-assign, assignment]
    httpx.HTTPTransport.handle_request = _originals.pop("httpx")  # type: ignore[method-assign, assignment]


@contextlib.contextmanager
def intercept_http(handler: Handler) -> Iterator[None]:
    """Route ``requests`` and ``httpx`` calls through ``handler(request, forward)`` in this block.

    ``forward()`` performs the real call and returns its response (decoded body). Blocks nest; the
    innermost handler wins.
    """
    with _lock:
        if not _handlers:
            _install()
        _handlers.append(handler)
    try:
        yield
    finally:
        with _lock:
            _handlers.remove(handler)
            if not _handlers:
                _uninstall()
