"""A form filled in a BrowserGym episode and not submitted answers offline as live, fresh loads too.

BrowserGym's observation writes every element's live ``.value`` into its ``value`` attribute and
``.checked`` into ``checked``, in the live DOM. The capture must still store the page's own
attributes (so a fresh load of the URL answered offline has the defaults a fresh live load has) and
what the agent typed as form state (so the agent's page answers as live). One short episode of the
real ``browsergym/openended`` env on a page served by a real HTTP server: type into two inputs, a
password input and a textarea, check one box and uncheck another, no submit; then the server stops
and the offline answers are compared with the live ones, and the unmodified WebArena evaluator
scores a fresh-load config and url ``last`` configs the same live and offline.

On the agent's page live, the attributes stay as BrowserGym's last observation wrote them
(``getAttribute('value')`` is the typed text, ``[value=...]`` selectors and ``outerHTML`` see it, so
does ``content()``, which a program_html locator ``""`` reads): the tab keeps what the marking wrote
(``marked_attributes``) and the agent's page offline answers with it; a fresh load keeps the page's own.
"""

from __future__ import annotations

import copy
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.capture.probes import build_trajectory
from cdp_integration.demo.agent import patient_action_mapping
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.replay import replay_step
from cdp_integration.session.models import MarkedAttributes
from cdp_integration.session.redact import redact_session
from cdp_integration.session.store import Session, load_session
from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls, webarena_config_file

pytestmark = pytest.mark.integration

PAGE = """<!DOCTYPE html><html><head><title>Review</title></head><body>
<form id="review" method="post" action="/review">
<input id="title" name="title" value="default title"><input id="nick" name="nick">
<input id="pw" name="pw" type="password">
<textarea id="body" name="body">default body</textarea>
<input id="agree" type="checkbox" name="agree"><input id="news" type="checkbox" name="news" checked>
<select id="rating" name="rating"><option>1</option><option selected>3</option><option>5</option></select>
<ol><li id="first">first</li></ol><button id="send" type="button">Send</button>
</form></body></html>"""

PASSWORD = "s3cret-typed"
ACTIONS = [
    ("fill", "#title", "Typed title"),
    ("fill", "#nick", "emma"),
    ("fill", "#pw", PASSWORD),
    ("fill", "#body", "Typed body"),
    ("click", "#agree"),
    ("click", "#news"),
]

IDS = ("title", "nick", "pw", "body", "agree", "news", "rating", "first", "send")
EXPRESSIONS = [
    *(f"document.querySelector('#{i}').value" for i in ("title", "nick", "body", "rating")),
    *(f"document.querySelector('#{i}').checked" for i in ("agree", "news")),
    "[...new FormData(document.querySelector('#review')).entries()].join(';')",
    "document.querySelectorAll(':checked').length",
]
"""Questions on the page as the agent left it (what BrowserGym's marking does not change)."""
FRESH = [
    *EXPRESSIONS,
    *(f"document.querySelector('#{i}').defaultValue" for i in ("title", "nick", "body")),
    *(f"document.querySelector('#{i}').defaultChecked" for i in ("agree", "news")),
    *(f"document.querySelector('#{i}').getAttribute('value')" for i in IDS),
    *(f"document.querySelector('#{i}').hasAttribute('checked')" for i in ("agree", "news")),
    "document.querySelector('#review').outerHTML.replace(/ (bid|browsergym_[a-z_]+)=\"[^\"]*\"/g, '')",
    "document.querySelector('#review').outerHTML",  # BrowserGym's bid marking is on the agent's page only
    "document.querySelectorAll('[bid], [browsergym_visibility_ratio]').length",
]
"""Questions on a fresh load of the form's URL: attributes too, which BrowserGym's marking rewrote."""
MARKED = [
    *(f"document.querySelector('#{i}').getAttribute('value')" for i in IDS),
    *(f"document.querySelector('#{i}').hasAttribute('checked')" for i in ("agree", "news")),
    *(f"document.querySelectorAll('[value=\"{v}\"]').length" for v in ("Typed title", "emma", "3", "first")),
    "document.querySelectorAll('[checked]').length",
    *(f"document.querySelector('#{i}').defaultValue" for i in ("title", "nick")),
    "document.querySelector('#review').outerHTML",
]
"""Questions on the page as the agent left it whose live answers BrowserGym's marking changed."""
FRESH += [f"document.querySelectorAll('[value=\"{v}\"]').length" for v in ("Typed title", "emma", "3")]

