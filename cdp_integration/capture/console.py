"""What the page said: console messages, uncaught errors and the browser's own log entries, per tab.

Heard on each followed tab's CDP session (``Runtime.consoleAPICalled``, ``Runtime.exceptionThrown``,
``Log.entryAdded``, but not its ``verbose`` advice) as they happen and kept until the next capture takes them into its step. Bounded
so that a page logging in a loop cannot grow the session or the logger's memory: at most
``MAX_ENTRIES`` per step (the later ones are counted, not kept) and ``MAX_TEXT`` characters per entry.
An argument is rendered from what the event carries (a value, or the object's preview): nothing is
asked of the page, so hearing it costs the page nothing but the event.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from cdp_integration.session.models import ConsoleEntry

__all__ = ["MAX_ENTRIES", "MAX_TEXT", "ConsoleRecorder", "render_remote_object"]

MAX_ENTRIES = 200
"""Entries one step keeps (all tabs together); the rest are counted in ``Step.console_dropped``."""
MAX_TEXT = 2_000
"""Characters one entry keeps (its text is cut there, with an ellipsis)."""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _preview(preview: dict[str, Any]) -> str:
    """An object's preview as JSON (so structured redaction sees its keys), ``…`` where cut short."""
    properties = preview.get("properties") or []
    if preview.get("subtype") == "array":
        items: list[Any] = [_preview_value(p) for p in properties]
        if preview.get("overflow"):
            items.append("…")
        return json.dumps(items, ensure_ascii=False)
    record = {str(p.get("name", "")): _preview_value(p) for p in properties}
    if preview.get("overflow"):
        record["…"] = "…"
    return json.dumps(record, ensure_ascii=False)


def _preview_value(prop: dict[str, Any]) -> Any:
    kind, value = prop.get("type"), prop.get("value", "")
    if kind == "number":
        try:
            return float(value) if "." in value or "e" in value else int(value)
        except ValueError:
            return value
    if kind == "boolean":
        return value == "true"
    if kind == "object" and prop.get("subtype") == "null":
        return None
    return value


def render_remote_object(value: dict[str, Any]) -> str:
    """One ``Runtime.RemoteObject`` as console text: strings as they are, primitives by value,
    errors by their description (message and stack), other objects by their preview."""
    kind = value.get("type")
    if kind == "string":
        return str(value.get("value", ""))
    if kind == "undefined":
        return "undefined"
    if "unserializableValue" in value:
        return str(value["unserializableValue"])
    if kind in ("number", "boolean"):
        return json.dumps(value.get("value"))
    if kind == "object" and value.get("subtype") == "null":
        return "null"
    if kind == "object" and value.get("subtype") != "error" and isinstance(value.get("preview"), dict):
        return _preview(value["preview"])
    return str(value.get("description") or kind or "")


class ConsoleRecorder:
    """The entries heard since the last ``take``, for all followed tabs (events come from Playwright's
    dispatch thread, ``take`` from the capture)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[ConsoleEntry] = []
        self._dropped = 0

    def listen(self, cdp: Any, tab_id: str) -> None:
        """Hear ``cdp``'s tab; the caller enables the ``Runtime`` and ``Log`` domains."""
        cdp.on("Runtime.consoleAPICalled", lambda event: self._console(tab_id, event))
        cdp.on("Runtime.exceptionThrown", lambda event: self._exception(tab_id, event))
        cdp.on("Log.entryAdded", lambda event: self._log(tab_id, event))

    def take(self) -> tuple[list[ConsoleEntry], int]:
        """The entries heard since the last call and how many more were dropped; starts afresh."""
        with self._lock:
            entries, dropped = self._entries, self._dropped
            self._entries, self._dropped = [], 0
        return entries, dropped

    def _add(self, entry: dict[str, Any]) -> None:
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._dropped += 1
                return
        try:
            built = ConsoleEntry.model_validate(entry)
        except Exception:  # a malformed event is not worth a fault: it is skipped
            return
        with self._lock:
            if len(self._entries) < MAX_ENTRIES:
                self._entries.append(built)
            else:
                self._dropped += 1

    def _console(self, tab_id: str, event: Any) -> None:
        if not isinstance(event, dict):
            return
        args = [render_remote_object(a) for a in (event.get("args") or [])[:50] if isinstance(a, dict)]
        frame = _top_frame(event.get("stackTrace"))
        self._add(
            {
                "tab_id": tab_id,
                "kind": "console",
                "level": str(event.get("type", "log")),
                "text": _cut(" ".join(args)),
                "url": str(frame.get("url", "")),
                "line": _line(frame.get("lineNumber")),
                "timestamp": _seconds(event.get("timestamp")),
            }
        )

    def _exception(self, tab_id: str, event: Any) -> None:
        details = event.get("exceptionDetails") if isinstance(event, dict) else None
        if not isinstance(details, dict):
            return
        found = details.get("exception")
        exception: dict[str, Any] = found if isinstance(found, dict) else {}
        text = str(exception.get("description") or "")
        if not text:
            text = " ".join(filter(None, [str(details.get("text", "")), render_remote_object(exception)]))
        self._add(
            {
                "tab_id": tab_id,
                "kind": "exception",
                "level": "error",
                "text": _cut(text),
                "url": str(details.get("url", "")),
                "line": _line(details.get("lineNumber")),
                "timestamp": _seconds(event.get("timestamp")),
            }
        )

    def _log(self, tab_id: str, event: Any) -> None:
        entry = event.get("entry") if isinstance(event, dict) else None
        if not isinstance(entry, dict) or entry.get("level") == "verbose":
            return  # verbose: the browser's advice to developers (autocomplete hints, ...), hidden by DevTools too
        self._add(
            {
                "tab_id": tab_id,
                "kind": "log",
                "level": str(entry.get("level", "info")),
                "source": str(entry.get("source", "")),
                "text": _cut(str(entry.get("text", ""))),
                "url": str(entry.get("url", "")),
                "line": _line(entry.get("lineNumber")),
                "timestamp": _seconds(entry.get("timestamp")),
            }
        )


def _top_frame(trace: Any) -> dict[str, Any]:
    frames = trace.get("callFrames") if isinstance(trace, dict) else None
    return frames[0] if isinstance(frames, list) and frames and isinstance(frames[0], dict) else {}


def _line(value: Any) -> int | None:
    return value + 1 if type(value) is int and value >= 0 else None  # CDP's lines count from 0


def _seconds(value: Any) -> float:
    """CDP's console timestamps are milliseconds since the epoch."""
    return round(float(value) / 1000, 3) if isinstance(value, int | float) and value > 0 else 0.0
