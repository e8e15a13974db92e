"""Checks and failure attribution: taken from the official evaluators as they score, never disagreeing
with the score, on every golden session (recorded and reconstructed, both scorers), and each attribution
class given for its own reason on sessions made for it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.batch import score_directory
from cdp_integration.evaluate.explain import ATTRIBUTION_CLASSES, combined_score
from cdp_integration.evaluate.report import write_report
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.evaluate.verified import verified_score_file
from cdp_integration.session import CaptureFault, SessionEnd, SessionWriter, Step, TabState, new_header
from cdp_integration.session.store import Session, load_session

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
GOLDEN = sorted(FIXTURES.glob("v*/*.session.jsonl.gz"))
CHECK_KEYS = {"evaluator", "target", "comparison", "expected", "found", "passed", "source", "note"}
SOURCE_KEYS = {"kind", "step", "url", "provenance"}
SHOP = "http://shop.test:7770"


def _ids(path: Path) -> str:
    return f"{path.parent.name}/{path.name.split('.session')[0]}"


def _reconstructed(session: Session) -> Session:
    """The same episode as if captured without the task's config: no live evaluator recording."""
    steps = tuple(step.model_copy(update={"evaluation": None}) for step in session.steps)
    end = session.end.model_copy(update={"probe": None}) if session.end else None
    return dataclasses.replace(session, steps=steps, end=end)


def _assert_well_formed(checks: list[dict[str, Any]]) -> None:
    for check in checks:
        assert set(check) == CHECK_KEYS
        assert set(check["source"]) == SOURCE_KEYS
        json.dumps(check)


@pytest.mark.parametrize("path", GOLDEN, ids=_ids)
def test_checks_combine_to_the_score_at_every_step(path: Path) -> None:
    expected = json.loads((path.parent / "expected.json").read_text())[path.name]
    result = evaluate_session(load_session(path))
    assert (result.score, result.max_score) == (expected["live"], expected["live_max"])  # no score moved
    for step in result.steps:
        assert step.checks, f"step {step.step} scored with no check"
        _assert_well_formed(step.checks)
        assert combined_score(step.checks) == step.score, step
    assert result.checks == result.steps[-1].checks
    if result.score == 0.0:
        failed = [c for c in result.checks if not c["passed"]]
        assert failed and all("expected" in c and "found" in c for c in failed)
        assert result.attribution is not None and result.attribution["class"] in ATTRIBUTION_CLASSES
        assert result.attribution["reason"]
    else:
        assert result.attribution is None


WITHOUT_PAGES = [
    p
    for p in GOLDEN
    if "program_html" not in json.loads((p.parent / "expected.json").read_text())[p.name]["eval_types"]
]
"""Golden sessions whose reconstructed scoring needs no sandboxed page (program_html's is in the
integration tests: ``test_parity.py``, the conformance suite)."""


@pytest.mark.parametrize("path", WITHOUT_PAGES, ids=_ids)
def test_reconstructed_checks_combine_to_the_score_or_the_miss_is_loud(path: Path) -> None:
    session = _reconstructed(load_session(path))
    try:
        result = evaluate_session(session)
    except Exception as exc:  # a loud miss: the page, or the LLM judge's reply (no recording to replay)
        assert isinstance(exc, ReplayMissError) or "no recorded response" in str(exc)
        return
    for step in result.steps:
        _assert_well_formed(step.checks)
        assert combined_score(step.checks) == step.score
        assert all(c["source"]["provenance"] in ("recorded", "reconstructed") for c in step.checks)
    assert any(c["source"]["provenance"] == "reconstructed" for c in result.checks)


@pytest.mark.parametrize("task_id", [20001, 20002, 20003])
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("v2/*.session.jsonl.gz")), ids=_ids)
def test_verified_checks_combine_to_the_score(path: Path, task_id: int, tmp_path: Path) -> None:
    session = load_session(path)
    task = {**session.task, "verified_task_id": task_id}
    header = session.header.model_copy(update={"task": task})
    end = session.end.model_copy(update={"task": {**session.end.task, "verified_task_id": task_id}})
    copy = _write(tmp_path / "s.session.jsonl.gz", dataclasses.replace(session, header=header, end=end))
    result = verified_score_file(copy)
    _assert_well_formed(result["checks"])
    assert result["checks"] and combined_score(result["checks"]) == result["score"]
    assert all(c["evaluator"] == "verified" for c in result["checks"])
    assert (result["attribution"] is None) == (result["score"] == 1.0)


