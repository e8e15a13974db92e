"""The agent's current tab: the end-of-episode evaluator and offline scoring ask the tab the agent used.

A real HTTP server serves two pages. On a plain Playwright page the logger attaches to the first tab,
then the agent works in another tab, opened each way a browser opens one (``context.new_page()``, a
``target=_blank`` link, ``window.open``), or goes back to the first tab and acts there, or closes the
second. The official evaluator, unmodified, scores a url_match on the tab the agent last used (live);
the session's recorded probe and its reconstructed answer, with the server stopped, must give the same.
A BrowserGym env does the same through BrowserGym's own notion of its active page. A step that cannot
tell which tab the agent was on is a loud miss, never the first tab's answer.
"""

from __future__ import annotations

import dataclasses
import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.capture.probes import build_trajectory
from cdp_integration.demo.agent import patient_action_mapping
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import Session, load_session
from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls, webarena_config_file

PAGES = {
    "/a.html": """<!DOCTYPE html><html><head><title>A</title></head><body><h1>First</h1>
<a id="blank" target="_blank" href="/b.html?x=1">in a new tab</a>
<button id="open" onclick="window.open('/b.html?x=2')">window.open</button>
<input id="q" name="q"></body></html>""",
    "/b.html": """<!DOCTYPE html><html><head><title>B</title></head><body><h1>Second</h1>
<input id="r" name="r"></body></html>""",
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGES.get(self.path.split("?", 1)[0])
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def _config(base: str, path: str) -> dict[str, Any]:
    return {
        "sites": ["shopping"],
        "task_id": 99301,
        "require_login": False,
        "storage_state": None,
        "start_url": f"{base}/a.html",
        "geolocation": None,
        "intent_template": "Open the second page",
        "instantiation_dict": {},
        "intent": "Open the second page",
        "require_reset": False,
        "eval": {
            "eval_types": ["url_match"],
            "reference_answers": None,
            "reference_url": f"{base}{path}",
            "url_note": "GOLD in PRED",
            "program_html": [],
            "string_note": "",
        },
        "intent_template_id": 9930,
    }


def _live_score(page: Page, config: dict[str, Any]) -> float:
    """The official evaluator, unmodified, on the live page."""
    from webarena.evaluation_harness.evaluators import evaluator_router

    with webarena_config_file(config) as config_file, skip_evaluator_sleep():
        evaluator = evaluator_router(config_file)
        trajectory = build_trajectory(None, stopped=False)
        return float(evaluator(trajectory=trajectory, config_file=config_file, page=page, client=None))


def _new_page(first: Page, base: str) -> Page:
    second = first.context.new_page()
    second.goto(base + "/b.html?x=1")
    return second


def _target_blank(first: Page, base: str) -> Page:
    with first.context.expect_page() as opened:
        first.click("#blank")
    second = opened.value
    second.wait_for_load_state()
    return second


def _window_open(first: Page, base: str) -> Page:
    with first.context.expect_page() as opened:
        first.click("#open")
    second = opened.value
    second.wait_for_load_state()
    return second


def _back_to_first(first: Page, base: str) -> Page:
    second = _new_page(first, base)
    second.fill("#r", "typed in the second tab")
    first.bring_to_front()
    first.fill("#q", "back in the first tab")
    return first


def _closed_second(first: Page, base: str) -> Page:
    second = _new_page(first, base)
    second.close()
    return first


# scenario -> (what the agent does, returning the tab it ended on; the url the task asks for)
SCENARIOS: dict[str, tuple[Callable[[Page, str], Page], str]] = {
    "new_page": (_new_page, "/b.html?x=1"),
    "target_blank": (_target_blank, "/b.html?x=1"),
    "window_open": (_window_open, "/b.html?x=2"),
    "back_to_first": (_back_to_first, "/a.html"),
    "closed_second": (_closed_second, "/a.html"),
}

Recorded = dict[str, tuple[Session, float, float]]
"""scenario -> (session, live score on the agent's tab, live score on the first tab)."""


@pytest.fixture(scope="module")
def recorded(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    out = tmp_path_factory.mktemp("current-tab")
    found: Recorded = {}
    try:
        for name, (act, path) in SCENARIOS.items():
            context = browser.new_context()
            try:
                first = context.new_page()
                first.goto(base + "/a.html")
                config = _config(base, path)
                logger = CDPSessionLogger(out, instance_id=name, task={"site_urls": {"shopping": base}})
                logger.attach_to_page(first)
                logger.capture_state_snapshot("goto")
                current = act(first, base)
                logger.capture_state_snapshot("action", action=name)
                with use_site_urls({"SHOPPING": base}):
                    live = _live_score(current, config)
                    on_first = _live_score(first, config) if not first.is_closed() else 0.0
                logger.task["config"] = config
                session_path = logger.save_session(name)  # runs the end-of-episode probe
                logger.detach()
            finally:
                context.close()
            found[name] = (load_session(session_path), live, on_first)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    yield found


def _reconstructed(session: Session) -> Session:
    """The session without its recorded probe: offline scoring reconstructs every answer."""
    assert session.end is not None
    return dataclasses.replace(session, end=session.end.model_copy(update={"probe": None}))


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scored_on_the_tab_the_agent_used(
    recorded: Recorded, scenario: str, no_sockets: list[object]
) -> None:
    session, live, on_first = recorded[scenario]
    if scenario in ("new_page", "target_blank", "window_open"):
        assert (live, on_first) == (1.0, 0.0)  # the test tells the tabs apart
    else:
        assert live == 1.0
    final = session.final_step
    assert final.current_tab_source in {"opened", "navigated", "acted", "only_tab"}, final.current_tab_source
    assert session.end is not None and session.end.probe is not None
    assert session.end.probe.score == live
    recorded_score = evaluate_session(session)
    assert recorded_score.score == live and recorded_score.steps[-1].source == "recorded"
    reconstructed = evaluate_session(_reconstructed(session))
    assert reconstructed.score == live and reconstructed.steps[-1].source != "recorded"
    assert no_sockets == []


def test_each_step_says_how_its_current_tab_was_decided(recorded: Recorded) -> None:
    sources = {
        name: [s.current_tab_source for s in session.steps] for name, (session, _, _) in recorded.items()
    }
    assert sources["new_page"][0] == "only_tab" and sources["new_page"][1] in {"opened", "navigated"}
    assert sources["back_to_first"] == ["only_tab", "acted"]
    assert sources["closed_second"] == ["only_tab", "only_tab"]


def test_a_step_that_cannot_tell_the_tab_is_a_loud_miss(recorded: Recorded) -> None:
    session, _, _ = recorded["new_page"]
    final = session.final_step
    unknown = final.model_copy(update={"current_tab_source": "unknown"})
    doubtful = dataclasses.replace(_reconstructed(session), steps=(*session.steps[:-1], unknown))
    with pytest.raises(ReplayMissError, match=r"could not tell which one the agent was on.*url_match"):
        evaluate_session(doubtful)


@pytest.fixture(scope="module")
def browsergym_two_tabs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, float, float]:
    """A BrowserGym env whose agent opens a tab (BrowserGym's ``new_tab`` action) and works there:
    (session, live score on BrowserGym's active page, live score on the first tab)."""
    import browsergym.core  # noqa: F401 - registers browsergym/openended
    import gymnasium as gym

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    config = _config(base, "/b.html?x=1")
    env = gym.make(
        "browsergym/openended",
        task_kwargs={"start_url": base + "/a.html"},
        headless=True,
        slow_mo=0,
        wait_for_user_message=False,
        action_mapping=patient_action_mapping(),
    )
    try:
        logger = CDPSessionLogger(
            tmp_path_factory.mktemp("bg-tabs"), instance_id="bg", task={"site_urls": {"shopping": base}}
        )
        logger.attach_to_browsergym_env(env)
        env.reset()
        env.step("new_tab()")
        env.step(f"goto({base + '/b.html?x=1'!r})")
        core: Any = env.unwrapped
        first = core.context.pages[0]
        with use_site_urls({"SHOPPING": base}):
            live = _live_score(core.page, config)
            on_first = _live_score(first, config)
        logger.task["config"] = config
        path = logger.save_session("bg")
    finally:
        env.close()
        server.shutdown()
        server.server_close()
        thread.join()
    return load_session(path), live, on_first


def test_browsergym_scores_on_its_active_page(
    browsergym_two_tabs: tuple[Session, float, float], no_sockets: list[object]
) -> None:
    session, live, on_first = browsergym_two_tabs
    assert (live, on_first) == (1.0, 0.0)
    assert [s.current_tab_source for s in session.steps][-1] == "harness"
    assert session.end is not None and session.end.probe is not None and session.end.probe.score == live
    assert evaluate_session(session).score == live
    assert evaluate_session(_reconstructed(session)).score == live
    assert no_sockets == []


def test_the_session_file_keeps_the_source(recorded: Recorded) -> None:
    session, _, _ = recorded["window_open"]
    assert session.path is not None and Path(session.path).exists()
    assert load_session(session.path).final_step.current_tab_source == session.final_step.current_tab_source
