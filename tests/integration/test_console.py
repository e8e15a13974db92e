"""What the pages said: console messages, uncaught errors and the browser's log, per step, bounded;
and what Chromium drew: a thumbnail of the current tab per step, by default.

A real HTTP server serves a page that logs at load (text, numbers, an object, a warning, an error, an
image that is not there) and, on a click, throws from a timer and logs in a loop. A plain Playwright
page with a logger in default options is captured after the load and after the click. Each step holds
what was said since the step before (nothing twice), objects by their preview, errors with their
stack, at most 200 entries with the rest counted; a redacting logger replaces a password the page
logged; the viewer shows the console beside each step and each step's thumbnail in its filmstrip,
in Chromium.
"""

from __future__ import annotations

import base64
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser

from cdp_integration.capture.console import MAX_ENTRIES
from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.capture.state import THUMBNAIL_WIDTH
from cdp_integration.cli import cli
from cdp_integration.session.store import Session, load_session

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "hunter2-console-canary"
PAGE = """<!DOCTYPE html><html><head><title>Console</title></head><body style="background: #1e8c3c">
<form><input type="password" name="password" id="password"></form>
<img src="/missing.png" alt="">
<button id="go">Go</button>
<script>
console.log("loaded", 42, true, {id: 7, name: "ocean"});
console.warn("stock is low");
console.error("cart failed", [1, 2]);
document.getElementById("go").addEventListener("click", () => {
  console.info("typed", document.getElementById("password").value);
  setTimeout(() => { throw new TypeError("price is undefined"); }, 0);
  setTimeout(() => { for (let i = 0; i < 500; i++) console.debug("tick", i); document.title = "done"; }, 10);
});
</script></body></html>"""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = self.path in ("/page", "/favicon.ico")  # the browser's own favicon request finds one
        body = PAGE.encode() if self.path == "/page" else b"" if found else b"not found"
        self.send_response(200 if found else 404)
        self.send_header(
            "Content-Type", "text/html; charset=utf-8" if self.path != "/favicon.ico" else "image/x-icon"
        )
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _play(browser: Browser, out: Path, base: str, **options: Any) -> Session:
    context = browser.new_context()
    try:
        page = context.new_page()
        logger = CDPSessionLogger(out, instance_id="console", **options)
        logger.attach_to_page(page)
        page.goto(base + "/page")
        page.wait_for_load_state("load")
        logger.capture_state_snapshot("goto", action=f"goto('{base}/page')")
        page.fill("#password", PASSWORD)
        page.click("#go")
        page.wait_for_function("document.title === 'done'")
        logger.capture_state_snapshot("click", action="click('#go')")
        path = logger.save_session("console")
        logger.detach()
    finally:
        context.close()
    return load_session(path)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def session(browser: Browser, served: str, tmp_path_factory: pytest.TempPathFactory) -> Session:
    return _play(browser, tmp_path_factory.mktemp("console"), served)


def test_each_step_holds_what_the_page_said_since_the_step_before(session: Session, served: str) -> None:
    load, click = session.steps
    said = [(e.kind, e.level, e.text) for e in load.console if e.kind == "console"]
    assert said == [
        ("console", "log", 'loaded 42 true {"id": 7, "name": "ocean"}'),
        ("console", "warning", "stock is low"),
        ("console", "error", "cart failed [1, 2]"),
    ], said
    missing = [e for e in load.console if e.kind == "log"]
    assert len(missing) == 1 and missing[0].level == "error" and missing[0].source == "network"
    assert missing[0].url == served + "/missing.png" and "404" in missing[0].text
    assert all(e.tab_id == load.tabs[0].tab_id and e.timestamp > 0 for e in load.console)
    logged = next(e for e in load.console if e.kind == "console")
    assert logged.url == served + "/page" and logged.line == 6
    assert click.console[0].text == f"typed {PASSWORD}"  # not heard twice: the load's are gone
    thrown = [e for e in click.console if e.kind == "exception"]
    assert len(thrown) == 1 and thrown[0].text.startswith("TypeError: price is undefined\n    at ")
    ticks = [e for e in click.console if e.text.startswith("tick ")]
    assert len(click.console) == MAX_ENTRIES and click.console_dropped == 2 + 500 - MAX_ENTRIES
    assert [e.text for e in ticks[:2]] == ["tick 0", "tick 1"] and ticks[0].level == "debug"


