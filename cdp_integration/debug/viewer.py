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
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

import orjson

from cdp_integration.debug.actions import action_target, describe_element, parse_action
from cdp_integration.debug.diff import StepDiff, diff
from cdp_integration.debug.text import VOID_ELEMENTS, visible_text, word_set
from cdp_integration.debug.views import (
    EvaluationSummary,
    end_evaluation,
    step_requests,
    step_summaries,
    task_text,
)
from cdp_integration.session.store import Session

__all__ = ["CSP", "InertPage", "episode_data", "inert_html", "render_viewer", "write_viewer"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:"
"""What a captured page may load inside the viewer: inline styles and ``data:`` images, nothing else."""

_VIEWER_CSP = CSP + "; script-src 'unsafe-inline'"
_DROPPED = word_set("script noscript base frame frameset object embed applet portal")
_URL_ATTRIBUTES = word_set(
    "src srcset data poster background action formaction ping xlink:href codebase cite longdesc"
)
_SAFE_BID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


Resources = dict[str, str]
"""Absolute URL -> ``data:`` URL (images) or stylesheet text, from response bodies the session kept."""


_IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?["']?([^"')\s;]+)["']?\s*\)?[^;]*;""")


def _inline_imports(css: str, css_url: str, resources: Resources, depth: int = 0) -> str:
    """``css`` with each ``@import`` of a captured sheet replaced by that sheet's text (the viewer's
    CSP lets nothing be fetched)."""

    def inline(match: re.Match[str]) -> str:
        url = urldefrag(urljoin(css_url, match.group(1))).url
        imported = resources.get(url)
        if imported is None or imported.startswith("data:") or depth > 4:
            return match.group(0)
        return _inline_imports(imported, url, resources, depth + 1)

    return _IMPORT.sub(inline, css) if "@import" in css else css


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
    def __init__(self, base_url: str, resources: Resources, head_extra: str) -> None:
        super().__init__(convert_charrefs=False)
        self._base = base_url
        self._resources = resources
        self._head_extra = head_extra
        self._injected = False
        self._skipping: str | None = None
        self._skip_depth = 0
        self.out: list[str] = []
        self.missing_stylesheets = 0

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
        if self._skipping is not None:
            self._skip_depth += tag == self._skipping
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
                if css and not css.startswith("data:"):
                    css = _inline_imports(css, css_url, self._resources)
                    self.out.append("<style>" + css.replace("</", "<\\/") + "</style>")
                else:
                    self.missing_stylesheets += 1
            return
        self.out.append(self._start(tag, self._attributes(tag, attrs)))
        if tag == "head":
            self._inject()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_ELEMENTS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skipping is not None:
            self._skip_depth -= tag == self._skipping
            if self._skip_depth <= 0:
                self._skipping = None
            return
        if tag not in VOID_ELEMENTS and tag != "link":
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self._skipping is None:
            self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")

    def handle_decl(self, decl: str) -> None:
        if decl.lower().startswith("doctype"):
            self.out.append(f"<!{decl}>")


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
) -> InertPage:
    """``page_html`` with nothing left that runs or fetches: for an ``<iframe sandbox srcdoc>``.

    Scripts, event handlers, ``<base>``, refresh/CSP ``<meta>`` and embedded objects go; links point
    nowhere (the original is kept in ``data-href``); images and stylesheets are inlined when their
    bodies were captured and dropped otherwise. ``highlight``: a BrowserGym id to outline.
    ``extra_css``: document-level rules the HTML lacks (adopted sheets, CSSOM-inserted rules).
    """
    head_extra = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
    head_extra += "".join("<style>" + css.replace("</", "<\\/") + "</style>" for css in extra_css)
    if highlight and _SAFE_BID.match(highlight):
        head_extra += (
            f'<style>[bid="{highlight}"]{{outline:3px solid #e11d48 !important;outline-offset:2px;'
            "box-shadow:0 0 0 6px rgba(225,29,72,.25) !important}</style>"
        )
    parser = _Inert(base_url, resources or {}, head_extra)
    parser.feed(page_html)
    parser.close()
    if not parser._injected:
        parser.out.insert(0, head_extra)
    return InertPage("".join(parser.out), parser.missing_stylesheets)


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
        "error": summary.error,
        "calls": summary.calls,
    }


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
    }


def episode_data(session: Session) -> dict[str, Any]:
    """Everything the viewer shows, as JSON-ready data (the same views the CLI prints)."""
    resources = collect_resources(session)
    summaries = step_summaries(session)
    steps = []
    for i, (step, summary) in enumerate(zip(session.steps, summaries, strict=True)):
        tab = step.active_tab
        target = action_target(session, i)
        upcoming = parse_action(session.steps[i + 1].action) if i + 1 < len(session.steps) else None
        next_bid = upcoming.bid if upcoming else None
        document_css = [
            css
            for style in (tab.cssom_styles if tab else [])
            if len(style.path) == (0 if style.target == "adopted" else 1)  # not inside a shadow root
            for css in style.css
        ]
        page = (
            inert_html(step.html, step.url, resources=resources, highlight=next_bid, extra_css=document_css)
            if step.html
            else None
        )
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
                "screenshot": f"data:image/png;base64,{tab.screenshot_png}"
                if tab and tab.screenshot_png
                else None,
                "viewport": _png_size(tab.screenshot_png) if tab and tab.screenshot_png else None,
                "html": page.html if page else None,
                "missing_stylesheets": page.missing_stylesheets if page else 0,
                "text": visible_text(step.html),
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
        "browser": session.header.browser_version,
        "created": session.header.created,
        "source": session.path.name if session.path else None,
        "steps": steps,
    }


def render_viewer(session: Session) -> str:
    """The viewer page for ``session``: one HTML document with no external reference."""
    template = files(__package__).joinpath("viewer.html").read_text(encoding="utf-8")
    # "<" is escaped so no captured string can end the <script> element the JSON sits in.
    data = orjson.dumps(episode_data(session)).decode().replace("<", "\\u003c")
    title = html.escape(f"{session.instance_id or 'session'} · episode viewer")
    return (
        template.replace("__CSP__", _VIEWER_CSP).replace("__TITLE__", title).replace("__EPISODE_DATA__", data)
    )


def write_viewer(session: Session, output: Path) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_viewer(session), encoding="utf-8")
    return output
