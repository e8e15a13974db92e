"""Parity: the demo corpus (``corpus.CORE_TASKS``, every task with ``CDP_TEST_CORPUS=all``), both scripted
trajectories, scored live and offline — same number.

Live: BrowserGym's ``GenericWebArenaTask.validate`` runs libwebarena's official evaluator after every
step against the demo shop. Offline: the demo shop has been shut down and Python may not open a
socket; the official evaluator scores each session file through the replay mocks.
"""

from __future__ import annotations

import pytest

from cdp_integration.demo.job import DemoEpisode, format_results, score_demo_sessions
from cdp_integration.demo.tasks import load_demo_tasks
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import load_session
from tests.integration.corpus import corpus_task_ids


@pytest.fixture(scope="module")
def episodes(demo_corpus: list[DemoEpisode]) -> list[DemoEpisode]:
    """All demo tasks played live with capture (in other processes, whose demo sites are stopped)."""
    return demo_corpus


def test_every_corpus_task_was_played_both_ways(episodes: list[DemoEpisode]) -> None:
    tasks = load_demo_tasks()
    assert len(tasks) >= 40
    chosen = corpus_task_ids([t.task_id for t in tasks])
    assert set(chosen) <= {t.task_id for t in tasks}
    assert len(chosen) >= 20
    assert {(e.task_id, e.trajectory) for e in episodes} == {
        (task_id, trajectory) for task_id in chosen for trajectory in ("success", "failure")
    }
    assert [e.live for e in episodes if e.trajectory == "success"] == [1.0] * len(chosen)
    assert [e.live for e in episodes if e.trajectory == "failure"] == [0.0] * len(chosen)


def test_the_corpus_covers_every_evaluation_type_and_mechanism() -> None:
    """What the left-out tasks exercise, a chosen one does too: their eval types and evaluator inputs."""
    tasks = load_demo_tasks()
    chosen = set(corpus_task_ids([t.task_id for t in tasks]))

    def kinds(config: dict) -> set[str]:  # type: ignore[type-arg]
        evaluation = config["eval"]
        found = {f"type:{t}" for t in evaluation["eval_types"]}
        found |= {f"answer:{k}" for k in evaluation.get("reference_answers") or {}}
        for target in evaluation.get("program_html") or []:
            url, locator = target.get("url", ""), target.get("locator", "")
            found.add("url:" + ("last" if url == "last" else "func" if url.startswith("func:") else "page"))
            found.add(
                "locator:" + ("func" if locator.startswith("func:") else "js" if locator else "content")
            )
            found |= {f"check:{k}" for k in target.get("required_contents") or {}}
            found.add("prep" if target.get("prep_actions") else "no-prep")
        return found

    covered = set().union(*(kinds(t.config) for t in tasks if t.task_id in chosen))
    every = set().union(*(kinds(t.config) for t in tasks))
    assert every <= covered, sorted(every - covered)


def test_offline_score_equals_live_score(
    episodes: list[DemoEpisode], no_sockets: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network and no API key: the LLM judge's answers come from the recording."""
    import webarena.llms.providers.openai_utils as openai_utils

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(openai_utils, "_client", None)  # the live phase's client knew the judge's URL
    results = score_demo_sessions(episodes)
    print("\n" + format_results(results))
    mismatches = [r for r in results if not r.match]
    assert not mismatches, format_results(mismatches)
    assert no_sockets == []


def test_per_step_maximum_matches_too(episodes: list[DemoEpisode], no_sockets: list[object]) -> None:
    """OpenHands reports max(per-step rewards); offline replays every recorded validate() call."""
    for episode in episodes:
        score = evaluate_session(load_session(episode.session))
        assert score.max_score == episode.live_max == score.live_max, episode
        assert all(step.source == "recorded" for step in score.steps), episode
        assert [s.score for s in score.steps] == [s.live_reward for s in score.steps], episode
