"""``cdp-session view``: one self-contained HTML file to step through an episode in any browser, offline.

The file holds the episode as JSON in a ``<script type="application/json">`` and renders a step only
when it is selected, so a long episode opens fast. A step's captured DOM is shown in an
``<iframe sandbox="">`` (no scripts, no forms, no popups) from ``srcdoc``, after ``inert_html``
removed scripts, event handlers and every URL the page could fetch; a Content-Security-Policy that
allows no network at all (the iframe inherits it) is the second fence.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

from cdp_integration.debug.actions import action_target, describe_element
from cdp_integration.debug.diff import StepDiff, diff
from cdp_integration.debug.views import (
    EvaluationSummary,
    end_evaluation,
    form_rows,
    step_requests,
    step_summaries,
    task_text,
)
from cdp_integration.replay.actions import parse_action
from cdp_integration.replay.text import VOID_ELEMENTS, ControlWalk, StateAt, visible_text, word_set
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import FormControlState, Step, TabState
from cdp_integration.session.output import BoundedOutput, iter_json, output_file
from cdp_integration.session.store import Session

__all__ = ["CSP", "InertPage", "Sheets", "episode_data", "inert_html", "render_viewer", "write_viewer"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:"
"""What a captured page may load inside the viewer: inline styles and ``data:`` images, nothing else."""

_VIEWER_CSP = CSP + "; script-src 'unsafe-inline'"
_DROPPED = word_set(
    "script noscript base frame frameset object embed applet portal animate set animatemotion "
    "animatetransform discard"
)
"""Dropped with their content. SVG animation elements can set an ``href`` to ``javascript:``."""
_SAFE_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_SAFE_ATTRIBUTE = re.compile(r"^[a-z_:][a-z0-9_:.-]*$")
_SAFE_REF = re.compile(r"^#?[A-Za-z0-9]{1,32}$")
_RAW_TEXT = frozenset(("style",))
_URL_ATTRIBUTES = word_set(
    "src srcset data poster background action formaction ping xlink:href codebase cite longdesc"
)
_SAFE_BID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_FORM_CSS = "[data-cdp-form]{outline:2px solid #2563eb !important;outline-offset:1px}"


_HIGHLIGHT_CSS = (
    '[bid="BID"]{outline:3px solid #e11d48 !important;outline-offset:2px;'
    "box-shadow:0 0 0 6px rgba(225,29,72,.25) !important}"
)
"""How the element the next action targets is outlined (``BID``: its BrowserGym id, a plain id)."""

Resources = dict[str, str]
"""Absolute URL -> ``data:`` URL (images) or stylesheet text, from response bodies the session kept."""


_IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?["']?([^"')\s;]+)["']?\s*\)?[^;]*;""")


def _inline_imports(
    css: str, css_url: str, resources: Resources, depth: int = 0, seen: set[str] | None = None
) -> str:
    """``css`` with each ``@import`` of a captured sheet replaced by that sheet's text (the viewer's
    CSP lets nothing be fetched); each sheet at most once (a sheet imported again adds no rule of
    its own), at most 4 levels deep."""
    seen = {css_url} if seen is None else seen

    def inline(match: re.Match[str]) -> str:
        url = urldefrag(urljoin(css_url, match.group(1))).url
        imported = resources.get(url)
        if imported is None or imported.startswith("data:") or depth > 4:
            return match.group(0)
        if url in seen:
            return ""
        seen.add(url)
        return _inline_imports(imported, url, resources, depth + 1, seen)

    return _IMPORT.sub(inline, css) if "@import" in css else css


def _style_text(css: str) -> str:
    """CSS that no HTML parser can read markup in, whatever namespace it thinks the ``<style>`` is
    in (inside ``<svg>``/``<math>`` a style's text is parsed as markup): no ``<`` at all (``\\3c``
    is CSS's escape for it)."""
    return css.replace("<", "\\3c ")


