"""Playwright trace formats 4 to 10 upgraded, step by step, to the newest one the importer reads.

A ``*.trace`` member starts with a ``context-options`` event whose ``version`` names its format.
WebArena's ``run.py`` pins Playwright 1.32 (format 4); 1.45 and 1.50 write 7, 1.60 writes 8, 1.63
writes 9, 1.65 (and ``@playwright/test`` 1.65) write 10.
As Playwright's own trace viewer does (its trace loader's ``_modernize_N_to_N+1`` steps), each
``upgrade_N`` turns events of format N into format N+1, so the importer reads one model:

- **page lifecycle**: ``BrowserContext.page`` / ``BrowserContext.pageClosed`` events with
  ``params.pageId``. Format 4 wrote them as protocol events (``params.page.guid``, ``Page.close``);
  later releases wrote none (1.45, format 7: only the ``newPage`` and ``Page.close`` calls) until they
  came back within format 7 (1.50); where a trace has none they are rebuilt from the first event
  naming a page and from its successful ``close`` call;
- **timestamps**: ``context-options`` carries ``monotonicTime`` (before format 7 it did not: the
  first call's ``startTime`` and ``wallTime`` anchor the clock, as the viewer does);
- **snapshot phases**: a ``frame-snapshot`` has ``phase`` (``before`` / ``input`` / ``after``);
  before format 9 it was only in the snapshot's name (``before@call@7``);
- **call titles**: ``title`` (was ``apiName``); **resource names**: ``_file`` / ``file`` paths inside
  the zip (were bare ``_sha1`` / ``sha1`` names under ``resources/``);
- **navigations**: format 4 recorded each frame's commits as protocol events (``Frame.navigated``:
  URL, commit time, ``newDocument`` naming the request); they are kept as ``Frame.navigated`` events
  with ``params.url``, ``params.newDocument`` (a bool) and ``params.isMainFrame`` (true, false, or
  absent when the trace cannot tell: a same-document navigation on a page with child frames). Later
  formats record no navigation events: a page's document loads are its network log's;
- **document loads**: a ``resource-snapshot`` carries ``_resourceType`` from format 9 (Playwright
  1.63); before, a navigation request is told by the headers browsers send only on navigations
  (``Sec-Fetch-Mode: navigate``, or, where no ``Sec-Fetch-*`` header is sent (plain-HTTP sites),
  ``Upgrade-Insecure-Requests: 1``) and gets ``_resourceType: "document"``.

A format newer than `LATEST_FORMAT`, older than `OLDEST_FORMAT`, or missing/garbled version info is
a loud `SessionFormatError`, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdp_integration.errors import SessionFormatError

__all__ = ["LATEST_FORMAT", "OLDEST_FORMAT", "trace_format", "upgrade_events", "upgrade_network"]

OLDEST_FORMAT = 4
"""Playwright 1.32 (WebArena's pin). Older traces wrapped calls in ``metadata`` envelopes."""
LATEST_FORMAT = 10
"""Playwright 1.6x and ``@playwright/test`` 1.6x."""

Events = list[dict[str, Any]]


def trace_format(first: dict[str, Any], where: str) -> int:
    """The format of a ``*.trace`` member from its first event; a loud error when unknown."""
    if first.get("type") != "context-options":
        raise SessionFormatError(
            f"{where}: the trace does not start with its context-options event (no format version)"
        )
    version = first.get("version")
    if type(version) is not int:
        raise SessionFormatError(f"{where}: the trace's format version is missing or not a number")
    if version > LATEST_FORMAT:
        raise SessionFormatError(
            f"{where}: trace format {version} was written by a newer Playwright than this importer "
            f"knows (formats {OLDEST_FORMAT} to {LATEST_FORMAT}); refused"
        )
    if version < OLDEST_FORMAT:
        raise SessionFormatError(
            f"{where}: trace format {version} is older than the oldest this importer reads "
            f"({OLDEST_FORMAT}, Playwright 1.32); refused"
        )
    return version


def _params(event: dict[str, Any]) -> dict[str, Any]:
    params = event.get("params")
    return params if isinstance(params, dict) else {}


def _page_event(method: str, page_id: str, time: Any) -> dict[str, Any]:
    return {
        "type": "event",
        "time": time,
        "class": "BrowserContext",
        "method": method,
        "params": {"pageId": page_id},
    }


def _guid(value: Any) -> str | None:
    guid = value.get("guid") if isinstance(value, dict) else None
    return guid if isinstance(guid, str) else None


def upgrade_4(events: Events) -> Events:
    """4 -> 5: page lifecycle from the protocol events (``page`` with ``params.page.guid``, a page's
    ``close``); navigations (``Frame.navigated``) kept with the frame they committed in (main or
    child, from the ``__create__`` events of pages, frames and requests); the other protocol objects
    (``__create__``, requests, load states) are dropped."""
    out: Events = []
    main_frames: dict[str, str] = {}
    """Page guid -> its main frame's guid."""
    parents: dict[str, str] = {}
    """Child frame guid -> its parent frame's guid."""
    request_frames: dict[str, str] = {}
    """Request guid -> the frame that issued it."""
    for event in events:
        if event.get("type") != "event":
            out.append(event)
            continue
        cls, method, params = event.get("class"), event.get("method"), _params(event)
        initializer = _params({"params": params.get("initializer")})
        guid = params.get("guid") if isinstance(params.get("guid"), str) else None
        page = params.get("page")
        if method == "__create__" and guid is not None:
            if cls == "Page" and _guid(initializer.get("mainFrame")):
                main_frames[guid] = str(_guid(initializer.get("mainFrame")))
            elif cls == "Frame" and _guid(initializer.get("parentFrame")):
                parents[guid] = str(_guid(initializer.get("parentFrame")))
            elif cls == "Request" and _guid(initializer.get("frame")):
                request_frames[guid] = str(_guid(initializer.get("frame")))
        elif cls == "Frame" and method == "navigated":
            navigation = _navigation(event, params, main_frames, parents, request_frames)
            if navigation is not None:
                out.append(navigation)
        elif cls == "BrowserContext" and method == "page" and isinstance(page, dict):
            if isinstance(page.get("guid"), str):
                out.append(_page_event("page", page["guid"], event.get("time")))
        elif cls == "Page" and method == "close" and isinstance(event.get("pageId"), str):
            out.append(_page_event("pageClosed", event["pageId"], event.get("time")))
        elif method != "__create__" and not (cls == "BrowserContext" and method in _PROTOCOL_EVENTS):
            out.append(event)
    return out


def _navigation(
    event: dict[str, Any],
    params: dict[str, Any],
    main_frames: dict[str, str],
    parents: dict[str, str],
    request_frames: dict[str, str],
) -> dict[str, Any] | None:
    """A format-4 ``Frame.navigated`` event in the model's shape: ``params.url``, ``newDocument``,
    ``isMainFrame`` when the trace tells which frame navigated (a new document names its request, and
    the request its frame; a same-document navigation is the main frame's when its page has no child
    frame), else absent."""
    page_id, url = event.get("pageId"), params.get("url")
    if not isinstance(page_id, str) or not isinstance(url, str):
        return None
    main = main_frames.get(page_id)
    new_document = isinstance(params.get("newDocument"), dict)
    frame = request_frames.get(_guid(params["newDocument"].get("request")) or "") if new_document else None
    is_main: bool | None = None
    if main is not None and frame is not None:
        is_main = frame == main
    elif main is not None and not new_document and not any(_root(f, parents) == main for f in parents):
        is_main = True
    fields: dict[str, Any] = {"url": url, "newDocument": new_document}
    if is_main is not None:
        fields["isMainFrame"] = is_main
    return {"type": "event", "time": event.get("time"), "class": "Frame", "method": "navigated",
            "pageId": page_id, "params": fields}  # fmt: skip


def _root(frame: str, parents: dict[str, str]) -> str:
    """The main frame a frame belongs to (its parents followed, bounded against a loop)."""
    for _ in range(len(parents) + 1):
        if frame not in parents:
            return frame
        frame = parents[frame]
    return frame


_PROTOCOL_EVENTS = frozenset({"request", "response", "requestFinished", "requestFailed", "page", "close"})


def upgrade_5(events: Events) -> Events:
    """5 -> 6: an ``after`` event's ``log`` lines became ``log`` events (dropped here: not read)."""
    for event in events:
        if event.get("type") == "after":
            event.pop("log", None)
    return events


def upgrade_6(events: Events) -> Events:
    """6 -> 7: ``context-options`` gains ``monotonicTime``; without it, the first call's
    ``startTime`` and ``wallTime`` anchor the trace's clock (as Playwright's viewer does)."""
    options = events[0]
    if not isinstance(options.get("monotonicTime"), int | float):
        first = next((e for e in events if e.get("type") == "before"), None)
        start = first.get("startTime") if first else None
        wall = first.get("wallTime") if first else None
        if isinstance(start, int | float) and isinstance(wall, int | float):
            options["monotonicTime"], options["wallTime"] = start, wall
        else:
            options["monotonicTime"] = 0
    return events


def upgrade_7(events: Events) -> Events:
    """7 -> 8: a call's ``apiName`` became its ``title``."""
    for event in events:
        if event.get("type") == "before" and "apiName" in event:
            event.setdefault("title", event.pop("apiName"))
    return events


def upgrade_8(events: Events) -> Events:
    """8 -> 9: snapshot names (``before@call@7``) became a snapshot's ``phase``."""
    for event in events:
        kind = event.get("type")
        if kind == "frame-snapshot" and isinstance(event.get("snapshot"), dict):
            snapshot = event["snapshot"]
            name = snapshot.pop("snapshotName", None)
            if "phase" not in snapshot and isinstance(name, str) and "@" in name:
                snapshot["phase"] = name.split("@", 1)[0]
        elif kind in ("before", "after", "input"):
            for key in ("beforeSnapshot", "afterSnapshot", "inputSnapshot"):
                event.pop(key, None)
    return events


def upgrade_9(events: Events) -> Events:
    """9 -> 10: a call's ``stepId`` became its call id; page lifecycle events exist. A trace without
    them (Playwright 1.45's format 7 wrote none): a page opens at the first event naming it, and
    closes after its ``close`` call returned."""
    steps: dict[str, str] = {}
    for event in events:
        call, step = event.get("callId"), event.get("stepId")
        if event.get("type") == "before" and isinstance(call, str) and isinstance(step, str):
            steps[call] = step
    for event in events:
        call = event.get("callId")
        if isinstance(call, str) and call in steps:
            event["callId"] = steps[call]
        event.pop("stepId", None)
    if any(_is_page_event(e) for e in events):
        return events
    out: Events = []
    seen: set[str] = set()
    closing: dict[str, str] = {}
    """callId of a ``Page.close`` call -> its page."""
    for event in events:
        page_id = _page_of(event)
        if page_id is not None and page_id not in seen:
            seen.add(page_id)
            out.append(_page_event("page", page_id, event.get("startTime", event.get("time"))))
        out.append(event)
        kind = event.get("type")
        if kind == "before" and event.get("class") == "Page" and event.get("method") == "close" and page_id:
            closing[str(event.get("callId"))] = page_id
        elif kind == "after" and str(event.get("callId")) in closing and not event.get("error"):
            out.append(_page_event("pageClosed", closing.pop(str(event.get("callId"))), event.get("endTime")))
    return out


def _is_page_event(event: dict[str, Any]) -> bool:
    return (
        event.get("type") == "event"
        and event.get("class") == "BrowserContext"
        and event.get("method") in ("page", "pageClosed")
    )


def _page_of(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind in ("before", "screencast-frame") and isinstance(event.get("pageId"), str):
        return str(event["pageId"])
    if kind == "frame-snapshot" and isinstance(event.get("snapshot"), dict):
        page_id = event["snapshot"].get("pageId")
        return page_id if isinstance(page_id, str) else None
    return None


UPGRADES: dict[int, Callable[[Events], Events]] = {
    4: upgrade_4,
    5: upgrade_5,
    6: upgrade_6,
    7: upgrade_7,
    8: upgrade_8,
    9: upgrade_9,
}
"""Format N -> the step that turns its events into format N + 1."""


def _resource_names(event: dict[str, Any]) -> None:
    """Bare blob names (``_sha1``, ``sha1``) -> paths inside the zip (``_file``, ``file``)."""
    kind = event.get("type")
    if kind == "resource-snapshot" and isinstance(event.get("snapshot"), dict):
        entry = event["snapshot"]
        for part, key in (("request", "postData"), ("response", "content")):
            holder = entry.get(part)
            inner = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(inner, dict) and isinstance(inner.get("_sha1"), str):
                inner.setdefault("_file", "resources/" + inner.pop("_sha1"))
    elif kind == "frame-snapshot" and isinstance(event.get("snapshot"), dict):
        overrides = event["snapshot"].get("resourceOverrides")
        for override in overrides if isinstance(overrides, list) else []:
            if isinstance(override, dict) and isinstance(override.get("sha1"), str):
                override.setdefault("file", "resources/" + override.pop("sha1"))
    elif kind == "screencast-frame" and isinstance(event.get("sha1"), str):
        event.setdefault("file", "resources/" + event.pop("sha1"))


def upgrade_events(events: Events, where: str) -> tuple[int, Events]:
    """A ``*.trace`` member's events (first: ``context-options``) in format `LATEST_FORMAT`, and the
    format they were written in."""
    if not events:
        raise SessionFormatError(f"{where}: an empty trace (no context-options event)")
    version = trace_format(events[0], where)
    for step in range(version, LATEST_FORMAT):
        events = UPGRADES[step](events)
    events[0]["version"] = LATEST_FORMAT
    for event in events:
        _resource_names(event)
    return version, events


def upgrade_network(events: Events) -> Events:
    """A ``*.network`` member's ``resource-snapshot`` events with the newest resource names and, before
    format 9, ``_resourceType: "document"`` on navigation requests (the entries are HAR in every
    format this importer reads)."""
    for event in events:
        _resource_names(event)
        entry = event.get("snapshot")
        if (
            event.get("type") == "resource-snapshot"
            and isinstance(entry, dict)
            and "_resourceType" not in entry
        ):
            request = entry.get("request")
            if isinstance(request, dict) and _navigation_request(request.get("headers")):
                entry["_resourceType"] = "document"
    return events


def _navigation_request(headers: Any) -> bool:
    """A request browsers send only to navigate a frame: ``Sec-Fetch-Mode: navigate`` or, on a site
    that gets no ``Sec-Fetch-*`` headers (plain HTTP), ``Upgrade-Insecure-Requests: 1``."""
    named: dict[str, str] = {}
    for header in headers if isinstance(headers, list) else []:
        if (
            isinstance(header, dict)
            and isinstance(header.get("name"), str)
            and isinstance(header.get("value"), str)
        ):
            named[header["name"].lower()] = header["value"].strip().lower()
    if "sec-fetch-mode" in named:
        return named["sec-fetch-mode"] == "navigate"
    return named.get("upgrade-insecure-requests") == "1"