CONFIG: dict[str, Any] = {
    "sites": ["shopping"],
    "task_id": 99301,
    "require_login": False,
    "storage_state": None,
    "start_url": "__BASE__/form",
    "geolocation": None,
    "intent_template": "Draft a review",
    "instantiation_dict": {},
    "intent": "Draft a review",
    "require_reset": False,
    "eval": {
        "eval_types": ["program_html"],
        "reference_answers": None,
        "reference_url": "",
        "program_html": [],
        "string_note": "",
        "reference_answer_raw_annotation": "",
    },
    "intent_template_id": 9930,
}


def _configs(base: str) -> dict[str, dict[str, Any]]:
    """url ``last`` (the typed title: passes) and a fresh load of the form (its default title: passes)."""

    def config(url: str, expected: str) -> dict[str, Any]:
        made = copy.deepcopy(CONFIG)
        made["start_url"] = base + "/form"
        made["eval"]["program_html"] = [
            {
                "url": url,
                "locator": "document.querySelector('#title').value + '|' + document.querySelector('#agree').checked",
                "required_contents": {"exact_match": expected},
            }
        ]
        return made

    content = copy.deepcopy(CONFIG)  # locator "": the page's content(), attributes as BrowserGym left them
    content["start_url"] = base + "/form"
    content["eval"]["program_html"] = [
        {"url": "last", "locator": "", "required_contents": {"must_include": ['value="Typed title"']}}
    ]
    return {
        "last": config("last", "Typed title|true"),
        "fresh": config(base + "/form", "default title|false"),
        "content": content,
    }


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = (PAGE if self.path == "/form" else "not found").encode()
        self.send_response(200 if self.path == "/form" else 404)
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
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """(session, live facts) of one BrowserGym episode; the server is stopped before the tests run."""
    import browsergym.core  # noqa: F401 - registers browsergym/openended
    import gymnasium as gym

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    live: dict[str, Any] = {"base": base}
    out: Path = tmp_path_factory.mktemp("bg-forms")
    env = gym.make(
        "browsergym/openended",
        task_kwargs={"start_url": base + "/form"},
        headless=True,
        slow_mo=0,
        action_mapping=patient_action_mapping(),
        wait_for_user_message=False,
    )
    try:
        logger = CDPSessionLogger(out, instance_id="bg-forms")
        logger.attach_to_browsergym_env(env)
        env.reset()
        page = env.unwrapped.page  # type: ignore[attr-defined]
        for verb, selector, *text in ACTIONS:
            bid = page.get_attribute(selector, "bid")
            env.step(f"{verb}({bid!r}{''.join(f', {t!r}' for t in text)})")
        live["marked"] = page.evaluate("document.querySelector('#title').getAttribute('value')")
        live["as_left"] = [page.evaluate(e) for e in EXPRESSIONS]
        live["as_marked"] = [page.evaluate(e) for e in MARKED]
        fresh = page.context.new_page()
        fresh.goto(base + "/form")
        live["fresh"] = [fresh.evaluate(e) for e in FRESH]
        fresh.close()
        with use_site_urls({"SHOPPING": base}), skip_evaluator_sleep():
            live["scores"] = {name: _live_score(page, c) for name, c in _configs(base).items()}
        path = logger.save_session("bg-forms")
        logger.detach()
    finally:
        env.close()
        server.shutdown()
        server.server_close()
        thread.join()
    yield load_session(path), live


def test_browsergym_marked_the_typed_values_into_attributes_live(captured: Captured) -> None:
    session, live = captured
    assert live["marked"] == "Typed title"  # what this is about: the live DOM holds the typed value
    assert live["as_left"][:3] == ["Typed title", "emma", "Typed body"]
    assert live["fresh"][:3] == ["default title", "", "default body"]
    assert all(not step.faults for step in session.steps), [s.faults for s in session.steps]


def test_the_capture_stores_the_pages_attributes_and_the_typed_values(captured: Captured) -> None:
    session, _ = captured
    tab = session.final_step.active_tab
    assert tab is not None and tab.html is not None
    assert '<input id="title" name="title" value="default title" ' in tab.html
    assert "Typed title" not in tab.html and "emma" not in tab.html
    tags = {m[1]: m[0] for m in re.finditer(r'<[a-z]+ id="([a-z]+)"[^>]*>', tab.html)}
    assert " value=" not in tags["nick"] and " value=" not in tags["first"] and " value=" not in tags["send"]
    assert " checked=" in tags["news"] and " checked=" not in tags["agree"]
    typed = {c.id: (c.value, c.checked) for c in tab.form_state}
    assert typed == {
        "title": ("Typed title", None),
        "nick": ("emma", None),
        "body": ("Typed body", None),
        "agree": (None, True),
        "news": (None, False),
        "pw": (PASSWORD, None),
    }


def test_the_agents_page_answers_as_live(captured: Captured, no_sockets: list[object]) -> None:
    session, live = captured
    page = replay_step(session, -1)
    assert [page.evaluate(e) for e in EXPRESSIONS] == live["as_left"]
    assert no_sockets == []