@dataclass
class Sheets:
    """The captured stylesheets a viewer file holds, each once: pages refer to them by number.

    ``css[n]``: sheet ``n`` without the ``@import`` rules of captured sheets; ``imports[n]``: the
    numbers of those sheets, in order (the viewer puts each sheet's imports before it, once per page).
    """

    resources: Resources
    css: list[str] = field(default_factory=list)
    imports: list[list[int]] = field(default_factory=list)
    numbers: dict[str, int] = field(default_factory=dict)
    on_new: Callable[[str], None] | None = None

    def number(self, url: str, depth: int = 0) -> int | None:
        if url in self.numbers:
            return self.numbers[url]
        css = self.resources.get(url)
        if css is None or css.startswith("data:") or depth > 4:
            return None
        number = self.numbers[url] = len(self.css)
        self.css.append("")
        self.imports.append([])
        imported: list[int] = []

        def strip(match: re.Match[str]) -> str:
            found = self.number(urldefrag(urljoin(url, match.group(1))).url, depth + 1)
            if found is None:
                return match.group(0)
            if found not in imported:
                imported.append(found)
            return ""

        text = _style_text(_IMPORT.sub(strip, css) if "@import" in css else css)
        if self.on_new is not None:
            self.on_new(text)
        self.css[number], self.imports[number] = text, imported
        return number


def collect_resources(session: Session) -> Resources:
    """Stylesheets and images whose bodies were captured, by URL: the subresources the logger read
    from the page (stylesheets by default), and response bodies (``response_bodies="all"``)."""
    found: Resources = {}
    for step in session.steps:
        for resource in step.resources:
            url = urldefrag(resource.url).url
            if resource.type == "Stylesheet" and not resource.body_base64:
                found.setdefault(url, resource.body)
            elif resource.mime_type.startswith("image/") and resource.mime_type != "image/svg+xml":
                body = (
                    resource.body
                    if resource.body_base64
                    else base64.b64encode(resource.body.encode()).decode()
                )
                found.setdefault(url, f"data:{resource.mime_type};base64,{body}")
    for exchange in (e for position in range(len(session.steps)) for e in session.network_at(position)):
        response = exchange.response
        if response is None or response.body is None or response.status != 200:
            continue
        mime = response.mime_type.lower()
        url = urldefrag(exchange.request.url).url
        if mime == "text/css" and not response.body_base64:
            found[url] = response.body
        elif mime.startswith("image/") and mime != "image/svg+xml":
            data = (
                response.body if response.body_base64 else base64.b64encode(response.body.encode()).decode()
            )
            found[url] = f"data:{mime};base64,{data}"
    return found


