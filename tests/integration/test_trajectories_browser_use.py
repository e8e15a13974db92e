"""Generated trajectories through a real ``browser_use.Agent`` (``tests/trajectories_browser_use.py``) on the
bundled site: each episode's tabs and actions are browser-use's own, the logger follows browser-use's
focused tab, and offline answers must equal those asked live of that tab, recorded and reconstructed.
``make check-fidelity-browser-use`` plays many more, on the bundled site and the demo shop.

Opt-in (``CDP_TEST_BROWSER_USE_STANDINS=1``, ``make test-browser-use``, in ``.venv-bu013``): the
generator speaks browser-use 0.13's actions. The seed is fixed; ``CDP_TEST_TRAJECTORY_SEED`` varies it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import trajectories
from tests.trajectory_site import bundled_site

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("CDP_TEST_BROWSER_USE_STANDINS") != "1",
        reason="opt-in: CDP_TEST_BROWSER_USE_STANDINS=1 (make test-browser-use)",
    ),
]

SEED = os.environ.get("CDP_TEST_TRAJECTORY_SEED", "0")
FIRST = ("blank_link", "window_open", "new_tab", "submit")


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[trajectories.LiveEnd]]:
    from playwright.sync_api import sync_playwright

    from tests.trajectories_browser_use import browser_use_environment, play_browser_use_episode

    out = tmp_path_factory.mktemp("browser-use-trajectories")
    ends = []
    with browser_use_environment(), sync_playwright() as playwright, bundled_site() as base:
        site = trajectories.Site("browser_use", base, bundled=True, start="/")
        for index, first in enumerate(FIRST):
            ends.append(
                play_browser_use_episode(
                    playwright,
                    site,
                    out,
                    seed=f"{SEED}:{index}",
                    first=first,
                    actions=5,
                    questions_per_episode=25,
                )
            )
    yield ends  # the site is stopped: offline answers come from the sessions alone


def test_offline_answers_match_browser_uses_focused_tab(
    played: list[trajectories.LiveEnd], no_sockets: list[object]
) -> None:
    checks = [check for end in played for check in trajectories.judge_episode(end)]
    report = trajectories.format_report(played, checks)
    print(report)
    assert [c for c in checks if c.verdict == "silent"] == [], report
    for end in played:
        assert end.url_live == 1.0, end.log
        mine = [c for c in checks if c.label == end.label]
        assert {c.mode for c in mine} == {"recorded", "reconstructed"}
        assert [c.verdict for c in mine if c.what == "current_tab"] == ["equal", "equal"], end.log
    assert no_sockets == []
    # each episode began with the behaviour asked for: the sample opens tabs three ways, and posts
    assert [end.behaviours[0] for end in played] == list(FIRST)
