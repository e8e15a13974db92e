"""Offline vs live evaluation time on the same program_html demo tasks.

Run::

    .venv/bin/python benchmarks/offline_vs_live.py [--limit N] [--rounds R]

For each demo task whose evaluation includes ``program_html`` (successful trajectory):

1. The episode is played live in BrowserGym with capture on (the demo shop in-process).
2. At its end, still live, the official evaluator is timed on the final state R times, side by side:
   as WebArena and BrowserGym run it (with its fixed ``time.sleep(3)`` after each navigation), and
   without those sleeps (the evaluator's own work: new tabs, navigations, JavaScript).
3. The shop is stopped; the session file is scored offline R times (``evaluate_step`` of the last
   step: BrowserGym's validate over the replay mocks).

Prints per-task medians, the totals and the ratios live/offline. Target: >= 100x.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdp_integration import environment

TARGET_RATIO = 100.0


@contextlib.contextmanager
def _real_sleep() -> Iterator[None]:
    """Undo the demo runner's skipped sleeps for the timed live evaluation."""
    import webarena.evaluation_harness.evaluators as evaluators

    current = evaluators.time
    evaluators.time = time  # type: ignore[assignment]
    try:
        yield
    finally:
        evaluators.time = current


def _time_live(env: Any, config: dict[str, Any], answer: str | None, rounds: int) -> tuple[float, float]:
    from webarena.evaluation_harness.evaluators import evaluator_router

    from cdp_integration.capture.probes import build_trajectory, webarena_config_file
    from cdp_integration.webarena import skip_evaluator_sleep

    page = env.unwrapped.page
    trajectory = build_trajectory(answer, stopped=answer is not None)
    with webarena_config_file(config) as config_file:
        evaluator = evaluator_router(config_file)
        quick, official = [], []
        for _ in range(rounds):
            with skip_evaluator_sleep():
                started = time.perf_counter()
                evaluator(trajectory, config_file, page, None)
                quick.append(time.perf_counter() - started)
            with _real_sleep():
                started = time.perf_counter()
                evaluator(trajectory, config_file, page, None)
                official.append(time.perf_counter() - started)
    return statistics.median(official), statistics.median(quick)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N program_html tasks")
    parser.add_argument("--rounds", type=int, default=3, help="timed repetitions per task (median)")
    parser.add_argument("--keep", type=Path, default=None, help="also copy the session files here")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    environment.prepare()

    from cdp_integration.capture.logger import CDPSessionLogger
    from cdp_integration.demo import DemoSite
    from cdp_integration.demo.agent import EPISODE_ATTEMPTS, ActionFailed
    from cdp_integration.demo.tasks import instantiate_config, load_demo_tasks, run_demo_task
    from cdp_integration.evaluate.scoring import evaluate_step
    from cdp_integration.session.store import load_session

    tasks = [t for t in load_demo_tasks() if "program_html" in t.config["eval"]["eval_types"]]
    tasks = tasks[: args.limit] if args.limit else tasks
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="offline-vs-live-") as folder, DemoSite() as site:
        for task in tasks:
            for attempt in range(1, EPISODE_ATTEMPTS + 1):
                logger = CDPSessionLogger(Path(folder), instance_id=str(task.task_id))
                row: dict[str, Any] = {
                    "task": task.task_id,
                    "targets": len(task.config["eval"]["program_html"]),
                }

                def measure(
                    env: Any, task: Any = task, logger: Any = logger, row: dict[str, Any] = row
                ) -> None:
                    config = instantiate_config(task.config, site.base_url)
                    answer = logger._final_answer() if logger._final_answer else None
                    row["live_official"], row["live_no_sleep"] = _time_live(env, config, answer, args.rounds)
                    row["session"] = logger.save_session()

                try:
                    run_demo_task(
                        task,
                        "success",
                        site.base_url,
                        on_env=logger.attach_to_browsergym_env,
                        before_close=measure,
                    )
                    break
                except (
                    ActionFailed
                ) as exc:  # BrowserGym's 0.5 s action timeout on a loaded machine, as in the demo job
                    if attempt == EPISODE_ATTEMPTS:
                        raise
                    print(f"  {task.task_id} attempt {attempt}: {exc}; playing it again", file=sys.stderr)
            rows.append(row)
            print(
                f"  live {task.task_id}: {row['live_official']:.2f} s official, {row['live_no_sleep']:.3f} s without sleeps"
            )
        site.stop()
        evaluate_step(load_session(rows[0]["session"]), -1)  # warm-up: imports, first offline use
        for row in rows:
            session = load_session(row["session"])
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                evaluate_step(session, -1)
                times.append(time.perf_counter() - started)
            row["offline"] = statistics.median(times)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for row in rows:
                shutil.copy2(row["session"], args.keep / Path(row["session"]).name)

    print(
        f"\n{'task':>6} {'targets':>7} {'live (official)':>16} {'live (no sleep)':>16} {'offline':>9} {'ratio':>8} {'ratio*':>8}"
    )
    for row in rows:
        print(
            f"{row['task']:>6} {row['targets']:>7} {row['live_official']:>14.3f} s {row['live_no_sleep']:>14.3f} s "
            f"{row['offline'] * 1000:>6.1f} ms {row['live_official'] / row['offline']:>7.0f}x "
            f"{row['live_no_sleep'] / row['offline']:>7.0f}x"
        )
    official = sum(r["live_official"] for r in rows)
    quick = sum(r["live_no_sleep"] for r in rows)
    offline = sum(r["offline"] for r in rows)
    ratio, ratio_quick = official / offline, quick / offline
    print(
        f"\n{len(rows)} program_html tasks: live {official:.2f} s (official, with its 3 s sleeps), "
        f"{quick:.2f} s (no sleeps); offline {offline:.3f} s"
    )
    print(
        f"ratio live/offline: {ratio:.0f}x official, {ratio_quick:.1f}x without the sleeps  (* = no sleeps)"
    )
    verdict = "PASS" if ratio >= TARGET_RATIO else "MISS"
    print(f"target >= {TARGET_RATIO:.0f}x (official live evaluation vs offline): {verdict}")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
