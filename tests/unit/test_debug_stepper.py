"""The stepper's commands, driven with scripted input (the tmux test drives the real terminal)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from cdp_integration.debug import Stepper
from cdp_integration.errors import ReplayMissError
from cdp_integration.session import Session
from tests.unit.test_debug_diff import ORIGIN, make_session


def drive(session: Session, *lines: str, **options: Any) -> tuple[Stepper, list[str]]:
    """Run the stepper over ``lines``; return it and the output of each command (index 0: the start)."""
    out = io.StringIO()
    chunks: list[str] = []
    feed: Iterator[str] = iter(lines)

    def read_line(prompt: str) -> str:
        chunks.append(out.getvalue())
        out.seek(0)
        out.truncate()
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    stepper = Stepper(session, out=out, read_line=read_line, **options)
    stepper.run()
    chunks.append(out.getvalue())
    return stepper, chunks


def test_moves_between_steps_and_shows_each_summary() -> None:
    stepper, out = drive(make_session(), "n", "", "p", "g 4", "g -2", "first", "last", "n", "g x", "q")
    assert "5 steps; h for help" in out[0] and "step      0 of 4   (reset)" in out[0]
    assert "action    fill('5', 'emma')" in out[1]
    assert "action    click('7')" in out[2]  # Enter is "next"
    assert "action    fill('5', 'emma')" in out[3]
    assert "step      4 of 4" in out[4] and "step      3 of 4" in out[5]
    assert "step      0 of 4" in out[6] and "step      4 of 4" in out[7]
    assert out[8] == "no step 5: steps are 0..4\n" and out[9] == "usage: g N\n"
    assert stepper.position == 4


def test_prompt_names_the_step_and_its_url() -> None:
    stepper, _ = drive(make_session(), "g 2", "q")
    assert stepper.prompt == f"[2/4] {ORIGIN}/account > "


def test_views_and_diff_with_the_previous_step() -> None:
    _, out = drive(make_session(), "d", "g 2", "text", "cookies", "net", "d", "d 0", "d 9", "steps", "q")
    assert out[1] == "step 0 has no previous step; use d N\n"
    assert out[3] == "My Account\nWelcome, Emma\nlogo Help\n"
    assert "session" in out[4] and "abc" in out[4]
    assert f"POST    302       Document    12 ms      {ORIGIN}/login" in out[5]
    assert out[6].startswith("step 1 → step 2\n") and "+ session (shop.test/) added: abc" in out[6]
    assert out[7].startswith("step 0 → step 2\n")
    assert out[8] == "step 9 is out of range: the session has steps 0..4\n"
    assert out[9].startswith("step  action") and "answer: 'Emma'" in out[9]


def test_js_runs_on_the_current_step_through_the_evaluator() -> None:
    asked: list[tuple[int, str]] = []

    def evaluate(session: Session, step: int, expression: str) -> Any:
        asked.append((step, expression))
        if expression == "missing()":
            raise ReplayMissError("no recorded answer for missing()")
        if expression == "boom()":
            raise RuntimeError("ReferenceError: boom is not defined")
        return session.steps[step].title

    _, out = drive(
        make_session(),
        "g 2",
        "js document.title",
        "js missing()",
        "js boom()",
        "js",
        "q",
        evaluate_js=evaluate,
    )
    assert out[2] == "'My Account'\n"
    assert out[3] == "js: no recorded answer for missing()\n"
    assert out[4] == "js: RuntimeError: ReferenceError: boom is not defined\n"
    assert out[5] == "usage: js EXPR\n"
    assert asked == [(2, "document.title"), (2, "missing()"), (2, "boom()")]


def test_unknown_command_help_and_end_of_input() -> None:
    stepper, out = drive(make_session(), "frobnicate", "h", "n")  # input ends without q
    assert out[1] == "unknown command 'frobnicate'; h for help\n"
    assert "g N" in out[2] and "js EXPR" in out[2] and "q             quit" in out[2]
    assert stepper.position == 1 and out[-1] == "\n"
