"""Playwright ``trace.zip`` -> sessions: the DOM rebuilt from the trace's snapshots, its network, cookies.

A trace (``context.tracing.start(snapshots=True)``; WebArena's ``run.py`` saves one per task as
``<task_id>.zip``) holds ``trace.trace`` (JSON lines: ``before``/``after`` events of every API
call, ``frame-snapshot`` DOMs, page events), ``trace.network`` (HAR entries as
``resource-snapshot``) and ``resources/`` (bodies by sha1). No cookie store, no script bodies.

**Snapshots.** A snapshot's ``html`` is a node: a text string, ``[name, attrs, ...children]``, or a
reference ``[[snapshotsAgo, nodeIndex]]`` to a node of an earlier snapshot of the same frame
(nodes counted in post-order, references not counted). They are rebuilt in order; a reference
that points at its own snapshot (it could loop) or forward, or at no node, is refused, and the
expansion of one snapshot is bounded (``MAX_RENDERED_NODES``), since shared subtrees can expand
exponentially. Typed form values (``__playwright_value_``, ``__playwright_checked_``,
``__playwright_selected_``) become the tab's form state, and the rebuilt HTML keeps the markup's own
attributes: the page as the agent left it answers with what was typed, a fresh load of its URL with
the defaults, as live (inside ``<template>``s, where form state cannot address a control, they are
written into the markup).
Playwright drops ``<script>`` elements, so whether a page had scripts is unknown: the rebuilt page
carries an inert empty ``<script type="application/x-playwright-dropped-scripts">`` so the replay
guard treats it as scripted (refusing, rather than guessing, what listeners would have done).

**Steps.** One step for the state before the first agent action, then one per agent action
(click, fill, goto, ...); a step's state is the last snapshot of each open page before the next
action. Pages the live evaluator opened (opened and closed with only ``goto`` / reads) are not
tabs; those opened after the last action are the end probe's pages (their snapshots are the
state the evaluator saw). The last step is the state the trace ends in: every snapshot up to its
end (reads after the last action, such as the evaluator's ``evaluate``), tabs opened and closed since.
A page that moved on after its last snapshot (a click that navigated, its snapshot taken before the
new document committed, nothing later) has its new URL but no DOM, so a question about it is a
``ReplayMissError``, never the previous page's answer (``_Builder._newer``: format 4's commit events,
else the network log's document loads). Each step records how its current tab was decided
(``_current_tab``); a tab opened after the last action makes it ``unknown``.

**Frames and network.** Same-origin child frames snapshotted with a page become its ``frames``
(cross-origin ones are left out, as live scripts cannot read them); request and response bodies
come from ``resources/`` (Playwright keeps a request's body there, ``postData.text`` empty), bounded;
header names are lower-cased as the capture stores them, so WebArena-Verified reads the trace's
document loads (wire headers) and form posts as it reads our own HAR.
"""

from __future__ import annotations

import base64
import bisect
import dataclasses
import html as html_lib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlencode, urlsplit

import orjson

from cdp_integration.errors import SessionFormatError
from cdp_integration.imports._zip import ZipLimits, ZipReader
from cdp_integration.imports.common import CookieJar, ImportedEpisode
from cdp_integration.imports.trace_formats import LATEST_FORMAT, upgrade_events, upgrade_network
from cdp_integration.imports.trace_screencast import Screencast, frame_png
from cdp_integration.session.limits import SessionLimits, count_values, limit_hint
from cdp_integration.session.markup import SNAPSHOT_DROPPED_MARKER, captured_scripts
from cdp_integration.session.models import (
    CurrentTabSource,
    FormControlState,
    FrameState,
    NetworkExchange,
    PageResource,
    RequestInfo,
    ResponseInfo,
    Step,
    TabState,
)
from cdp_integration.session.untrusted import Budget, ascii_int, iter_lines, parse_json

__all__ = ["MAX_RENDERED_NODES", "import_trace", "import_traces", "render_snapshot_html"]

MAX_RENDERED_NODES = 2_000_000
"""Nodes one rebuilt snapshot may expand to (references included); more is refused."""
MAX_RENDERED_BYTES = 48 * 1024**2
"""Bytes of HTML one rebuilt snapshot may expand to (references included, counted before it is
built, as texts and attributes, not nodes); more is refused."""
MAX_BODY_BYTES = 16 * 1024**2
"""Response bodies larger than this are not carried into the session."""
DROPPED_SCRIPTS_MARKER = SNAPSHOT_DROPPED_MARKER

ACTION_METHODS = frozenset(
    {
        "goto", "click", "dblclick", "fill", "type", "press", "selectOption", "check", "uncheck",
        "setChecked", "tap", "hover", "goBack", "goForward", "reload", "setInputFiles", "dragAndDrop",
        "keyboardPress", "keyboardType", "keyboardInsertText", "keyboardDown", "keyboardUp",
        "mouseClick", "mouseDown", "mouseUp", "mouseMove", "mouseWheel", "dispatchEvent",
    }
)  # fmt: skip
"""API calls that act on the page (a step each); the rest (evaluate, content, title, ...) only read."""
_EVALUATOR_PAGE_METHODS = frozenset(
    {"goto", "content", "title", "evaluateExpression", "close", "__waitInfo__"}
)
_VOID = frozenset(
    {
        "AREA",
        "BASE",
        "BR",
        "COL",
        "EMBED",
        "HR",
        "IMG",
        "INPUT",
        "LINK",
        "META",
        "PARAM",
        "SOURCE",
        "TRACK",
        "WBR",
    }
)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9:._-]*$")
_RESOURCE_TYPES = {
    "document": "Document", "stylesheet": "Stylesheet", "script": "Script", "image": "Image", "font": "Font",
    "xhr": "XHR", "fetch": "Fetch", "media": "Media", "websocket": "WebSocket", "manifest": "Manifest",
}  # fmt: skip
_TEXT_MIME = re.compile(
    r"^(text/|application/(json|javascript|xml|xhtml\+xml|x-www-form-urlencoded)|image/svg)"
)


# -- snapshot nodes -> HTML ---------------------------------------------------------------------


def _is_reference(node: Any) -> bool:
    return type(node) is list and len(node) == 1 and type(node[0]) is list


def _post_order(html: Any, where: str) -> list[Any]:
    """The snapshot's nodes that are not references, in post-order (what references count)."""
    nodes: list[Any] = []
    stack: list[tuple[Any, bool]] = [(html, False)]
    while stack:
        node, expanded = stack.pop()
        if type(node) is str:
            nodes.append(node)
        elif _is_reference(node):
            continue
        elif type(node) is list and node and type(node[0]) is str:
            if expanded:
                nodes.append(node)
                continue
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node[2:]))
        else:
            raise SessionFormatError(f"{where}: a snapshot node is neither text, element nor reference")
    return nodes


