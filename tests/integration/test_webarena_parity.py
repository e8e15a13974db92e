"""Parity on real WebArena task ids: live in BrowserGym's own ``browsergym/webarena.<id>`` envs against
the stand-in sites, then offline from the session files alone.

Live: each curated task's success and failure trajectory runs in the real env (unmodified config from
libwebarena's ``test.raw.json``, real ``ui_login`` through the stand-ins' sign-in forms, real
``validate`` after every step) with a ``CDPSessionLogger`` attached, in two spawned worker processes,
each with its own stand-ins (WebArena reads the site URLs once per process). The workers stop their
stand-ins before they return. Offline: this process may not open a socket, has no API key, and scores
every session with the official evaluator through the replay mocks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import load_session
from tests.standins.coverage import covering_subset
from tests.standins.tasks import LiveEpisode, load_curated_tasks, play_in_workers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]


SELECTION = os.environ.get("CDP_TEST_WEBARENA_TASKS", "")
"""``cover``: the 11 curated tasks that cover every category of the coverage table (22 live episodes);
``all``: all 41. Unset, ``make test`` leaves this module out: its live phase has not yet been seen green
inside the full suite on this machine (see issue 11); the stand-ins' own tests always run."""


def _selected_ids() -> list[int]:
    if SELECTION == "all":
        return [t.task_id for t in load_curated_tasks()]
    return covering_subset()


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> list[LiveEpisode]:
    if SELECTION not in ("cover", "all"):
        pytest.skip("live WebArena parity: set CDP_TEST_WEBARENA_TASKS=cover (11 tasks) or all (41)")
    started = time.perf_counter()
    played = play_in_workers(_selected_ids(), tmp_path_factory.mktemp("webarena"))
    print(f"\nlive phase: {len(played)} episodes in {time.perf_counter() - started:.1f} s (2 workers)")
    return played


def _table(rows: list[str]) -> str:
    return "\n".join(rows)


def test_every_curated_task_scores_1_live_on_success_and_0_on_failure(episodes: list[LiveEpisode]) -> None:
    selected = set(_selected_ids())
    tasks = [t for t in load_curated_tasks() if t.task_id in selected]
    errors = [f"{e.task_id} {e.trajectory}: {e.error}" for e in episodes if e.error]
    assert not errors, _table(errors)
    assert {(e.task_id, e.trajectory) for e in episodes} == {
        (t.task_id, trajectory) for t in tasks for trajectory in ("success", "failure")
    }
    wrong = [
        f"{e.task_id} {e.trajectory}: rewards {e.rewards}"
        for e in episodes
        if (e.live, e.live_max) != ((1.0, 1.0) if e.trajectory == "success" else (0.0, 0.0))
    ]
    assert not wrong, _table(wrong)


def test_offline_score_equals_live_reward_final_and_per_step(
    episodes: list[LiveEpisode], no_sockets: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-ins stopped, sockets refused, no judge URL or key: final score and per-step maximum match."""
    import webarena.llms.providers.openai_utils as openai_utils

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(openai_utils, "_client", None)
    mismatches, rows = [], []
    started = time.perf_counter()
    for episode in episodes:
        if episode.error:
            continue
        score = evaluate_session(load_session(Path(episode.session)))
        steps_match = [s.score for s in score.steps] == [s.live_reward for s in score.steps]
        ok = score.score == episode.live and score.max_score == episode.live_max and steps_match
        ok = ok and all(step.source == "recorded" for step in score.steps)
        row = (
            f"{episode.task_id:>4} {episode.trajectory:<8} live {episode.live:.1f} max {episode.live_max:.1f}  "
            f"offline {score.score} max {score.max_score}  {'yes' if ok else 'NO'}  ({episode.seconds:.1f} s live)"
        )
        rows.append(row)
        if not ok:
            mismatches.append(row)
    print("\n" + _table(rows) + f"\noffline scoring: {time.perf_counter() - started:.2f} s")
    assert not mismatches, _table(mismatches)
    assert no_sockets == []
    assert len(rows) == len(episodes)
