"""OpenHands V0's thought travels to the browser process on a first comment line of the action.

The line must survive any thought (quotes, newlines, the mark itself), leave every other action as it
is, and be a comment BrowserGym's own action parser ignores (for a browser process without capture).
"""

from __future__ import annotations

import pytest

from openhands_patch._capture import THOUGHT_MARK, split_thought, with_thought

THOUGHTS = [
    "Click the search box.",
    "I need the \"Orders\" tab\nthen sort by date.\n\n```click('12')```",
    f"{THOUGHT_MARK} looks like a mark\r\n and \\ backslashes \u2028 and \U0001f600",
]


@pytest.mark.parametrize("thought", THOUGHTS)
def test_a_thought_goes_with_its_action_and_comes_off_whole(thought: str) -> None:
    action = "fill('5', 'a\\nb')\nclick('12')"
    sent = with_thought(action, thought)
    assert sent.count("\n") == action.count("\n") + 1  # one line, whatever the thought holds
    assert split_thought(sent) == (thought, action)


@pytest.mark.parametrize(
    "action",
    ["click('12')", f"click('12')\n{THOUGHT_MARK}\"x\"", f"{THOUGHT_MARK}not json\nclick('1')", 7, None],
)
def test_other_actions_pass_as_they_are(action: object) -> None:
    thought, rest = split_thought(action)
    assert thought is None
    if isinstance(action, str) and action.startswith(THOUGHT_MARK):
        assert rest == "click('1')"  # a damaged line is still taken off, never run
    else:
        assert rest == action


def test_browsergyms_parser_ignores_the_line() -> None:
    from browsergym.core.action.highlevel import HighLevelActionSet

    actions = HighLevelActionSet(subsets=["bid", "nav"], strict=False)
    plain = actions.to_python_code("click('12')")
    assert actions.to_python_code(with_thought("click('12')", 'why: "x"\nmore')) == plain
