"""Batch evaluation at scale: sessions/s with 1 and 2 workers, peak RSS, resume after a real kill.

Run::

    .venv/bin/python benchmarks/eval_throughput.py [--count 1000] [--sessions DIR] [--fake-scorer]

1. Sessions: ``--count`` copies (hard links) of the session files under ``--sessions``, else of
   ``cdp_sessions/`` or ``demo_output/`` in the repository if present, else of a few synthetic
   sessions written here in the real file format.
2. ``score_directory`` over them, each configuration in a fresh process so peak RSS is its own:
   1 worker on a tenth of the sessions, then 1 worker and 2 workers on all of them. Printed:
   seconds, sessions/s, peak RSS of the scoring process and of its largest worker, the 2-vs-1
   speedup, and the RSS growth from a tenth to all the sessions (bounded memory: about zero).
3. Resume: a 2-worker run SIGKILLed halfway, then run again; every session must be in
   ``output.jsonl`` exactly once.

``--fake-scorer`` scores with a stand-in that loads each session (the real file read, decompress
and parse), spends ``--fake-cost-ms`` of CPU in place of the evaluators, and answers from the
session; so the batch machinery is measured on its own. Without it the real scorer
(``cdp_integration.evaluate.scoring``) runs. Exit status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from cdp_integration.evaluate.batch import discover_sessions, score_directory
from cdp_integration.session import (
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    SessionEnd,
    SessionWriter,
    Step,
    TabState,
    load_session,
    new_header,
)

REPO = Path(__file__).resolve().parent.parent
TARGET_SPEEDUP = 1.6
"""Near-linear from 1 to 2 workers, on a machine with at least 2 CPUs."""
SYNTHETIC_SESSIONS = 4
FAKE_LOOPS = [0]
"""Set from ``--fake-cost-ms``: the fake scorer's CPU work per session, in ``_busy`` loops."""


def fake_score(
    path: Path, configs: Mapping[int, Mapping[str, Any]] | None = None, *, scorer: str = "webarena"
) -> dict[str, Any]:
    """Stand-in scorer: the real session load, CPU work in place of the evaluators, a result."""
    started = time.perf_counter()
    session = load_session(path)
    _busy(int(os.environ.get("EVAL_THROUGHPUT_FAKE_LOOPS", "0")))
    answer = session.final_answer
    rewards = session.end.rewards if session.end else []
    config = session.header.task.get("config") or {}
    return {
        "instance_id": session.instance_id or path.name,
        "task_id": config.get("task_id"),
        "intent_template_id": config.get("intent_template_id"),
        "sites": config.get("sites", []),
        "eval_types": config.get("eval", {}).get("eval_types", []),
        "score": 1.0 if answer else 0.0,
        "max_score": 1.0 if answer else 0.0,
        "live_reward": rewards[-1] if rewards else None,
        "live_max": max(rewards) if rewards else None,
        "answer": answer,
        "history": [{"index": s.index, "action": s.action, "url": s.url} for s in session.steps],
        "error": None,
        "error_type": None,
        "duration_ms": (time.perf_counter() - started) * 1000,
    }


def _busy(loops: int) -> int:
    """A fixed amount of pure-Python CPU work (not a timed wait: that would scale without CPUs)."""
    total = 0
    for number in range(loops):
        total += number
    return total


