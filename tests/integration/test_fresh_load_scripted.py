"""A fresh load of a page whose DOM the agent changed through the page's own scripts (issue 19, class A).

A real HTTP server serves two scripted pages. On load, their script builds a collapsible table of
contents (the load's own DOM change, which a fresh load shows); a click on its heading collapses it
(a listener: no request, no navigation). On ``/prefs`` the click also remembers the choice in local
storage, which a later load could read. A plain Playwright page with a ``CDPSessionLogger`` loads
each page, is captured, clicks, is captured again; the server is stopped before the offline checks.

Live, a new tab's ``goto`` of the same URL shows the table expanded; the agent's tab shows it
collapsed. Offline, the same fresh load must give the live fresh answers (from the tab's first
capture, taken right after its document loaded), or, where the capture cannot tell what a fresh load
would show (``/prefs``: the origin's local storage changed since), a loud ``ReplayMissError`` naming
the reason: never the agent's collapsed table. The unmodified WebArena evaluator's fresh-load
``program_html`` scores the same live and offline.
"""

from __future__ import annotations

import copy
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.capture.probes import build_trajectory
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.replay import replay_step
from cdp_integration.session.models import EVALUATOR_WAIT_MS
from cdp_integration.session.store import Session, load_session
from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls, webarena_config_file

SCRIPT = """<script>
document.addEventListener("DOMContentLoaded", () => {
  const toc = document.getElementById("toc"), head = toc.querySelector("h3"), list = toc.querySelector("ul");
  head.insertAdjacentHTML("afterbegin", "<strong>\\u2212</strong>");
  toc.setAttribute("aria-expanded", "true");
  head.addEventListener("click", () => {
    toc.setAttribute("aria-expanded", "false");
    list.style.display = "none";
    head.querySelector("strong").textContent = "+";
    if (location.pathname === "/prefs") localStorage.setItem("toc", "closed");
  });
});
</script>"""
PAGE = f"""<!DOCTYPE html><html><head><title>Rivers</title>{SCRIPT}</head><body>
<div id="toc"><h3>Table of Contents</h3><ul><li><a href="#nile">Nile</a></li><li><a href="#amazon">Amazon</a></li></ul></div>
<h2 id="nile">Nile</h2><p>6650 km</p><h2 id="amazon">Amazon</h2><p>6400 km</p></body></html>"""
FILES = {"/rivers": PAGE, "/prefs": PAGE}

EXPRESSIONS = [
    "document.body.textContent",
    "document.querySelector('#toc').outerHTML",
    "document.querySelector('#toc').getAttribute('aria-expanded')",
    "document.querySelector('#toc h3').textContent",
    "document.querySelector('#toc ul').getAttribute('style')",
    "document.querySelectorAll('#toc ul[style]').length",
]

CONFIG: dict[str, Any] = {
    "sites": ["wikipedia"],
    "task_id": 99301,
    "require_login": False,
    "storage_state": None,
    "start_url": "__BASE__/rivers",
    "geolocation": None,
    "intent_template": "Open the rivers page",
    "instantiation_dict": {},
    "intent": "Open the rivers page",
    "require_reset": False,
    "eval": {
        "eval_types": ["program_html"],
        "reference_answers": None,
        "reference_url": "",
        "program_html": [
            {
                "url": "__BASE__/rivers",
                "locator": "document.querySelector('#toc h3').textContent",
                "required_contents": {"exact_match": "\u2212Table of Contents"},
            }
        ],
        "string_note": "",
        "reference_answer_raw_annotation": "",
    },
    "intent_template_id": 9930,
}