class _Inert(HTMLParser):
    def __init__(
        self, base_url: str, resources: Resources, head_extra: str, sheets: Sheets | None = None
    ) -> None:
        super().__init__(convert_charrefs=False)
        self._base = base_url
        self._resources = resources
        self._sheets = sheets
        self._raw: str | None = None
        self._head_extra = head_extra
        self._injected = False
        self._skipping: str | None = None
        self._skip_depth = 0
        self.out: list[str] = []
        self.missing_stylesheets = 0
        self._controls = ControlWalk(())
        self._textarea: str | None = None
        """Inside a changed ``<textarea>``: its typed value, written in place of the default text."""

    def set_form_state(self, controls: Sequence[FormControlState]) -> None:
        """Show ``controls``' state (what was typed, checked, selected) in the copy: controls in the
        document and its shadow roots (frames are not rendered)."""
        self._controls = ControlWalk(controls)

    def _with_state(
        self, tag: str, attrs: list[tuple[str, str | None]], state: StateAt
    ) -> list[tuple[str, str | None]]:
        """``attrs`` showing the control's captured state (a ``value``, ``checked``, ``selected``)."""
        if state.option_selected is not None:
            kept = [(n, v) for n, v in attrs if n.lower() != "selected"]
            return [*kept, ("selected", None)] if state.option_selected else kept
        control = state.control
        if control is None:
            return attrs
        typed = control.value is not None
        dropped = ({"value"} if typed and tag == "input" else set()) | (
            {"checked"} if control.checked is not None else set()
        )
        marked = [(n, v) for n, v in attrs if n.lower() not in dropped]
        if typed and tag == "input":
            marked.append(
                ("value", "•" * len(control.value or "") if control.type == "password" else control.value)
            )
        elif typed:
            self._textarea = control.value
        if control.checked:
            marked.append(("checked", None))
        return [*marked, ("data-cdp-form", None)]

    def _inject(self) -> None:
        if not self._injected:
            self.out.append(self._head_extra)
            self._injected = True

    def _url(self, value: str) -> str:
        return urldefrag(urljoin(self._base, value.strip())).url

    def _attributes(self, tag: str, attrs: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
        kept: list[tuple[str, str | None]] = []
        for name, value in attrs:
            name = name.lower()
            if not _SAFE_ATTRIBUTE.match(name):
                continue
            if name.startswith("on") or name in ("srcdoc", "target", "http-equiv", "integrity", "nonce"):
                continue
            if name == "href" and tag in ("a", "area"):
                kept += [("href", "#"), ("data-href", value)]
            elif name == "src" and tag == "img" and value and not value.startswith("data:"):
                inlined = self._resources.get(self._url(value))
                kept += [("src", inlined)] if inlined else [("data-src", value)]
            elif name in _URL_ATTRIBUTES or name == "href":
                if value and value.startswith("data:image/"):
                    kept.append((name, value))
                else:
                    kept.append((f"data-{name.replace(':', '-')}", value))
            else:
                kept.append((name, value))
        return kept

    @staticmethod
    def _start(tag: str, attrs: list[tuple[str, str | None]]) -> str:
        rendered = "".join(
            f" {name}" if value is None else f' {name}="{html.escape(value, quote=True)}"'
            for name, value in attrs
        )
        return f"<{tag}{rendered}>"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        state = self._controls.start(tag, attrs)
        if self._skipping is not None:
            self._skip_depth += tag == self._skipping
            return
        if not _SAFE_NAME.match(tag):
            return
        if tag not in ("html", "head"):
            self._inject()
        if tag in _DROPPED or (tag == "meta" and any(name.lower() == "http-equiv" for name, _ in attrs)):
            if tag not in VOID_ELEMENTS:
                self._skipping, self._skip_depth = tag, 1
            return
        if tag == "link":
            values = {name.lower(): value or "" for name, value in attrs}
            css_url = self._url(values.get("href", ""))
            css = self._resources.get(css_url)
            if "stylesheet" in values.get("rel", "").lower().split():
                number = self._sheets.number(css_url) if self._sheets is not None else None
                if number is not None:
                    self.out.append(f'<style data-cdp-sheet="{number}"></style>')
                elif css and not css.startswith("data:") and self._sheets is None:
                    css = _inline_imports(css, css_url, self._resources)
                    self.out.append("<style>" + _style_text(css) + "</style>")
                else:
                    self.missing_stylesheets += 1
            return
        if self._controls:
            attrs = self._with_state(tag, attrs, state)
        self.out.append(self._start(tag, self._attributes(tag, attrs)))
        if tag in _RAW_TEXT:
            self._raw = tag
        if tag == "head":
            self._inject()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_ELEMENTS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        self._controls.end(tag)
        if tag == "textarea" and self._textarea is not None:
            self.out.append(html.escape(self._textarea, quote=False))
            self._textarea = None
        if self._skipping is not None:
            self._skip_depth -= tag == self._skipping
            if self._skip_depth <= 0:
                self._skipping = None
            return
        if tag == self._raw:
            self._raw = None
        if tag not in VOID_ELEMENTS and tag != "link" and _SAFE_NAME.match(tag):
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        """Text never holds markup: ``<``, ``>`` and ``&`` escaped (in a style, no ``<`` at all), so
        the output parses into exactly the elements written here, in any namespace (no mXSS)."""
        if self._skipping is None and self._textarea is None:
            self.out.append(_style_text(data) if self._raw else html.escape(data, quote=False))

    def handle_entityref(self, name: str) -> None:
        if self._skipping is None and self._textarea is None and _SAFE_REF.match(name):
            self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        if self._skipping is None and self._textarea is None and _SAFE_REF.match(name):
            self.out.append(f"&#{name};")

    def handle_decl(self, decl: str) -> None:
        if decl.lower().startswith("doctype") and self._skipping is None:
            self.out.append("<!DOCTYPE html>")


@dataclass(frozen=True)
class InertPage:
    html: str
    missing_stylesheets: int
    """Stylesheets the page linked whose bodies the session does not hold (shown unstyled)."""


def inert_html(
    page_html: str,
    base_url: str,
    *,
    resources: Resources | None = None,
    highlight: str | None = None,
    extra_css: Sequence[str] = (),
    sheets: Sheets | None = None,
    form_state: Sequence[FormControlState] = (),
) -> InertPage:
    """``page_html`` with nothing left that runs or fetches: for an ``<iframe sandbox srcdoc>``.

    Scripts, event handlers, ``<base>``, refresh/CSP ``<meta>`` and embedded objects go; links point
    nowhere (the original is kept in ``data-href``); images and stylesheets are inlined when their
    bodies were captured and dropped otherwise. ``highlight``: a BrowserGym id to outline.
    ``extra_css``: document-level rules the HTML lacks (adopted sheets, CSSOM-inserted rules).
    ``form_state``: what was typed, checked and selected, shown in the copy (as ``value``,
    ``checked``, ``selected`` attributes and a textarea's text; a password as bullets) and outlined.
    ``sheets``: captured stylesheets become ``<style data-cdp-sheet="N">`` references into it (the
    viewer fills them in) instead of being copied into the page.

    Safe on its own, sandbox and CSP aside: only tags and attributes with plain names are written,
    attribute values and text escaped, style text without ``<``; so a browser parses the output into
    the elements written here and no others, whatever foreign content (``<svg>``, ``<math>``) or
    raw-text element the input used to confuse a parser.
    """
    head_extra = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
    head_extra += "".join("<style>" + _style_text(css) + "</style>" for css in extra_css)
    if highlight and _SAFE_BID.match(highlight):
        head_extra += "<style>" + _HIGHLIGHT_CSS.replace("BID", highlight) + "</style>"
    if form_state:
        head_extra += f"<style>{_FORM_CSS}</style>"
    parser = _Inert(base_url, resources or {}, head_extra, sheets)
    parser.set_form_state(form_state)
    parser.feed(page_html)
    parser.close()
    if not parser._injected:
        parser.out.insert(0, head_extra)
    return InertPage("".join(parser.out), parser.missing_stylesheets)


def _reasoning_view(step: Step, passwords: list[str]) -> dict[str, Any] | None:
    """The agent's reasoning of ``step`` for the viewer (typed passwords as dots)."""
    reasoning = step.reasoning
    if reasoning is None:
        return None
    return {
        "source": reasoning.source,
        "thought": _masked(reasoning.thought or "", passwords),
        "messages": [{"role": m.role, "text": _masked(m.text, passwords)} for m in reasoning.messages],
        "tool_calls": [
            {
                "name": c.name,
                "arguments": _masked(c.arguments, passwords),
                "result": _masked(c.result, passwords) if c.result is not None else None,
            }
            for c in reasoning.tool_calls
        ],
        "notes": [[name, _masked(value, passwords)] for name, value in reasoning.notes.items()],
    }


def _masked(text: str, passwords: list[str]) -> str:
    """``text`` with each password typed in the session shown as dots, as the form state shows it."""
    for password in passwords:
        if password in text:
            text = text.replace(password, "•" * len(password))
    return text


def _viewport(tab: TabState | None) -> tuple[int, int] | None:
    """The browser's viewport at the step: the screenshot's size, else the one the thumbnail recorded."""
    if tab is None:
        return None
    if tab.screenshot_png:
        return _png_size(tab.screenshot_png)
    return tab.viewport


def _png_size(data: str) -> tuple[int, int] | None:
    try:
        head = base64.b64decode(data[:44])
    except ValueError:
        return None
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _evaluation(summary: EvaluationSummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "label": summary.label,
        "score": summary.score,
        "source": summary.source,
        "answer": summary.answer,
        "answer_label": summary.answer_label,
        "error": summary.error,
        "calls": summary.calls,
    }


@dataclass
class _Explained:
    """The offline score's checks per step (``evaluate.explain``), for the Evaluation panels."""

    checks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    scores: dict[int, float | None] = field(default_factory=dict)
    attribution: dict[str, Any] | None = None
    error: str | None = None

    def timeline(self, steps: Sequence[int]) -> list[dict[str, Any]]:
        """One row per check of the final state: its verdict at each step (``pass``, ``fail``,
        ``unknown``: the step could not answer; absent: not asked), the steps it first and last
        passed at. Failed checks carry every step (asked again for the failure class)."""
        from cdp_integration.evaluate.explain import check_timeline

        if not steps or steps[-1] not in self.checks:
            return []
        final = self.checks[steps[-1]]
        asked = [
            row
            for row in (self.attribution or {}).get("timeline") or []
            if isinstance(row, dict) and isinstance(row.get("check"), str)
        ]
        rows = []
        for check, row in zip(final, check_timeline(final, self.checks), strict=True):
            if not check.get("passed"):
                again = next(
                    (r for r in asked if r["check"] == row["check"] and r.get("expected") == row["expected"]),
                    None,
                )
                row = again or row
            cells = {str(k): "pass" for k in row.get("passed") or []}
            cells.update({str(k): "fail" for k in row.get("failed") or []})
            cells.update({str(k): "unknown" for k in row.get("unknown") or []})
            rows.append(
                {
                    "check": row["check"],
                    "expected": row.get("expected"),
                    "passed_at_end": bool(check.get("passed")),
                    "first_passed": row.get("first_passed"),
                    "last_passed": row.get("last_passed"),
                    "cells": cells,
                }
            )
        return rows


def _explained(session: Session) -> _Explained:
    """Score the episode offline with the official evaluator; a session that cannot be scored says why."""
    config = session.task.get("config")
    if not session.steps or not isinstance(config, dict) or not isinstance(config.get("eval"), dict):
        return _Explained(error="no WebArena task config in the session: nothing to score")
    from cdp_integration.evaluate.scoring import evaluate_session

    try:
        result = evaluate_session(session)
    except Exception as exc:  # a miss or the evaluator's own failure: shown, never fatal to the viewer
        return _Explained(error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return _Explained(
        checks={s.step: s.checks for s in result.steps},
        scores={s.step: s.score for s in result.steps},
        attribution=result.attribution,
    )


def _answering_tab(session: Session, step: int, url: str | None) -> TabState | None:
    """The captured page behind a check's found value: the evaluator's own page, else a tab at its URL."""
    if not url:
        return None
    evaluation = session.evaluation_at(step)
    captured = session.step(step)
    for tab in [*(evaluation.pages if evaluation else []), *captured.tabs]:
        if tab.html is not None and urldefrag(tab.url)[0].rstrip("/") == urldefrag(url)[0].rstrip("/"):
            return tab
    return None


def _changes(change: StepDiff) -> dict[str, Any]:
    return {
        "from": change.a,
        "url": list(change.url) if change.url_changed else None,
        "title": list(change.title) if change.title_changed else None,
        "tabs": [{"kind": t.kind, "id": t.tab_id, "url": t.url, "title": t.title} for t in change.tabs],
        "cookies": [
            {
                "kind": c.kind,
                "name": c.name,
                "domain": c.domain,
                "path": c.path,
                "before": c.before,
                "after": c.after,
            }
            for c in change.cookies
        ],
        "storage": [
            {
                "kind": s.kind,
                "area": s.area,
                "origin": s.origin,
                "key": s.key,
                "before": s.before,
                "after": s.after,
                "tab": s.tab_id,
            }
            for s in change.storage
        ],
        "text_diff": list(change.text_diff[2:]),  # without the ---/+++ header lines
        "forms": [
            (f"tab {f.tab_id}: " if len({g.tab_id for g in change.forms}) > 1 else "") + f.text
            for f in change.forms
        ],
    }


def episode_data(session: Session, *, limits: SessionLimits | None = None) -> dict[str, Any]:
    """Everything the viewer shows, as JSON-ready data (the same views the CLI prints).

    Each distinct inert page, visible text and stylesheet is held once (``pages``, ``sheets``) and
    steps refer to them by number: a session whose 150 steps share one 3 MB page makes one copy.
    Their sizes count against the output budget as they are built (``OutputLimitError``).
    """
    budget = BoundedOutput(
        None, (limits or SessionLimits.from_env()).max_output_bytes, "the viewer of this session"
    )
    resources = collect_resources(session)
    sheets = Sheets(resources, on_new=lambda css: budget.count(len(css)))
    pages: dict[str, int] = {}
    page_list: list[str] = []
    inert: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], tuple[int, int]] = {}
    texts: dict[tuple[str, tuple[str, ...]], str] = {}
    summaries = step_summaries(session)
    explained = _explained(session)

    def add_page(made: str) -> int:
        if made not in pages:
            budget.count(len(made))
            pages[made] = len(page_list)
            page_list.append(made)
        return pages[made]

    def check_view(step: int, check: dict[str, Any]) -> dict[str, Any]:
        from cdp_integration.evaluate.explain import check_title

        source = check.get("source") or {}
        tab = _answering_tab(session, step, source.get("url")) if source.get("kind") != "answer" else None
        page = add_page(inert_html(tab.html, tab.url, sheets=sheets).html) if tab and tab.html else None
        return {**check, "title": check_title(check), "page": page}

    typed_passwords = sorted(
        {
            control.value
            for step in session.steps
            for tab in step.tabs
            for control in tab.form_state
            if control.type == "password" and control.value and len(control.value) >= 4
        },
        key=len,
        reverse=True,
    )
    steps = []
    for i, (step, summary) in enumerate(zip(session.steps, summaries, strict=True)):
        tab = step.active_tab
        target = action_target(session, i)
        upcoming = parse_action(session.steps[i + 1].action) if i + 1 < len(session.steps) else None
        next_bid = upcoming.bid if upcoming else None
        document_css = tuple(
            css
            for style in (tab.cssom_styles if tab else [])
            if len(style.path) == (0 if style.target == "adopted" else 1)  # not inside a shadow root
            for css in style.css
        )
        page: tuple[int, int] | None = None
        if step.html:
            form_state = tuple(tab.form_state) if tab else ()
            key = (step.html, step.url, document_css, tuple(c.model_dump_json() for c in form_state))
            if key not in inert:
                made = inert_html(
                    step.html, step.url, extra_css=document_css, sheets=sheets, form_state=form_state
                )
                inert[key] = (add_page(made.html), made.missing_stylesheets)
            page = inert[key]
        text_key = (step.html or "", tuple(c.model_dump_json() for c in tab.form_state) if tab else ())
        if step.html is not None and text_key not in texts:
            texts[text_key] = visible_text(step.html, tab.form_state if tab else ())
            budget.count(len(texts[text_key]))
        steps.append(
            {
                "index": step.index,
                "trigger": step.trigger,
                "action": step.action,
                "target": describe_element(target) if target else None,
                "next_action": session.steps[i + 1].action if i + 1 < len(session.steps) else None,
                "next_bid": next_bid,
                "url": step.url,
                "title": step.title,
                "document_status": summary.document_status,
                "capture_ms": round(step.capture_ms, 1),
                "faults": list(summary.faults),
                "evaluation": _evaluation(summary.evaluation),
                "checks": [check_view(step.index, c) for c in explained.checks[step.index]]
                if step.index in explained.checks
                else None,
                "offline_score": explained.scores.get(step.index),
                "screenshot": f"data:image/png;base64,{tab.screenshot_png}"
                if tab and tab.screenshot_png
                else None,
                "thumbnail": f"data:image/webp;base64,{tab.thumbnail_webp}"
                if tab and tab.thumbnail_webp and not tab.screenshot_png
                else None,
                "viewport": _viewport(tab),
                "page": page[0] if page else None,
                "missing_stylesheets": page[1] if page else 0,
                "text": texts[text_key] if step.html is not None else "",
                "form": [
                    (f"tab {row.tab_id}: " if len(step.tabs) > 1 else "") + row.text
                    for row in form_rows(step)
                ],
                "requests": [
                    {
                        "method": r.method,
                        "url": r.url,
                        "status": r.status_label,
                        "ok": r.status is not None and r.status < 400,
                        "type": r.resource_type,
                        "time": r.time_label,
                        "origin": r.origin,
                    }
                    for r in step_requests(session, i)
                ],
                "console": [
                    {
                        "kind": entry.kind,
                        "level": entry.level,
                        "text": _masked(entry.text, typed_passwords),
                        "where": f"{entry.url}:{entry.line}" if entry.url and entry.line else entry.url,
                        "tab": entry.tab_id if len(step.tabs) > 1 else "",
                    }
                    for entry in step.console
                ],
                "console_dropped": step.console_dropped,
                "reasoning": _reasoning_view(step, typed_passwords),
                "changes": _changes(diff(session, i - 1, i)) if i > 0 else None,
                "tabs": [
                    {"id": t.tab_id, "url": t.url, "title": t.title, "active": t.active} for t in step.tabs
                ],
                "cookies": len(step.cookies),
            }
        )
    end = session.end
    return {
        "instance_id": session.instance_id,
        "task": task_text(session),
        "complete": session.complete,
        "final_answer": end.final_answer if end else None,
        "final_evaluation": _evaluation(end_evaluation(session)),
        "attribution": explained.attribution,
        "timeline": explained.timeline([s.index for s in session.steps]),
        "explain_error": explained.error,
        "browser": session.header.browser_version,
        "created": session.header.created,
        "source": session.path.name if session.path else None,
        "pages": page_list,
        "sheets": {"css": sheets.css, "imports": sheets.imports},
        "highlight_css": _HIGHLIGHT_CSS,
        "steps": steps,
    }


