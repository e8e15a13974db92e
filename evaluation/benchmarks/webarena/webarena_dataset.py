"""``run_infer.py --dataset webarena``: WebArena's real task ids on the user's own deployment.

Each task is BrowserGym's own eval env ``browsergym/webarena.<id>`` (its ``test.raw.json`` config,
``ui_login`` and ``validate``), run in OpenHands' ``BrowserEnv`` exactly as the demo tasks are. This
module only adds what a real deployment needs around it (``cdp_integration.deployment``): the site
URLs (``WEBARENA_BASE_URL`` and ``WA_*``), a preflight that names every unreachable site before
OpenHands starts, the reset command before state-changing tasks, and scripted plans where a
trajectory file provides them (otherwise a real model drives the agent: ``--llm-base-url``).
"""

from __future__ import annotations

import argparse
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
from cdp_integration.errors import EnvironmentSetupError

__all__ = ["TRAJECTORIES_VARIABLE", "WebArenaRun", "load_trajectories"]

TRAJECTORIES_VARIABLE = "WEBARENA_TRAJECTORIES"
"""A JSON file ``{"<task_id>": {"success": [action, ...], "failure": [...]}}`` of BrowserGym action
strings: the scripted LLM's (and ``--mode direct``'s) plan for each task when no model is given."""


def load_trajectories(path: Path) -> dict[int, dict[str, list[str]]]:
    """The scripted plans of a trajectories file; ``EnvironmentSetupError`` when malformed."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EnvironmentSetupError(f"{path}: cannot read the trajectories file ({exc})") from None
    plans: dict[int, dict[str, list[str]]] = {}
    if not isinstance(raw, dict):
        raise EnvironmentSetupError(f"{path}: expected an object keyed by task id")
    for key, entry in raw.items():
        if not (str(key).isdigit() and isinstance(entry, dict)):
            raise EnvironmentSetupError(f"{path}: entry {key!r} is not <task_id>: {{trajectory: [actions]}}")
        plans[int(key)] = {}
        for name, actions in entry.items():
            if not (isinstance(actions, list) and all(isinstance(a, str) for a in actions)):
                raise EnvironmentSetupError(f"{path}: task {key} {name}: expected a list of action strings")
            plans[int(key)][str(name)] = list(actions)
    return plans


class WebArenaRun:
    """The WebArena side of one ``run_infer.py`` run: tasks, site URLs, preflight, resets, plans."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tasks: list[WebArenaTaskSpec] = []
        self.urls: dict[str, str] = {}
        self.plans: dict[int, dict[str, list[str]]] = {}
        self.resets = 0

    def prepare(self) -> None:
        """Everything that can fail fast, before OpenHands starts: task ids, site URLs, trajectories,
        reachability of every site the tasks use. Raises ``EnvironmentSetupError``."""
        args = self.args
        self.tasks = load_webarena_tasks(args.task_ids, args.eval_n_limit)
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
        preflight(self.tasks, self.urls)

    def configure(self) -> None:
        """Site variables (``WA_*`` for BrowserGym, plain for the evaluators) for this process and the
        browser processes OpenHands spawns; Chromium layout and punkt_tab."""
        environment.prepare(webarena_urls=self.urls)

    def select(self, done: set[str]) -> list[WebArenaTaskSpec]:
        return [task for task in self.tasks if task.env_id.removeprefix("browsergym/") not in done]

    def plan(self, task: WebArenaTaskSpec) -> list[str]:
        """The task's scripted actions, URL placeholders (``__SHOPPING__``) replaced by the sites'."""
        actions = self.plans.get(task.task_id, {}).get(self.args.trajectory, [])
        placeholders = {f"__{site}__": url for site, url in self.urls.items()}
        ordered = sorted(placeholders, key=len, reverse=True)  # __SHOPPING_ADMIN__ before __SHOPPING__
        resolved = []
        for action in actions:
            for placeholder in ordered:
                action = action.replace(placeholder, placeholders[placeholder])
            resolved.append(action)
        return resolved

    def before_task(self, task: WebArenaTaskSpec) -> float | None:
        """Run the reset command when ``task`` needs it; the seconds it took, else None."""
        command = self.args.reset_cmd
        if not command or not needs_reset(task, self.args.reset_when):
            return None
        print(f"webarena.{task.task_id}: resetting ({command})", file=sys.stderr)
        seconds = run_reset(command, task, self.urls)
        self.resets += 1
        return round(seconds, 1)

    def metadata(self) -> dict[str, Any]:
        return {
            "site_urls": self.urls,
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
        "WEBARENA_TASK_ID, WEBARENA_TASK_SITES and WA_<SITE> in its environment.",
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
