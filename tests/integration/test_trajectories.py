"""A sample of generated trajectories (``tests/trajectories.py``) on the bundled site: plain Playwright
pages and a BrowserGym env, scored live on the agent's current tab and offline from each session, with
its recorded end probe and reconstructed. ``make check-fidelity`` runs hundreds more on every app.

The seed is fixed; ``CDP_TEST_TRAJECTORY_SEED`` varies it. Each episode starts with a behaviour that
opens or leaves tabs (so the sample always has several tabs), then plays random ones.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests import trajectories
from tests.trajectory_site import bundled_site

SEED = os.environ.get("CDP_TEST_TRAJECTORY_SEED", "0")
PLAIN_FIRST = ("blank_link", "window_open", "new_page")
BROWSERGYM_FIRST = ("bg_click_blank", "bg_new_tab")


@pytest.fixture(scope="module")
def played(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[trajectories.LiveEnd]]:
    out = tmp_path_factory.mktemp("trajectories")
    ends = []
    with bundled_site() as base:
        site = trajectories.Site("bundled", base, bundled=True, start="/")
        for index, first in enumerate(PLAIN_FIRST):
            ends.append(
                trajectories.play_episode(
                    browser,
                    site,
                    out,
                    seed=f"{SEED}:plain:{index}",
                    first=first,
                    actions=5,
                    questions_per_episode=25,
                )
            )
        for index, first in enumerate(BROWSERGYM_FIRST):
            ends.append(
                trajectories.play_browsergym_episode(
                    base,
                    out,
                    seed=f"{SEED}:browsergym:{index}",
                    first=first,
                    actions=4,
                    questions_per_episode=25,
                )
            )
    yield ends  # the site is stopped: offline answers come from the sessions alone


def test_offline_answers_match_the_agents_current_tab(
    played: list[trajectories.LiveEnd], no_sockets: list[object]
) -> None:
    checks = [check for end in played for check in trajectories.judge_episode(end)]
    report = trajectories.format_report(played, checks)
    print(report)
    assert [c for c in checks if c.verdict == "silent"] == [], report
    for end in played:
        assert end.url_live == 1.0, end.log  # url_match on the agent's tab, asked live, matches it
        mine = [c for c in checks if c.label == end.label]
        assert {c.mode for c in mine} == {"recorded", "reconstructed"}
        # where the capture knew the tab, url_match is answered offline, never a miss
        known = [c for c in mine if c.what == "current_tab" and c.verdict == "equal"]
        url = [c for c in mine if c.what == "url_match"]
        if known:
            assert all(c.verdict == "equal" for c in url), [c.detail for c in url]
    assert no_sockets == []


def test_the_sample_opens_tabs_and_scores_on_the_right_one(played: list[trajectories.LiveEnd]) -> None:
    """Each episode's first behaviour opened a tab (or posted a form): the sample is not single-tab only."""
    assert [end.behaviours[0] for end in played] == [*PLAIN_FIRST, *BROWSERGYM_FIRST]
    several = [end for end in played if end.other_config is not None]
    assert several, [end.log for end in played]
    # the oracle tells the tabs apart: url_match on another open tab's URL fails live
    assert any(end.other_live == 0.0 for end in several), [end.log for end in several]


def test_the_oracle_notices_a_session_scored_on_another_tab(played: list[trajectories.LiveEnd]) -> None:
    """Told that the agent was on another tab, with the live scores that tab would give, the oracle finds
    silent differences: it can fail."""
    end = next(end for end in played if end.other_config is not None)
    wrong = dataclasses.replace(end, truth_tab="another-tab", url_live=0.0)
    verdicts = {(c.mode, c.what): c.verdict for c in trajectories.judge_episode(wrong)}
    assert verdicts[("recorded", "current_tab")] == verdicts[("reconstructed", "current_tab")] == "silent"
    assert verdicts[("recorded", "url_match")] == verdicts[("reconstructed", "url_match")] == "silent"
