"""The differential checker on pages that fill themselves in after their load: 0 silent differences.

A real HTTP server (and a websocket server) serves pages whose content arrives after the load event:
from a timer, a slow ``fetch``, a poll that ends when the server says "ready", a websocket message;
and one page that fills itself in before its load (settled). Each page is one short episode: the
agent loads it, the logger captures right away, the checker asks questions live (fresh loads read
the evaluator's 3 s after their load), the agent waits on the page and the logger captures again.

Offline, a fresh load of such a URL answered from the capture taken right after the load would show
"waiting for data" where live shows the reading: a silent wrong answer, which the replay must refuse
loudly instead (``MockBrowserContext._settled``). The settled page must still be answered. The same
episodes replayed with the capture's settling record removed (a session of an earlier version) show
that the checker finds the silent difference this class causes.
"""

from __future__ import annotations

import dataclasses
import http.server
import os
import socketserver
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser

from cdp_integration import CDPSessionLogger, load_session
from tests.conformance.differential import EpisodeProbe, Outcome, format_report, format_silent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

WAITING = "<p id=out class=reading>waiting for data\u2026</p>"


def _page(script: str) -> bytes:
    return f"<html><head><title>meter</title></head><body><h1>Meter</h1>{WAITING}<script>{script}</script></body></html>".encode()


FILL = "document.getElementById('out').textContent = "
PAGES = {
    "/timer": _page(f"setTimeout(() => {{ {FILL}'reading: 17 kWh'; }}, 1200);"),
    "/fetch": _page(f"fetch('/api/reading').then((r) => r.text()).then((t) => {{ {FILL}t; }});"),
    "/poll": _page(
        "let n = 0; const tick = () => fetch('/api/status?n=' + (n++)).then((r) => r.text()).then((t) => {"
        f" if (t === 'pending') setTimeout(tick, 300); else {FILL}t; }}); tick();"
    ),
    "/socket": _page(
        "const ws = new WebSocket('ws://' + location.hostname + ':' + WS_PORT + '/');"
        f" ws.onmessage = (e) => {{ {FILL}e.data; }};"
    ),
    "/settled": _page(f"{FILL}'reading: 9 kWh';"),
}
ALL = os.environ.get("CDP_TEST_CONFORMANCE") == "all"
PLAYED = tuple(PAGES) if ALL else ("/timer", "/settled")
"""``make test`` plays a timer and the settled page (the conformance suite's single-page app fills itself
over XHR there too); ``CDP_TEST_CONFORMANCE=all`` (``make test-conformance``) every page: a slow fetch, a
poll and a websocket too."""
TIME_DEPENDENT = tuple(path for path in ("/timer", "/fetch", "/poll", "/socket") if path in PLAYED)


class MeterServer:
    """The pages over HTTP (``/api/reading`` answers after 800 ms; ``/api/status`` is "pending" for
    the first three polls of a load) and a websocket server that sends one reading after 1 s."""

    def __init__(self) -> None:
        from websockets.sync.server import serve

        def greet(connection: Any) -> None:
            time.sleep(1.0)
            connection.send("reading: 23 kWh")
            for _ in connection:  # until the page closes it
                pass

        self.ws = serve(greet, "127.0.0.1", 0)
        self.ws_port = self.ws.socket.getsockname()[1]
        self.ws_thread = threading.Thread(target=self.ws.serve_forever, daemon=True)
        self.ws_thread.start()
        ws_port = self.ws_port

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == "/api/reading":
                    time.sleep(0.8)
                    body = b"reading: 42 kWh"
                elif parts.path == "/api/status":
                    n = int(parse_qs(parts.query).get("n", ["0"])[0])
                    body = b"pending" if n < 3 else b"ready: 5 kWh"
                elif parts.path in PAGES:
                    body = PAGES[parts.path].replace(b"WS_PORT", str(ws_port).encode())
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/html" if parts.path in PAGES else "text/plain")
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http_thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.http_thread.start()
        self.base = f"http://127.0.0.1:{self.http.server_address[1]}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.ws.shutdown()
        self.http_thread.join(10)
        self.ws_thread.join(10)


@pytest.fixture(scope="module")
def meters() -> Iterator[MeterServer]:
    server = MeterServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    import browsergym.core

    from cdp_integration import environment

    launched = browsergym.core._get_global_playwright().chromium.launch(
        executable_path=environment.headless_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture(scope="module")
def played(
    meters: MeterServer, browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, dict[str, EpisodeProbe]]:
    """One episode over every page: load, capture, ask; wait past the evaluator's wait, capture, ask."""
    out = tmp_path_factory.mktemp("time-dependent")
    context = browser.new_context()
    page = context.new_page()
    logger = CDPSessionLogger(out, instance_id="time-dependent", task={})
    logger.attach_to_page(page)
    probes: dict[str, EpisodeProbe] = {}
    try:
        step = 0
        for path in PLAYED:
            probe = probes[path] = EpisodeProbe("meters", path, seed=5, per_step=6, fresh_per_url=6)
            page.goto(meters.base + path)
            for _ in range(2):
                logger.capture_state_snapshot("look", action=f"goto {path}")
                probe.ask_live(
                    page,
                    step,
                    captured=logger.last_step,
                    phases=[logger.evaluation_phase],
                    fresh_delay_ms=3_000,
                )
                step += 1
                page.wait_for_function("!document.getElementById('out').textContent.startsWith('waiting')")
                page.wait_for_timeout(3_200)
        session = load_session(logger.save_session())
    finally:
        logger.detach()
        context.close()
    return session, probes


def fresh_outcomes(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.question.url is not None]


def test_pages_filled_after_load_are_never_answered_silently(
    played: tuple[Any, dict[str, EpisodeProbe]],
) -> None:
    session, probes = played
    outcomes: dict[str, Sequence[Outcome]] = {
        path: probe.answer_offline(session) for path, probe in probes.items()
    }
    print("\n" + format_report(outcomes))
    silent = [
        format_silent(path, o) for path, found in outcomes.items() for o in found if o.verdict == "silent"
    ]
    assert not silent, "\n\n".join(silent)
    for path in TIME_DEPENDENT:
        fresh = fresh_outcomes(outcomes[path])
        assert any(o.verdict == "miss" for o in fresh), path
        misses = [o.miss or "" for o in fresh if o.verdict == "miss"]
        assert any("fill itself" in m or "changed by itself" in m for m in misses), misses[:3]
    settled = fresh_outcomes(outcomes["/settled"])
    assert any(o.verdict == "equal" for o in settled)


def test_without_the_settling_record_the_checker_finds_the_silent_wrong_answers(
    played: tuple[Any, dict[str, EpisodeProbe]],
) -> None:
    """The same session as an earlier version wrote it (no ``settling``): fresh loads are answered
    from the capture right after the load, and the checker reports the difference."""
    session, probes = played
    steps = tuple(
        step.model_copy(update={"tabs": [t.model_copy(update={"settling": None}) for t in step.tabs]})
        for step in session.steps
    )
    options = {k: v for k, v in session.header.options.items() if k != "stall_budget_ms"}
    session = dataclasses.replace(
        session, steps=steps, end=None, header=session.header.model_copy(update={"options": options})
    )
    found = [
        o
        for path in TIME_DEPENDENT
        for o in fresh_outcomes(probes[path].answer_offline(session))
        if o.verdict == "silent"
    ]
    assert found and any("waiting for data" in str(o.offline) for o in found)
