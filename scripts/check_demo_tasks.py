"""Play every demo task's success and failure trajectory live and check what the official evaluator says.

One in-process demo site; BrowserGym runs the official WebArena evaluator (``validate()``) after every
step. Prints per episode the final reward (the last step's), the maximum over steps (what OpenHands'
run_infer reports), the number of steps and the seconds taken. Exits 1 unless every success trajectory
ends with reward 1.0 and every failure trajectory with 0.0, each with every scripted step executed
without an action error; exits 2 on a malformed task file.

    .venv/bin/python scripts/check_demo_tasks.py [--tasks FILE] [--only ID ...] [--headed]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from cdp_integration.demo import DemoSite
from cdp_integration.errors import CDPIntegrationError

EXPECTED = {"success": 1.0, "failure": 0.0}


def _record_action_errors(env: Any, errors: list[str]) -> None:
    """Collect each step's ``last_action_error``: a scripted step BrowserGym could not execute."""
    browser_env = env.unwrapped
    step = browser_env.step

    def recording_step(action: str) -> Any:
        result = step(action)
        if result[0]["last_action_error"]:
            errors.append(f"{action}: {result[0]['last_action_error'].splitlines()[0]}")
        return result

    browser_env.step = recording_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, help="a task file in tasks.json format (default: bundled)")
    parser.add_argument("--only", type=int, nargs="+", metavar="ID", help="play only these task ids")
    parser.add_argument("--headed", action="store_true", help="show the browser")
    args = parser.parse_args(argv)

    from cdp_integration.demo.tasks import configure_demo_environment, load_demo_tasks, run_demo_task

    try:
        tasks = load_demo_tasks(args.tasks)
    except CDPIntegrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.only:
        tasks = [t for t in tasks if t.task_id in set(args.only)]

    mismatches: list[str] = []
    started = time.perf_counter()
    with DemoSite() as site:
        configure_demo_environment(site.base_url)
        print(
            f"{'task':>6} {'template':>8}  {'trajectory':<10} {'reward':>6} {'max':>4} {'steps':>5} {'secs':>5}  result"
        )
        for task in tasks:
            for trajectory, expected in EXPECTED.items():
                t0 = time.perf_counter()
                errors: list[str] = []
                try:
                    run = run_demo_task(
                        task,
                        trajectory,  # type: ignore[arg-type]
                        site.base_url,
                        on_env=lambda env, errors=errors: _record_action_errors(env, errors),
                        headless=not args.headed,
                    )
                    reward, best, steps = run.final_reward, max(run.rewards, default=0.0), run.steps
                except Exception as exc:  # report and go on: one broken task must not hide the others
                    reward, best, steps = float("nan"), float("nan"), 0
                    errors.append(f"{type(exc).__name__}: {exc}")
                ok = reward == expected and not errors
                if not ok:
                    mismatches.append(f"{task.task_id}/{trajectory}")
                details = "".join(f"\n{'':>16}{error}" for error in errors)
                print(
                    f"{task.task_id:>6} {task.intent_template_id:>8}  {trajectory:<10} {reward:>6.1f} {best:>4.1f}"
                    f" {steps:>5} {time.perf_counter() - t0:>5.1f}  {'ok' if ok else 'MISMATCH'}{details}",
                    flush=True,
                )
    elapsed = time.perf_counter() - started
    episodes = len(EXPECTED) * len(tasks)
    print(
        f"\n{len(tasks)} tasks, {episodes} episodes in {elapsed:.0f} s ({elapsed / max(episodes, 1):.1f} s each)"
    )
    if mismatches:
        print(f"{len(mismatches)} episode(s) not as expected: {', '.join(mismatches)}")
        return 1
    print("every success trajectory ended at 1.0 and every failure trajectory at 0.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