@dataclass
class _FrameSnapshots:
    """Every snapshot of one frame, in order, with their post-order node lists (built on demand)."""

    where: str
    raw: list[dict[str, Any]] = field(default_factory=list)
    _nodes: dict[int, list[Any]] = field(default_factory=dict)
    _sizes: dict[tuple[int, int], int] = field(default_factory=dict)
    """(snapshot index, id of a raw node) -> nodes it expands to; the raw nodes stay alive in ``raw``."""

    def expanded_size(self, index: int, cap: int) -> int:
        """How many bytes of HTML snapshot ``index`` expands to (at most ``cap + 1``), in time linear
        in the raw nodes: a subtree shared by many references is counted once, not once per use, and
        a reference re-adding a whole text counts that text's length each time."""
        sizes = self._sizes

        def size_of(node: Any, at: int) -> int:
            return len(node) + 1 if type(node) is str else sizes[(at, id(node))]

        root = self.raw[index].get("html")
        stack: list[tuple[Any, int, bool]] = [(root, index, False)]
        while stack:
            node, at, done = stack.pop()
            key = (at, id(node))
            if type(node) is str or key in sizes:
                continue
            if _is_reference(node):
                target, target_at = _resolve(self, node, at)
                if done:
                    sizes[key] = size_of(target, target_at)
                else:
                    stack += [(node, at, True), (target, target_at, False)]
            elif type(node) is list and node and type(node[0]) is str:
                if done:
                    own = _element_bytes(node)
                    sizes[key] = min(cap + 1, own + sum(size_of(child, at) for child in node[2:]))
                else:
                    stack.append((node, at, True))
                    stack.extend((child, at, False) for child in node[2:])
            else:
                raise SessionFormatError(
                    f"{self.where}: snapshot {at}: a node is neither text, element nor reference"
                )
        return size_of(root, index)

    def nodes(self, index: int) -> list[Any]:
        if index not in self._nodes:
            self._nodes[index] = _post_order(self.raw[index].get("html"), f"{self.where} snapshot {index}")
        return self._nodes[index]


def _element_bytes(node: list[Any]) -> int:
    """An element's own share of the HTML: its tags and attributes (its children are counted apart)."""
    size = 2 * len(node[0]) + 5
    attrs = node[1] if len(node) > 1 and type(node[1]) is dict else {}
    for key, value in attrs.items():
        size += (len(key) if type(key) is str else 0) + (len(value) if type(value) is str else 0) + 4
    return size


def _resolve(frame: _FrameSnapshots, node: Any, index: int) -> tuple[Any, int]:
    """A reference's target node and the snapshot it belongs to; refuses loops and forward refs."""
    ago, number = node[0] if len(node[0]) == 2 else (None, None)
    if type(ago) is not int or type(number) is not int:
        raise SessionFormatError(f"{frame.where}: snapshot {index}: malformed node reference {node!r:.60}")
    if ago <= 0:
        what = "its own snapshot (it could loop)" if ago == 0 else "a later snapshot"
        raise SessionFormatError(
            f"{frame.where}: snapshot {index}: a node reference points at {what}; refused"
        )
    target = index - ago
    if target < 0:
        raise SessionFormatError(
            f"{frame.where}: snapshot {index}: a node reference points {ago} snapshots back, before the frame's first"
        )
    nodes = frame.nodes(target)
    if not 0 <= number < len(nodes):
        raise SessionFormatError(
            f"{frame.where}: snapshot {index}: a node reference names node {number} of snapshot {target}, "
            f"which has {len(nodes)}"
        )
    return nodes[number], target


@dataclass
class _Rendered:
    html: str
    title: str
    typed_values: int
    """Form controls whose live value (typed, checked, selected) differs from the markup's default."""
    form_state: list[FormControlState] = field(default_factory=list)
    """What was typed, checked and selected in the document (not in the markup: a fresh load of the
    page shows the markup's defaults, as live)."""


def _attributes(
    name: str, attrs: dict[str, Any], typed: list[int], *, bake: bool = True
) -> list[tuple[str, str | None]]:
    """The attributes to write: Playwright's own removed; live form state written as markup when
    ``bake`` (inside templates, where form state cannot address a control), else left to form state."""
    out: dict[str, str | None] = {}
    special: dict[str, str] = {}
    for key, value in attrs.items():
        if type(key) is not str or type(value) is not str:
            continue
        if key.startswith("__playwright"):
            special[key] = value
        elif _NAME.match(key):
            out[key] = value
    if name == "INPUT" and "__playwright_value_" in special and (out.get("type") or "").lower() != "file":
        if out.get("value") != special["__playwright_value_"]:
            typed.append(1)
        if bake:
            out["value"] = special["__playwright_value_"]
    if "__playwright_checked_" in special:
        checked = special["__playwright_checked_"] == "true"
        if checked != ("checked" in out):
            typed.append(1)
        if bake:
            out.pop("checked", None)
            if checked:
                out["checked"] = ""
    if name == "OPTION" and "__playwright_selected_" in special:
        selected = special["__playwright_selected_"] == "true"
        if selected != ("selected" in out):
            typed.append(1)
        if bake:
            out.pop("selected", None)
            if selected:
                out["selected"] = ""
    if name == "IMG" and "__playwright_current_src__" in special and "src" not in out:
        out["src"] = special["__playwright_current_src__"]
    if name == "TEMPLATE" and "__playwright_shadow_root_" in special:
        out["shadowrootmode"] = "open"
    return list(out.items())


_LEFT_OUT = re.compile(
    r"<(?:no)?script\b|\bhttp-equiv\b|\brel\s*=\s*[\"']?[^>]*\b(?:preload|prefetch|modulepreload)\b|<iframe\b",
    re.IGNORECASE,
)
"""Markup a trace snapshot leaves out or may leave out (scripts of every type, ``<noscript>``, ``<meta
http-equiv>``, preload links, frames in ``<head>``), looked for in a document's response body."""

_HEAD_FIRST = "HEAD:first"
"""The parent name given to a ``<head>``'s first child while rendering."""


def _snapshotter_base(node: list[Any]) -> bool:
    """Whether ``node`` (the first child of a ``<head>``) is the ``<base href>`` Playwright's snapshotter puts
    first in every ``<head>`` it serializes (``href`` its ``document.baseURI``; the page's own ``<base>``, if
    any, follows it). Every producer version of the trace corpus writes it (1.32.1 to 1.65)."""
    return len(node) == 2 and node[0].upper() == "BASE" and type(node[1]) is dict and set(node[1]) == {"href"}


