"""Session -> HAR 1.2, the format WebArena-Verified scores from.

Each entry carries the step it was captured in (``_step``), its tab (``_tabId``, also ``pageref``),
who caused it (``_origin``) and where its request headers came from (``_headersSource``). Traffic of
the live evaluator's own tabs is left out unless asked for: WebArena-Verified scores the agent's
*last* navigation, and the evaluator's navigations would otherwise be taken for it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urldefrag, urlsplit

from cdp_integration._version import __version__
from cdp_integration.errors import SessionFormatError
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import NetworkExchange
from cdp_integration.session.output import BoundedOutput, iter_json, output_file
from cdp_integration.session.store import Session

__all__ = ["exchange_to_har_entry", "session_har_entries", "session_to_har", "write_har"]

_HTTP_VERSIONS = {"h2": "HTTP/2", "h3": "HTTP/3", "http/1.0": "HTTP/1.0"}


def _iso(seconds: float) -> str:
    """ISO 8601 of a session timestamp; a value no date can hold is the session's error, one line."""
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise SessionFormatError(f"timestamp {seconds!r} is out of range (not a date)") from None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _header_list(headers: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for name, value in headers.items():
        for line in value.split("\n"):
            out.append({"name": name, "value": line})
    return out


def _request_cookies(headers: dict[str, str]) -> list[dict[str, str]]:
    raw = headers.get("cookie", "")
    pairs = (part.strip().partition("=") for part in raw.split(";") if part.strip())
    return [{"name": name, "value": value} for name, _, value in pairs]


def _response_cookies(headers: dict[str, str]) -> list[dict[str, Any]]:
    cookies: list[dict[str, Any]] = []
    for line in headers.get("set-cookie", "").split("\n"):
        if not line.strip():
            continue
        parsed: SimpleCookie = SimpleCookie()
        try:
            parsed.load(line)
        except CookieError:
            name, _, rest = line.partition("=")
            cookies.append({"name": name.strip(), "value": rest.split(";")[0]})
            continue
        for morsel in parsed.values():
            cookie: dict[str, Any] = {"name": morsel.key, "value": morsel.value}
            if morsel["path"]:
                cookie["path"] = morsel["path"]
            if morsel["domain"]:
                cookie["domain"] = morsel["domain"]
            cookie["httpOnly"] = bool(morsel["httponly"])
            cookie["secure"] = bool(morsel["secure"])
            cookies.append(cookie)
    return cookies


def exchange_to_har_entry(exchange: NetworkExchange, step: int) -> dict[str, Any]:
    """One HAR 1.2 entry for one request/response hop."""
    request, response = exchange.request, exchange.response
    http_version = _HTTP_VERSIONS.get(response.protocol if response else "", "HTTP/1.1")
    # HAR 1.2: "fragments are not included" (Playwright's HAR agrees); the session keeps the fragment,
    # but WebArena-Verified compares it, so `/page#anchor` would not match an expected `/page`.
    url = urldefrag(request.url).url
    har_request: dict[str, Any] = {
        "method": request.method,
        "url": url,
        "httpVersion": http_version,
        "cookies": _request_cookies(request.headers),
        "headers": _header_list(request.headers),
        "queryString": [
            {"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)
        ],
        "headersSize": -1,
        "bodySize": len(request.post_data.encode()) if request.post_data is not None else 0,
    }
    if request.post_data is not None:
        mime = request.headers.get("content-type", "application/octet-stream")
        post: dict[str, Any] = {"mimeType": mime, "text": request.post_data}
        if mime.startswith("application/x-www-form-urlencoded") and not request.post_data_base64:
            post["params"] = [
                {"name": k, "value": v} for k, v in parse_qsl(request.post_data, keep_blank_values=True)
            ]
        har_request["postData"] = post
    if response is not None:
        content: dict[str, Any] = {
            "size": response.encoded_size if response.encoded_size >= 0 else 0,
            "mimeType": response.mime_type or "x-unknown",
        }
        if response.body is not None:
            content["text"] = response.body
            if response.body_base64:
                content["encoding"] = "base64"
        har_response: dict[str, Any] = {
            "status": response.status,
            "statusText": response.status_text,
            "httpVersion": http_version,
            "cookies": _response_cookies(response.headers),
            "headers": _header_list(response.headers),
            "content": content,
            "redirectURL": response.redirect_url or response.headers.get("location", ""),
            "headersSize": -1,
            "bodySize": response.encoded_size,
        }
    else:
        har_response = {
            "status": 0,
            "statusText": "",
            "httpVersion": http_version,
            "cookies": [],
            "headers": [],
            "content": {"size": 0, "mimeType": "x-unknown"},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
            "_error": exchange.error,
        }
    duration = max(exchange.duration_ms, 0.0)
    entry: dict[str, Any] = {
        "startedDateTime": _iso(exchange.started),
        "time": duration,
        "request": har_request,
        "response": har_response,
        "cache": {},
        "timings": {"send": 0, "wait": duration, "receive": 0},
        "_step": step,
        "_tabId": exchange.tab_id,
        "_origin": exchange.origin,
        "_headersSource": request.headers_source,
        "_resourceType": request.resource_type,
    }
    if exchange.tab_id:
        entry["pageref"] = exchange.tab_id
    if response is not None and response.remote_address:
        entry["serverIPAddress"] = response.remote_address.rsplit(":", 1)[0]
    return entry


def session_har_entries(
    session: Session, *, steps: range | None = None, include_evaluator: bool = False
) -> list[dict[str, Any]]:
    """The session's HAR entries in capture order, optionally for ``steps`` only."""
    entries = []
    for position, step in enumerate(session.steps):
        if steps is not None and step.index not in steps:
            continue
        for exchange in session.network_at(position):
            if exchange.origin == "evaluator" and not include_evaluator:
                continue
            entries.append(exchange_to_har_entry(exchange, step.index))
    return entries


def session_to_har(
    session: Session, *, steps: range | None = None, include_evaluator: bool = False
) -> dict[str, Any]:
    """A HAR 1.2 document of the session (or of ``steps``), one page per tab."""
    entries = session_har_entries(session, steps=steps, include_evaluator=include_evaluator)
    pages: dict[str, dict[str, Any]] = {}
    for step in session.steps:
        if steps is not None and step.index not in steps:
            continue
        for tab in step.tabs:
            pages.setdefault(
                tab.tab_id,
                {
                    "startedDateTime": _iso(step.timestamp),
                    "id": tab.tab_id,
                    "title": tab.title,
                    "pageTimings": {},
                },
            )
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "cdp-integration", "version": __version__},
            "browser": {"name": "Chromium", "version": session.header.browser_version or ""},
            "pages": list(pages.values()),
            "entries": entries,
            "_instanceId": session.instance_id,
        }
    }


def write_har(
    session: Session,
    path: str | os.PathLike[str],
    *,
    steps: range | None = None,
    include_evaluator: bool = False,
    limits: SessionLimits | None = None,
) -> int:
    """Write ``session_to_har`` to ``path`` (indented JSON) entry by entry, within the output budget
    (``OutputLimitError`` and no file when it would exceed it); returns the number of entries.

    Entries share the session's body strings, so only one entry's JSON is in memory at a time.
    """
    document = session_to_har(session, steps=steps, include_evaluator=include_evaluator)
    limit = (limits or SessionLimits.from_env()).max_output_bytes
    counted = BoundedOutput(None, limit, f"HAR {path}")
    for piece in iter_json(document, stream_depth=3):  # sized first: a refusal writes nothing
        counted.count(len(piece))
    with output_file(path, limits=limits, what=f"HAR {path}") as output:
        for piece in iter_json(document, stream_depth=3):
            output.write(piece)
    return len(document["log"]["entries"])
