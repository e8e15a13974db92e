"""The curated real WebArena task ids, their scripted trajectories, and a live runner against the stand-ins.

``tasks.json``: ``[{"task_id", "needs", "success": [steps], "failure": [steps]}]``; a step is a
`cdp_integration.demo.agent` step whose strings may hold WebArena's URL placeholders (``__REDDIT__`` ...),
replaced by the stand-in URLs when the step runs. Each episode runs in BrowserGym's own
``browsergym/webarena.<id>`` env: BrowserGym reads the unmodified config from libwebarena's
``test.raw.json``, logs in through the stand-ins' forms (``ui_login``), and validates every step with
the official evaluator.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from cdp_integration.environment import StallWatchdog

__all__ = [
    "PLACEHOLDERS",
    "CuratedTask",
    "LiveEpisode",
    "expand_step",
    "load_curated_tasks",
    "play_in_workers",
    "play_tasks",
    "real_configs",
]

PLACEHOLDERS = {
    "__SHOPPING_ADMIN__": "WA_SHOPPING_ADMIN",
    "__SHOPPING__": "WA_SHOPPING",
    "__REDDIT__": "WA_REDDIT",
    "__GITLAB__": "WA_GITLAB",
    "__WIKIPEDIA__": "WA_WIKIPEDIA",
    "__MAP__": "WA_MAP",
}
"""``__SHOPPING_ADMIN__`` first: ``__SHOPPING__`` is not a prefix of it, but order keeps this obvious."""


@dataclass(frozen=True)
class CuratedTask:
    task_id: int
    needs: str
    success: tuple[tuple[str, ...], ...]
    failure: tuple[tuple[str, ...], ...]

    @property
    def env_id(self) -> str:
        return f"browsergym/webarena.{self.task_id}"


@dataclass(frozen=True)
class LiveEpisode:
    task_id: int
    trajectory: str
    rewards: tuple[float, ...]
    session: str
    seconds: float
    error: str = ""
    """Why the episode could not be played to the end (then it has no session)."""

    @property
    def live(self) -> float:
        return self.rewards[-1] if self.rewards else 0.0

    @property
    def live_max(self) -> float:
        return max(self.rewards, default=0.0)


def load_curated_tasks() -> list[CuratedTask]:
    entries = json.loads((Path(__file__).parent / "tasks.json").read_text())
    return [
        CuratedTask(
            e["task_id"],
            e["needs"],
            tuple(tuple(s) for s in e["success"]),
            tuple(tuple(s) for s in e["failure"]),
        )
        for e in entries
    ]


def real_configs() -> dict[int, dict[str, Any]]:
    """libwebarena's shipped ``test.raw.json`` (the file BrowserGym's webarena envs read), by task id."""
    import importlib.resources

    import webarena

    configs = json.loads(importlib.resources.files(webarena).joinpath("test.raw.json").read_text())
    return {c["task_id"]: c for c in configs}


def expand_step(step: Sequence[str], urls: dict[str, str]) -> tuple[str, ...]:
    """``step`` with WebArena's URL placeholders replaced by ``urls`` (``WA_*`` -> base URL)."""
    out = []
    for part in step:
        for placeholder, variable in PLACEHOLDERS.items():
            part = part.replace(placeholder, urls[variable])
        out.append(part)
    return tuple(out)


_SELECTOR_VERBS = frozenset({"click", "fill", "select", "press"})
_WAIT_MS = 30_000
_STALL_S = 120
"""An episode takes 5-40 s here (up to ~60 s under heavy load); one still running after this long is stopped."""
"""How long a scripted step waits for its element: BrowserGym's own action timeouts are short (0.5 s)."""


