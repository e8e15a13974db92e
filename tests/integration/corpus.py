"""The demo corpus: every demo task played live once per test run, in parallel worker processes.

``make demo``'s 90 episodes (45 tasks x success/failure trajectories) are what the parity and
redaction tests score. Recording them is mostly waiting (BrowserGym sleeps 0.5 s after every step, the
live evaluator sleeps 3 s per program_html check), so the tasks are split round-robin over
``CDP_TEST_CORPUS_WORKERS`` processes (default 3), each with its own demo shop, Playwright driver and
Chromium, started as soon as pytest has collected a test that needs the corpus: the rest of the suite
runs meanwhile. Each worker writes its episodes into a JSON manifest; :class:`CorpusRecording` joins
them back in demo-task order.

Run as ``python -m tests.integration.corpus OUT TASK_ID...`` (what a worker is).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from cdp_integration.demo.job import DemoEpisode

__all__ = ["CorpusRecording", "default_workers", "record"]

REPO = Path(__file__).resolve().parents[2]
MANIFEST = "episodes.json"


def default_workers() -> int:
    """``$CDP_TEST_CORPUS_WORKERS`` or 3 (measured best on a 2-core machine: the workers mostly wait)."""
    return max(1, int(os.environ.get("CDP_TEST_CORPUS_WORKERS", "3")))


def record(out: Path, task_ids: list[int]) -> list[DemoEpisode]:
    """Play ``task_ids`` both ways with capture into ``out/sessions``; write ``out/episodes.json``.

    A task whose scripted agent fails (it waits at most 5 s for an element, which a heavily loaded
    machine can exceed) is played again once, from a fresh demo shop; the retry is logged.
    """
    from cdp_integration.demo.job import capture_demo_tasks

    episodes: list[DemoEpisode] = []
    for task_id in task_ids:
        try:
            episodes += capture_demo_tasks(out / "sessions", task_ids=[task_id])
        except Exception as exc:
            print(
                f"corpus: task {task_id} failed ({type(exc).__name__}: {exc}); playing it again", flush=True
            )
            episodes += capture_demo_tasks(out / "sessions", task_ids=[task_id])
    rows = [{**asdict(e), "session": str(e.session)} for e in episodes]
    partial = out / (MANIFEST + ".partial")
    partial.write_text(json.dumps(rows))
    partial.rename(out / MANIFEST)
    return episodes


def _read_manifest(path: Path) -> list[DemoEpisode]:
    rows = json.loads(path.read_text())
    return [
        DemoEpisode(**{**row, "eval_types": tuple(row["eval_types"]), "session": Path(row["session"])})
        for row in rows
    ]


class CorpusRecording:
    """Worker processes recording the demo corpus in the background; :meth:`episodes` waits for them."""

    def __init__(self, root: Path, task_ids: list[int], *, workers: int) -> None:
        self.root = root
        self.started = time.perf_counter()
        self._task_order = {task_id: index for index, task_id in enumerate(task_ids)}
        self._procs: list[tuple[Path, subprocess.Popen[bytes]]] = []
        for worker in range(min(workers, len(task_ids))):
            out = root / f"worker-{worker}"
            out.mkdir(parents=True)
            share = [str(task_id) for task_id in task_ids[worker::workers]]
            log = (out / "log.txt").open("wb")
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.corpus", str(out), *share],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: Chromium and the driver stop with it
            )
            log.close()
            self._procs.append((out, proc))
        self._episodes: list[DemoEpisode] | None = None
        self.seconds: float | None = None

    def episodes(self, timeout: float = 1800) -> list[DemoEpisode]:
        if self._episodes is None:
            deadline = time.monotonic() + timeout
            collected: list[DemoEpisode] = []
            for out, proc in self._procs:
                code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                if code != 0 or not (out / MANIFEST).exists():
                    tail = (out / "log.txt").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"corpus worker {out.name} exited with {code}:\n{tail}")
                collected += _read_manifest(out / MANIFEST)
            trajectories = {"success": 0, "failure": 1}
            collected.sort(key=lambda e: (self._task_order[e.task_id], trajectories[e.trajectory]))
            self._episodes = collected
            self.seconds = round(time.perf_counter() - self.started, 1)
        return self._episodes

    def stop(self) -> None:
        """Stop any worker still running (by its PID), e.g. when the run was interrupted."""
        for _, proc in self._procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


if __name__ == "__main__":
    record(Path(sys.argv[1]), [int(arg) for arg in sys.argv[2:]])
