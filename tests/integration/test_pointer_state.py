"""Where the agent left the pointer and the focus answers offline as it did live.

Page tools that CSS shows on ``:hover`` (DokuWiki's), a hint shown on ``:focus-within``, a keyboard
focus ring shown by ``:focus-visible``, in the document and in an open shadow root: ``innerText``,
visibility and computed style follow the pointer and the focus, not the document. A real HTTP
server serves the page; a plain Playwright page tabs into the search box and rests the mouse on
the tools, the logger captures, the server stops. Offline, the agent's page must answer as live
(and the unmodified WebArena evaluator score as live); a fresh load of the URL must answer as a
fresh live load, with nothing hovered or focused; an element that cannot be found again is loud.
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
from cdp_integration.session.store import Session, load_session
from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls, webarena_config_file

STYLE = """<style>
.tools ul { display: none; } .tools:hover ul { display: block; }
.hint { display: none; } .search:focus-within .hint { display: block; }
.ring { display: none; } #q:focus-visible ~ .ring { display: inline; }
</style>"""
TOOLS = (
    """<div class="tools"><span>Page tools</span><ul><li>Old revisions</li><li>Backlinks</li></ul></div>"""
)
PAGE = f"""<!DOCTYPE html><html><head><title>Wiki</title>{STYLE}</head><body>
<h1>Start</h1>
<form class="search"><input id="q" name="q"><span class="ring">keyboard</span>
<p class="hint">Press Enter to search</p></form>
{TOOLS}
<div id="host"></div>
<script>
document.getElementById("host").attachShadow({{mode: "open"}}).innerHTML = `{STYLE}<div class="tools"
  id="inner"><span>More</span><ul><li>Export to PDF</li></ul></div>`;
