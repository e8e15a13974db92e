"""The main job on the bundled demo: play the demo tasks live with capture, then score them offline.

Phase 1 runs every task's scripted trajectories in BrowserGym against the in-process demo shop,
with the official evaluator scoring each step live and a ``CDPSessionLogger`` capturing it. Phase 2
starts after the shop has been shut down: each session file alone is scored with the same official
evaluator through the replay mocks. The table compares the two numbers per episode.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdp_integration.demo.agent import EPISODE_ATTEMPTS, ActionFailed
from cdp_integration.errors import CDPIntegrationError

if TYPE_CHECKING:
    from cdp_integration.demo.tasks import DemoTask

__all__ = [
    "DemoEpisode",
    "DemoResult",
    "capture_demo_tasks",
    "format_results",
    "run_demo_job",
    "score_demo_sessions",
]

Trajectory = str


@dataclass(frozen=True)
class DemoEpisode:
    """One captured live episode."""

    task_id: int
    trajectory: Trajectory
    eval_types: tuple[str, ...]
    live: float
    live_max: float
    """The best per-step reward (what OpenHands' run_infer reports)."""
    session: Path
    live_seconds: float


@dataclass(frozen=True)
class DemoResult:
    episode: DemoEpisode
    offline: float | None
    offline_max: float | None
    offline_ms: float
    error: str | None = None

    @property
    def match(self) -> bool:
        return self.offline is not None and self.offline == self.episode.live


def capture_demo_tasks(
    sessions_dir: Path,
    *,
    task_ids: Iterable[int] = (),
    trajectories: Sequence[Trajectory] = ("success", "failure"),
    headless: bool = True,
    report: Callable[[DemoEpisode], None] | None = None,
    trace_dir: Path | None = None,
) -> list[DemoEpisode]:
    """Phase 1: play the demo tasks live (official evaluator in BrowserGym) with capture on.

    ``trace_dir``: also record a Playwright trace of each episode (DOM snapshots on, from the end of
    ``reset`` until after the last step's evaluation), saved as ``trace_dir/<trajectory>/<task_id>.zip``
    as WebArena's ``run.py`` names them: real recordings for ``cdp-session import``.
    """
    from cdp_integration import environment
    from cdp_integration.demo import DemoSite
    from cdp_integration.demo.tasks import load_demo_tasks

    environment.prepare()
    wanted = set(task_ids)
    tasks = [task for task in load_demo_tasks() if not wanted or task.task_id in wanted]
    if wanted and not tasks:
        raise CDPIntegrationError(f"no demo task has id {', '.join(map(str, sorted(wanted)))}")
    episodes: list[DemoEpisode] = []
    with DemoSite() as site:
        for task in tasks:
            for trajectory in trajectories:
                for attempt in range(1, EPISODE_ATTEMPTS + 1):
                    try:
                        episode = _capture_one(
                            task, trajectory, site.base_url, sessions_dir, headless, trace_dir
                        )
                        break
                    except ActionFailed as exc:
                        if attempt == EPISODE_ATTEMPTS:
                            raise
                        # the task's setup resets the shop: played again, it starts from the same state
                        print(
                            f"demo: {task.task_id} {trajectory} attempt {attempt}: {exc}; playing it again",
                            file=sys.stderr,
                        )
                episodes.append(episode)
                if report is not None:
                    report(episode)
    return episodes


def _capture_one(
    task: DemoTask,
    trajectory: Trajectory,
    base_url: str,
    sessions_dir: Path,
    headless: bool,
    trace_dir: Path | None,
) -> DemoEpisode:
    from cdp_integration.capture.logger import CDPSessionLogger
    from cdp_integration.demo.tasks import run_demo_task

    logger = CDPSessionLogger(sessions_dir, instance_id=f"{task.task_id}.{trajectory}")
    logger.task["demo_trajectory"] = trajectory
    saved: list[Path] = []
    trace_path = (trace_dir / trajectory / f"{task.task_id}.zip") if trace_dir else None

    def save(env: Any) -> None:
        if trace_path is not None:
            env.unwrapped.context.tracing.stop(path=str(trace_path))
        saved.append(logger.save_session())

    def attach(env: Any) -> None:
        logger.attach_to_browsergym_env(env)
        if trace_dir is not None:
            _trace_after_reset(env)

    started = time.perf_counter()
    try:
        run = run_demo_task(
            task,
            trajectory,  # type: ignore[arg-type]
            base_url,
            on_env=attach,
            before_close=save,
            headless=headless,
        )
    except ActionFailed:
        if logger.partial_path is not None:
            logger.partial_path.unlink(missing_ok=True)
        raise
    return DemoEpisode(
        task_id=task.task_id,
        trajectory=trajectory,
        eval_types=tuple(task.config["eval"]["eval_types"]),
        live=run.final_reward,
        live_max=max(run.rewards, default=0.0),
        session=saved[0],
        live_seconds=round(time.perf_counter() - started, 2),
    )


def _trace_after_reset(env: Any) -> None:
    """Start Playwright tracing with DOM snapshots right after the env's ``reset`` made its context.

    Screenshots (WebArena's ``run.py`` records them too) are off: the importer does not read them,
    and encoding a screencast costs CPU in every traced corpus episode."""
    browser_env = env.unwrapped
    reset = browser_env.reset

    def traced_reset(*args: Any, **kwargs: Any) -> Any:
        result = reset(*args, **kwargs)
        browser_env.context.tracing.start(screenshots=False, snapshots=True)
        return result

    browser_env.reset = traced_reset


def score_demo_sessions(
    episodes: Iterable[DemoEpisode], *, report: Callable[[DemoResult], None] | None = None
) -> list[DemoResult]:
    """Phase 2: score each session file offline (nothing but the file is needed)."""
    from cdp_integration.evaluate.scoring import evaluate_session
    from cdp_integration.session.store import load_session

    results: list[DemoResult] = []
    for episode in episodes:
        started = time.perf_counter()
        try:
            score = evaluate_session(load_session(episode.session))
            result = DemoResult(episode, score.score, score.max_score, _ms(started))
        except CDPIntegrationError as exc:
            result = DemoResult(episode, None, None, _ms(started), error=f"{type(exc).__name__}: {exc}")
        results.append(result)
        if report is not None:
            report(result)
    return results


def run_demo_job(
    output: Path,
    *,
    task_ids: Iterable[int] = (),
    trajectories: Sequence[Trajectory] = ("success", "failure"),
    headless: bool = True,
    echo: Callable[[str], None] | None = None,
) -> list[DemoResult]:
    """Both phases; sessions go to ``output/sessions``."""
    say = echo or (lambda line: None)
    sessions_dir = output / "sessions"
    say(f"phase 1: live episodes (official evaluator in BrowserGym), capturing into {sessions_dir}")
    episodes = capture_demo_tasks(
        sessions_dir,
        task_ids=task_ids,
        trajectories=trajectories,
        headless=headless,
        report=lambda e: say(f"  {e.task_id} {e.trajectory:<8} live {e.live:.1f}  ({e.live_seconds:.1f} s)"),
    )
    say("phase 2: demo site stopped; scoring the session files offline")
    return score_demo_sessions(episodes)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def format_results(results: Sequence[DemoResult]) -> str:
    """The table the ``demo`` command prints: task, live score, offline score, match."""

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [
        f"{'task':>6}  {'trajectory':<10} {'eval types':<34} {'live':>5} {'offline':>8} {'max':>5} {'ms':>7}  match"
    ]
    for r in results:
        e = r.episode
        mark = "yes" if r.match else f"NO {r.error or ''}".rstrip()
        lines.append(
            f"{e.task_id:>6}  {e.trajectory:<10} {'+'.join(e.eval_types):<34} {number(e.live):>5} "
            f"{number(r.offline):>8} {number(r.offline_max):>5} {r.offline_ms:>7.1f}  {mark}"
        )
    matched = sum(r.match for r in results)
    live_s = sum(r.episode.live_seconds for r in results)
    offline_s = sum(r.offline_ms for r in results) / 1000
    lines.append(
        f"\n{matched}/{len(results)} episodes: offline score == live score. "
        f"Live episodes {live_s:.1f} s in total; offline scoring {offline_s:.2f} s in total."
    )
    return "\n".join(lines)
