"""The agent's reasoning beside each step: given at capture or noted before it, bounded, redacted,
exported (WABE ``thoughts``) and shown by the viewer, in Chromium.

A plain Playwright page on a real HTTP server plays three actions; the harness (this test) gives the
first step a thought and a tool call with its result, notes a message and a second thought before the
second step (they add up), and gives the third nothing. The harness-specific sources are tested where
their harness runs: OpenHands V1 in ``test_openhands_v1.py``, BrowserGym's chat in
``test_capture_browsergym.py``.
"""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.capture.reasoning import MAX_ITEMS, MAX_TEXT
from cdp_integration.cli import cli
from cdp_integration.session.store import Session, load_session

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "hunter2-reasoning-canary"
PAGE = """<!DOCTYPE html><html><head><title>Shop</title></head><body>
<form action="/search"><input name="q" id="q"><button>Search</button></form>
<input type="password" id="password" name="password"></body></html>"""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGE.encode() if self.path.startswith(("/shop", "/search")) else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _play(browser: Browser, out: Path, **options: Any) -> Session:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    context = browser.new_context()
    try:
        page = context.new_page()
        logger = CDPSessionLogger(out, instance_id="reasoning", **options)
        logger.attach_to_page(page)
        page.goto(base + "/shop")
        page.fill("#password", PASSWORD)
        logger.capture_state_snapshot(
            "action",
            action="goto('/shop')",
            reasoning={
                "source": "my-harness",
                "thought": "The shop's search box is the way to the mug.",
                "tool_calls": [{"name": "browser_navigate", "arguments": '{"url": "/shop"}', "result": "ok"}],
                "notes": {"next_goal": "search for mug", "memory": ""},
            },
        )
        logger.note_reasoning({"source": "my-harness", "messages": [{"role": "user", "text": "Find a mug"}]})
        logger.note_reasoning(
            {"source": "my-harness", "thought": f"I type mug (the password was {PASSWORD})."}
        )
        page.fill("#q", "mug")
        page.press("#q", "Enter")
        page.wait_for_url("**/search?q=mug")
        logger.capture_state_snapshot("action", action="fill('#q', 'mug')")
        page.click("#q")
        logger.capture_state_snapshot(
            "action",
            action="click('#q')",
            reasoning={
                "source": "my-harness",
                "thought": "x" * (MAX_TEXT + 50),
                "messages": [{"role": "assistant", "text": str(n)} for n in range(MAX_ITEMS + 5)],
            },
        )
        logger.capture_state_snapshot("action", action="noop()")
        path = logger.save_session("reasoning")
        logger.detach()
    finally:
        context.close()
        server.shutdown()
        server.server_close()
        thread.join()
    return load_session(path)


@pytest.fixture(scope="module")
def session(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Session:
    return _play(browser, tmp_path_factory.mktemp("reasoning"))


def test_each_step_keeps_the_reasoning_its_harness_gave(session: Session) -> None:
    first, second, third, fourth = session.steps
    assert first.reasoning is not None and first.reasoning.source == "my-harness"
    assert first.reasoning.thought == "The shop's search box is the way to the mug."
    assert [(c.name, c.arguments, c.result) for c in first.reasoning.tool_calls] == [
        ("browser_navigate", '{"url": "/shop"}', "ok")
    ]
    assert first.reasoning.notes == {"next_goal": "search for mug"}  # an empty note is no note
    assert second.reasoning is not None  # the two notes add up, in order
    assert [(m.role, m.text) for m in second.reasoning.messages] == [("user", "Find a mug")]
    assert second.reasoning.thought == f"I type mug (the password was {PASSWORD})."
    assert third.reasoning is not None and len(third.reasoning.thought or "") == MAX_TEXT
    assert third.reasoning.thought.endswith("…") and len(third.reasoning.messages) == MAX_ITEMS  # type: ignore[union-attr]
    assert fourth.reasoning is None


def test_a_redacting_logger_keeps_no_password_in_the_reasoning(browser: Browser, tmp_path: Path) -> None:
    redacted = _play(browser, tmp_path, redact=True)
    text = json.dumps([step.model_dump(mode="json") for step in redacted.steps])
    assert PASSWORD not in text
    assert redacted.steps[1].reasoning is not None
    assert redacted.steps[1].reasoning.thought.startswith("I type mug (the password was ")  # type: ignore[union-attr]


def test_wabe_thoughts_go_beside_the_actions(session: Session, tmp_path: Path) -> None:
    assert session.path is not None
    out = tmp_path / "wabe"
    result = CliRunner().invoke(cli, ["export-wabe", str(session.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    (document,) = [json.loads(p.read_text()) for p in out.rglob("result.json")]
    thoughts = document["thoughts"]
    assert len(thoughts) == len(document["action_history"]) == 4
    assert thoughts[0] == "The shop's search box is the way to the mug."
    assert thoughts[1].startswith("I type mug") and thoughts[3] == ""


def test_the_viewer_shows_the_reasoning_beside_each_step_in_chromium(
    session: Session, browser: Browser, tmp_path: Path
) -> None:
    assert session.path is not None
    html = tmp_path / "reasoning.html"
    result = CliRunner().invoke(cli, ["view", str(session.path), "-o", str(html)])
    assert result.exit_code == 0, result.output
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.context.route(
            "**/*", lambda route: route.abort() if route.request.url.startswith("http") else route.continue_()
        )
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        card = page.locator("#reasoning")
        assert "as my-harness recorded it" in card.locator("h3").inner_text()
        assert page.locator("#thought").inner_text() == "The shop's search box is the way to the mug."
        assert "browser_navigate" in card.locator(".calls").inner_text()
        assert "search for mug" in card.locator(".notes").inner_text()
        assert page.locator('#timeline li[data-step="0"] .chips').inner_text().count("thought") == 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "viewer-reasoning.png")
        page.keyboard.press("ArrowDown")
        assert "Find a mug" in page.locator("#reasoning .messages").inner_text()
        assert PASSWORD not in page.content()  # the typed password is shown as dots, as in the form state
        page.keyboard.press("End")
        assert page.locator("#reasoning").count() == 0  # no reasoning recorded: no card
    finally:
        page.close()