def test_the_evaluators_are_restored_after_scoring() -> None:
    evaluate_session(load_session(FIXTURES / "v2" / "10000.success.session.jsonl.gz"))  # sets up the imports
    from webarena.evaluation_harness.evaluators import HTMLContentEvaluator, StringEvaluator, URLEvaluator

    before = {
        (cls, name): cls.__dict__[name]
        for cls, name in [
            (StringEvaluator, "exact_match"),
            (StringEvaluator, "must_include"),
            (StringEvaluator, "fuzzy_match"),
            (StringEvaluator, "ua_match"),
            (StringEvaluator, "__call__"),
            (URLEvaluator, "__call__"),
            (HTMLContentEvaluator, "__call__"),
        ]
    }
    evaluate_session(load_session(FIXTURES / "v2" / "10039.failure.session.jsonl.gz"))
    assert all(cls.__dict__[name] is original for (cls, name), original in before.items())


# -- sessions made for one attribution class each -------------------------------------------------


def _tab(url: str, html: str = "<html><body></body></html>") -> TabState:
    return TabState(tab_id="T1", url=url, title="", active=True, html=html)


def _step(index: int, url: str, html: str = "<html><body></body></html>", **fields: Any) -> Step:
    return Step(index=index, trigger="action", action="noop()", timestamp=float(index), url=url, title="",
                tabs=[_tab(url, html)], **fields)  # fmt: skip


