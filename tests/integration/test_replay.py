"""Replay: Playwright's types over a captured session; the end-of-episode probe; offline scoring.

One episode on a plain Playwright page (no BrowserGym): sign in, post a review, stay on the product.
At ``save_session`` the logger runs the official evaluator live on the final state (the probe) with a
task config that needs the page itself, another page, a Magento REST helper and the LLM judge. Offline,
with the demo server stopped and Python sockets refused, the same evaluator scores the session file.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from playwright.sync_api import BrowserContext, CDPSession, Page
from playwright.sync_api import Error as PlaywrightError

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.cli import cli
from cdp_integration.demo import DemoSite
from cdp_integration.demo.tasks import configure_demo_environment, site_urls
from cdp_integration.errors import ReconstructedAnswerError, ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.replay import (
    MockBrowserContext,
    MockCDPSession,
    MockPage,
    WebArenaCDPIntegration,
    offline_browser,
    replay_step,
)
from cdp_integration.session.store import Session, load_session

CONFIG = {
    "sites": ["shopping"],
    "task_id": 99001,
    "require_login": True,
    "storage_state": None,
    "start_url": "__SHOPPING__/login",
    "geolocation": None,
    "intent_template": "Review {{product}} and tell me who wrote its latest review",
    "instantiation_dict": {"product": "the mug set"},
    "intent": "Review the mug set and tell me who wrote its latest review",
    "require_reset": True,
    "eval": {
        "eval_types": ["string_match", "program_html"],
        "reference_answers": {"fuzzy_match": ["Emma Lopez"]},
        "reference_url": "",
        "program_html": [
            {
                "url": "last",
                "locator": "[...document.querySelectorAll('.review-title')].map(e => e.outerText).join(' | ')",
                "required_contents": {"must_include": ["Replay works"]},
            },
            {
                "url": "__SHOPPING__/products/5",
                "locator": "func:shopping_get_sku_latest_review_author('DS-HK-002')",
                "required_contents": {"exact_match": "Emma Lopez"},
            },
            {
                "url": "__SHOPPING__/account",
                "prep_actions": ["document.querySelector('h1').textContent = 'Prepared'"],
                "locator": "document.querySelector('h1').textContent",
                "required_contents": {"exact_match": "Prepared"},
            },
        ],
        "string_note": "",
        "reference_answer_raw_annotation": "Emma Lopez",
    },
    "intent_template_id": 9900,
}

ANSWER = "The latest review of the mug set was written by Emma Lopez."


@pytest.fixture(scope="module")
def captured(browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, float]]:
    """(session, live probe score); the demo site is stopped before the test body runs."""
    folder = tmp_path_factory.mktemp("replay")
    with DemoSite() as site:
        base = site.base_url
        configure_demo_environment(base)
        context = browser.new_context()
        page = context.new_page()
        # Stylesheet bodies too: the sandbox then applies the page's CSS, so innerText can be answered.
        logger = CDPSessionLogger(
            folder, instance_id="review-probe", task={"site_urls": site_urls(base)}, response_bodies="all"
        )
        logger.attach_to_page(page)
        page.goto(base + "/login")
        logger.capture_state_snapshot("action", action="goto /login")
        page.fill("#username", "emma")
        page.fill("#password", "emma1234")
        page.click("#login-button")
        logger.capture_state_snapshot("action", action="sign in")
        page.goto(base + "/products/5")
        logger.capture_state_snapshot("action", action="goto /products/5")
        page.evaluate("() => localStorage.setItem('draft', 'yes')")
        page.fill("#review-title-input", "Replay works")
        page.fill("#review-text-input", "Scored offline.")
        page.click("#submit-review")
        page.wait_for_load_state()
        logger.capture_state_snapshot("action", action="submit review")
        config = json.loads(json.dumps(CONFIG).replace("__SHOPPING__", base))
        logger.task["config"] = config
        path = logger.save_session("review-probe", final_answer=ANSWER)  # runs the probe
        context.close()
    session = load_session(path)
    assert session.end is not None and session.end.probe is not None
    yield session, session.end.probe.score


def test_probe_recorded_every_question_of_the_live_evaluator(captured: tuple[Session, float]) -> None:
    session, live = captured
    probe = session.end.probe
    assert live == 1.0 and probe.error is None
    ops = [(c.page, c.op) for c in probe.calls]
    assert (1, "new_page") in ops and (1, "goto") in ops and (1, "close") in ops
    assert any(c.op == "evaluate" and c.history for c in probe.calls)  # the locator after its prep_action
    assert [p.url.split("/", 3)[-1] for p in probe.pages] == ["products/5", "account"]
    urls = [call.url for call in probe.http]
    assert any("/rest/default/V1/integration/admin/token" in u for u in urls)
    assert any("/rest/V1/products/DS-HK-002/reviews" in u for u in urls)
    judge = [call for call in probe.http if call.url.endswith("/chat/completions")]
    assert len(judge) == 1 and "Judgement: correct" in judge[0].response_body


def test_offline_score_equals_live_with_no_network(
    captured: tuple[Session, float], no_sockets: list[object]
) -> None:
    session, live = captured
    result = evaluate_session(session)
    assert result.score == live == 1.0
    assert result.steps[-1].source == "recorded"
    assert no_sockets == []


def test_mock_types_pass_the_evaluators_type_checks(captured: tuple[Session, float]) -> None:
    session, _ = captured
    page = replay_step(session, -1)
    assert isinstance(page, Page) and isinstance(page, MockPage)
    assert isinstance(page.context, BrowserContext) and isinstance(page.context, MockBrowserContext)
    assert isinstance(MockCDPSession(page), CDPSession)
    assert page.url.endswith("/products/5")
    assert page.title() == "Ceramic Coffee Mug Set"
    assert "Replay works" in page.content()
    assert [p.url for p in page.context.pages] == [page.url]
    assert {c["name"] for c in page.context.cookies()} == {"session"}
    assert page.context.cookies("http://example.org/") == []


def test_javascript_runs_on_the_captured_dom_in_the_sandbox(captured: tuple[Session, float]) -> None:
    session, _ = captured
    page = replay_step(session, -1)
    assert page.evaluate("() => document.querySelectorAll('.review').length") >= 1
    assert page.evaluate("localStorage.getItem('draft')") == "yes"
    assert page.evaluate("document.cookie") == ""  # the session cookie is httpOnly
    assert page.locator(".review-title").count() >= 1
    assert "Replay works" in page.locator(".review-title").all_inner_texts()
    with pytest.raises(PlaywrightError, match="TypeError"):
        page.evaluate("() => document.querySelector('#nope').outerText")


def test_state_differs_between_steps(captured: tuple[Session, float]) -> None:
    session, _ = captured
    before, after = replay_step(session, 2), replay_step(session, 3)
    expression = (
        "() => [...document.querySelectorAll('.review-title')].some(e => e.textContent === 'Replay works')"
    )
    assert before.evaluate(expression) is False
    assert after.evaluate(expression) is True
    runner = CliRunner()
    texts = [
        runner.invoke(cli, ["eval-at", str(session.path), str(step), "--js", expression]).output.strip()
        for step in (2, 3)
    ]
    assert texts == ["false", "true"]


def test_pages_an_evaluator_opens_come_from_its_recording_or_snapshots(
    captured: tuple[Session, float],
) -> None:
    session, _ = captured
    page = replay_step(session, -1)
    other = page.context.new_page()
    other.goto(page.url.rsplit("/products", 1)[0] + "/account")
    assert other.evaluate("() => document.querySelector('h1').textContent") == "My Account"
    other.close()
    assert other not in page.context.pages
    stray = page.context.new_page()
    stray.goto(page.url.rsplit("/products", 1)[0] + "/orders")
    with pytest.raises(
        ReplayMissError, match=r"no recorded answer and no captured page.*captured pages: .*/products/5"
    ):
        stray.content()


def test_rescore_with_an_edited_config(
    captured: tuple[Session, float], tmp_path: Path, no_sockets: list[object]
) -> None:
    session, _ = captured
    base = session.header.task["site_urls"]["SHOPPING"]
    edited = json.loads(json.dumps(CONFIG).replace("__SHOPPING__", base))
    edited["eval"]["program_html"][1]["required_contents"] = {"exact_match": "somebody else"}
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    same_questions = evaluate_session(session, path)
    assert same_questions.score == 0.0  # same questions, recorded answers, other verdict
    assert same_questions.provenance == "recorded" and same_questions.answers["reconstructed"] == 0
    edited["eval"]["program_html"][0]["locator"] = "document.querySelector('h1').outerText"
    edited["eval"]["program_html"][0]["required_contents"] = {"exact_match": "Ceramic Coffee Mug Set"}
    edited["eval"]["program_html"][1]["required_contents"] = {"exact_match": "Emma Lopez"}
    new_question = evaluate_session(session, edited)
    assert new_question.score == 1.0  # a new question, answered by the captured DOM
    assert new_question.provenance == "mixed" and new_question.answers["reconstructed"] >= 1
    with pytest.raises(ReconstructedAnswerError, match=r"outerText.*recorded-only"):
        evaluate_session(session, edited, recorded_only=True)
    edited_path = tmp_path / "edited-new-question.json"
    edited_path.write_text(json.dumps(edited))
    refused = CliRunner().invoke(
        cli, ["rescore", str(session.path), "--config", str(edited_path), "--recorded-only"]
    )
    assert refused.exit_code == 2 and "recorded-only" in refused.output
    edited["eval"]["program_html"][2]["url"] = base + "/orders"
    with pytest.raises(ReplayMissError, match="/orders"):
        evaluate_session(session, edited)
    result = CliRunner().invoke(cli, ["rescore", str(session.path), "--config", str(path)])
    assert result.exit_code == 0 and "final-state score 0.0" in result.output
    assert "provenance recorded" in result.output


def test_cdp_session_answers_from_the_capture(captured: tuple[Session, float]) -> None:
    session, _ = captured
    folder = session.path.parent
    page, client = WebArenaCDPIntegration(folder).create_mock_page_and_client("review-probe")
    assert client.send("DOM.getOuterHTML", {"nodeId": 1})["outerHTML"] == page.content()
    assert {c["name"] for c in client.send("Network.getAllCookies")["cookies"]} == {"session"}
    origin = page.url.split("/products")[0]
    storage = client.send(
        "DOMStorage.getDOMStorageItems", {"storageId": {"securityOrigin": origin, "isLocalStorage": True}}
    )
    assert ["draft", "yes"] in storage["entries"]
    assert (
        client.send("Runtime.evaluate", {"expression": "document.title"})["result"]["value"] == page.title()
    )
    assert "exceptionDetails" in client.send("Runtime.evaluate", {"expression": "null.x"})
    assert "documents" in client.send("DOMSnapshot.captureSnapshot", {"computedStyles": []})
    with pytest.raises(
        ReplayMissError, match=r"CDP method Debugger.enable was not captured; .*Network.getAllCookies"
    ):
        client.send("Debugger.enable")
    with pytest.raises(ReplayMissError, match="no session 'nope'"):
        WebArenaCDPIntegration(folder).create_mock_page_and_client("nope")


def test_unsupported_playwright_calls_say_so(captured: tuple[Session, float]) -> None:
    page = replay_step(captured[0], -1)
    with pytest.raises(ReplayMissError, match=r"Page\.click is not available on a replayed page"):
        page.click("#submit-review")


def test_the_sandbox_refuses_the_network(captured: tuple[Session, float]) -> None:
    """A replayed page cannot reach a live server, even one on 127.0.0.1: the server sees nothing."""
    seen: list[str] = []

    class Counting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        target = f"http://127.0.0.1:{server.server_port}/steal"
        urllib.request.urlopen(target, timeout=5).close()  # the server works: it counts this one
        page = replay_step(captured[0], -1)
        script = f"() => fetch({target!r}).then(r => 'reached ' + r.status, e => 'refused: ' + e.message)"
        assert page.evaluate(script).startswith("refused")
        assert target in offline_browser().blocked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert seen == ["/steal"]