def render_snapshot_html(
    frame: _FrameSnapshots,
    index: int,
    *,
    max_nodes: int = MAX_RENDERED_NODES,
    max_bytes: int = MAX_RENDERED_BYTES,
    frame_url: Callable[[str], str | None] | None = None,
    live_values: bool = False,
) -> _Rendered:
    """The HTML of snapshot ``index`` of ``frame``, references expanded (iteratively, bounded).

    ``live_values``: the live form state (typed, checked, selected, or set by the page's scripts) is
    written into the markup everywhere, not kept apart as form state: for the evaluator's own pages,
    which the replay serves as a fresh load (markup only), while their snapshot is the state the
    evaluator read there.

    Playwright points an ``<iframe>``'s ``src`` at its own viewer (``/snapshot/<frameId>``); with
    ``frame_url`` (frame id -> the child frame's URL) the frame's URL is written back, so the
    replay finds the child frame's document by it; an unknown frame id loses its ``src``."""
    snapshot = frame.raw[index]
    if frame.expanded_size(index, max_bytes) > max_bytes:
        raise SessionFormatError(
            f"{frame.where}: snapshot {index} expands to more than {max_bytes} bytes (shared subtrees "
            "or texts repeated); refused"
        )
    parts: list[str] = []
    doctype = snapshot.get("doctype")
    if isinstance(doctype, str) and doctype:
        parts.append(f"<!DOCTYPE {re.sub(r'[^A-Za-z0-9]', '', doctype)}>")
    typed: list[int] = []
    title: list[str] = []
    in_title = 0
    emitted = 0
    elements = 0  # elements of the document so far, in the order of querySelectorAll("*")
    in_template = 0
    controls: list[FormControlState] = []
    selects: list[tuple[dict[str, Any], list[tuple[bool, bool, str]]]] = []
    """Open ``<select>``s: the control's fields, and per option (live selected, markup selected, label)."""
    # stack items: ("node", node, snapshot index, parent name) | ("close", name)
    stack: list[tuple[Any, ...]] = [("node", snapshot.get("html"), index, "")]
    while stack:
        item = stack.pop()
        if item[0] == "close":
            parts.append(f"</{item[1]}>")
            closed = item[1].upper()
            if closed == "TITLE":
                in_title -= 1
            elif closed == "TEMPLATE":
                in_template -= 1
            elif closed == "SELECT" and not in_template and selects:
                fields, options = selects.pop()
                if any(live != markup for live, markup, _ in options):
                    chosen = [i for i, (live, _, _) in enumerate(options) if live]
                    controls.append(
                        FormControlState(
                            **fields, selected=chosen, selected_text=[options[i][2] for i in chosen]
                        )
                    )
            continue
        _, node, at, parent = item
        emitted += 1
        if emitted > max_nodes:
            raise SessionFormatError(
                f"{frame.where}: snapshot {index} expands to more than {max_nodes} nodes (shared subtrees "
                "repeated); refused"
            )
        if type(node) is str:
            if parent in ("STYLE",):
                parts.append(node.replace("</", "<\\/"))
            else:
                parts.append(html_lib.escape(node, quote=False))
            if in_title:
                title.append(node)
            continue
        if _is_reference(node):
            target, at = _resolve(frame, node, at)
            stack.append(("node", target, at, parent))
            continue
        if type(node) is not list or not node or type(node[0]) is not str:
            raise SessionFormatError(
                f"{frame.where}: snapshot {index}: a node is neither text, element nor reference"
            )
        name = node[0].upper()
        if name == "SCRIPT" or not _NAME.match(node[0]):
            continue
        if parent == _HEAD_FIRST and _snapshotter_base(node):
            continue  # Playwright's own <base>, not the page's
        attrs = node[1] if len(node) > 1 and type(node[1]) is dict else {}
        if (
            name in ("IFRAME", "FRAME")
            and type(attrs.get("src")) is str
            and attrs["src"].startswith("/snapshot/")
        ):
            attrs = {k: v for k, v in attrs.items() if k != "src"}
            url = frame_url(node[1]["src"].removeprefix("/snapshot/")) if frame_url else None
            if url is not None:
                attrs["src"] = url
        if name == "TEMPLATE" and "__playwright_style_sheet_" in attrs:
            continue  # an adopted stylesheet Playwright serialized; not carried (see the fidelity notes)
        children = node[2:]
        bake = in_template > 0 or live_values
        path = [elements]
        if not bake:
            elements += 1
        plain = {k.lower(): v for k, v in attrs.items() if type(k) is str and type(v) is str}
        identity: dict[str, Any] = {
            "path": path,
            "name": plain.get("name", ""),
            "id": plain.get("id", ""),
            "autocomplete": plain.get("autocomplete", ""),
        }
        if name == "TEXTAREA" and type(attrs.get("__playwright_value_")) is str:
            value = attrs["__playwright_value_"]
            default = "".join(c for c in children if type(c) is str)
            if not (len(children) == 1 and children[0] == value) and (children or value):
                typed.append(1)
            if bake:
                children = [value]
            elif value != default:
                controls.append(FormControlState(tag="textarea", value=value, **identity))
        if not bake and name == "INPUT":
            kind = plain.get("type", "").lower()
            live_value = plain.get("__playwright_value_")
            live_checked = plain.get("__playwright_checked_")
            if kind in ("checkbox", "radio") and live_checked is not None:
                if (live_checked == "true") != ("checked" in plain):
                    controls.append(
                        FormControlState(tag="input", type=kind, checked=live_checked == "true", **identity)
                    )
            elif kind != "file" and live_value is not None and live_value != plain.get("value", ""):
                controls.append(FormControlState(tag="input", type=kind, value=live_value, **identity))
        if not bake and name == "SELECT":
            selects.append(({"tag": "select", **identity}, []))
        if not bake and name == "OPTION" and selects:
            label = " ".join("".join(c for c in children if type(c) is str).split())
            live = plain.get("__playwright_selected_")
            markup = "selected" in plain
            selects[-1][1].append((markup if live is None else live == "true", markup, label))
        if name == "TEMPLATE":
            in_template += 1
        written = [
            f" {key}"
            if value == "" and key in ("checked", "selected")
            else f' {key}="{html_lib.escape(value or "")}"'
            for key, value in _attributes(name, attrs, typed, bake=bake)
        ]
        parts.append(f"<{node[0]}{''.join(written)}>")
        if name in _VOID:
            continue
        if name == "TITLE":
            in_title += 1
        stack.append(("close", node[0]))
        stack.extend(
            ("node", child, at, _HEAD_FIRST if name == "HEAD" and i == 0 else name)
            for i, child in reversed(list(enumerate(children)))
        )
    parts.append(DROPPED_SCRIPTS_MARKER)
    return _Rendered("".join(parts), " ".join("".join(title).split()), len(typed), controls)


# -- the trace's events -------------------------------------------------------------------------


@dataclass
class _Call:
    call_id: str
    cls: str
    method: str
    params: dict[str, Any]
    line: int
    start: float
    page: str | None = None
    error: str | None = None


@dataclass
class _Snapshot:
    line: int
    frame: str
    index: int
    """Position in its frame's snapshot list."""
    page: str
    main: bool
    url: str
    time: float
    call: str
    phase: str
    overrides: list[dict[str, Any]]


@dataclass
class _Navigation:
    """A commit in a page's frame (format 4 records them: ``Frame.navigated``, upgraded)."""

    line: int
    url: str
    new_document: bool
    main: bool | None
    """The page's main frame navigated (False: a child frame; None: the trace does not tell)."""


@dataclass
class _Page:
    page_id: str
    opened: int
    closed: int | None = None
    calls: list[_Call] = field(default_factory=list)


@dataclass
class _Trace:
    source: str
    reader: ZipReader
    calls: list[_Call] = field(default_factory=list)
    by_id: dict[str, _Call] = field(default_factory=dict)
    snapshots: list[_Snapshot] = field(default_factory=list)
    frames: dict[str, _FrameSnapshots] = field(default_factory=dict)
    pages: dict[str, _Page] = field(default_factory=dict)
    network: list[dict[str, Any]] = field(default_factory=list)
    wall0: float = 0.0
    mono0: float = 0.0
    tool: str | None = None
    lines: int = 0
    held: Budget | None = None
    """What parsed events and rendered pages hold in memory (``max_expanded_bytes``)."""
    format: int = LATEST_FORMAT
    """The format the trace was written in (its events are read upgraded to the newest)."""
    screencasts: dict[str, Screencast] = field(default_factory=dict)
    """Each page's screencast frames (``screenshots=True``)."""
    navigations: dict[str, list[_Navigation]] = field(default_factory=dict)
    """Each page's navigations of a main or unknown frame, in trace order (format 4 only)."""

    def wall(self, monotonic: float) -> float:
        return self.wall0 + (monotonic - self.mono0) / 1000


