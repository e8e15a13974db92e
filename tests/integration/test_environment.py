"""The set-up makes the official WebArena evaluators importable and runnable on this machine.

Checks what `environment.prepare()` promises third-party code: punkt_tab for the evaluators'
tokenizer, the site variables read at import, and a real Playwright ``Page`` accepted by their
beartype-checked signatures under the overridden beartype release.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from cdp_integration.demo import DemoSite

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def page(browser: Browser, demo_site: DemoSite) -> Iterator[Page]:
    page = browser.new_page()
    page.goto(demo_site.base_url + "/products/5")
    yield page
    page.close()


def write_config(tmp_path: Path, eval_types: list[str], **eval_fields: object) -> Path:
    config = {
        "task_id": 0,
        "intent": "What is the price?",
        "sites": ["shopping"],
        "start_url": "",
        "eval": {
            "eval_types": eval_types,
            "reference_answers": None,
            "reference_url": "",
            "program_html": [],
            "url_note": "GOLD in PRED",
            **eval_fields,
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_punkt_tab_tokenizes_english_sentences() -> None:
    import nltk

    text = "Mr. Smith paid $3.50 for the U.S. map. Then he left."
    assert nltk.sent_tokenize(text) == ["Mr. Smith paid $3.50 for the U.S. map.", "Then he left."]


@pytest.mark.parametrize(("answer", "expected"), [("$24.00", 1.0), ("24", 0.0)])
def test_official_string_match_runs_with_a_real_page(
    page: object, tmp_path: Path, answer: str, expected: float
) -> None:
    from webarena.evaluation_harness import evaluator_router

    config = write_config(tmp_path, ["string_match"], reference_answers={"must_include": ["$24.00"]})
    trajectory = [{}, {"action_type": 0, "answer": answer}]
    assert evaluator_router(config)(trajectory, config, page, None) == expected


def test_official_url_match_reads_the_live_url(page: object, tmp_path: Path, demo_site: DemoSite) -> None:
    from webarena.evaluation_harness import evaluator_router

    config = write_config(tmp_path, ["url_match"], reference_url=demo_site.base_url + "/products/5")
    assert evaluator_router(config)([{}, {"answer": ""}], config, page, None) == 1.0
    other = write_config(tmp_path, ["url_match"], reference_url=demo_site.base_url + "/products/6")
    assert evaluator_router(other)([{}, {"answer": ""}], other, page, None) == 0.0


def test_duck_typed_page_is_rejected_by_beartype(tmp_path: Path) -> None:
    """Why replay must subclass Playwright's Page: the evaluators refuse anything else."""
    from beartype.roar import BeartypeCallHintParamViolation
    from webarena.evaluation_harness import evaluator_router

    class DuckPage:
        url = "http://127.0.0.1/"

    config = write_config(tmp_path, ["url_match"], reference_url="http://127.0.0.1/")
    with pytest.raises(BeartypeCallHintParamViolation):
        evaluator_router(config)([{}, {"answer": ""}], config, DuckPage(), None)


STALLED_CALL = """
import sys, time
from cdp_integration import environment
environment.prepare()
from playwright.sync_api import sync_playwright
with sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=environment.chromium_executable(),
                                 args=list(environment.CHROMIUM_ARGS), headless=True)
    page = browser.new_page()
    started = time.monotonic()
    with environment.StallWatchdog(2, "stalled call") as watchdog:
        try:
            page.evaluate("new Promise(() => {})")  # never settles; Playwright has no timeout for it
            print("returned")
        except Exception as exc:
            print(type(exc).__name__, watchdog.fired, round(time.monotonic() - started))
    again = pw.chromium.launch(executable_path=environment.chromium_executable(),
                               args=list(environment.CHROMIUM_ARGS), headless=True)
    print("driver still serves:", again.new_page().evaluate("6 * 7"))
    again.close()
"""


def test_the_stall_watchdog_ends_a_playwright_call_that_never_returns() -> None:
    """In its own process: the watchdog kills the browsers of this process's Playwright driver only."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", STALLED_CALL], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[0].split()[:2] == ["TargetClosedError", "True"] and 2 <= int(lines[0].split()[2]) < 30
    assert lines[1] == "driver still serves: 42"
    assert "stalled call: still running after 2 s; stacks:" in run.stderr


class _SignIn(BaseHTTPRequestHandler):
    """``/``: a sign-in form; its POST answers with a redirect to ``/home``, as a site's sign-in does."""

    def do_GET(self) -> None:
        body = b"<h1>home</h1>"
        if self.path == "/":
            body = b'<form method="post" action="/login"><input name="u" value="x"><button>Log in</button></form>'
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(302)
        self.send_header("location", "/home")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.mark.timeout(300)
def test_a_page_closed_as_its_sign_in_navigates_is_closed(browser: Browser) -> None:
    """BrowserGym's WebArena sign-in closes its page right after the click that signs in. Chromium drops
    a close that races the navigation's commit (a third of the closes here, without the mend), and
    Playwright's ``close()`` then waits forever: the mended one (``environment.prepare()``) returns."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SignIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for _ in range(20):
            context = browser.new_context()
            try:
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
                page.get_by_role("button", name="Log in").click()
                page.close()
                assert page.is_closed()
                assert context.pages == []
            finally:
                context.close()
    finally:
        server.shutdown()
        server.server_close()
