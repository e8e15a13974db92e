"""Play every demo task's success and failure trajectory live and check what the official evaluator says.

One in-process demo site, BrowserGym with the official WebArena evaluator (``validate()`` after each
step). Prints task / trajectory / reward / seconds and exits 1 unless every success trajectory scores
1.0 and every failure trajectory 0.0 (2 on a malformed task file).

    .venv/bin/python scripts/check_demo_tasks.py [--tasks FILE] [--only ID ...] [--headed]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cdp_integration.demo import DemoSite
from cdp_integration.errors import CDPIntegrationError

EXPECTED = {"success": 1.0, "failure": 0.0}


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

    failures: list[str] = []
    started = time.perf_counter()
    with DemoSite() as site:
        configure_demo_environment(site.base_url)
        print(f"{'task':>6}  {'template':>8}  {'trajectory':<10} {'reward':>6}  {'steps':>5}  {'secs':>5}  result")
        for task in tasks:
            for trajectory, expected in EXPECTED.items():
                t0 = time.perf_counter()
                try:
                    run = run_demo_task(task, trajectory, site.base_url, headless=not args.headed)  # type: ignore[arg-type]
                    reward, steps, verdict = run.final_reward, run.steps, ""
                except Exception as exc:  # report and go on: one broken task must not hide the others
                    reward, steps, verdict = float("nan"), 0, f"  {type(exc).__name__}: {exc}"
                ok = reward == expected
                if not ok:
                    failures.append(f"{task.task_id}/{trajectory}")
                print(
                    f"{task.task_id:>6}  {task.intent_template_id:>8}  {trajectory:<10} {reward:>6.1f}  {steps:>5}"
                    f"  {time.perf_counter() - t0:>5.1f}  {'ok' if ok else 'MISMATCH'}{verdict}",
                    flush=True,
                )
    elapsed = time.perf_counter() - started
    episodes = 2 * len(tasks)
    print(f"\n{len(tasks)} tasks, {episodes} episodes in {elapsed:.0f} s ({elapsed / max(episodes, 1):.1f} s each)")
    if failures:
        print(f"{len(failures)} episode(s) scored other than expected: {', '.join(failures)}")
        return 1
    print("every success trajectory scored 1.0 and every failure trajectory 0.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
