"""The failure-attribution property check: every claim an attribution makes (the named check, asked at
the named step, passed or failed; a typed value the check would have passed on; an expected answer in a
page's visible text) asked again of the official evaluator, step by step, the way
``cdp-session eval-at SESSION STEP`` asks it. Used on the golden sessions (``tests/unit``), the demo
corpus (``test_parity``) and the conformance applications' episodes (``tests/conformance``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.explain import find_check, form_satisfies, visible_match
from cdp_integration.evaluate.scoring import evaluate_session, evaluate_step
from cdp_integration.replay.actions import parse_action
from cdp_integration.replay.text import visible_text
from cdp_integration.session.store import Session

__all__ = ["false_claims"]


def _asked(
    session: Session, step: int, check: Mapping[str, Any], config: Mapping[str, Any] | None = None
) -> bool | None:
    """The check asked again at ``step`` as ``eval-at`` asks it: passed, failed, or None (a miss or
    the check not made there)."""
    try:
        checks = evaluate_step(session, step, config).checks
    except ReplayMissError:
        return None
    found = find_check(checks, check)
    return None if found is None else bool(found["passed"])


def false_claims(session: Session, config: Mapping[str, Any] | None = None) -> list[str]:
    """Every claim of the session's failure attribution that the evaluator, asked again, does not confirm
    (``config``: the task's, for a session captured without it)."""
    result = evaluate_session(session, config)
    attribution = result.attribution
    assert result.score == 0.0 and attribution is not None
    final = session.final_step.index
    failed = [c for c in result.checks if not c["passed"]]
    timeline = attribution["timeline"]
    assert [row["check"] for row in timeline] == [
        f"{c['evaluator']}{'' if c['target'] is None else f'[{c["target"]}]'}"
        + ("" if c["comparison"] == c["evaluator"] else f" {c['comparison']}")
        for c in failed
    ]
    wrong: list[str] = []
    for check, row in zip(failed, timeline, strict=True):
        every = row["passed"] + row["failed"] + row["unknown"]
        assert sorted(every) == sorted(set(every)) == [s.index for s in session.steps] or not any(
            c["evaluator"] in ("url_match", "program_html") for c in [check]
        )
        for said, steps in ((True, row["passed"]), (False, row["failed"]), (None, row["unknown"])):
            for step in steps:
                got = _asked(session, step, check, config)
                if got != said:
                    wrong.append(f"{row['check']} at step {step}: claimed {said}, the evaluator says {got}")
    klass, step, evidence = attribution["class"], attribution["step"], attribution["evidence"] or {}
    row = next((r for r in timeline if r["check"] == attribution["check"]), None)
    if attribution["rerun"] is not None and not attribution["rerun"].endswith(f" {step}"):
        wrong.append(f"the rerun command {attribution['rerun']!r} does not ask step {step}")
    if evidence.get("kind") == "asked":
        check = failed[timeline.index(row)] if row is not None else failed[0]
        if _asked(session, evidence["step"], check, config) is not evidence["passed"]:
            wrong.append(
                f"{klass}: {attribution['check']} at step {evidence['step']} is not {evidence['passed']}"
            )
    if klass == "state_undone":
        assert row is not None
        if step not in row["passed"] or final not in row["failed"]:
            wrong.append(f"state_undone at {step}, but the check passed at {row['passed']}")
    if klass == "state_not_saved":
        assert row is not None and evidence["kind"] == "form"
        check = failed[timeline.index(row)]
        if row["passed"] or not form_satisfies(check["comparison"], check["expected"], evidence["value"]):
            wrong.append(f"state_not_saved: {evidence['value']!r} does not pass {row['check']}")
        typed = session.steps[evidence["step"]]
        parsed = parse_action(typed.action)
        in_action = (
            parsed is not None and len(parsed.args) > 1 and evidence["value"] in map(str, parsed.args[1:])
        )
        in_form = any(
            evidence["value"] in (c.value, *c.selected_text) for tab in typed.tabs for c in tab.form_state
        )
        if not (in_action or in_form):
            wrong.append(f"state_not_saved: {evidence['value']!r} was not typed at step {evidence['step']}")
    if klass == "answer_wrong" and evidence.get("kind") == "visible":
        tabs = [t for t in session.steps[evidence["step"]].tabs if t.url == evidence["url"]]
        if not any(visible_match(visible_text(t.html), evidence["expected"]) for t in tabs):
            wrong.append(
                f"answer_wrong: {evidence['expected']!r} is not visible text at step {evidence['step']}"
            )
    if klass == "state_not_reached" and row is not None:
        start = session.steps[0].index if session.steps[0].trigger != "action" else None
        if row["passed"] or set(row["unknown"]) - {start}:
            wrong.append(f"state_not_reached, but {row['check']} passed at {row['passed']}")
    if klass == "state_unknown" and (row is None or not row["unknown"] or row["passed"]):
        wrong.append("state_unknown with every step answered")
    return wrong
