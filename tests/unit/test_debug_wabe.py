"""``export_wabe``: WABE's result.json fields and trajectory/step_NNN.png; Mind2Web-style actions."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson

from cdp_integration.debug import export_wabe
from cdp_integration.debug.actions import mind2web_action
from cdp_integration.replay.actions import parse_action
from tests.unit.test_debug_diff import ORIGIN, make_session


def test_result_json_has_the_documented_fields(tmp_path: Path) -> None:
    session = make_session()
    exported = export_wabe(session, tmp_path / "task")
    result = orjson.loads(exported.result.read_bytes())
    assert list(result) == [
        "task_id",
        "task",
        "final_result_response",
        "action_history",
        "thoughts",
        "screenshots",
        "steps_taken",
        "error",
        "metadata",
    ]
    assert result["task_id"] == "demo.unit"
    assert result["task"] == "Find the account holder's name."
    assert result["final_result_response"] == "Emma"
    assert result["steps_taken"] == 4 and result["metadata"]["total_steps"] == 4
    assert result["action_history"] == [
        "[textbox] username -> TYPE: emma",
        "[button] Sign In -> CLICK",
        "[link] Help -> CLICK",
        "ANSWER: Emma",
    ]
    assert result["metadata"]["agent_actions"][0] == "fill('5', 'emma')"
    assert result["metadata"]["final_url"] == f"{ORIGIN}/help"
    assert result["screenshots"] == [f"trajectory/step_00{i}.png" for i in (0, 1, 2, 4)]
    assert result["error"] is None and result["thoughts"] == [""] * len(
        result["action_history"]
    )  # no reasoning recorded


def test_screenshots_are_the_captured_pngs(tmp_path: Path) -> None:
    out = tmp_path / "task"
    (out / "trajectory").mkdir(parents=True)
    (out / "trajectory" / "step_009.png").write_bytes(b"from an earlier export")
    exported = export_wabe(make_session(), out)
    assert [p.name for p in exported.screenshots] == [
        "step_000.png",
        "step_001.png",
        "step_002.png",
        "step_004.png",
    ]
    assert sorted(p.name for p in (out / "trajectory").iterdir()) == [p.name for p in exported.screenshots]
    expected = base64.b64decode(make_session().steps[2].tabs[0].screenshot_png or "")
    assert (out / "trajectory" / "step_002.png").read_bytes() == expected


def test_a_partial_session_is_reported_as_an_error(tmp_path: Path) -> None:
    result = orjson.loads(export_wabe(make_session(end=False), tmp_path).result.read_bytes())
    assert result["error"] == "the episode did not finish saving (partial session file)"
    assert result["final_result_response"] == ""


def test_action_strings_are_parsed_without_running_them() -> None:
    parsed = parse_action("fill('25', \"it's\")")
    assert (
        parsed is not None and parsed.name == "fill" and parsed.args == ("25", "it's") and parsed.bid == "25"
    )
    assert parse_action("__import__('os').system('x')") is None
    assert parse_action("click(open('f'))") is None
    assert parse_action("I think I am done") is None
    assert parse_action("go_back()") is not None and parse_action("go_back()").bid is None  # type: ignore[union-attr]
    session = make_session()
    assert mind2web_action(session, 0) is None  # reset: no action
    assert mind2web_action(session, 2) == "[button] Sign In -> CLICK"
