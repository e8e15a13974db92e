"""``run_infer.py --dataset webarena``: WebArena's real task ids on the user's own deployment.

Each task is a ``task_runner.TaskRun`` (``webarena_task_run``): BrowserGym's own eval env
``browsergym/webarena.<id>`` (its ``test.raw.json`` config, ``ui_login`` and ``validate``), run by
either SDK's driver exactly as the demo tasks are. This module only adds what a real deployment
needs around it (``cdp_integration.deployment``): the site URLs (``WEBARENA_BASE_URL`` and
``WA_*``), a preflight that names every unreachable site before OpenHands starts, the reset command
before state-changing tasks, and scripted plans where a trajectory file provides them (otherwise a
real model drives the agent: ``--llm-base-url``), with V0's rehearsal of them (``plan``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from cdp_integration import environment
from cdp_integration.deployment import (
    RESET_POLICIES,
    WebArenaTaskSpec,
    load_webarena_tasks,
    needs_reset,
    preflight,
    run_reset,
    site_urls_from_environment,
)
from cdp_integration.errors import EnvironmentSetupError, escape_controls, redact_credentials

__all__ = ["TRAJECTORIES_VARIABLE", "WebArenaRun", "load_trajectories"]

TRAJECTORIES_VARIABLE = "WEBARENA_TRAJECTORIES"
"""A JSON list ``[{"task_id": N, "success": [step, ...], "failure": [...]}, ...]`` of scripted
trajectories, steps as ``cdp_integration.demo.agent`` takes them (``["click", "<css selector>"]``,
``["goto", "__REDDIT__/f/books"]``; URL placeholders allowed): the scripted LLM's (and ``--mode
direct``'s) plan for each task when no model is given. The stand-ins' ``tests/standins/tasks.json``
is such a file."""

REHEARSAL_STALL_S = 180
"""A rehearsal (plain BrowserGym, no slow_mo) takes 10-60 s; one still running after this is stuck in a
Playwright call without a timeout (see ``environment.StallWatchdog``) and is started again."""
REHEARSAL_ATTEMPTS = 3

Steps = tuple[tuple[str, ...], ...]

_URL_MODULES = ("webarena.browser_env.env_config", "webarena.evaluation_harness.helper_functions")


def load_trajectories(path: Path) -> dict[int, dict[str, Steps]]:
    """``{task_id: {"success": steps, "failure": steps}}``; ``EnvironmentSetupError`` when malformed."""
    from cdp_integration.demo.agent import VERBS

    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EnvironmentSetupError(f"{path}: cannot read the trajectories file ({exc})") from None
    if not isinstance(raw, list):
        raise EnvironmentSetupError(f"{path}: expected a list of {{task_id, success, failure}} objects")
    plans: dict[int, dict[str, Steps]] = {}
    for number, entry in enumerate(raw):
        task_id = entry.get("task_id") if isinstance(entry, dict) else None
        if not isinstance(task_id, int):
            raise EnvironmentSetupError(f"{path}: entry #{number} has no integer task_id")
        plans[task_id] = {}
        for name in ("success", "failure"):
            steps = entry.get(name, [])
            if not (
                isinstance(steps, list)
                and all(
                    isinstance(step, list)
                    and step
                    and step[0] in VERBS
                    and all(isinstance(x, str) for x in step)
                    for step in steps
                )
            ):
                raise EnvironmentSetupError(
                    f'{path}: task {task_id} {name}: expected steps like ["click", "<selector>"] '
                    f"(verbs: {', '.join(sorted(VERBS))})"
                )
            if steps:
                plans[task_id][name] = tuple(tuple(step) for step in steps)
    return plans


class WebArenaRun:
    """The WebArena side of one ``run_infer.py`` run: tasks, site URLs, preflight, resets, plans."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tasks: list[WebArenaTaskSpec] = []
        self.urls: dict[str, str] = {}
        self.plans: dict[int, dict[str, Steps]] = {}
        self.resets = 0
        self.reset_cmd: str | None = args.reset_cmd
        """The reset command of this run's deployment (a pool's deployment may name its own)."""

    def prepare(self, *, check_sites: bool = True) -> None:
        """Everything that can fail fast, before OpenHands starts: task ids, site URLs, trajectories,
        reachability of every site the tasks use. Raises ``EnvironmentSetupError``. Without
        ``check_sites`` (a pool: its deployments are checked each) no site URL is read or probed."""
        args = self.args
        self.tasks = load_webarena_tasks(args.task_ids, args.eval_n_limit)
        if check_sites:
            self.urls = site_urls_from_environment()
        trajectories = args.trajectories or os.environ.get(TRAJECTORIES_VARIABLE)
        if args.llm_base_url is None:
            if not trajectories:
                raise EnvironmentSetupError(
                    "--dataset webarena needs a model (--llm-base-url) or scripted plans "
                    f"(--trajectories FILE or ${TRAJECTORIES_VARIABLE})"
                )
            self.plans = load_trajectories(Path(trajectories))
            unplanned = [
                t.task_id for t in self.tasks if args.trajectory not in self.plans.get(t.task_id, {})
            ]
            if unplanned:
                raise EnvironmentSetupError(
                    f"no scripted {args.trajectory} trajectory for task(s) "
                    f"{', '.join(map(str, unplanned))} in {trajectories}; pass --llm-base-url for a model"
                )
        if check_sites:
            preflight(self.tasks, self.urls)
        else:
            preflight(self.tasks, {})  # the LLM judge's settings only

    def prepare_deployment(self, deployment: Any) -> None:
        """``prepare`` for one deployment of a pool (``cdp_integration.pool.Deployment``), checked
        already: its site URLs and reset command."""
        self.prepare(check_sites=False)
        self.urls = dict(deployment.urls)
        self.reset_cmd = deployment.reset_cmd or self.args.reset_cmd

    def configure(self) -> None:
        """Site variables (``WA_*`` for BrowserGym, plain for the evaluators) for this process and the
        browser processes OpenHands spawns; Chromium layout and punkt_tab."""
        environment.prepare(webarena_urls=self.urls)
        for name in _URL_MODULES:  # read the variables at import: in case that was before now
            module = sys.modules.get(name)
            for site, url in self.urls.items():
                if module is not None and hasattr(module, site):
                    setattr(module, site, url)

    def _expand(self, text: str) -> str:
        for site in sorted(self.urls, key=len, reverse=True):  # SHOPPING_ADMIN before SHOPPING
            text = text.replace(f"__{site}__", self.urls[site])
        return text

    def plan(self, task: WebArenaTaskSpec, trajectory: str) -> list[str]:
        """``TaskRun.rehearse``: the task's scripted ``trajectory`` as BrowserGym action strings,
        element ids included.

        Steps name elements by CSS selector; an action names them by the id BrowserGym marks on the
        live page. So the trajectory is played once in plain BrowserGym, in the same
        ``browsergym/webarena.<id>`` env marking elements as OpenHands' ``BrowserEnv`` does
        (``tags_to_mark="all"``), and the actions recorded. This changes the sites' state like the run
        itself: the driver resets again afterwards (``before_task``, when the task needs it).
        """
        import browsergym.webarena  # noqa: F401  (registers browsergym/webarena.<id>)
        import gymnasium as gym

        from cdp_integration.demo.agent import to_browsergym_action
        from cdp_integration.webarena import skip_evaluator_sleep

        steps = self.plans[task.task_id][trajectory]
        for attempt in range(1, REHEARSAL_ATTEMPTS + 1):
            label = f"webarena.{task.task_id}: rehearsal"
            with environment.StallWatchdog(REHEARSAL_STALL_S, label) as watchdog:
                actions: list[str] = []
                env = gym.make(task.env_id, headless=True, slow_mo=0, tags_to_mark="all")
                try:
                    with skip_evaluator_sleep():  # the live score of this rehearsal is not used
                        env.reset()
                        for step in steps:
                            expanded = tuple(self._expand(part) for part in step)
                            page = env.unwrapped.page  # type: ignore[attr-defined]
                            action = to_browsergym_action(expanded, page, "")
                            actions.append(action)
                            _, _, terminated, _, _ = env.step(action)
                            if terminated:
                                break
                    return actions
                except Exception:
                    if not watchdog.fired or attempt == REHEARSAL_ATTEMPTS:
                        raise
                finally:
                    with contextlib.suppress(Exception):  # browsers the watchdog killed
                        env.close()
            print(f"{label} stalled (browsers stopped), attempt {attempt + 1}", file=sys.stderr)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def before_task(self, task: WebArenaTaskSpec) -> float | None:
        """Run the reset command when ``task`` needs it; the seconds it took, else None. Called
        before the task, and again after ``plan``'s rehearsal of it."""
        command = self.reset_cmd
        if not command or not needs_reset(task, self.args.reset_when):
            return None
        print(escape_controls(f"webarena.{task.task_id}: resetting ({command})"), file=sys.stderr)
        seconds = run_reset(command, task, self.urls)
        self.resets += 1
        return round(seconds, 1)

    def changes_sites(self, task: WebArenaTaskSpec) -> bool:
        """Whether ``task`` may change its sites (WebArena-Verified ``mutate``) or is reset before: then
        it must run alone on them (``--num-workers``)."""
        from cdp_integration.deployment import verified_task_types

        reset = bool(self.reset_cmd) and needs_reset(task, self.args.reset_when)
        return reset or verified_task_types().get(task.task_id) == "mutate"

    def metadata(self) -> dict[str, Any]:
        return {
            "site_urls": {site: redact_credentials(url) for site, url in self.urls.items()},
            "reset_cmd": self.args.reset_cmd,
            "reset_when": self.args.reset_when,
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options only ``--dataset webarena`` reads."""
    group = parser.add_argument_group("--dataset webarena")
    group.add_argument(
        "--reset-cmd",
        default=None,
        metavar="CMD",
        help="Shell command run before each task that needs a fresh deployment (see --reset-when), with "
        "WEBARENA_TASK_ID, WEBARENA_TASK_SITES and WA_<SITE> in its environment. It is code this machine "
        "runs, as is a pool file's reset_cmd.",
    )
    group.add_argument(
        "--reset-when",
        choices=RESET_POLICIES,
        default="mutate",
        help="require_reset: the config's flag (false for all 812 tasks); mutate: that or WebArena-Verified's "
        "task type 'mutate' [default]; always: before every task.",
    )
    group.add_argument(
        "--trajectories",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"Scripted plans per task id (default ${TRAJECTORIES_VARIABLE}); without --llm-base-url.",
    )


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.dataset != "webarena" and (args.reset_cmd or args.trajectories):
        parser.error("--reset-cmd and --trajectories apply to --dataset webarena only")
