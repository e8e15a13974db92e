"""Every failure class proves itself: each claim an attribution makes (the named check, asked at the
named step, passed or failed; a typed value the check would have passed on; an expected answer in a
page's visible text) is asked again here of the official evaluator, step by step, the way
``cdp-session eval-at SESSION STEP`` asks it. On every failed golden demo session, recorded and
reconstructed (no live recording: the earlier steps are asked offline), and on sessions made for
one class each. A claim the evaluator does not confirm fails the test."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session import SessionEnd, Step, TabState, new_header
from cdp_integration.session.models import FormControlState
from cdp_integration.session.store import Session, load_session
from tests.claims import false_claims

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "v2"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
FAILED = sorted(p for p in FIXTURES.glob("*.session.jsonl.gz") if EXPECTED[p.name]["live"] == 0.0)
SHOP = "http://shop.test:7770"


def _reconstructed(session: Session) -> Session:
    steps = tuple(step.model_copy(update={"evaluation": None}) for step in session.steps)
    end = session.end.model_copy(update={"probe": None}) if session.end else None
    return dataclasses.replace(session, steps=steps, end=end)


def _ids(path: Path) -> str:
    return path.name.split(".session")[0]


@pytest.mark.parametrize("path", FAILED, ids=_ids)
def test_every_claim_on_a_failed_golden_session_is_what_the_evaluator_says(path: Path) -> None:
    assert false_claims(load_session(path)) == []


OFFLINE = [
    p
    for p in FAILED
    if "program_html" not in EXPECTED[p.name]["eval_types"]
    and "fuzzy_match" not in json.dumps(load_session(p).task.get("config"))
]
"""Failed golden sessions scoreable without the live recording: no sandboxed page (program_html's is in
the integration tests) and no LLM judge (its reply exists only in the recording)."""


@pytest.mark.parametrize("path", OFFLINE, ids=_ids)
def test_every_claim_holds_when_the_earlier_steps_are_asked_offline(path: Path) -> None:
    assert false_claims(_reconstructed(load_session(path))) == []


# -- sessions made for one class each ------------------------------------------------------------


def _tab(url: str, html: str, form: list[FormControlState] | None = None) -> TabState:
    return TabState(tab_id="T1", url=url, title="", active=True, html=html, form_state=form or [])


def _session(steps: list[Step], eval_: dict[str, Any], answer: str | None = None) -> Session:
    config = {"task_id": 1, "sites": ["shopping"], "intent": "Do it.", "eval": eval_}
    task: dict[str, Any] = {"task_id": 1, "config": config, "site_urls": {"SHOPPING": SHOP}}
    end = SessionEnd(ended=9.0, instance_id="unit.claims", final_answer=answer)
    return Session(header=new_header(instance_id="unit.claims", task=task), steps=tuple(steps), end=end,
                   complete=True)  # fmt: skip


def _step(index: int, url: str, html: str, action: str = "noop()", **tab: Any) -> Step:
    return Step(index=index, trigger="action" if index else "reset", action=action, timestamp=float(index),
                url=url, title="", tabs=[_tab(url, html, **tab)])  # fmt: skip


POST = {
    "eval_types": ["program_html"],
    "program_html": [
        {
            "url": f"{SHOP}/forum",
            "locator": "",
            "required_contents": {"must_include": ["My electronics post"]},
        }
    ],
}


def test_a_typed_post_never_submitted_is_not_saved_not_undone() -> None:
    """The form's own URL and an input's default carry the expected word: markup, not state."""
    form = f'<form action="{SHOP}/forum?tag=electronics"><input name="nick" value="electronics"><textarea name="body"></textarea></form>'
    typed = FormControlState(path=[5], tag="textarea", name="body", value="My electronics post")
    steps = [
        _step(0, f"{SHOP}/forum", "<p>No posts yet.</p>"),
        _step(1, f"{SHOP}/forum/new", form, "click('3')"),
        _step(2, f"{SHOP}/forum/new", form, "fill('7', 'My electronics post')", form=[typed]),
        _step(3, f"{SHOP}/forum", "<p>No posts yet.</p>", "goto('/forum')"),
    ]
    session = _session(steps, POST)
    result = evaluate_session(session)
    assert result.attribution is not None and result.attribution["class"] == "state_not_saved"
    assert (
        result.attribution["step"] == 2 and result.attribution["evidence"]["value"] == "My electronics post"
    )
    assert false_claims(session) == []


def test_a_port_in_base_href_is_not_the_expected_answer() -> None:
    page = '<head><base href="http://127.0.0.1:18765/"></head><body><p>Total: $34.99</p></body>'
    three = {"eval_types": ["string_match"], "reference_answers": {"exact_match": "3"}}
    session = _session([_step(0, f"{SHOP}/", page)], three, answer="5")
    result = evaluate_session(session)
    assert result.attribution is not None and result.attribution["class"] == "state_not_reached"
    assert "never visible" in result.attribution["reason"]
    assert false_claims(session) == []


def test_content_on_an_earlier_page_that_the_check_never_passed_on_is_not_undone() -> None:
    """The expected word in an older review at step 1: the check itself failed there."""
    review = {"url": f"{SHOP}/product", "locator": "", "required_contents": {"exact_match": "great"}}
    eval_ = {"eval_types": ["program_html"], "program_html": [review]}
    steps = [
        _step(0, f"{SHOP}/", "<p>home</p>"),
        _step(1, f"{SHOP}/product", "<p>An older review: great</p>"),
        _step(2, f"{SHOP}/product", "<p>An older review: great</p>", "click('2')"),
    ]
    session = _session(steps, eval_)
    result = evaluate_session(session)
    assert result.attribution is not None and result.attribution["class"] != "state_undone"
    assert false_claims(session) == []


def test_a_url_held_then_left_is_undone_at_the_last_step_it_held() -> None:
    sports = {"eval_types": ["url_match"], "reference_url": f"{SHOP}/sports", "url_note": "GOLD in PRED"}
    steps = [
        _step(0, f"{SHOP}/", "<p>home</p>"),
        _step(1, f"{SHOP}/sports", "<p>sports</p>", "click('1')"),
        _step(2, f"{SHOP}/sports", "<p>sports</p>", "scroll(0, 10)"),
        _step(3, f"{SHOP}/", "<p>home</p>", "go_back()"),
    ]
    session = _session(steps, sports)
    attribution = evaluate_session(session).attribution
    assert attribution is not None and (attribution["class"], attribution["step"]) == ("state_undone", 2)
    assert attribution["timeline"][0]["passed"] == [1, 2] and attribution["timeline"][0]["failed"] == [0, 3]
    assert attribution["rerun"] == "cdp-session eval-at SESSION 2"
    assert false_claims(session) == []