def _viewer_pieces(session: Session, limits: SessionLimits | None) -> Iterator[bytes]:
    yield from _pieces(episode_data(session, limits=limits), session)


def _pieces(data: dict[str, Any], session: Session) -> Iterator[bytes]:
    template = files(__package__).joinpath("viewer.html").read_text(encoding="utf-8")
    title = html.escape(f"{session.instance_id or 'session'} · episode viewer")
    head, _, tail = (
        template.replace("__CSP__", _VIEWER_CSP).replace("__TITLE__", title).partition("__EPISODE_DATA__")
    )
    yield head.encode()
    # "<" is escaped so no captured string can end the <script> element the JSON sits in.
    for piece in iter_json(data, indent=False, stream_depth=2):
        yield piece.replace(b"<", b"\\u003c")
    yield tail.encode()


def render_viewer(session: Session, *, limits: SessionLimits | None = None) -> str:
    """The viewer page for ``session``: one HTML document with no external reference."""
    budget = BoundedOutput(
        None, (limits or SessionLimits.from_env()).max_output_bytes, "the viewer of this session"
    )
    pieces = []
    for piece in _viewer_pieces(session, limits):
        budget.count(len(piece))
        pieces.append(piece)
    return b"".join(pieces).decode()


def write_viewer(session: Session, output: Path, *, limits: SessionLimits | None = None) -> Path:
    """Write the viewer to ``output`` piece by piece, sized first within the output budget
    (``OutputLimitError`` and nothing written when it would exceed it)."""
    data = episode_data(session, limits=limits)
    limit = (limits or SessionLimits.from_env()).max_output_bytes
    counted = BoundedOutput(None, limit, f"the viewer {output}")
    for piece in _pieces(data, session):
        counted.count(len(piece))
    output.parent.mkdir(parents=True, exist_ok=True)
    with output_file(output, limits=limits, what=f"the viewer {output}") as stream:
        for piece in _pieces(data, session):
            stream.write(piece)
    return output