def _config(eval_: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": 1, "sites": ["shopping"], "intent": "Find it.", "eval": eval_}


def _session(
    steps: list[Step], eval_: dict[str, Any], answer: str | None = None, *, sites: bool = True
) -> Session:
    task: dict[str, Any] = {"task_id": 1, "config": _config(eval_)}
    if sites:
        task["site_urls"] = {"SHOPPING": SHOP}
    end = SessionEnd(ended=9.0, instance_id="unit.explain", final_answer=answer)
    return Session(header=new_header(instance_id="unit.explain", task=task), steps=tuple(steps), end=end,
                   complete=True)  # fmt: skip


def _write(path: Path, session: Session) -> Path:
    writer = SessionWriter(path.with_name(path.name + ".partial"), session.header)
    for step in session.steps:
        writer.write_step(step)
    assert session.end is not None
    return writer.finish(session.end, path)


SKU = {"eval_types": ["string_match"], "reference_answers": {"exact_match": "DS-HK-003"}}
SPORTS = {
    "eval_types": ["url_match"],
    "reference_url": f"{SHOP}/products?category=Sports",
    "url_note": "GOLD in PRED",
}


def _attributed(session: Session) -> dict[str, str]:
    result = evaluate_session(session)
    assert result.score == 0.0 and combined_score(result.checks) == 0.0
    assert result.attribution is not None
    return result.attribution


def test_answer_seen_on_a_page_but_not_given_is_answer_wrong() -> None:
    steps = [_step(0, f"{SHOP}/"), _step(1, f"{SHOP}/products/3", "<p>SKU: DS-HK-003</p>")]
    attribution = _attributed(_session(steps, SKU, answer="$34.99"))
    assert attribution["class"] == "answer_wrong"
    assert "step 1" in attribution["reason"] and "'$34.99'" in attribution["reason"]


def test_answer_differing_only_in_format_is_answer_wrong() -> None:
    attribution = _attributed(_session([_step(0, f"{SHOP}/")], SKU, answer="DS HK 003"))
    assert attribution["class"] == "answer_wrong" and "only in format" in attribution["reason"]


def test_no_answer_is_said_in_words_and_the_placeholder_shown() -> None:
    steps = [_step(0, f"{SHOP}/products/3", "<p>SKU: DS-HK-003</p>")]
    result = evaluate_session(_session(steps, SKU, answer=None))
    (check,) = result.checks
    assert (check["found"], check["passed"]) == ("whatever", False)
    assert "placeholder" in check["note"] and "no answer" in check["note"]
    assert result.attribution is not None
    assert (result.attribution["class"], result.attribution["reason"]) == (
        "answer_wrong",
        f"no answer was given; the expected 'DS-HK-003' was visible at step 0 ({SHOP}/products/3: 'SKU: DS-HK-003')",
    )
    assert result.attribution["evidence"] == {
        "kind": "visible", "step": 0, "url": f"{SHOP}/products/3", "expected": "DS-HK-003", "text": "SKU: DS-HK-003"
    }  # fmt: skip
    assert result.attribution["rerun"] == "cdp-session eval-at SESSION 0"


def test_answer_never_on_any_page_is_state_not_reached() -> None:
    attribution = _attributed(_session([_step(0, f"{SHOP}/")], SKU, answer="$34.99"))
    assert attribution["class"] == "state_not_reached" and "never visible" in attribution["reason"]


def test_url_never_open_is_state_not_reached() -> None:
    attribution = _attributed(_session([_step(0, f"{SHOP}/"), _step(1, f"{SHOP}/search?q=sports")], SPORTS))
    assert attribution["class"] == "state_not_reached" and "URL" in attribution["reason"]


def test_url_open_earlier_then_left_is_state_undone() -> None:
    steps = [_step(0, f"{SHOP}/"), _step(1, f"{SHOP}/products?category=Sports"), _step(2, f"{SHOP}/")]
    attribution = _attributed(_session(steps, SPORTS))
    assert (attribution["class"], attribution["step"]) == ("state_undone", 1)
    assert attribution["reason"] == (
        f"url_match passed at step 1 (found '{SHOP}/products?category=Sports') and failed at the end "
        f"(found '{SHOP}/')"
    )


def test_a_tab_off_the_sites_is_said_even_with_the_right_answer() -> None:
    steps = [_step(0, f"{SHOP}/"), _step(1, "http://elsewhere.test/")]
    result = evaluate_session(_session(steps, SKU, answer="DS-HK-003"))
    assert result.score == 0.0 and combined_score(result.checks) == 0.0
    (check,) = result.checks
    assert (check["evaluator"], check["comparison"], check["found"]) == (
        "browsergym",
        "authorized_tabs",
        ["http://elsewhere.test/"],
    )
    assert result.attribution is not None and result.attribution["class"] == "state_not_reached"
    assert "outside the WebArena sites" in result.attribution["reason"]


def test_tabs_on_none_of_the_environments_sites_are_loud_when_the_session_names_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sites from the environment only (the session records none): when no tab is on them, they are
    another deployment's, and the tab safeguard's 0 would say nothing about the episode."""
    steps = [_step(0, f"{SHOP}/"), _step(1, f"{SHOP}/products/7")]
    unnamed = _session(steps, SKU, answer="DS-HK-003", sites=False)
    monkeypatch.setenv("WA_SHOPPING", "http://other-deployment.test:7770")
    with pytest.raises(ReplayMissError, match="no tab is on the sites the environment names"):
        evaluate_session(unnamed)
    monkeypatch.setenv("WA_SHOPPING", SHOP)  # the right deployment: scored
    assert evaluate_session(unnamed).score == 1.0
    shop_tab = TabState(tab_id="T1", url=f"{SHOP}/", title="", active=False, html="<p>x</p>")
    other_tab = TabState(tab_id="T2", url="http://elsewhere.test/", title="", active=True, html="<p>y</p>")
    two_tabs = Step(index=1, trigger="action", action="noop()", timestamp=1.0, url=other_tab.url, title="",
                    tabs=[shop_tab, other_tab])  # fmt: skip
    off_site = _session([_step(0, f"{SHOP}/"), two_tabs], SKU, "DS-HK-003", sites=False)
    assert evaluate_session(off_site).score == 0.0  # a tab on the sites: the agent opened one elsewhere


def test_capture_fault_is_harness_fault() -> None:
    fault = CaptureFault(stage="tab_state", error_type="TimeoutError", message="the tab's renderer crashed")
    steps = [
        _step(0, f"{SHOP}/"),
        _step(1, f"{SHOP}/products?category=Sports", faults=[fault]),
        _step(2, f"{SHOP}/"),
    ]
    attribution = _attributed(_session(steps, SPORTS))
    assert attribution["class"] == "harness_fault" and "renderer crashed" in attribution["reason"]


def test_a_question_the_session_cannot_answer_is_evaluator_miss(tmp_path: Path) -> None:
    target = {"url": f"{SHOP}/admin/products/3/edit", "locator": "document.querySelector('#price').value",
              "required_contents": {"exact_match": "39.99"}}  # fmt: skip
    session = _session([_step(0, f"{SHOP}/")], {"eval_types": ["program_html"], "program_html": [target]})
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    _write(sessions / "miss.session.jsonl.gz", session)
    score_directory(sessions, tmp_path / "out")
    (line,) = [orjson.loads(x) for x in (tmp_path / "out" / "output.jsonl").read_bytes().splitlines()]
    result = line["test_result"]
    assert result["error_type"] == "ReplayMissError" and result["score"] is None
    assert result["attribution"]["class"] == "evaluator_miss"
    assert "/admin/products/3/edit" in result["attribution"]["reason"]


def test_output_line_carries_checks_and_attribution(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for name in ("10024.failure", "10024.success"):
        source = FIXTURES / "v2" / f"{name}.session.jsonl.gz"
        (sessions / source.name).write_bytes(source.read_bytes())
    score_directory(sessions, tmp_path / "out")
    lines = {
        Path(line["metadata"]["session_path"]).name.split(".session")[0]: line["test_result"]
        for line in map(orjson.loads, (tmp_path / "out" / "output.jsonl").read_bytes().splitlines())
    }
    failed = [c for c in lines["10024.failure"]["checks"] if not c["passed"]]
    assert [(c["evaluator"], c["target"], c["expected"], c["found"]) for c in failed] == [
        ("program_html", 0, "$39.99", "$45.50"),
        ("program_html", 1, "39.99", "45.50"),
    ]
    assert failed[0]["source"]["url"].endswith("/products/3") and failed[0]["source"]["kind"] == "locator"
    attribution = lines["10024.failure"]["attribution"]
    assert (attribution["class"], attribution["step"]) == ("state_not_saved", 3)  # typed 39.99, never saved
    assert attribution["evidence"]["value"] == "39.99" and attribution["rerun"].endswith(" 3")
    assert lines["10024.success"]["attribution"] is None
    assert all(c["passed"] for c in lines["10024.success"]["checks"])

    report = write_report(tmp_path / "out")
    assert report.failed_checks == {"program_html[0] exact_match": 1, "program_html[1] exact_match": 1}
    assert report.attribution == {"state_not_saved": 1}
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "## Most common failed checks" in markdown and "| `program_html[0] exact_match` | 1 |" in markdown
    assert "| state_not_saved | 1 |" in markdown
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["attribution"] == {"state_not_saved": 1}


# -- where the checks show -------------------------------------------------------------------------


def _cli(*args: str) -> str:
    from click.testing import CliRunner

    from cdp_integration.cli import cli

    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_rescore_and_eval_at_print_the_checks_failed_first() -> None:
    path = str(FIXTURES / "v2" / "10039.failure.session.jsonl.gz")
    out = _cli("rescore", path)
    table = out[out.index("checks (2 failed of 3, failed first):") :].splitlines()
    assert table[1] == "  FAIL  url_match"
    assert table[2] == "        expected 'http://127.0.0.1:42797/admin/products/10/edit'"
    assert table[3] == "        found    'http://127.0.0.1:42797/admin'"
    assert table[6] == "  FAIL  program_html[0] exact_match"
    assert [line for line in table if line.startswith("  pass")] == ["  pass  program_html[1] exact_match"]
    assert table[-2] == (
        "why 0: state_undone: url_match passed at step 3 (found 'http://127.0.0.1:42797/admin/products/10/edit"
        "?saved=1') and failed at the end (found 'http://127.0.0.1:42797/admin')"
    )
    assert table[-1] == f"ask again: cdp-session eval-at {path} 3"
    assert (
        "  url_match 'http://127.0.0.1:42797/admin/products/10/edit': passed at 1-3; failed at 4; unknown at 0"
        in table
    )
    at = _cli("eval-at", path, "3")
    assert at.startswith("step 3  score 1.0  provenance recorded\nchecks (0 failed of 3, failed first):")


def test_steps_and_show_agree_on_a_missing_answer(tmp_path: Path) -> None:
    steps = [_step(0, f"{SHOP}/products/3", "<p>SKU: DS-HK-003</p>")]
    path = str(_write(tmp_path / "none.session.jsonl.gz", _session(steps, SKU, answer=None)))
    words = "none (no final message: BrowserGym's validate compares its placeholder 'whatever')"
    listed = _cli("steps", path)
    assert f"answer: {words}" in listed
    assert "expected 'DS-HK-003'\n        found    'whatever'" in listed
    shown = _cli("show", path, "0")
    assert "FAIL  string_match exact_match" in shown and "no answer: the agent sent no final message" in shown
    rescored = _cli("rescore", path)
    assert f"answer {words}" in rescored.splitlines()[0]


def test_a_judge_question_the_session_cannot_answer_is_a_miss_not_the_clients_exception() -> None:
    """A fuzzy_match answer needs the LLM judge; a session (an imported trace) without its recorded reply
    makes the judge's client raise inside the evaluator: scoring says which call it could not answer."""
    judged = {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["the skillet"]}}
    session = _session([_step(0, f"{SHOP}/")], judged, answer="a cast iron pan")
    with pytest.raises(ReplayMissError, match=r"POST .*chat/completions.*no recorded request matches"):
        evaluate_session(session)