def _play(task: CuratedTask, trajectory: str, urls: dict[str, str], sessions: Path) -> LiveEpisode:
    import gymnasium as gym

    from cdp_integration.capture.logger import CDPSessionLogger
    from cdp_integration.demo.agent import patient_action_mapping, play_step
    from cdp_integration.webarena import skip_evaluator_sleep

    started = time.perf_counter()
    steps = task.success if trajectory == "success" else task.failure
    env = gym.make(task.env_id, headless=True, slow_mo=0, action_mapping=patient_action_mapping())
    logger = CDPSessionLogger(sessions, instance_id=f"{task.task_id}.{trajectory}")
    rewards: list[float] = []
    try:
        logger.attach_to_browsergym_env(env)
        # the stand-ins have served a page when goto returns: the evaluator's fixed 3 s waits are moot
        with skip_evaluator_sleep():
            env.reset()
            for step in steps:
                page = env.unwrapped.page  # type: ignore[attr-defined]
                verb, *args = expand_step(step, urls)
                if verb in _SELECTOR_VERBS or (verb == "answer" and args[0].startswith(("#", "."))):
                    page.wait_for_selector(args[0], state="visible", timeout=_WAIT_MS)
                _, reward, terminated, *_ = play_step(env, (verb, *args), "")
                rewards.append(float(reward))
                if terminated:
                    break
        session = logger.save_session()
    finally:
        env.close()
    return LiveEpisode(
        task.task_id, trajectory, tuple(rewards), str(session), round(time.perf_counter() - started, 2)
    )


def _play_with_retries(
    task: CuratedTask, trajectory: str, sites: Any, sessions: Path, attempts: int = 4
) -> LiveEpisode:
    """A scripted action that BrowserGym could not carry out (a timing fault on a loaded machine, not a
    verdict on the task) replays the whole episode from fresh stand-in data, up to ``attempts`` times.
    So does an episode stopped by the stall watchdog (``environment.StallWatchdog``: BrowserGym's
    ``ui_login`` can leave a Playwright call that has no timeout waiting forever)."""
    started = time.perf_counter()
    error = ""
    for attempt in range(attempts):
        sites.reset()
        label = f"webarena parity: {task.task_id} {trajectory} attempt {attempt + 1}"
        with StallWatchdog(_STALL_S, label) as watchdog:
            try:
                return _play(task, trajectory, sites.urls, sessions)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                if watchdog.fired:
                    error = f"stalled for {_STALL_S} s, browsers stopped ({error})"
                print(f"{label}: {error.splitlines()[0]}", file=sys.stderr)
    return LiveEpisode(task.task_id, trajectory, (), "", round(time.perf_counter() - started, 2), error)


def play_tasks(
    task_ids: Iterable[int],
    sessions: str,
    trajectories: Sequence[str] = ("success", "failure"),
    *,
    verbose: bool = False,
) -> list[dict[str, Any]]:
    """In this (fresh) process: start the stand-ins, point WebArena at them, play each task's trajectories.

    Must run before anything imports ``webarena`` in this process: its site URLs are read at import.
    Returns `LiveEpisode` fields as dicts (picklable across processes); the stand-ins are stopped on return.
    """
    from cdp_integration import environment
    from tests.standins import StandIns

    wanted = set(task_ids)
    tasks = [t for t in load_curated_tasks() if t.task_id in wanted]
    episodes: list[dict[str, Any]] = []
    with StandIns() as sites:
        env = sites.environ()
        os.environ.update(env)
        environment.prepare(webarena_urls={k: v for k, v in env.items() if k in environment.WEBARENA_SITES})
        import browsergym.webarena  # noqa: F401 - registers browsergym/webarena.<id>

        for task in tasks:
            for trajectory in trajectories:
                episode = _play_with_retries(task, trajectory, sites, Path(sessions))
                if verbose:
                    print(
                        f"{episode.task_id} {trajectory} {episode.rewards} {episode.seconds}s {episode.error}",
                        flush=True,
                    )
                episodes.append(asdict(episode))
    return episodes


def play_in_workers(task_ids: Sequence[int], sessions: Path, *, workers: int = 2) -> list[LiveEpisode]:
    """`play_tasks` split over ``workers`` spawned processes, each with its own stand-ins and browser."""
    chunks = [list(task_ids[i::workers]) for i in range(workers)]
    from tests.standins.wikipedia import build_zim

    build_zim()  # once, here: the workers' stand-ins then find it in the cache instead of racing to build it
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(play_tasks, chunk, str(sessions)) for chunk in chunks if chunk]
        results = [episode for future in futures for episode in future.result()]
    episodes = [LiveEpisode(**{**r, "rewards": tuple(r["rewards"])}) for r in results]
    return sorted(episodes, key=lambda e: (e.task_id, e.trajectory != "success"))
