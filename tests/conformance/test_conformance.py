"""Offline scores against live ones on two real applications (DokuWiki, Trac), with and without the config.

For every task of ``tasks.json`` and each of its trajectories (success, failure) the episode is
played once on the live application with a plain Playwright page and two ``CDPSessionLogger``s:

- **recorded**: this logger knows the task's WebArena config; when saved it runs the official
  evaluator on the live final state and records every question and answer;
- **reconstructed**: this logger knows nothing of the task; its session is scored offline with the
  config, so every answer has to be reconstructed from the captured pages.

The live score is the recorded run's (the unmodified evaluator run once more on the final state
must agree, unless the task has prep actions, which may change the state a rerun sees).

Acceptance: every recorded score equals live; every reconstructed score equals live or is a loud
``ReplayMissError`` that names the page or expression (as ``tasks.json`` expects per task); a
silently different score never happens. The counts are printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp_integration import CDPSessionLogger, load_session
from cdp_integration.capture.probes import build_trajectory, webarena_config_file
from cdp_integration.errors import ReconstructedAnswerError, ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls
from tests.conformance import apps, differential

TASKS: list[dict[str, Any]] = json.loads((Path(__file__).with_name("tasks.json")).read_text())
PLACEHOLDERS = {"dokuwiki": ("__WIKIPEDIA__", "WIKIPEDIA"), "trac": ("__GITLAB__", "GITLAB")}

_missing = apps.dokuwiki_missing() or apps.trac_missing()
pytestmark = [
    pytest.mark.integration,
    # ~44 live episodes: about a minute and a half on an idle 2-CPU machine, ten on a heavily loaded one.
    pytest.mark.timeout(1800),
    pytest.mark.skipif(_missing is not None, reason=_missing or ""),
]


def _resolve(config: dict[str, Any], urls: dict[str, str]) -> dict[str, Any]:
    text = json.dumps(config)
    for placeholder, site in PLACEHOLDERS.values():
        text = text.replace(placeholder, urls[site])
    resolved: dict[str, Any] = json.loads(text)
    return resolved


def _act(page: Any, app: apps.App, action: list[str]) -> None:
    """One agent action on the live application, as a scripted agent would do it."""
    kind = action[0]
    if kind == "goto":
        page.goto(app.url + action[1])
    elif kind == "click":
        page.click(action[1])
    elif kind == "login" and app.name == "dokuwiki":
        page.goto(app.url + "/doku.php/start?do=login")
        page.fill("input[name=u]", apps.USER)
        page.fill("input[name=p]", apps.PASSWORD)
        with page.expect_navigation():
            page.click("#dw__login button[type=submit]")
    elif kind == "login":  # Trac: HTTP basic auth (the context carries the credentials)
        page.goto(app.url + "/login")
    elif kind == "edit" and app.name == "dokuwiki":
        page.goto(f"{app.url}/doku.php/{action[1]}?do=edit")
        page.fill("#wiki__text", action[2])
        with page.expect_navigation():
            page.click("#edbtn__save")
    elif kind == "edit":
        page.goto(f"{app.url}/wiki/{action[1]}?action=edit")
        page.fill("#text", action[2])
        with page.expect_navigation():
            page.click("input[name=save]")
    else:
        raise ValueError(f"unknown action {action!r}")


def _live_score(page: Any, config: dict[str, Any], answer: str | None) -> float:
    """The official evaluator, unmodified, on the live final state."""
    from webarena.evaluation_harness.evaluators import evaluator_router

    with webarena_config_file(config) as config_file:
        evaluator = evaluator_router(config_file)
        trajectory = build_trajectory(answer, stopped=answer is not None)
        return float(evaluator(trajectory=trajectory, config_file=config_file, page=page, client=None))


MODES = ("recorded", "reconstructed")

SAMPLE_QUESTIONS_PER_STEP = int(os.environ.get("CDP_TEST_DIFFERENTIAL_QUESTIONS", "8"))
SAMPLE_SEED = int(os.environ.get("CDP_TEST_DIFFERENTIAL_SEED", "0"))
SAMPLE_MIN_QUESTIONS = 500


def _sample_probe(app: str, label: str) -> differential.EpisodeProbe:
    """The differential checker's bounded sample: a few questions per step of every conformance episode
    (``scripts/differential_check.py`` / ``make check-fidelity`` run it at full size)."""
    return differential.EpisodeProbe(
        app, label, seed=SAMPLE_SEED, per_step=SAMPLE_QUESTIONS_PER_STEP, fresh_per_url=6, max_controls=20
    )


def _play(
    context: Any,
    app: apps.App,
    urls: dict[str, str],
    config: dict[str, Any],
    trajectory: dict[str, Any],
    out: Path,
    label: str,
    probe: differential.EpisodeProbe | None = None,
) -> tuple[dict[str, Any], float]:
    """Play ``trajectory`` once with two loggers on the page: one knowing the task's config
    (``recorded``: it runs the official evaluator on the live final state when saved and records every
    answer) and one knowing nothing of the task (``reconstructed``). Returns both sessions and the live
    score, the recorded run's; the unmodified evaluator run once more on the final state must agree
    (unless the config has prep actions, which may change the state they run on).

    The ``reconstructed`` logger saves first, so its session ends before the evaluator's own
    navigations; the recorded one tags those as evaluator traffic. ``probe``: the differential checker's
    questions, asked live after each step (its own tabs tagged as evaluator traffic, like the evaluator's).
    """
    page = context.new_page()
    loggers = {
        mode: CDPSessionLogger(
            out, task={"site_urls": urls} | ({"config": config} if mode == "recorded" else {})
        )
        for mode in MODES
    }
    for logger in loggers.values():
        logger.attach_to_page(page)
    for step, action in enumerate(trajectory["actions"]):
        _act(page, app, action)
        for logger in loggers.values():
            logger.capture_state_snapshot(" ".join(action[:2]))
        if probe is not None:  # the sample's fresh loads: at the last step, where evaluators ask
            last = step == len(trajectory["actions"]) - 1
            probe.ask_live(
                page,
                step,
                captured=loggers["reconstructed"].last_step,
                phases=[logger.evaluation_phase for logger in loggers.values()],
                fresh=last,
            )
    answer = trajectory.get("answer")
    sessions = {}
    for mode in ("reconstructed", "recorded"):
        sessions[mode] = load_session(loggers[mode].save_session(f"{label}.{mode}", final_answer=answer))
        loggers[mode].detach()
    assert "config" not in sessions["reconstructed"].task
    probe = sessions["recorded"].end.probe if sessions["recorded"].end else None
    assert probe is not None and probe.score is not None, (label, probe)
    if "prep_actions" not in json.dumps(config):  # a prep action (a click) may change what a rerun sees
        assert _live_score(page, config, answer) == probe.score, label
    return sessions, probe.score


@pytest.fixture(scope="module")
def live_apps() -> Iterator[dict[str, apps.App]]:
    with (
        tempfile.TemporaryDirectory(prefix="cdp-conformance-") as workdir,
        apps.running(apps.start_dokuwiki, Path(workdir)) as wiki,
        apps.running(apps.start_trac, Path(workdir)) as trac,
    ):
        yield {"dokuwiki": wiki, "trac": trac}


@pytest.fixture(scope="module")
def differential_sample() -> dict[str, list[tuple[str, differential.Outcome]]]:
    """The differential checker's outcomes on the episodes the conformance test plays (filled by it)."""
    return {}


SAMPLE_SECONDS: list[float] = []
"""What the sample's probes cost, per episode (printed with the sample's table)."""


def test_offline_scores_equal_live_or_miss_loudly(
    live_apps: dict[str, apps.App],
    tmp_path: Path,
    differential_sample: dict[str, list[tuple[str, differential.Outcome]]],
) -> None:
    import browsergym.core

    from cdp_integration import environment

    urls = {"WIKIPEDIA": live_apps["dokuwiki"].url, "GITLAB": live_apps["trac"].url}
    browser = browsergym.core._get_global_playwright().chromium.launch(
        executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    problems: list[str] = []
    rows: list[str] = []
    try:
        with use_site_urls(urls), skip_evaluator_sleep():
            for task in TASKS:
                config = task["config"]
                resolved = _resolve(config, urls)
                app = live_apps[task["app"]]
                for name, trajectory in task["trajectories"].items():
                    label = f"{config['task_id']}.{name}"
                    context = browser.new_context(
                        http_credentials={"username": apps.USER, "password": apps.PASSWORD}
                    )
                    probe = _sample_probe(task["app"], label)
                    try:
                        sessions, live = _play(
                            context, app, urls, resolved, trajectory, tmp_path, label, probe
                        )
                    finally:
                        context.close()
                    outcomes = probe.answer_offline(sessions["reconstructed"])
                    differential_sample.setdefault(task["app"], []).extend((label, o) for o in outcomes)
                    SAMPLE_SECONDS.append(probe.seconds)
                    for mode in MODES:
                        verdict = _judge(
                            task,
                            name,
                            mode,
                            sessions[mode],
                            config,
                            live,
                            counts,
                            problems,
                            f"{label}.{mode}",
                        )
                        rows.append(
                            f"{label + '.' + mode:<34} {time.perf_counter() - started:6.1f}s live {live}  "
                            f"offline {verdict}"
                        )
                        print(rows[-1], flush=True)
    finally:
        browser.close()
    recorded = counts["recorded matched"]
    total = recorded + counts["recorded wrong"] + counts["recorded miss"]
    print(
        f"conformance: recorded {recorded}/{total} == live; reconstructed: matched "
        f"{counts['reconstructed matched']} / loud misses {counts['reconstructed miss']} / "
        f"silent wrong {counts['reconstructed wrong']}"
    )
    assert counts["reconstructed wrong"] == 0, problems
    assert recorded == total == sum(len(t["trajectories"]) for t in TASKS), problems
    assert not problems, problems


def _judge(
    task: dict[str, Any],
    trajectory: str,
    mode: str,
    session: Any,
    config: dict[str, Any],
    live: float | None,
    counts: Counter[str],
    problems: list[str],
    label: str,
) -> str:
    """Score one capture offline, count the outcome, note what breaks the task's expectation."""
    expected = task.get("offline_without_config", "match") if mode == "reconstructed" else "match"
    try:
        result = evaluate_session(session, None if mode == "recorded" else config, per_step=False)
    except ReplayMissError as exc:
        counts[f"{mode} miss"] += 1
        if expected == "match":
            problems.append(f"{label}: expected a match, got a miss: {exc}")
        elif task.get("miss_names") and task["miss_names"] not in str(exc):
            problems.append(f"{label}: the miss does not name {task['miss_names']!r}: {exc}")
        hint = task.get("miss_hints", {}).get(trajectory)
        if hint and hint not in str(exc):
            problems.append(f"{label}: the miss does not say {hint!r}: {exc}")
        return f"ReplayMissError: {exc}"
    if result.score != live:
        counts[f"{mode} wrong"] += 1
        problems.append(f"{label}: offline {result.score} != live {live} ({result.provenance})")
        return f"{result.score}  WRONG"
    counts[f"{mode} matched"] += 1
    if expected == "miss":
        problems.append(f"{label}: expected a loud miss, got a (correct) score {result.score}")
    if result.provenance != mode:
        problems.append(f"{label}: provenance {result.provenance}, expected {mode}")
    if mode == "reconstructed":
        with contextlib.suppress(ReconstructedAnswerError):
            evaluate_session(session, config, per_step=False, recorded_only=True)
            problems.append(f"{label}: --recorded-only accepted a reconstructed score")
    return f"{result.score}  ({result.provenance})"


@pytest.mark.xfail(
    strict=False,
    reason="known replay gap on this branch (notes/diffcheck.md, class A): a fresh load of a scripted page is "
    "answered from the agent's tab after a click changed its DOM (DokuWiki's table of contents); "
    "remove this mark once the fresh-load rules of issue 19 item 3 are merged",
)
def test_differential_sample_has_no_silent_difference(
    live_apps: dict[str, apps.App],
    tmp_path: Path,
    differential_sample: dict[str, list[tuple[str, differential.Outcome]]],
) -> None:
    """At every step of the conformance episodes, questions built from the live DOM (element text, form
    controls' values, attributes, counts, computed style, visibility, location, fresh loads of the URLs
    seen) answered live and from the reconstructed session: equal, or a loud miss, never different.

    Reuses the episodes the test above played; run alone, it plays the conformance episodes itself.
    """
    if not differential_sample:
        _play_sample(live_apps, tmp_path, differential_sample)
    by_app = {app: [outcome for _, outcome in rows] for app, rows in differential_sample.items()}
    print(
        f"\ndifferential sample (seed {SAMPLE_SEED}, {SAMPLE_QUESTIONS_PER_STEP} questions per step; "
        f"{sum(SAMPLE_SECONDS):.0f} s of asking over {len(SAMPLE_SECONDS)} episodes):"
    )
    print(differential.format_report(by_app))
    silent = [
        differential.format_silent(label, outcome)
        for rows in differential_sample.values()
        for label, outcome in rows
        if outcome.verdict == "silent"
    ]
    for line in silent:
        print(line)
    outcomes = [outcome for rows in by_app.values() for outcome in rows]
    equal = sum(outcome.verdict == "equal" for outcome in outcomes)
    assert len(outcomes) >= SAMPLE_MIN_QUESTIONS, len(outcomes)
    assert equal >= 0.6 * len(outcomes), f"only {equal} of {len(outcomes)} answers compared equal"
    assert not silent, f"{len(silent)} silent difference(s):\n" + "\n".join(silent[:20])


def _play_sample(
    live_apps: dict[str, apps.App], out: Path, sample: dict[str, list[tuple[str, differential.Outcome]]]
) -> None:
    """The conformance episodes with one task-less logger each and the sample's questions."""
    import browsergym.core

    from cdp_integration import environment
    from tests.conformance import sources

    browser = browsergym.core._get_global_playwright().chromium.launch(
        executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    try:
        for source in sources.conformance_sources():
            if source.name not in live_apps:
                continue
            for episode in source.episodes():
                probe = _sample_probe(source.name, episode.label)
                session = sources.play(
                    source, live_apps[source.name], browser, episode, out, probe, fresh_every_step=False
                )
                sample.setdefault(source.name, []).extend(
                    (episode.label, outcome) for outcome in probe.answer_offline(session)
                )
                SAMPLE_SECONDS.append(probe.seconds)
    finally:
        browser.close()
