"""Form state: what the agent typed, checked and selected answers offline as it did live.

A real HTTP server serves a form in the main document, in an open shadow root and in a same-origin
iframe. On a plain Playwright page the test types into inputs and textareas, checks and unchecks
boxes, picks radios and options (single and multiple), captures, and stops the server. Offline, the
agent's page (the evaluator's url ``last``) must give the live answers for ``.value``, ``.checked``,
``selectedIndex`` and ``selectedOptions``; a fresh load of the same URL must give the defaults, as a
fresh live load does. The unmodified WebArena evaluator scores a ``.value`` config the same live
and offline.
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
from cdp_integration.debug.viewer import inert_html
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.replay import replay_step
from cdp_integration.session.store import Session, load_session
from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls, webarena_config_file

CONTROLS = """<input id="{p}title" name="title" value="default title">
<textarea id="{p}body" name="body">default body</textarea>
<input id="{p}agree" type="checkbox" name="agree"><input id="{p}news" type="checkbox" name="news" checked>
<select id="{p}color" name="color"><option>red</option><option selected>green</option><option>blue</option></select>
<select id="{p}sizes" name="sizes" multiple><option selected>S</option><option>M</option><option>L</option></select>
<input type="radio" name="ship" id="{p}ship-a" value="a" checked><input type="radio" name="ship" id="{p}ship-b" value="b">
<input id="{p}qty" type="number" name="qty" value="1"><input id="{p}range" type="range" name="level">"""

PAGE = f"""<!DOCTYPE html><html><head><title>Form</title></head><body>
<form id="main">{CONTROLS.format(p="")}
<input id="password" type="password" name="password"></form>
<div id="host"></div>
<iframe id="frame" src="/frame"></iframe>
<script>
document.getElementById("host").attachShadow({{mode: "open"}}).innerHTML = `<form>{CONTROLS.format(p="s-")}</form>`;
</script></body></html>"""
FRAME = f"""<!DOCTYPE html><html><head><title>Framed</title></head><body>
<form>{CONTROLS.format(p="f-")}</form></body></html>"""
FILES = {"/form": PAGE, "/frame": FRAME}

ROOTS = {
    "": "document",
    "s-": "document.querySelector('#host').shadowRoot",
    "f-": "document.querySelector('#frame').contentDocument",
}


def _expressions(prefix: str, root: str) -> list[str]:
    def at(name: str) -> str:
        return f"{root}.querySelector('#{prefix}{name}')"

    return [
        f"{at('title')}.value",
        f"{at('title')}.defaultValue",
        f"{at('body')}.value",
        f"{at('agree')}.checked",
        f"{at('news')}.checked",
        f"{at('color')}.selectedIndex",
        f"{at('color')}.value",
        f"[...{at('sizes')}.selectedOptions].map(o => o.value).join()",
        f"{at('ship-a')}.checked + ',' + {at('ship-b')}.checked",
        f"{at('qty')}.value",
        f"{at('range')}.value",
        f"[...new FormData({root}.querySelector('form')).entries()].join(';')",
        f"{root}.querySelectorAll(':checked').length",
    ]


EXPRESSIONS = [e for prefix, root in ROOTS.items() for e in _expressions(prefix, root)] + [
    "document.querySelector('#password').value"
]


def _act(page: Any) -> None:
    """What the agent does: type, check, uncheck, pick, in each of the three documents."""
    for prefix, scope in (("", page), ("s-", page.locator("#host")), ("f-", page.frame_locator("#frame"))):
        scope.locator(f"#{prefix}title").fill("Typed title")
        scope.locator(f"#{prefix}body").fill(f"typed {prefix or 'main'}\nsecond line")
        scope.locator(f"#{prefix}agree").check()
        scope.locator(f"#{prefix}news").uncheck()
        scope.locator(f"#{prefix}color").select_option("blue")
        scope.locator(f"#{prefix}sizes").select_option(["M", "L"])
        scope.locator(f"#{prefix}ship-b").check()
        scope.locator(f"#{prefix}qty").fill("3")
    page.fill("#password", "hunter2-secret")


CONFIG: dict[str, Any] = {
    "sites": ["shopping"],
    "task_id": 99201,
    "require_login": False,
    "storage_state": None,
    "start_url": "__BASE__/form",
    "geolocation": None,
    "intent_template": "Draft a message",
    "instantiation_dict": {},
    "intent": "Draft a message",
    "require_reset": False,
    "eval": {
        "eval_types": ["program_html"],
        "reference_answers": None,
        "reference_url": "",
        "program_html": [
            {
                "url": "last",
                "locator": "document.querySelector('#title').value",
                "required_contents": {"exact_match": "Typed title"},
            },
            {
                "url": "last",
                "locator": "document.querySelector('#frame').contentDocument.querySelector('#f-body').value",
                "required_contents": {"must_include": ["typed f-", "second line"]},
            },
            {
                "url": "last",
                "locator": "document.querySelector('#host').shadowRoot.querySelector('#s-color').selectedIndex",
                "required_contents": {"exact_match": "2"},
            },
        ],
        "string_note": "",
        "reference_answer_raw_annotation": "",
    },
    "intent_template_id": 9920,
}


def _configs(base: str) -> dict[str, dict[str, Any]]:
    """The task config (the agent's page: passes), a wrong expectation (fails), and a fresh load of the
    form's URL (the evaluator's own tab: the default value)."""
    passing = copy.deepcopy(CONFIG)
    passing["start_url"] = base + "/form"
    failing = copy.deepcopy(passing)
    failing["eval"]["program_html"][0]["required_contents"] = {"exact_match": "default title"}
    fresh = copy.deepcopy(failing)
    fresh["eval"]["program_html"] = [dict(failing["eval"]["program_html"][0], url=base + "/form")]
    return {"passing": passing, "failing": failing, "fresh": fresh}


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


def _live_score(page: Any, config: dict[str, Any]) -> float:
    """The official evaluator, unmodified, on the live page."""
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
        logger = CDPSessionLogger(tmp_path_factory.mktemp("forms"), instance_id="forms")
        logger.attach_to_page(page)
        page.goto(base + "/form")
        page.wait_for_function("document.querySelector('#frame').contentDocument?.querySelector('#f-title')")
        first = logger.capture_state_snapshot("goto")
        assert first is not None and first.faults == []
        _act(page)
        step = logger.capture_state_snapshot("fill")
        assert step is not None and step.faults == []
        live["as_left"] = [page.evaluate(e) for e in EXPRESSIONS]
        fresh = context.new_page()
        fresh.goto(base + "/form")
        fresh.wait_for_function("document.querySelector('#frame').contentDocument?.querySelector('#f-title')")
        live["fresh"] = [fresh.evaluate(e) for e in EXPRESSIONS]
        fresh.close()
        with use_site_urls({"SHOPPING": base}), skip_evaluator_sleep():
            live["scores"] = {name: _live_score(page, c) for name, c in _configs(base).items()}
        path = logger.save_session("forms")
        logger.detach()
    finally:
        context.close()
        server.shutdown()
        server.server_close()
        thread.join()
    yield load_session(path), live


def test_the_form_actually_changed_live(captured: Captured) -> None:
    _, live = captured
    changed = [e for e, a, f in zip(EXPRESSIONS, live["as_left"], live["fresh"], strict=True) if a != f]
    unchanged = {e for e in EXPRESSIONS if e not in changed}
    assert all(e.endswith((".defaultValue", "range').value")) for e in unchanged), unchanged
    assert len(changed) == len(EXPRESSIONS) - 6


def test_only_changed_controls_are_stored(captured: Captured) -> None:
    session, _ = captured
    assert session.header.format_version == 3
    assert session.steps[0].active_tab.form_state == []  # type: ignore[union-attr]
    controls = session.final_step.active_tab.form_state  # type: ignore[union-attr]
    per_root = 9  # title, body, agree, news, color, sizes, ship-a, ship-b, qty (not the untouched range)
    assert len(controls) == 3 * per_root + 1  # and the password
    assert {len(c.path) for c in controls} == {1, 2}
    framed = [c for c in controls if c.frame]
    assert len(framed) == per_root and all(c.frame.endswith("/frame") for c in framed)
    title = next(c for c in controls if c.id == "title")
    assert (title.tag, title.type, title.name, title.value) == ("input", "text", "title", "Typed title")
    sizes = next(c for c in controls if c.id == "f-sizes")
    assert (sizes.selected, sizes.selected_text) == ([1, 2], ["M", "L"])


def test_the_agents_page_answers_as_live(captured: Captured, no_sockets: list[object]) -> None:
    session, live = captured
    page = replay_step(session, -1)
    assert [page.evaluate(e) for e in EXPRESSIONS] == live["as_left"]
    assert page.locator("#title").count() == 1
    assert no_sockets == []


def test_a_fresh_load_offline_has_the_defaults_as_live(captured: Captured) -> None:
    session, live = captured
    page = replay_step(session, -1)
    page.goto(live["base"] + "/form")
    assert [page.evaluate(e) for e in EXPRESSIONS] == live["fresh"]
    opened = page.context.new_page()
    opened.goto(live["base"] + "/form")
    assert [opened.evaluate(e) for e in EXPRESSIONS] == live["fresh"]


def test_the_official_evaluator_scores_value_questions_as_live(captured: Captured) -> None:
    session, live = captured
    assert live["scores"] == {"passing": 1.0, "failing": 0.0, "fresh": 1.0}
    offline = {}
    for name, config in _configs(live["base"]).items():
        score = evaluate_session(session, config, per_step=False)
        assert score.provenance == "reconstructed"
        offline[name] = score.score
    assert offline == live["scores"]


def test_the_viewer_shows_the_typed_values_where_they_were_typed(captured: Captured) -> None:
    session, _ = captured
    tab = session.final_step.active_tab
    assert tab is not None and tab.html is not None
    page = inert_html(tab.html, tab.url, form_state=tab.form_state).html
    for prefix in ("", "s-"):  # the document and its shadow root (frames are not rendered)
        assert f'<input id="{prefix}title" name="title" value="Typed title" data-cdp-form>' in page
        assert f'<input id="{prefix}agree" type="checkbox" name="agree" checked data-cdp-form>' in page
        assert f'<input id="{prefix}news" type="checkbox" name="news" data-cdp-form>' in page
        assert f">typed {prefix or 'main'}\nsecond line</textarea>" in page
    assert page.count("<option selected>") == 2 * 3  # blue; M and L
    assert page.count(" data-cdp-form") == 2 * 9 + 1  # every changed control is outlined
    assert 'type="password" name="password" value="••••••••••••••" data-cdp-form' in page


def _with_title_control(session: Session, **changes: Any) -> Session:
    step = session.final_step
    tab = step.active_tab
    assert tab is not None
    controls = [c.model_copy(update=changes) if c.id == "title" else c for c in tab.form_state]
    tabs = [tab.model_copy(update={"form_state": controls})]
    return Session(session.header, (*session.steps[:-1], step.model_copy(update={"tabs": tabs})), session.end)


def test_a_control_found_by_identity_elsewhere_is_restored_and_a_missing_one_is_loud(
    captured: Captured,
) -> None:
    session, live = captured
    moved = replay_step(_with_title_control(session, path=[0]), -1)
    assert moved.evaluate(EXPRESSIONS[0]) == live["as_left"][0] == "Typed title"
    missing = replay_step(_with_title_control(session, id="gone", path=[0]), -1)
    with pytest.raises(ReplayMissError, match=r"input#gone.*cannot be restored"):
        missing.evaluate(EXPRESSIONS[0])
    # The evaluator swallows a failed evaluate (its answer becomes ""): the scoring still fails loudly.
    config = _configs(live["base"])["passing"]
    with pytest.raises(ReplayMissError, match="input#gone"):
        evaluate_session(_with_title_control(session, id="gone", path=[0]), config, per_step=False)


def test_a_page_the_offline_browser_cannot_load_is_loud_not_a_swallowed_zero(captured: Captured) -> None:
    """The offline browser is Playwright's sync API, bound to the thread that started it: scoring from
    another thread (a thread pool) cannot load the captured page there. The evaluator would swallow
    the failure as an empty answer (a silent 0.0); it is a ``ReplayMissError`` naming the cause."""
    session, live = captured
    config = _configs(live["base"])["passing"]
    assert evaluate_session(session, config, per_step=False).score == 1.0  # the browser starts here
    outcome: list[BaseException | float] = []

    def elsewhere() -> None:
        try:
            outcome.append(evaluate_session(session, config, per_step=False).score)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert len(outcome) == 1 and isinstance(outcome[0], ReplayMissError), outcome
    assert "the offline browser could not load the captured page" in str(outcome[0])