def test_the_agents_page_has_the_attributes_browsergym_wrote_as_live(captured: Captured) -> None:
    session, live = captured
    answers = dict(zip(MARKED, live["as_marked"], strict=True))
    assert answers["document.querySelector('#title').getAttribute('value')"] == "Typed title"
    assert answers["document.querySelector('#nick').getAttribute('value')"] == "emma"
    assert answers["document.querySelector('#agree').hasAttribute('checked')"] is True
    assert answers["document.querySelector('#news').hasAttribute('checked')"] is False
    tab = session.final_step.active_tab
    assert tab is not None
    marks = {m.id: (m.value, m.checked) for m in tab.marked_attributes if m.id}
    assert {i: marks.get(i) for i in ("title", "nick", "agree", "news")} == {
        "title": ("Typed title", None),
        "nick": ("emma", None),
        "agree": ("on", True),  # a checkbox's .value is "on": written too
        "news": ("on", False),
    }
    page = replay_step(session, -1)
    offline = dict(zip(MARKED, [page.evaluate(e) for e in MARKED], strict=True))
    assert offline == answers
    assert page.content().count('value="Typed title"') == 1  # locator "": what program_html reads


def test_a_marked_attribute_matching_no_single_element_of_its_tag_is_skipped(captured: Captured) -> None:
    """The records are untrusted: a bid on no element or on two, or on an element of another tag, is
    left out (the page's own attribute stays); a value is set as data, whatever it holds."""
    session, _ = captured
    step = session.final_step
    tab = step.active_tab
    assert tab is not None and tab.html is not None
    bids = {mark.id: mark.bid for mark in tab.marked_attributes if mark.id}
    hostile = '"></textarea><img src=x onerror="document.title=1">${1}`'
    marks = [
        MarkedAttributes(bid="no-such-bid", tag="input", value="nowhere"),
        MarkedAttributes(bid=bids["nick"], tag="input", value="twice"),  # on two elements below
        MarkedAttributes(bid=bids["title"], tag="textarea", value="wrong tag"),
        MarkedAttributes(bid=bids["body"], tag="textarea", value=hostile, value_at=10**20, checked_at=-1),
    ]
    html = tab.html.replace("</form>", f'<input bid="{bids["nick"]}"></form>', 1)
    tabs = [tab.model_copy(update={"html": html, "marked_attributes": marks})]
    changed = Session(
        session.header, (*session.steps[:-1], step.model_copy(update={"tabs": tabs})), session.end
    )
    page = replay_step(changed, -1)
    questions = [
        *(f"document.querySelector('#{i}').getAttribute('value')" for i in ("nick", "title", "body")),
        "document.querySelectorAll('img').length",
        "document.querySelector('#title').value",
    ]
    assert [page.evaluate(e) for e in questions] == [None, "default title", hostile, 0, "Typed title"]


def test_the_typed_password_browsergym_wrote_into_its_attribute_is_redacted(captured: Captured) -> None:
    """BrowserGym copies a typed password into the ``value`` attribute: redaction replaces that copy
    with the form state's placeholder, so the redacted agent's page still agrees with itself."""
    session, live = captured
    assert (
        dict(zip(MARKED, live["as_marked"], strict=True))[
            "document.querySelector('#pw').getAttribute('value')"
        ]
        == PASSWORD
    )
    redacted = redact_session(session)
    assert all(PASSWORD not in step.model_dump_json() for step in redacted.steps)
    tab = redacted.final_step.active_tab
    assert tab is not None
    mark = next(m.value for m in tab.marked_attributes if m.id == "pw")
    assert mark == next(c.value for c in tab.form_state if c.id == "pw")
    assert mark is not None and mark.startswith("REDACTED-password-")
    page = replay_step(redacted, -1)
    questions = ["document.querySelector('#pw').getAttribute('value')", "document.querySelector('#pw').value"]
    assert [page.evaluate(e) for e in questions] == [mark, mark]


def test_a_fresh_load_offline_answers_as_a_fresh_live_load(captured: Captured) -> None:
    session, live = captured
    page = replay_step(session, -1)
    page.goto(live["base"] + "/form")
    assert dict(zip(FRESH, [page.evaluate(e) for e in FRESH], strict=True)) == dict(
        zip(FRESH, live["fresh"], strict=True)
    )


def test_the_official_evaluator_scores_as_live(captured: Captured) -> None:
    session, live = captured
    assert live["scores"] == {"last": 1.0, "fresh": 1.0, "content": 1.0}
    offline = {}
    for name, config in _configs(live["base"]).items():
        score = evaluate_session(session, config, per_step=False)
        assert score.provenance == "reconstructed"
        offline[name] = score.score
    assert offline == live["scores"]