def test_each_step_has_a_thumbnail_of_what_chromium_drew(session: Session) -> None:
    from PIL import Image

    assert session.header.options["thumbnail"] is True and session.header.options["screenshot"] is False
    for step in session.steps:
        tab = step.active_tab
        assert tab is not None and tab.thumbnail_webp and tab.screenshot_png is None
        assert tab.viewport == (1280, 720)  # Playwright's default viewport, in CSS pixels
        image = Image.open(io.BytesIO(base64.b64decode(tab.thumbnail_webp, validate=True)))
        assert image.format == "WEBP" and image.size == (THUMBNAIL_WIDTH, 720 * THUMBNAIL_WIDTH // 1280)
        red, green, blue = image.convert("RGB").getpixel((THUMBNAIL_WIDTH - 5, image.height - 5))
        assert (abs(red - 0x1E), abs(green - 0x8C), abs(blue - 0x3C)) < (12, 12, 12), "not the page's green"
    assert not any(f.stage == "thumbnail" for step in session.steps for f in step.faults)


def test_a_redacting_logger_keeps_no_password_the_page_logged(
    browser: Browser, served: str, tmp_path: Path
) -> None:
    redacted = _play(browser, tmp_path, served, redact=True)
    texts = [e.text for step in redacted.steps for e in step.console]
    assert texts and not any(PASSWORD in text for text in texts)
    assert any(text.startswith("typed ") for text in texts)
    assert PASSWORD not in json.dumps([s.model_dump(mode="json") for s in redacted.steps])
    assert all(tab.thumbnail_webp is None for step in redacted.steps for tab in step.tabs)  # pixels


def test_the_option_off_records_nothing(browser: Browser, served: str, tmp_path: Path) -> None:
    quiet = _play(browser, tmp_path, served, console=False, thumbnail=False)
    assert all(step.console == [] and step.console_dropped == 0 for step in quiet.steps)
    assert all(
        tab.thumbnail_webp is None and tab.viewport is None for step in quiet.steps for tab in step.tabs
    )
    assert quiet.header.options["console"] is False and quiet.header.options["thumbnail"] is False


def test_the_viewer_shows_the_console_of_each_step_in_chromium(
    session: Session, browser: Browser, tmp_path: Path
) -> None:
    assert session.path is not None
    html = tmp_path / "console.html"
    result = CliRunner().invoke(cli, ["view", str(session.path), "-o", str(html)])
    assert result.exit_code == 0, result.output
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.context.route(
            "**/*", lambda route: route.abort() if route.request.url.startswith("http") else route.continue_()
        )
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        card = page.locator("#console")
        assert "4 entries" in card.locator("h3").inner_text()
        assert card.locator("tr").count() == 4
        assert "stock is low" in card.inner_text()
        page.keyboard.press("ArrowDown")
        assert (
            f"{MAX_ENTRIES} entries since step 0, {2 + 500 - MAX_ENTRIES} more not kept"
            in card.locator("h3").inner_text()
        )
        assert "uncaught" in card.inner_text() and "TypeError: price is undefined" in card.inner_text()
        assert "typed " + "•" * len(PASSWORD) in card.inner_text()  # as the form state shows it
        assert PASSWORD not in page.content()
        assert page.locator('#timeline li[data-step="1"] .chip.bad').inner_text() == "1 page error"
        thumbs = page.locator("#filmstrip .thumb .shot img")
        assert thumbs.count() == 2 and page.locator("#filmstrip .thumb iframe").count() == 0
        assert all(
            (thumbs.nth(i).get_attribute("src") or "").startswith("data:image/webp;base64,") for i in range(2)
        )
        assert thumbs.nth(1).evaluate("(img) => img.complete && img.naturalWidth") == THUMBNAIL_WIDTH
        assert (
            page.locator("#thumbnail-note").is_visible() and page.locator("#screenshot-missing").count() == 0
        )
        assert page.locator("#dom-frame").evaluate("(frame) => frame.style.width") == "1280px"
        card.evaluate("(card) => card.scrollIntoView({block: 'start'})")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "viewer-console.png")
    finally:
        page.close()


COLOURS = ["#c81e1e", "#1e3cc8", "#e6b40a", "#1e8c3c", "#8c1ec8", "#0ab4b4"]


def test_each_thumbnail_shows_its_own_step_when_the_agent_goes_on_at_once(
    browser: Browser, served: str, tmp_path: Path
) -> None:
    """Chromium draws a thumbnail from a frame after the capture asked for it: the agent's next
    action, run as soon as the capture returns, must not be what it shows (a thumbnail taken after
    the capture would show it). Each step paints the page anew."""
    from PIL import Image

    context = browser.new_context()
    try:
        page = context.new_page()
        logger = CDPSessionLogger(tmp_path, instance_id="colours")
        logger.attach_to_page(page)
        page.goto(served + "/page")
        for index, colour in enumerate(COLOURS):
            page.evaluate("(colour) => { document.body.style.background = colour; }", colour)
            logger.capture_state_snapshot("action", action=f"paint('{colour}')")
            assert logger.last_step is not None and logger.last_step.index == index
        page.evaluate("() => { document.body.style.background = '#ffffff'; }")
        path = logger.save_session("colours")
        logger.detach()
    finally:
        context.close()
    session = load_session(path)
    for step, colour in zip(session.steps, COLOURS, strict=True):
        tab = step.active_tab
        assert tab is not None and tab.thumbnail_webp and tab.viewport == (1280, 720)
        image = Image.open(io.BytesIO(base64.b64decode(tab.thumbnail_webp)))
        drawn = image.convert("RGB").getpixel((THUMBNAIL_WIDTH - 5, image.height - 5))
        wanted = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert all(abs(a - b) < 12 for a, b in zip(drawn, wanted, strict=True)), (step.index, drawn, colour)
    assert not any(f.stage == "thumbnail" for step in session.steps for f in step.faults)