</script></body></html>"""

EXPRESSIONS = [
    "document.body.innerText",
    "document.querySelector('.tools ul').checkVisibility()",
    "getComputedStyle(document.querySelector('.hint')).display",
    "getComputedStyle(document.querySelector('.ring')).display",
    "document.querySelector('#host').shadowRoot.querySelector('.tools').innerText",
    "document.activeElement ? document.activeElement.id : null",
]

CONFIG: dict[str, Any] = {
    "sites": ["wikipedia"],
    "task_id": 99301,
    "require_login": False,
    "storage_state": None,
    "start_url": "__BASE__/wiki",
    "geolocation": None,
    "intent_template": "Find the page's old revisions",
    "instantiation_dict": {},
    "intent": "Find the page's old revisions",
    "require_reset": False,
    "eval": {
        "eval_types": ["program_html"],
        "reference_answers": None,
        "reference_url": "",
        "program_html": [
            {
                "url": "last",
                "locator": "document.querySelector('.tools').innerText",
                "required_contents": {"must_include": ["Old revisions"]},
            }
        ],
        "string_note": "",
        "reference_answer_raw_annotation": "",
    },
    "intent_template_id": 9930,
}


def _configs(base: str) -> dict[str, dict[str, Any]]:
    """The agent's page (the tools are open: passes) and a fresh load of its URL (closed: fails)."""
    agents = copy.deepcopy(CONFIG)
    agents["start_url"] = base + "/wiki"
    fresh = copy.deepcopy(agents)
    fresh["eval"]["program_html"] = [dict(agents["eval"]["program_html"][0], url=base + "/wiki")]
    return {"agents": agents, "fresh": fresh}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGE.encode() if self.path == "/wiki" else b"not found"
        self.send_response(200 if self.path == "/wiki" else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _live_score(page: Any, config: dict[str, Any]) -> float:
    from webarena.evaluation_harness.evaluators import evaluator_router

    with webarena_config_file(config) as config_file:
        evaluator = evaluator_router(config_file)
        trajectory = build_trajectory(None, stopped=False)
        return float(evaluator(trajectory=trajectory, config_file=config_file, page=page, client=None))


Captured = tuple[Session, dict[str, Any]]


@pytest.fixture(scope="module")
def captured(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """(session, live facts); the server is stopped before the tests run."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    context = browser.new_context()
    live: dict[str, Any] = {"base": base}
    try:
        page = context.new_page()
        logger = CDPSessionLogger(tmp_path_factory.mktemp("pointer"), instance_id="pointer")
        logger.attach_to_page(page)
        page.goto(base + "/wiki")
        page.wait_for_function("document.querySelector('#host').shadowRoot?.querySelector('#inner')")
        logger.capture_state_snapshot("goto")
        # where the pointer starts is the browser's: the headless shell's is over the page (html:hover)
        live["start"] = page.evaluate(
            "[...document.querySelectorAll(':hover, :focus-within')].map(e => e.tagName.toLowerCase())"
        )
        page.keyboard.press("Tab")  # keyboard focus: :focus-visible as well as :focus-within
        page.wait_for_function("document.activeElement && document.activeElement.id === 'q'")
        page.hover(".tools span")
        page.wait_for_function("document.querySelector('.tools ul').checkVisibility()")
        step = logger.capture_state_snapshot("hover")
        assert step is not None and step.faults == []
        live["as_left"] = [page.evaluate(e) for e in EXPRESSIONS]
        inner = page.locator("#inner span")
        inner.hover()
        page.wait_for_function(
            "document.querySelector('#host').shadowRoot.querySelector('#inner ul').checkVisibility()"
        )
        assert logger.capture_state_snapshot("hover inside the shadow root") is not None
        live["inner"] = [page.evaluate(e) for e in EXPRESSIONS]
        fresh = context.new_page()
        fresh.goto(base + "/wiki")
        fresh.wait_for_function("document.querySelector('#host').shadowRoot?.querySelector('#inner')")
        live["fresh"] = [fresh.evaluate(e) for e in EXPRESSIONS]
        fresh.close()
        page.hover(".tools span")
        page.wait_for_function("document.querySelector('.tools ul').checkVisibility()")
        # The page runs a script: a fresh load is answered offline only from a capture that shows the
        # document unchanged when the evaluator would read it (3 s after its load).
        page.wait_for_function("performance.now() > 3200")
        step = logger.capture_state_snapshot("hover again")
        assert step is not None and step.faults == []
        with use_site_urls({"WIKIPEDIA": base}), skip_evaluator_sleep():
            live["scores"] = {name: _live_score(page, c) for name, c in _configs(base).items()}
        path = logger.save_session("pointer")
        logger.detach()
    finally:
        context.close()
        server.shutdown()
        server.server_close()
        thread.join()
    yield load_session(path), live


def test_the_pointer_and_the_focus_changed_what_the_page_shows_live(captured: Captured) -> None:
    _, live = captured
    changed = [e for e, a, f in zip(EXPRESSIONS, live["as_left"], live["fresh"], strict=True) if a != f]
    assert changed == EXPRESSIONS[:4] + EXPRESSIONS[5:], (live["as_left"], live["fresh"])
    assert live["inner"][4] != live["fresh"][4]  # the shadow root's tools opened
    assert live["inner"][1] is False  # and the document's closed


def test_the_states_are_recorded_per_element(captured: Captured) -> None:
    session, live = captured
    start = session.steps[0].active_tab.pseudo_classes  # type: ignore[union-attr]
    assert [s.tag for s in start] == live["start"] and all(s.classes == ["hover"] for s in start)
    states = session.steps[1].active_tab.pseudo_classes  # type: ignore[union-attr]
    by_tag = {(s.tag, tuple(s.classes)) for s in states}
    assert ("input", ("focus", "focus-within", "focus-visible")) in by_tag
    assert ("form", ("focus-within",)) in by_tag
    assert ("div", ("hover",)) in by_tag and ("span", ("hover",)) in by_tag
    assert ("html", ("hover", "focus-within")) in by_tag
    inner = session.steps[2].active_tab.pseudo_classes  # type: ignore[union-attr]
    assert any(len(s.path) == 2 and s.tag == "span" and s.classes == ["hover"] for s in inner)


@pytest.mark.parametrize(("step", "facts"), [(1, "as_left"), (2, "inner")])
def test_the_agents_page_answers_as_live(
    captured: Captured, step: int, facts: str, no_sockets: list[object]
) -> None:
    session, live = captured
    page = replay_step(session, step)
    assert [page.evaluate(e) for e in EXPRESSIONS] == live[facts]
    assert no_sockets == []


def test_a_fresh_load_offline_has_nothing_hovered_or_focused_as_live(captured: Captured) -> None:
    session, live = captured
    page = replay_step(session, -1)
    opened = page.context.new_page()
    opened.goto(live["base"] + "/wiki")
    assert [opened.evaluate(e) for e in EXPRESSIONS] == live["fresh"]


def test_the_official_evaluator_scores_as_live(captured: Captured) -> None:
    session, live = captured
    assert live["scores"] == {"agents": 1.0, "fresh": 0.0}
    offline = {}
    for name, config in _configs(live["base"]).items():
        score = evaluate_session(session, config, per_step=False)
        assert score.provenance == "reconstructed"
        offline[name] = score.score
    assert offline == live["scores"]


def test_an_element_the_replayed_page_lacks_is_loud(captured: Captured) -> None:
    session, live = captured
    step = session.final_step
    tab = step.active_tab
    assert tab is not None and tab.pseudo_classes
    moved = [s.model_copy(update={"path": [9999]}) if s.tag == "div" else s for s in tab.pseudo_classes]
    tabs = [tab.model_copy(update={"pseudo_classes": moved})]
    broken = Session(
        session.header, (*session.steps[:-1], step.model_copy(update={"tabs": tabs})), session.end
    )
    with pytest.raises(ReplayMissError, match="under the pointer or focused"):
        replay_step(broken, -1).evaluate(EXPRESSIONS[0])
    with pytest.raises(ReplayMissError, match="under the pointer or focused"):
        evaluate_session(broken, _configs(live["base"])["agents"], per_step=False)
