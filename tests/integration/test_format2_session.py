"""A session written by format 2 (the golden file in ``tests/fixtures/format2``) still loads and scores.

The file was written by ``tests/fixtures/format2/make_session.py`` with the format-2 code (chunked
HTML and snapshots, stored stylesheets); later formats must read it as it is: recorded answers
replay, and new questions are answered from the captured pages in the offline sandbox.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import Session, load_session

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "format2" / "review.session.jsonl.gz"


@pytest.fixture(scope="module")
def session() -> Session:
    return load_session(FIXTURE)


def test_format2_file_loads(session: Session) -> None:
    assert session.header.format_version == 2
    assert session.complete and len(session.steps) == 4
    assert session.final_step.url.endswith("/products/5")
    assert session.final_step.title == "Ceramic Coffee Mug Set"
    assert "Ceramic Coffee Mug Set" in (session.final_step.html or "")
    assert [r.url.rsplit("/", 1)[-1] for r in session.steps[0].resources] == ["style.css"]
    assert session.end is not None and session.end.probe is not None and session.end.probe.score == 1.0


def test_format2_file_scores_offline_as_live(session: Session, no_sockets: list[object]) -> None:
    result = evaluate_session(session)
    assert result.score == session.end.probe.score == 1.0  # type: ignore[union-attr]
    assert no_sockets == []


def test_format2_file_answers_new_questions_from_its_pages(session: Session) -> None:
    config = copy.deepcopy(session.task["config"])
    config["eval"]["program_html"][0]["locator"] = "document.querySelectorAll('#review-form textarea').length"
    config["eval"]["program_html"][0]["required_contents"] = {"exact_match": "1"}
    assert evaluate_session(session, config).score == 1.0
    config["eval"]["program_html"][0]["required_contents"] = {"exact_match": "2"}
    assert evaluate_session(session, config).score == 0.0
    config["eval"]["program_html"][0]["url"] = session.task["site_urls"]["SHOPPING"] + "/orders"
    with pytest.raises(ReplayMissError, match="/orders"):
        evaluate_session(session, config)