def loops_per_ms() -> float:
    """How many ``_busy`` loops this machine runs in a millisecond (best of 5, one process)."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        _busy(200_000)
        best = min(best, time.perf_counter() - started)
    return 200_000 / (best * 1000)


def write_synthetic_sessions(directory: Path) -> list[Path]:
    """A few sessions in the real format: ~10 steps of a 30 KB page each, as a short episode."""
    paths = []
    for number in range(SYNTHETIC_SESSIONS):
        instance_id = f"synthetic.{number}"
        config = {
            "task_id": number,
            "intent_template_id": number % 2,
            "sites": ["shopping"],
            "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "42"}},
        }
        writer = SessionWriter(
            directory / f"{instance_id}.session.jsonl.gz.partial",
            new_header(instance_id=instance_id, task={"config": config}),
        )
        for index in range(10):
            url = f"http://shop.test/page/{number}/{index}"
            items = "".join(f"<p>item {index}.{i}</p>" for i in range(1500))
            html = f"<html><body>{items}</body></html>"
            writer.write_step(
                Step(
                    index=index,
                    trigger="action" if index else "reset",
                    action=f"click('{index}')" if index else None,
                    timestamp=time.time(),
                    url=url,
                    title=f"page {index}",
                    tabs=[TabState(tab_id="T1", url=url, title=f"page {index}", active=True, html=html)],
                    network=[
                        NetworkExchange(
                            request_id=str(index),
                            tab_id="T1",
                            started=time.time(),
                            request=RequestInfo(method="GET", url=url, headers={"accept": "text/html"}),
                            response=ResponseInfo(
                                status=200, headers={"content-type": "text/html"}, body=html
                            ),
                        )
                    ],
                    reward=0.0,
                )
            )
        end = SessionEnd(
            ended=time.time(), instance_id=instance_id, final_answer="42", rewards=[0.0] * 9 + [1.0]
        )
        paths.append(writer.finish(end, directory / f"{instance_id}.session.jsonl.gz"))
    return paths


def source_sessions(given: Path | None, scratch: Path) -> tuple[list[Path], str]:
    candidates = [given] if given is not None else [REPO / "cdp_sessions", REPO / "demo_output"]
    for directory in candidates:
        if directory is not None and directory.is_dir():
            found, _ = discover_sessions(directory)
            if found:
                return found, str(directory)
    if given is not None:
        sys.exit(f"eval_throughput: no *.session.jsonl.gz under {given}")
    return write_synthetic_sessions(scratch / "synthetic"), f"{SYNTHETIC_SESSIONS} synthetic sessions"


def replicate(sources: list[Path], count: int, directory: Path) -> None:
    """``count`` sessions named ``rep-NNNNN-<source name>``, hard-linked where the filesystem allows."""
    directory.mkdir(parents=True)
    for number in range(count):
        source = sources[number % len(sources)]
        target = directory / f"rep-{number:05d}-{source.name}"
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)


class _DescendantRss(threading.Thread):
    """Peak RSS of any one descendant process (workers fork from a fork server, so they are not our
    children and ``RUSAGE_CHILDREN`` never sees them), sampled every 50 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = 0
        self._done = threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._done.wait(0.05):
            for child in me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self.peak_kb = max(self.peak_kb, child.memory_info().rss // 1024)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)


def run_child(spec: dict[str, Any]) -> None:
    """One measured configuration, in its own process; prints a JSON line for the parent.

    The fake scorer's cost reaches spawned workers through the environment they inherit.
    """
    os.environ["EVAL_THROUGHPUT_FAKE_LOOPS"] = str(spec["fake_loops"])
    if spec.get("warmup"):
        # Load the evaluators (and start the fork server) first, so the run below measures
        # steady-state scoring; the cold figure is the run without this.
        with tempfile.TemporaryDirectory(prefix="eval-warmup-") as folder:
            sample = Path(folder) / "sessions"
            sample.mkdir()
            for source in sorted(Path(spec["sessions"]).rglob("*.session.jsonl.gz"))[: 4 * spec["workers"]]:
                (sample / source.name).symlink_to(source)
            score_directory(
                sample,
                Path(folder) / "out",
                workers=spec["workers"],
                score_fn=fake_score if spec["fake"] else None,
            )
    sampler = _DescendantRss()
    sampler.start()
    summary = score_directory(
        spec["sessions"],
        spec["output"],
        workers=spec["workers"],
        score_fn=fake_score if spec["fake"] else None,
    )
    sampler.stop()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = sampler.peak_kb
    result = {
        "scored": summary.scored,
        "failed": summary.failed,
        "skipped": summary.skipped,
        "seconds": summary.elapsed_s,
        "rss_mb": own / 1024,
        "worker_rss_mb": workers / 1024 if spec["workers"] > 1 else None,
        "error_types": dict(summary.error_types),
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


def child_command(sessions: Path, output: Path, workers: int, fake: bool, warmup: bool = False) -> list[str]:
    spec = {
        "sessions": str(sessions),
        "output": str(output),
        "workers": workers,
        "fake": fake,
        "warmup": warmup,
        "fake_loops": FAKE_LOOPS[0],
    }
    return [sys.executable, str(Path(__file__).resolve()), "--child", orjson.dumps(spec).decode()]


def measure(sessions: Path, output: Path, workers: int, fake: bool, warmup: bool = False) -> dict[str, Any]:
    done = subprocess.run(
        child_command(sessions, output, workers, fake, warmup), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"eval_throughput: run with {workers} worker(s) failed:\n{done.stderr}")
    result: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return result


def count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def kill_and_resume(sessions: Path, output: Path, count: int, fake: bool) -> tuple[bool, str]:
    """SIGKILL a 2-worker run once half the sessions are written; resume; check each appears once."""
    # What the killed run cannot clean up (its temporary directories) stays in the scratch directory.
    killed_tmp = output.parent / f"{output.name}-tmp"
    killed_tmp.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        child_command(sessions, output, 2, fake),
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        env=os.environ | {"TMPDIR": str(killed_tmp)},
    )
    output_file = output / "output.jsonl"
    deadline = time.monotonic() + 600
    while count_lines(output_file) < count // 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    killed_at = count_lines(output_file)
    with contextlib.suppress(ProcessLookupError):  # the run and its workers, as a power loss would
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    resumed = measure(sessions, output, 2, fake)
    paths = [orjson.loads(line)["metadata"]["session_path"] for line in output_file.read_bytes().splitlines()]
    ok = len(paths) == count and len(set(paths)) == count
    detail = (
        f"killed with {killed_at} lines written; resumed run skipped {resumed['skipped']}, scored "
        f"{resumed['scored']}; output.jsonl has {len(paths)} lines, {len(set(paths))} distinct sessions"
    )
    return ok, detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="sessions to score (default 1000)")
    parser.add_argument("--sessions", type=Path, default=None, help="session files to replicate")
    parser.add_argument("--fake-scorer", action="store_true", help="measure without the evaluators")
    parser.add_argument(
        "--fake-cost-ms",
        type=float,
        default=20.0,
        help="CPU ms the fake scorer spends per session, in place of the evaluators (default 20)",
    )
    parser.add_argument("--no-kill", action="store_true", help="skip the kill-and-resume check")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(orjson.loads(args.child))
        return 0
    FAKE_LOOPS[0] = int(args.fake_cost_ms * loops_per_ms())
    if args.count < 10:
        parser.error("--count must be at least 10")
    scratch = Path(tempfile.mkdtemp(prefix="eval-throughput-"))
    try:
        sources, origin = source_sessions(args.sessions, scratch)
        small = scratch / "small"
        full = scratch / "full"
        replicate(sources, args.count // 10, small)
        replicate(sources, args.count, full)
        size = sum(p.stat().st_size for p in sources) / len(sources)
        scorer = (
            f"fake scorer (session load + {args.fake_cost_ms:g} ms CPU, no evaluator)"
            if args.fake_scorer
            else "real scorer"
        )
        print(f"{args.count} sessions replicated from {origin} (mean {size / 1024:.0f} KB/file); {scorer}")
        print(f"CPUs: {os.cpu_count()}")
        runs = [
            ("small", args.count // 10, 1, measure(small, scratch / "out-small", 1, args.fake_scorer)),
            ("full", args.count, 1, measure(full, scratch / "out-1", 1, args.fake_scorer)),
            ("full", args.count, 2, measure(full, scratch / "out-2", 2, args.fake_scorer)),
            ("warm", args.count, 1, measure(full, scratch / "out-w1", 1, args.fake_scorer, warmup=True)),
            ("warm", args.count, 2, measure(full, scratch / "out-w2", 2, args.fake_scorer, warmup=True)),
        ]
        print()
        print(
            f"{'sessions':>8} {'workers':>7} {'seconds':>8} {'sessions/s':>10} {'errors':>6} {'RSS MB':>7} {'worker RSS MB':>13}"
        )
        for kind, count, workers, result in runs:
            worker_rss = f"{result['worker_rss_mb']:.0f}" if result["worker_rss_mb"] is not None else "-"
            print(
                f"{count:>8} {workers:>7} {result['seconds']:>8.2f} {count / result['seconds']:>10.1f} "
                f"{result['failed']:>6} {result['rss_mb']:>7.0f} {worker_rss:>13}"
                f"{'  (warm: evaluators already loaded)' if kind == 'warm' else ''}"
            )
        failures = {k: v for _, _, _, r in runs for k, v in r["error_types"].items()}
        if failures:
            print(f"errors by type: {failures}")
        cold = runs[1][3]["seconds"] / runs[2][3]["seconds"]
        speedup = runs[3][3]["seconds"] / runs[4][3]["seconds"]
        print(f"\ncold speedup 2 vs 1 workers (including the one-off ~3 s evaluator import): {cold:.2f}x")
        growth = runs[1][3]["rss_mb"] - runs[0][3]["rss_mb"]
        checks = []
        print()
        enough_cpus = (os.cpu_count() or 1) >= 2
        speed_ok = speedup >= TARGET_SPEEDUP or not enough_cpus
        checks.append(speed_ok)
        print(
            f"steady-state speedup 2 vs 1 workers: {speedup:.2f}x (target >= {TARGET_SPEEDUP}x"
            f"{'' if enough_cpus else ', not judged: fewer than 2 CPUs'}) {'PASS' if speed_ok else 'MISS'}"
        )
        memory_ok = growth < 50
        checks.append(memory_ok)
        print(
            f"RSS growth from {args.count // 10} to {args.count} sessions (1 worker): {growth:+.1f} MB "
            f"(bounded: < 50 MB) {'PASS' if memory_ok else 'MISS'}"
        )
        if not args.no_kill:
            ok, detail = kill_and_resume(full, scratch / "out-kill", args.count, args.fake_scorer)
            checks.append(ok)
            print(f"kill -9 halfway, then resume: {detail} {'PASS' if ok else 'MISS'}")
        return 0 if all(checks) else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