def _lines(
    reader: ZipReader, suffix: str, limits: SessionLimits, held: Budget
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events of every ``*<suffix>`` member, one line at a time (``untrusted.iter_lines``), each
    counted before it is parsed against the trace's budgets: JSON values, and what the parsed events
    hold in memory (bytes plus a value's cost per value: the events stay alive while steps are built)."""
    values = Budget(limits.max_values, reader.source, "JSON values in the trace", limit_hint("max_values"))
    for name in sorted(n for n in reader.names() if n.endswith(suffix) and "/" not in n):
        data = reader.read(name)
        where = f"{reader.source}: {name}"
        for number, line in iter_lines(data, max_line=limits.max_record_bytes, source=where):
            if not line.strip():
                continue
            held.spend(len(line) + _VALUE_BYTES * count_values(line), f"{name} line {number}")
            event = parse_json(
                line, f"{where} line {number}", limits, values=values, max_depth=_MAX_EVENT_DEPTH
            )
            if type(event) is not dict:
                raise SessionFormatError(f"{reader.source}: {name} line {number}: not a JSON object")
            yield name, event
        del data


_MAX_EVENT_DEPTH = 1000
"""Snapshot nodes nest as deep as the page's DOM; rendered iteratively, never written back as JSON."""
_VALUE_BYTES = 64
"""What one parsed JSON value costs at most beyond its text (as ``session.store`` counts it)."""


def _number(value: Any, default: float = 0.0) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _members(
    reader: ZipReader, limits: SessionLimits, held: Budget
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The browser context's ``*.trace`` member(s), upgraded to the newest format (`trace_formats`).

    ``@playwright/test`` writes one member per context (``<n>-trace.trace``) and its own steps
    (``test.trace``): the runner's steps and contexts with no event (its API request context) are
    not the browser's. Two browser contexts with events are refused (one episode is one context)."""
    by_member: dict[str, list[dict[str, Any]]] = {}
    for count, (name, event) in enumerate(_lines(reader, ".trace", limits, held), 1):
        if count > limits.max_records * 10:
            raise SessionFormatError(f"{reader.source}: more than {limits.max_records * 10} trace events")
        by_member.setdefault(name, []).append(event)
    members: list[tuple[str, list[dict[str, Any]]]] = []
    for name, events in by_member.items():
        version, upgraded = upgrade_events(events, f"{reader.source}: {name}")
        if upgraded[0].get("origin") == "testRunner" or len(upgraded) == 1:
            continue
        upgraded[0]["_format"] = version
        members.append((name, upgraded))
    if len(members) > 1:
        raise SessionFormatError(
            f"{reader.source}: the trace holds {len(members)} browser contexts "
            f"({', '.join(n for n, _ in members)}); one episode is one context"
        )
    return members


def _read_trace(reader: ZipReader, limits: SessionLimits) -> _Trace:
    held = Budget(
        limits.max_expanded_bytes,
        reader.source,
        "bytes of parsed events and rendered pages",
        limit_hint("max_expanded_bytes"),
    )
    trace = _Trace(source=reader.source, reader=reader, held=held)
    if not any(n.endswith(".trace") and "/" not in n for n in reader.names()):
        raise SessionFormatError(f"{reader.source}: not a Playwright trace (no trace.trace member)")
    members = _members(reader, limits, held)
    for event in (event for _, events in members for event in events):
        trace.lines += 1
        if trace.lines > limits.max_records * 10:
            raise SessionFormatError(f"{reader.source}: more than {limits.max_records * 10} trace events")
        kind = event.get("type")
        line = trace.lines
        if kind == "context-options":
            trace.wall0 = _number(event.get("wallTime")) / 1000
            trace.mono0 = _number(event.get("monotonicTime"))
            trace.format = int(event.get("_format", LATEST_FORMAT))
            version = _text(event.get("playwrightVersion"))
            trace.tool = f"playwright {version}".strip() if version else "playwright"
            trace.tool += f" (trace format {trace.format})"
        elif kind == "before":
            params = _obj(event.get("params"))
            call = _Call(
                call_id=_text(event.get("callId")),
                cls=_text(event.get("class")),
                method=_text(event.get("method")),
                params=params,
                line=line,
                start=_number(event.get("startTime")),
            )
            if isinstance(event.get("pageId"), str):
                call.page = event["pageId"]
            trace.calls.append(call)
            trace.by_id[call.call_id] = call
        elif kind == "after":
            call_after = trace.by_id.get(_text(event.get("callId")))
            if call_after is not None and isinstance(event.get("error"), dict):
                call_after.error = _text(event["error"].get("message")) or "error"
        elif kind == "screencast-frame":
            page_id, member = _text(event.get("pageId")), event.get("file")
            if page_id and isinstance(member, str):
                trace.screencasts.setdefault(page_id, Screencast()).add(
                    _number(event.get("timestamp")), member
                )
        elif kind == "frame-snapshot":
            raw = event.get("snapshot")
            if not isinstance(raw, dict):
                raise SessionFormatError(
                    f"{reader.source}: trace event {line}: frame-snapshot without a snapshot"
                )
            frame_id, page_id = _text(raw.get("frameId")), _text(raw.get("pageId"))
            frame = trace.frames.setdefault(
                frame_id, _FrameSnapshots(where=f"{reader.source}: frame {frame_id[-12:]}")
            )
            frame.raw.append(raw)
            call_id = _text(raw.get("callId"))
            snapshot = _Snapshot(
                line=line,
                frame=frame_id,
                index=len(frame.raw) - 1,
                page=page_id,
                main=raw.get("isMainFrame") is not False,
                url=_text(raw.get("frameUrl")),
                time=_number(raw.get("timestamp")),
                call=call_id,
                phase=_text(raw.get("phase")),
                overrides=[o for o in raw.get("resourceOverrides") or [] if isinstance(o, dict)],
            )
            trace.snapshots.append(snapshot)
            owner = trace.by_id.get(call_id)
            if owner is not None and owner.page is None and snapshot.main:
                owner.page = page_id
            trace.pages.setdefault(page_id, _Page(page_id, opened=0))
        elif kind == "event" and event.get("class") == "Frame" and event.get("method") == "navigated":
            params = _obj(event.get("params"))
            main = params.get("isMainFrame")
            if isinstance(event.get("pageId"), str) and main is not False:
                trace.navigations.setdefault(event["pageId"], []).append(
                    _Navigation(
                        line=line,
                        url=_text(params.get("url")),
                        new_document=params.get("newDocument") is True,
                        main=main if isinstance(main, bool) else None,
                    )
                )
        elif kind == "event" and event.get("class") == "BrowserContext":
            params = _obj(event.get("params"))
            page_id = _text(params.get("pageId"))
            if event.get("method") == "page" and page_id:
                trace.pages.setdefault(page_id, _Page(page_id, opened=line))
            elif event.get("method") == "pageClosed" and page_id in trace.pages:
                trace.pages[page_id].closed = line
    prefixes = {name.removesuffix("trace.trace") for name, _ in members}
    network = [
        e
        for name, e in _lines(reader, ".network", limits, held)
        if name.removesuffix("trace.network") in prefixes
    ]
    for event in upgrade_network(network):
        entry = event.get("snapshot")
        if event.get("type") == "resource-snapshot" and isinstance(entry, dict):
            trace.network.append(entry)
    trace.network.sort(key=lambda e: _number(e.get("_monotonicTime")))
    for call in trace.calls:
        if call.page in trace.pages:
            trace.pages[call.page].calls.append(call)
    return trace


# -- trace -> steps -----------------------------------------------------------------------------


def _evaluator_pages(trace: _Trace) -> set[str]:
    """Pages opened and closed with nothing but navigation and reads: the live evaluator's tabs."""
    return {
        page.page_id
        for page in trace.pages.values()
        if page.closed is not None
        and page.opened > 0
        and page.calls
        and all(call.method in _EVALUATOR_PAGE_METHODS for call in page.calls)
    }


def _headers(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        return []
    return [
        (item["name"], item["value"])
        for item in raw
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)
    ]


def _joined(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Header names lower-cased, as the capture stores them (readers look ``content-type`` up so),
    repeated headers joined by newlines."""
    out: dict[str, str] = {}
    for name, value in headers:
        name = name.lower()
        out[name] = f"{out[name]}\n{value}" if name in out else value
    return out


def _body(trace: _Trace, content: dict[str, Any], mime: str) -> tuple[str | None, bool]:
    member = content.get("_file") or (
        f"resources/{content['_sha1']}" if isinstance(content.get("_sha1"), str) else None
    )
    if isinstance(content.get("text"), str):
        return content["text"], content.get("encoding") == "base64"
    if not isinstance(member, str) or not trace.reader.has(member):
        return None, False
    if not _TEXT_MIME.match(mime.lower()):
        return None, False
    data = trace.reader.read(member, MAX_BODY_BYTES)
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return None, False


def _post_body(trace: _Trace, post: dict[str, Any]) -> tuple[str | None, bool]:
    """A request's body: Playwright keeps it in a resource (``postData._file`` / ``_sha1``, with
    ``text`` empty); ``text`` or, for a form, its ``params`` otherwise. Bounded like a response body;
    bytes that are not UTF-8 are kept as base64."""
    member = post.get("_file") or (
        f"resources/{post['_sha1']}" if isinstance(post.get("_sha1"), str) else None
    )
    if isinstance(member, str) and trace.reader.has(member):
        data = trace.reader.read(member, MAX_BODY_BYTES)
        try:
            return data.decode("utf-8"), False
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii"), True
    if _text(post.get("text")):
        return post["text"], False
    params = post.get("params")
    if isinstance(params, list) and params:
        pairs = [
            (p["name"], p["value"])
            for p in params
            if isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("value"), str)
        ]
        return urlencode(pairs), False
    return None, False


def _started(entry: dict[str, Any], trace: _Trace) -> float:
    text = _text(entry.get("startedDateTime"))
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return trace.wall(_number(entry.get("_monotonicTime")))


def _exchange(trace: _Trace, number: int, entry: dict[str, Any], evaluator: set[str]) -> NetworkExchange:
    request = _obj(entry.get("request"))
    response = _obj(entry.get("response"))
    content = _obj(response.get("content"))
    post = _obj(request.get("postData"))
    request_headers = _joined(_headers(request.get("headers")))
    mime = _text(content.get("mimeType"))
    body, body_base64 = _body(trace, content, mime)
    post_data, post_base64 = _post_body(trace, post) if post else (None, False)
    page = _text(entry.get("pageref")) or None
    status = int(_number(response.get("status"), -1))
    return NetworkExchange(
        request_id=f"trace-{number}",
        tab_id=page,
        origin="evaluator" if page in evaluator else "agent",
        source="playwright",
        started=_started(entry, trace),
        duration_ms=_number(entry.get("time"), -1),
        request=RequestInfo(
            method=_text(request.get("method")) or "GET",
            url=_text(request.get("url")),
            headers=request_headers,
            headers_source="wire" if "accept" in request_headers else "devtools",
            post_data=post_data,
            post_data_base64=post_base64,
            resource_type=_RESOURCE_TYPES.get(_text(entry.get("_resourceType")), "Other"),
        ),
        response=None
        if status <= 0
        else ResponseInfo(
            status=status,
            status_text=_text(response.get("statusText")),
            headers=_joined(_headers(response.get("headers"))),
            mime_type=mime.split(";")[0].strip(),
            redirect_url=_text(response.get("redirectURL")) or None,
            body=body,
            body_base64=body_base64,
        ),
    )


def _origin(url: str) -> tuple[str, str | None, int | None] | None:
    """(scheme, host, port) of an http(s) URL, else None (about:, data:, blob: frames)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https"):
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _is_document(entry: dict[str, Any]) -> bool:
    response = _obj(entry.get("response"))
    status = int(_number(response.get("status"), -1))
    return entry.get("_resourceType") == "document" and 200 <= status < 300


def _action_text(call: _Call) -> str:
    params = call.params
    arg = params.get("selector") or params.get("url") or params.get("key") or params.get("text")
    parts = [repr(arg)] if isinstance(arg, str) else []
    if call.method in ("fill", "type") and isinstance(params.get("value"), str):
        parts.append(repr(params["value"]))
    if call.method == "selectOption" and params.get("options") is not None:
        parts.append(orjson.dumps(params["options"]).decode()[:200])
    return f"{call.method}({', '.join(parts)})"


_LOADED_AFTER = "the DOM of a page loaded after the trace's last snapshot of it"
_NAVIGATED_AFTER = "the DOM of a page after a same-document navigation the trace has no later snapshot of"
_MOVES_BY_ITSELF = (
    "the URL and DOM of a page that changes its URL by itself (between calls, without a document "
    "load), after the trace's last snapshot of it: this trace format records no same-document navigation"
)
_UNKNOWN_FRAME = (
    "the URL of a page after a same-document navigation in a frame the trace does not name (a page "
    "with child frames), with no later snapshot"
)


@dataclass
class _Newer:
    """What a page did after its last snapshot: its URL since, why its DOM is unknown, and whether
    the URL itself is known."""

    url: str
    lack: str
    url_known: bool


@dataclass
class _MainIndex:
    """Main-frame snapshots in trace order, with the latest per page before ``line`` (``done`` of
    them taken up) and by call id: what ``_Builder._latest`` reads per step in constant time."""

    mains: list[_Snapshot]
    by_call: dict[str, list[_Snapshot]] = field(default_factory=dict)
    prefix: dict[str, _Snapshot] = field(default_factory=dict)
    done: int = 0
    line: int = 0

    def __post_init__(self) -> None:
        for snapshot in self.mains:
            if snapshot.phase == "before":
                self.by_call.setdefault(snapshot.call, []).append(snapshot)

    def reset(self) -> None:
        self.prefix, self.done, self.line = {}, 0, 0


class _Builder:
    """Walks the trace once, building the state at each step boundary."""

    def __init__(self, trace: _Trace, limits: SessionLimits) -> None:
        self.limits = limits
        self.trace = trace
        self.evaluator = _evaluator_pages(trace)
        self.jar = CookieJar()
        self.network_done = 0
        self.resources_seen: set[str] = set()
        self.rendered: dict[tuple[str, int, bool], _Rendered] = {}
        self.screenshots: dict[str, str | None] = {}
        """Screencast frame member -> its PNG (each frame decoded once)."""
        self.lacks: set[str] = set()
        self.tabs: dict[str, tuple[tuple[Any, ...], tuple[TabState, bool]]] = {}
        """Page id -> what its last tab state was built from, and that state (reused while unchanged)."""
        self.final_url_known = True
        """The URL of the agent's current tab at the trace's end is known (``ImportedEpisode``)."""
        self.siblings: dict[tuple[str, str, str], dict[str, _Snapshot]] = {}
        """(page, call, phase) -> child frame id -> its snapshot taken with that page snapshot."""
        self.frame_history: dict[str, tuple[list[int], list[str]]] = {}
        """Child frame id -> the trace lines and URLs of its snapshots, in order."""
        self._main_index = _MainIndex([s for s in trace.snapshots if s.main])
        self._documents: dict[
            tuple[str, str | None], tuple[list[float], list[tuple[int, dict[str, Any]]]]
        ] = {}
        """(page id, frame id: "" for none, None for any) -> times and (order, entry) of its document
        loads, in the (time-sorted) network log's order."""
        for order, entry in enumerate(trace.network):
            page = entry.get("pageref")
            if not _is_document(entry) or not isinstance(page, str):
                continue
            frame = entry.get("_frameref")
            keys = (
                [(page, None), (page, frame if isinstance(frame, str) else "")]
                if frame is None or isinstance(frame, str)
                else [(page, None)]
            )
            for key in keys:
                times, loads = self._documents.setdefault(key, ([], []))
                times.append(_number(entry.get("_monotonicTime")))
                loads.append((order, entry))
        self._navigation_index: dict[str, tuple[list[int], list[_Navigation], list[int]]] = {}
        """Page -> the lines and navigations of its main frame, and the lines of its navigations in
        a frame the trace does not name."""
        for page_id, navigations in trace.navigations.items():
            mains = [n for n in navigations if n.main]
            unknown = [n.line for n in navigations if n.main is None]
            self._navigation_index[page_id] = ([n.line for n in mains], mains, unknown)
        self._main_times: dict[str, tuple[list[float], list[str]]] = {}
        """Page -> the times and URLs of its main-frame snapshots, by time."""
        self._load_finish: dict[str, list[float]] = {}
        """Page -> for each of its document loads (by start), the latest finish of the loads so far."""
        self._moves_by_itself: set[str] = set()
        """Pages whose URL changed between two calls' snapshots with no document load between them
        (a router that updates the URL later than the action), in a trace that records no navigation."""
        last_main: dict[str, _Snapshot] = {}
        for snapshot in sorted((s for s in trace.snapshots if s.main), key=lambda s: s.time):
            times, urls = self._main_times.setdefault(snapshot.page, ([], []))
            times.append(snapshot.time)
            urls.append(snapshot.url)
            before = last_main.get(snapshot.page)
            last_main[snapshot.page] = snapshot
            if (
                not trace.navigations
                and before is not None
                and before.call != snapshot.call
                and before.url != snapshot.url
                and snapshot.page not in self.evaluator
                and not self._loaded_between(snapshot.page, before.time, snapshot.time)
            ):
                self._moves_by_itself.add(snapshot.page)
        for snapshot in trace.snapshots:
            if not snapshot.main:
                self.siblings.setdefault((snapshot.page, snapshot.call, snapshot.phase), {})[
                    snapshot.frame
                ] = snapshot
                lines, urls = self.frame_history.setdefault(snapshot.frame, ([], []))
                lines.append(snapshot.line)
                urls.append(snapshot.url)

    def _render(self, snapshot: _Snapshot, live_values: bool = False) -> _Rendered:
        key = (snapshot.frame, snapshot.index, live_values)
        if key not in self.rendered:
            rendered = render_snapshot_html(
                self.trace.frames[snapshot.frame],
                snapshot.index,
                frame_url=lambda frame_id: self._frame_url(snapshot, frame_id),
                live_values=live_values,
            )
            if self._nothing_dropped(snapshot):
                rendered = dataclasses.replace(
                    rendered, html=rendered.html.removesuffix(DROPPED_SCRIPTS_MARKER)
                )
            self.rendered[key] = rendered
            if self.trace.held is not None:
                self.trace.held.spend(len(self.rendered[key].html), f"snapshot {snapshot.index}")
        return self.rendered[key]

    def _nothing_dropped(self, snapshot: _Snapshot) -> bool:
        """Whether the snapshot's document, as its server sent it (the trace's response body for the
        snapshot's URL), holds nothing Playwright's snapshot leaves out and nothing that runs a script
        (which could have added such elements): then the rebuilt markup is the live page's whole, and
        needs no marker. Unknown (no body, another URL) keeps the marker."""
        load = self._last_document(snapshot.page, snapshot, snapshot.time)
        if load is None:
            return False
        request, response = _obj(load.get("request")), _obj(load.get("response"))
        if urlsplit(_text(request.get("url")))._replace(fragment="") != urlsplit(snapshot.url)._replace(
            fragment=""
        ):
            return False
        content = _obj(response.get("content"))
        body, base64_encoded = _body(self.trace, content, _text(content.get("mimeType")))
        if body is None or base64_encoded:
            return False
        return _LEFT_OUT.search(body) is None and captured_scripts(body) is None

    def _latest(self, limit_line: int, extra_call: str | None) -> dict[str, _Snapshot]:
        """Each page's last main-frame snapshot before ``limit_line`` (plus the "before" snapshot of
        ``extra_call``, the state right before the next action). Indexed: the snapshots before the
        line are taken up once over all steps (lines only grow), the call's from its own list."""
        index = self._main_index
        if limit_line < index.line:  # asked out of order: start over (never with growing lines)
            index.reset()
        mains = index.mains
        while index.done < len(mains) and mains[index.done].line < limit_line:
            index.prefix[mains[index.done].page] = mains[index.done]
            index.done += 1
        index.line = limit_line
        latest = dict(index.prefix)
        for snapshot in index.by_call.get(extra_call, []) if extra_call is not None else []:
            if snapshot.line >= limit_line:  # the ones before are in the prefix already, in order
                latest[snapshot.page] = snapshot
        return latest

    def _tab(
        self,
        page_id: str,
        snapshot: _Snapshot | None,
        until: float,
        active: bool,
        limit_line: int,
        *,
        probe: bool = False,
    ) -> tuple[TabState, bool]:
        """The page's state at a step's end (``until``, trace line ``limit_line``) from its last
        main-frame snapshot, and whether its URL is known. A snapshot the page moved on from (a
        navigation or document load it does not show) leaves the tab its newer URL and no DOM.

        The same object as at the previous step when nothing of it changed, so a trace of many open
        pages costs its pages plus a pointer per page and step, not a copy of every open page at every
        step."""
        newer = self._newer(page_id, snapshot, until, limit_line)
        fresh = snapshot is None or newer is not None
        shot_at = until if fresh or until != float("inf") else snapshot.time  # type: ignore[union-attr]
        screencast = self.trace.screencasts.get(page_id)
        member = screencast.at(shot_at) if screencast is not None else None
        key = (
            snapshot.line if snapshot is not None else None,
            (newer.url, newer.lack, newer.url_known) if newer is not None else None,
            active,
            probe,
            member,
        )
        known = self.tabs.get(page_id)
        if known is not None and known[0] == key:
            if newer is not None:
                self.lacks.add(newer.lack)
            return known[1]
        built = self._new_tab(page_id, snapshot, newer, active, member, probe=probe)
        self.tabs[page_id] = (key, built)
        return built

    def _new_tab(
        self,
        page_id: str,
        snapshot: _Snapshot | None,
        newer: _Newer | None,
        active: bool,
        member: str | None,
        *,
        probe: bool,
    ) -> tuple[TabState, bool]:
        if snapshot is None or newer is not None:
            if newer is not None:
                self.lacks.add(newer.lack)
            tab = TabState(
                tab_id=page_id,
                url=newer.url if newer is not None else "about:blank",
                title="",
                active=active,
                html=None,
                screenshot_png=self._screenshot(member),
            )
            return tab, newer is None or newer.url_known
        rendered = self._render(snapshot, live_values=probe)
        return TabState(
            tab_id=page_id,
            url=snapshot.url,
            title=rendered.title,
            active=active,
            html=rendered.html,
            form_state=rendered.form_state,
            frames=self._child_frames(snapshot),
            screenshot_png=self._screenshot(member),
        ), True

    def _newer(
        self, page_id: str, snapshot: _Snapshot | None, until: float, limit_line: int
    ) -> _Newer | None:
        """What the page's main frame did by the step's end that ``snapshot`` does not show, or None.

        Format 4 records each commit (``Frame.navigated``): the snapshot shows the page when it was
        taken after the main frame's last navigation and has its URL (a snapshot taken while a click's
        navigation was still in flight has the old URL). A same-document navigation of a frame the
        trace does not name, after the snapshot, leaves the URL unknown. Later formats record only
        document loads (``_newer_load``); same-document navigations after the last snapshot are not
        recorded there at all."""
        navigations = self.trace.navigations.get(page_id)
        if not navigations:
            newer = self._newer_load(page_id, snapshot, until)
            if (
                newer is None
                and snapshot is not None
                and until == float("inf")
                and page_id in self._moves_by_itself
            ):
                # Its URL may have changed again after the last snapshot; no event would show it.
                return _Newer(snapshot.url, _MOVES_BY_ITSELF, False)
            return newer
        line = max(limit_line, snapshot.line + 1) if snapshot is not None else limit_line
        main_lines, mains, unknown_lines = self._navigation_index[page_id]
        at = bisect.bisect_left(main_lines, line) - 1
        last = mains[at] if at >= 0 else None
        at_unknown = bisect.bisect_left(unknown_lines, line) - 1
        seen = max(snapshot.line if snapshot is not None else 0, last.line if last is not None else 0)
        url_known = not (at_unknown >= 0 and unknown_lines[at_unknown] > seen)
        if last is not None and (snapshot is None or last.line > snapshot.line or last.url != snapshot.url):
            lack = _LOADED_AFTER if last.new_document else _NAVIGATED_AFTER
            return _Newer(last.url, lack, url_known)
        if not url_known:
            return _Newer(snapshot.url if snapshot is not None else "about:blank", _UNKNOWN_FRAME, False)
        return self._newer_load(page_id, snapshot, until) if last is None else None

    def _newer_load(self, page_id: str, snapshot: _Snapshot | None, until: float) -> _Newer | None:
        """The page's last document load by ``until`` when ``snapshot`` does not show it: the snapshot
        was taken before the response could commit, or it has another URL while taken before the
        load finished or still has the URL the page had before the load (it raced the navigation)."""
        reach = max(until, snapshot.time) if snapshot is not None else until
        load = self._last_document(page_id, snapshot, reach)
        if load is None:
            return None
        url = _text(_obj(load.get("request")).get("url"))
        newer = _Newer(url, _LOADED_AFTER, True)
        if snapshot is None:
            return newer
        started = _number(load.get("_monotonicTime"))
        timings = _obj(load.get("timings"))
        responded = started + sum(
            max(0.0, _number(timings.get(part))) for part in ("blocked", "dns", "connect", "send", "wait")
        )
        finished = started + max(0.0, _number(load.get("time")))
        if snapshot.time < responded:
            return newer
        if urldefrag(snapshot.url).url != url and (
            snapshot.time < finished
            or (
                self._url_before(page_id, started) == snapshot.url
                and not self._shown_between(page_id, started, snapshot.time, url)
            )
        ):
            return newer
        return None

    def _loaded_between(self, page_id: str, start: float, end: float) -> bool:
        """Whether a document load of the page was under way between ``start`` and ``end``: started by
        ``end`` and finished at ``start`` or later (a snapshot that raced a load is still before it)."""
        times, loads = self._documents.get((page_id, None), ([], []))
        at = bisect.bisect_right(times, end) - 1
        if at < 0:
            return False
        finished = self._load_finish.get(page_id)
        if finished is None:  # the latest finish among the loads started so far, per load
            finished, latest = [], float("-inf")
            for started, (_order, entry) in zip(times, loads, strict=True):
                latest = max(latest, started + max(0.0, _number(entry.get("time"))))
                finished.append(latest)
            self._load_finish[page_id] = finished
        return finished[at] >= start

    def _shown_between(self, page_id: str, start: float, end: float, url: str) -> bool:
        """Whether a main-frame snapshot of the page taken in ``[start, end)`` shows ``url``: the load of
        ``url`` committed before ``end``, so a later snapshot with the URL the page had before it is a
        navigation since (back to ``about:blank``), not a snapshot that raced the load."""
        times, urls = self._main_times.get(page_id, ([], []))
        first, last = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
        loaded = urldefrag(url).url  # a request's URL has no fragment; the page's may
        return any(urldefrag(shown).url == loaded for shown in urls[first:last])

    def _url_before(self, page_id: str, time: float) -> str | None:
        """The URL of the page's last main-frame snapshot taken before ``time``."""
        times, urls = self._main_times.get(page_id, ([], []))
        at = bisect.bisect_left(times, time) - 1
        return urls[at] if at >= 0 else None

    def _last_document(self, page_id: str, snapshot: _Snapshot | None, until: float) -> dict[str, Any] | None:
        """The page's last document load at or before ``until`` (of ``snapshot``'s frame or of no
        frame); found by bisection in per-page, per-frame lists."""
        keys = [(page_id, None)] if snapshot is None else [(page_id, ""), (page_id, snapshot.frame)]
        best: tuple[float, int, dict[str, Any]] | None = None
        for key in keys:
            times, loads = self._documents.get(key, ([], []))
            at = bisect.bisect_right(times, until) - 1
            if at >= 0:
                order, entry = loads[at]
                if best is None or (times[at], order) > (best[0], best[1]):
                    best = (times[at], order, entry)
        return best[2] if best is not None else None

    def _screenshot(self, member: str | None) -> str | None:
        """A screencast frame (the page's last one painted at or before the next action's start; at
        the end, the last snapshot's time) as PNG (`trace_screencast`), each decoded once."""
        if member is None:
            return None
        if member not in self.screenshots:
            self.screenshots[member] = frame_png(self.trace.reader, member, self.lacks)
        return self.screenshots[member]

    def _frame_url(self, snapshot: _Snapshot, frame_id: str) -> str | None:
        """The URL of child frame ``frame_id`` as of ``snapshot``: its sibling snapshot (same call and
        phase), else its last snapshot before ``snapshot``. Indexed: a trace's iframes cost a lookup each."""
        sibling = self.siblings.get((snapshot.page, snapshot.call, snapshot.phase), {}).get(frame_id)
        if sibling is not None and snapshot.call:
            return sibling.url
        lines, urls = self.frame_history.get(frame_id, ([], []))
        position = bisect.bisect_right(lines, snapshot.line)
        return urls[position - 1] if position else None

    def _child_frames(self, main: _Snapshot) -> list[FrameState]:
        """The same-origin child frames Playwright snapshotted with ``main`` (one ``frame-snapshot``
        per frame, same call and phase). Cross-origin ones are left out, as the capture leaves them:
        the page's scripts cannot read them live, so the replay must not either."""
        if not main.call:
            return []
        origin = _origin(main.url)
        frames: list[FrameState] = []
        for snapshot in self.siblings.get((main.page, main.call, main.phase), {}).values():
            if _origin(snapshot.url) == origin:
                frames.append(FrameState(url=snapshot.url, html=self._render(snapshot).html))
            elif _origin(snapshot.url) is not None:
                self.lacks.add("cross-origin child frames (left out, as the capture leaves them out)")
        return frames

    def _traffic(self, until: float) -> tuple[list[NetworkExchange], list[PageResource]]:
        exchanges: list[NetworkExchange] = []
        resources: list[PageResource] = []
        network = self.trace.network
        while (
            self.network_done < len(network)
            and _number(network[self.network_done].get("_monotonicTime")) <= until
        ):
            entry = network[self.network_done]
            exchange = _exchange(self.trace, self.network_done, entry, self.evaluator)
            self.network_done += 1
            exchanges.append(exchange)
            cookie = exchange.request.headers.get("cookie")
            if cookie:
                self.jar.sent(exchange.request.url, cookie.split("\n")[0])
            response = exchange.response
            if response is not None:
                for name, value in _headers(_obj(entry.get("response")).get("headers")):
                    if name.lower() == "set-cookie":
                        for line in value.split("\n"):
                            self.jar.set(exchange.request.url, line, exchange.started)
                if (
                    exchange.request.resource_type == "Stylesheet"
                    and response.body is not None
                    and exchange.request.url not in self.resources_seen
                ):
                    self.resources_seen.add(exchange.request.url)
                    resources.append(
                        PageResource(
                            url=exchange.request.url,
                            type="Stylesheet",
                            mime_type=response.mime_type or "text/css",
                            body=response.body,
                        )
                    )
        return exchanges, resources

    def _overrides(self, snapshots: list[_Snapshot]) -> list[PageResource]:
        """Stylesheets whose content the snapshot took from the CSSOM (``resourceOverrides`` by sha1)."""
        found: list[PageResource] = []
        for snapshot in snapshots:
            for override in snapshot.overrides:
                url, member = override.get("url"), override.get("file")
                if not isinstance(url, str) or not isinstance(member, str) or url in self.resources_seen:
                    continue
                if not self.trace.reader.has(member):
                    continue
                try:
                    body = self.trace.reader.read(member, MAX_BODY_BYTES).decode("utf-8")
                except UnicodeDecodeError:
                    continue
                self.resources_seen.add(url)
                found.append(PageResource(url=url, type="Stylesheet", mime_type="text/css", body=body))
        return found

    def steps(self) -> tuple[list[Step], list[NetworkExchange], list[TabState]]:
        trace = self.trace
        actions = [c for c in trace.calls if c.method in ACTION_METHODS and c.page not in self.evaluator]
        if not actions and not trace.snapshots:
            raise SessionFormatError(f"{trace.source}: the trace holds no page snapshot and no action")
        # boundaries: before the first action, then after each one (until the next one starts)
        boundaries: list[tuple[_Call | None, _Call | None]] = [(None, actions[0] if actions else None)]
        boundaries += [
            (action, actions[i + 1] if i + 1 < len(actions) else None) for i, action in enumerate(actions)
        ]
        if not actions:
            boundaries = [(None, None)]
        steps: list[Step] = []
        active_page = next((a.page for a in actions if a.page), None)
        url_known = True
        # Every step holds a tab state per open page: bounded like steps, or a few KB of trace that
        # opens a page per action would make a session of pages x actions tabs.
        tab_states = 0
        for number, (done, upcoming) in enumerate(boundaries):
            if done is not None and done.page:
                active_page = done.page
            limit_line = upcoming.line if upcoming is not None else trace.lines + 1
            until = upcoming.start if upcoming is not None else float("inf")
            latest = self._latest(limit_line, upcoming.call_id if upcoming else None)
            open_pages = [
                page
                for page in trace.pages.values()
                if page.page_id not in self.evaluator
                and page.opened < limit_line
                and (page.closed is None or page.closed > limit_line)
            ]
            tab_states += len(open_pages)
            if tab_states > self.limits.max_steps:
                raise SessionFormatError(
                    f"{trace.source}: step {number}: more than {self.limits.max_steps} tab states "
                    f"(open pages summed over the steps, {len(open_pages)} open here; "
                    f"{limit_hint('max_steps')}); refused"
                )
            active_page, source = _current_tab(open_pages, active_page, done, upcoming)
            tabs: list[TabState] = []
            for p in open_pages:
                tab, known = self._tab(
                    p.page_id, latest.get(p.page_id), until, p.page_id == active_page, limit_line
                )
                tabs.append(tab)
                if p.page_id == active_page:
                    url_known = known
            network, resources = self._traffic(until) if upcoming is not None else ([], [])
            resources += self._overrides([latest[p.page_id] for p in open_pages if p.page_id in latest])
            active = next((t for t in tabs if t.active), tabs[0] if tabs else None)
            when = (
                latest[active.tab_id].time
                if active and active.tab_id in latest
                else (done.start if done else trace.mono0)
            )
            steps.append(
                Step(
                    index=number,
                    trigger="reset" if done is None else "action",
                    action=None if done is None else _action_text(done),
                    timestamp=trace.wall(when),
                    url=active.url if active else "about:blank",
                    title=active.title if active else "",
                    tabs=tabs,
                    cookies=self.jar.cookies(),
                    network=network,
                    resources=resources,
                    current_tab_source=source if tabs else None,
                )
            )
        self.final_url_known = url_known
        # the rest of the traffic (the last action's and the evaluator's) and the final cookies
        end_network, end_resources = self._traffic(float("inf"))
        last = steps[-1]
        steps[-1] = last.model_copy(
            update={
                "network": [*last.network, *end_network],
                "resources": [*last.resources, *end_resources],
                "cookies": self.jar.cookies(),
            }
        )
        last_action_line = actions[-1].line if actions else 0
        probe_pages = []
        for page_id in sorted(self.evaluator, key=lambda p: trace.pages[p].opened):
            page = trace.pages[page_id]
            if page.opened <= last_action_line:
                continue
            mains = [s for s in trace.snapshots if s.page == page_id and s.main and s.url != "about:blank"]
            if mains:
                probe_pages.append(
                    self._tab(page_id, mains[-1], float("inf"), False, trace.lines + 1, probe=True)[0]
                )
        return steps, [], probe_pages


def _current_tab(
    open_pages: list[_Page], active_page: str | None, done: _Call | None, upcoming: _Call | None
) -> tuple[str | None, CurrentTabSource]:
    """The agent's current tab at a step's end, and how that was decided (``Step.current_tab_source``).

    A trace records which page each call acted in, not which one the agent's harness held current:
    the page of the step's action (``acted``), unless a page opened since (a popup, a new tab) and
    the agent's next action does not say which of them it went on with; at the trace's end, with a
    page opened after the last action began, ``unknown`` (a question about the current tab is then a
    loud miss, never the older tab's answer)."""
    ids = {page.page_id for page in open_pages}
    if active_page not in ids:
        active_page = open_pages[0].page_id if open_pages else None
    if len(open_pages) <= 1:
        return active_page, "only_tab"
    since = done.line if done is not None else 0
    opened = [page.page_id for page in open_pages if page.opened > since and page.page_id != active_page]
    if done is not None and not opened:
        return active_page, "acted"
    if upcoming is not None and upcoming.page in ids:
        return upcoming.page, "acted"
    return active_page, "unknown"


def _task_id(path: Path) -> int | None:
    """``<task_id>.zip`` (WebArena's ``run.py`` naming) gives the task id."""
    return ascii_int(path.name.removesuffix(".zip"))


def import_trace(
    path: Path,
    *,
    limits: SessionLimits | None = None,
    zip_limits: ZipLimits | None = None,
    root: Path | None = None,
) -> ImportedEpisode:
    """One ``trace.zip`` as an episode (task id from a ``<task_id>.zip`` name); ``root``: the folder it
    was found in (a symlink there is refused, not followed)."""
    limits = limits or SessionLimits.from_env()
    with ZipReader(path, zip_limits, root=root) as reader:
        names = list(reader.names())
        trace = _read_trace(reader, limits)
        builder = _Builder(trace, limits)
        steps, end_network, probe_pages = builder.steps()
    lacks = sorted(
        {
            *builder.lacks,
            "script bodies and <script> elements (Playwright drops them)",
            "cookies set by scripts (only Cookie / Set-Cookie headers are recorded)",
            "localStorage and sessionStorage",
            "the agent's final answer (pass --answers)",
        }
    )
    task_id = _task_id(path)
    has_network = any(n.endswith(".network") and "/" not in n for n in names)
    return ImportedEpisode(
        name=str(task_id) if task_id is not None else path.name.removesuffix(".zip"),
        source=str(path),
        steps=steps,
        task_id=task_id,
        answer_text_known=False,
        final_url_known=builder.final_url_known,
        lacks=lacks,
        end_network=end_network,
        probe_pages=probe_pages,
        tool=trace.tool,
        network_missing=None if has_network else "all traffic (the trace has no trace.network member)",
    )


def import_traces(path: Path, **kwargs: Any) -> Iterator[ImportedEpisode]:
    """``path``: a ``trace.zip``, or a directory whose ``*.zip`` files are traces (not recursive)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.endswith(".zip"))
        if not files:
            raise SessionFormatError(f"{path}: no *.zip trace in this directory")
        for file in files:
            yield import_trace(file, root=path, **kwargs)
    else:
        yield import_trace(path, **kwargs)
