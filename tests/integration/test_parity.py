"""Parity: the demo corpus (``corpus.CORE_TASKS``, every task with ``CDP_TEST_CORPUS=all``), both scripted
trajectories, scored live and offline — same number.

Live: BrowserGym's ``GenericWebArenaTask.validate`` runs libwebarena's official evaluator after every
step against the demo shop. Offline: the demo shop has been shut down and Python may not open a
socket; the official evaluator scores each session file through the replay mocks.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import orjson
import pytest

from cdp_integration.demo.job import DemoEpisode, format_results, score_demo_sessions
from cdp_integration.demo.tasks import load_demo_tasks
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.batch import score_directory
from cdp_integration.evaluate.explain import ATTRIBUTION_CLASSES, combined_score
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import load_session
from tests.claims import false_claims
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
        assert all(combined_score(s.checks) == s.score for s in score.steps), episode


def test_every_failure_names_its_failed_check(episodes: list[DemoEpisode], tmp_path: Path) -> None:
    """``output.jsonl`` of the corpus: every failure trajectory's line names a failed check with its
    expected and found values and a failure class; every line's checks combine to its score."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    trajectories = {}
    for episode in episodes:
        name = f"{episode.task_id}.{episode.trajectory}.session.jsonl.gz"
        shutil.copy(episode.session, sessions / name)
        trajectories[name] = episode.trajectory
    score_directory(sessions, tmp_path / "out")
    lines = [orjson.loads(line) for line in (tmp_path / "out" / "output.jsonl").read_bytes().splitlines()]
    assert len(lines) == len(episodes)
    for line in lines:
        result, name = line["test_result"], line["metadata"]["session_path"]
        assert result["error"] is None, (name, result["error"])
        assert combined_score(result["checks"]) == result["score"], name
        if trajectories[name] == "failure":
            failed = [c for c in result["checks"] if not c["passed"]]
            assert failed and all({"expected", "found", "source"} <= set(c) for c in failed), name
            assert result["attribution"]["class"] in ATTRIBUTION_CLASSES, name
        else:
            assert result["attribution"] is None, name


def test_reconstructed_checks_combine_to_the_score(episodes: list[DemoEpisode]) -> None:
    """The same episodes as if captured without the task's config: every answer from the captured
    pages; the checks still combine to the score (or the miss is loud)."""
    scored = 0
    for episode in episodes:
        session = load_session(episode.session)
        steps = tuple(step.model_copy(update={"evaluation": None}) for step in session.steps)
        end = session.end.model_copy(update={"probe": None}) if session.end else None
        try:
            result = evaluate_session(dataclasses.replace(session, steps=steps, end=end), per_step=False)
        except Exception as exc:  # a loud miss: a page, or the LLM judge's reply, not captured
            assert isinstance(exc, ReplayMissError) or "no recorded response" in str(exc), exc
            continue
        scored += 1
        assert combined_score(result.checks) == result.score, episode
    print(f"\nreconstructed: {scored} of {len(episodes)} episodes scored, the others a loud miss")
    assert scored


def test_every_failure_claim_is_what_the_evaluator_says(
    episodes: list[DemoEpisode], no_sockets: list[object]
) -> None:
    """The failure class of every failure trajectory of the corpus proves itself: each claim (the named
    check at the named step, the unsaved value, the visible answer) asked again of the evaluator
    (``tests/claims.py``), the earlier steps offline."""
    wrong = {
        f"{episode.task_id}.{episode.trajectory}": claims
        for episode in episodes
        if episode.trajectory == "failure" and (claims := false_claims(load_session(episode.session)))
    }
    assert wrong == {}
