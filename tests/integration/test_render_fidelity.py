"""Render-faithful capture: what CSS, shadow roots and iframes make of a page offline equals live.

A real HTTP server serves a page whose text visibility depends on an external stylesheet (class
rule), an ``@import``-ed sheet, rules inserted through the CSSOM into an empty ``<style>``, a
constructed stylesheet adopted by the document, an open shadow root with its own adopted sheet, and a
same-origin iframe that a script changed after load. The page is captured on a plain Playwright page,
the server is stopped, and the same expressions run live and on the replayed page must agree.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.debug.viewer import collect_resources, inert_html
from cdp_integration.replay import replay_step
from cdp_integration.session.store import Session, load_session

PAGE = """<!DOCTYPE html><html><head><title>Styled</title>
<link rel="stylesheet" href="/main.css"><style id="cssinjs"></style></head><body>
<p class="by-class">hidden by a class rule</p>
<p class="by-import">hidden by an imported sheet</p>
<p class="by-cssom">hidden by a CSSOM rule</p>
<p class="by-adopted">hidden by an adopted sheet</p>
<p id="shown" class="shown">shown in red</p>
<div id="host"></div>
<iframe id="frame" src="/frame"></iframe>
<script>
document.getElementById("cssinjs").sheet.insertRule(".by-cssom { display: none }");
const page = new CSSStyleSheet(); page.replaceSync(".by-adopted { display: none }");
document.adoptedStyleSheets = [page];
const root = document.getElementById("host").attachShadow({ mode: "open" });
root.innerHTML = '<span class="in-shadow">shadow text</span> <span class="shadow-hidden">shadow secret</span>';
const inner = new CSSStyleSheet(); inner.replaceSync(".shadow-hidden { display: none }");
root.adoptedStyleSheets = [inner];
</script></body></html>"""
FRAME = """<!DOCTYPE html><html><head><link rel="stylesheet" href="/frame.css"></head><body>
<p id="framed">frame text</p><p class="frame-hidden">frame secret</p>
<script>document.body.insertAdjacentHTML("beforeend", '<p id="added">added by a script</p>')</script>
</body></html>"""
FILES = {
    "/page": ("text/html", PAGE),
    "/frame": ("text/html", FRAME),
    "/main.css": (
        "text/css",
        '@import url("/imported.css");\n.by-class { display: none }\n.shown { color: red }',
    ),
    "/imported.css": ("text/css", ".by-import { display: none }"),
    "/frame.css": ("text/css", ".frame-hidden { display: none }"),
}

EXPRESSIONS = [
    "document.body.innerText",
    "[...document.querySelectorAll('p')].map(p => getComputedStyle(p).display).join(',')",
    "[...document.querySelectorAll('p')].map(p => p.checkVisibility()).join(',')",
    "getComputedStyle(document.querySelector('#shown')).color",
    "document.querySelector('#host').shadowRoot.querySelector('.in-shadow').textContent",
    "[...document.querySelector('#host').shadowRoot.querySelectorAll('span')].map(s => s.checkVisibility()).join()",
    "document.querySelector('#frame').contentDocument.body.innerText",
    "document.querySelector('#frame').contentDocument.querySelector('#added').textContent",
    "document.querySelectorAll('style').length",
]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        kind, body = FILES.get(self.path, ("text/plain", "not found"))
        data = body.encode()
        self.send_response(200 if self.path in FILES else 404)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "max-age=3600")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def captured(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Session, list[Any]]]:
    """(session, live values of ``EXPRESSIONS``); the server is stopped before the tests run."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    try:
        page = context.new_page()
        logger = CDPSessionLogger(tmp_path_factory.mktemp("render"), instance_id="styled")
        logger.attach_to_page(page)
        base = f"http://127.0.0.1:{server.server_address[1]}"
        page.goto(base + "/page")
        page.wait_for_function("document.querySelector('#frame').contentDocument?.querySelector('#added')")
        step = logger.capture_state_snapshot("goto")
        assert step is not None and step.faults == []
        live = [page.evaluate(expression) for expression in EXPRESSIONS]
        page.goto(base + "/frame")  # a second step: the stylesheets are not stored again
        logger.capture_state_snapshot("goto")
        path = logger.save_session("styled")
        logger.detach()
    finally:
        context.close()
        server.shutdown()
        server.server_close()
        thread.join()
    yield load_session(path), live


def test_stylesheets_are_stored_once_by_url(captured: tuple[Session, list[Any]]) -> None:
    session, _ = captured
    first, second = session.steps
    assert sorted(r.url.rsplit("/", 1)[1] for r in first.resources) == [
        "frame.css",
        "imported.css",
        "main.css",
    ]
    assert second.resources == []
    assert {r.type for r in first.resources} == {"Stylesheet"}


def test_shadow_roots_frames_and_cssom_rules_are_captured(captured: tuple[Session, list[Any]]) -> None:
    tab = captured[0].steps[0].active_tab
    assert tab is not None and tab.html is not None
    assert '<template shadowrootmode="open">' in tab.html
    assert [f.url.rsplit("/", 1)[1] for f in tab.frames] == ["frame"]
    assert 'id="added"' in (tab.frames[0].html or "")
    assert {(s.target, len(s.path)) for s in tab.cssom_styles} == {
        ("adopted", 0),
        ("adopted", 1),
        ("style_element", 1),
    }


def test_offline_page_answers_as_the_live_page(captured: tuple[Session, list[Any]]) -> None:
    session, live = captured
    page = replay_step(session, 0)
    offline = [page.evaluate(expression) for expression in EXPRESSIONS]
    assert offline == live
    assert "hidden by" not in live[0] and "shown in red" in live[0]  # the CSS did hide them live


def test_locators_see_css_visibility_offline(captured: tuple[Session, list[Any]]) -> None:
    page = replay_step(captured[0], 0)
    hidden = [".by-class", ".by-import", ".by-cssom", ".by-adopted", "#host .shadow-hidden"]
    assert [page.locator(selector).is_visible() for selector in hidden] == [False] * 5
    assert page.locator("#shown").is_visible() and page.locator("#host .in-shadow").is_visible()
    assert page.locator("#host .in-shadow").inner_text() == "shadow text"


def test_viewer_renders_with_the_captured_stylesheets(captured: tuple[Session, list[Any]]) -> None:
    session, _ = captured
    step = session.steps[0]
    page = inert_html(step.html or "", step.url, resources=collect_resources(session))
    assert page.missing_stylesheets == 0
    assert ".by-class { display: none }" in page.html and ".by-import { display: none }" in page.html