def _config(base: str) -> dict[str, Any]:
    return (
        copy.deepcopy(CONFIG)
        | {"start_url": base + "/rivers"}
        | {
            "eval": copy.deepcopy(CONFIG["eval"])
            | {"program_html": [dict(CONFIG["eval"]["program_html"][0], url=base + "/rivers")]}
        }
    )


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = FILES.get(self.path, "not found").encode()
        self.send_response(200 if self.path in FILES else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


Captured = tuple[Session, dict[str, Any]]


@pytest.fixture(scope="module")
def captured(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """(session, live answers); the server is stopped before the tests run."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    context = browser.new_context()
    live: dict[str, Any] = {"base": base, "as_left": {}, "fresh": {}}
    try:
        page = context.new_page()
        logger = CDPSessionLogger(tmp_path_factory.mktemp("scripted"), instance_id="scripted")
        logger.attach_to_page(page)
        for path in ("/rivers", "/prefs"):
            page.goto(base + path)
            page.wait_for_function("document.querySelector('#toc').getAttribute('aria-expanded') === 'true'")
            # The agent looks at the page for longer than the evaluator waits after a fresh load: the
            # capture then shows the page had settled (a capture right after the load could not tell).
            page.wait_for_timeout(EVALUATOR_WAIT_MS + 200)
            logger.capture_state_snapshot(f"goto {path}")
            page.click("#toc h3")
            page.wait_for_function("document.querySelector('#toc').getAttribute('aria-expanded') === 'false'")
            logger.capture_state_snapshot("click #toc h3")
            live["as_left"][path] = [page.evaluate(e) for e in EXPRESSIONS]
            with logger.evaluation_phase():  # the evaluator's own tab, tagged as its traffic
                fresh = context.new_page()
                fresh.goto(base + path)
                fresh.wait_for_function(
                    "document.querySelector('#toc').getAttribute('aria-expanded') === 'true'"
                )
                live["fresh"][path] = [fresh.evaluate(e) for e in EXPRESSIONS]
                with use_site_urls({"WIKIPEDIA": base}), skip_evaluator_sleep():
                    live[f"score {path}"] = _live_score(fresh, _config(base))
                fresh.close()
        path_saved = logger.save_session("scripted")
        logger.detach()
    finally:
        context.close()
        server.shutdown()
        server.server_close()
        thread.join()
    yield load_session(path_saved), live


def _live_score(page: Any, config: dict[str, Any]) -> float:
    from webarena.evaluation_harness.evaluators import evaluator_router

    with webarena_config_file(config) as config_file:
        evaluator = evaluator_router(config_file)
        trajectory = build_trajectory(None, stopped=False)
        return float(evaluator(trajectory=trajectory, config_file=config_file, page=page, client=None))


def test_the_click_changed_the_agents_tab_and_not_a_fresh_load(captured: Captured) -> None:
    _, live = captured
    for path in FILES:
        differing = [
            e
            for e, a, f in zip(EXPRESSIONS, live["as_left"][path], live["fresh"][path], strict=True)
            if a != f
        ]
        assert differing == EXPRESSIONS, (path, differing)
    assert live["fresh"]["/rivers"][3] == "\u2212Table of Contents"


def test_a_fresh_load_offline_answers_as_a_fresh_live_load(
    captured: Captured, no_sockets: list[object]
) -> None:
    """Step 1: the agent collapsed /rivers. Its own tab still answers as the agent left it."""
    session, live = captured
    agents = replay_step(session, 1, evaluation=None)
    assert [agents.evaluate(e) for e in EXPRESSIONS] == live["as_left"]["/rivers"]
    fresh = agents.context.new_page()
    fresh.goto(live["base"] + "/rivers")
    assert [fresh.evaluate(e) for e in EXPRESSIONS] == live["fresh"]["/rivers"]
    assert fresh.content() == session.steps[0].tabs[0].html  # the tab's capture right after the load
    assert no_sockets == []


def test_a_fresh_load_after_a_change_the_capture_cannot_undo_is_a_loud_miss(captured: Captured) -> None:
    """Step 3: the click on /prefs also wrote local storage, which a fresh load could read."""
    session, live = captured
    page = replay_step(session, 3, evaluation=None).context.new_page()
    page.goto(live["base"] + "/prefs")
    with pytest.raises(
        ReplayMissError, match="the agent changed this tab's document after it loaded"
    ) as error:
        page.evaluate(EXPRESSIONS[0])
    assert "aria-expanded" in str(error.value)
    assert "local storage of " + live["base"] + " changed since" in str(error.value)


def test_the_official_evaluator_scores_a_fresh_load_as_live(captured: Captured) -> None:
    session, live = captured
    assert live["score /rivers"] == 1.0
    config = _config(live["base"])
    at_click = session.steps[1]
    result = evaluate_session(
        Session(session.header, (*session.steps[:1], at_click), session.end), config, per_step=False
    )
    assert (result.score, result.provenance) == (1.0, "reconstructed")
