"""The demo corpus: demo tasks played live once per test run, in parallel worker processes.

``make test`` plays a covering subset of ``make demo``'s 45 tasks (`CORE_TASKS`: every evaluation
type and mechanism, each task a test names), both trajectories; ``CDP_TEST_CORPUS=all`` (and
``make test-imports``) plays all 90 episodes. They are what the parity, import and redaction tests
score. Recording them is mostly waiting (BrowserGym sleeps 0.5 s after every step, the
live evaluator sleeps 3 s per program_html check), so the tasks are split round-robin over
``CDP_TEST_CORPUS_WORKERS`` processes (default 3), each with its own demo shop, Playwright driver and
Chromium, started as soon as pytest has collected a test that needs the corpus (by the first pytest-xdist
worker that has, when the suite runs distributed): the rest of the suite runs meanwhile. Each
recorder writes its episodes into a JSON manifest; :class:`CorpusRecording` joins them back in
demo-task order.

Run as ``python -m tests.integration.corpus OUT TASK_ID...`` (what a worker is).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from cdp_integration.demo.job import DemoEpisode

__all__ = ["CORE_TASKS", "CorpusRecording", "corpus_task_ids", "default_workers", "record"]

REPO = Path(__file__).resolve().parents[2]
MANIFEST = "episodes.json"
PLAN = "plan.json"


def default_workers() -> int:
    """``$CDP_TEST_CORPUS_WORKERS`` or 3 (measured best on a 2-core machine: the workers mostly wait)."""
    return max(1, int(os.environ.get("CDP_TEST_CORPUS_WORKERS", "3")))


TRACED_TASKS = frozenset({10000, 10003, 10014, 10017, 10018, 10021, 10024, 10027, 10030, 10036, 10039, 10042})
"""Demo tasks whose corpus episodes are also recorded as Playwright traces (``out/traces``), for the
import tests: every eval type and each way a trace can fail to answer. ``CDP_TEST_IMPORTS_FULL=1``
traces every task."""


CORE_TASKS = TRACED_TASKS | frozenset(
    {
        10001, 10015, 10037,  # test_browser_use's cases
        10004,  # must_include (test_hostile_sessions)
        10007,  # must_include of a single character (the evaluator tokenizes)
        10010, 10013,  # fuzzy_match: two references each judged; N/A answered with a reason
        10028,  # program_html: the latest order (REST) plus a second page
        10033,  # program_html with prep_actions
        10043,  # __last_url__ a comment link that reddit_get_post_url() maps to its post
    }
)  # fmt: skip
"""The demo tasks ``make test`` plays: the traced ones, the ones a test picks by id, and one of each
other mechanism. The 23 left out vary the failure of a mechanism a chosen task already exercises;
``make demo`` plays them (its 90/90 line), as does ``CDP_TEST_CORPUS=all``."""

ALL_VARIABLE = "CDP_TEST_CORPUS"


def corpus_task_ids(task_ids: list[int]) -> list[int]:
    """The demo task ids (in ``task_ids``' order) the test run's corpus plays."""
    if os.environ.get(ALL_VARIABLE) == "all" or os.environ.get("CDP_TEST_IMPORTS_FULL") == "1":
        return list(task_ids)
    return [task_id for task_id in task_ids if task_id in CORE_TASKS]


def _traced(task_id: int) -> bool:
    return task_id in TRACED_TASKS or os.environ.get("CDP_TEST_IMPORTS_FULL") == "1"


def record(out: Path, task_ids: list[int]) -> list[DemoEpisode]:
    """Play ``task_ids`` both ways with capture into ``out/sessions``; write ``out/episodes.json``.

    A task whose scripted agent fails (it waits at most 30 s for an element, which a heavily loaded
    machine can exceed) is played again once, from a fresh demo shop; the retry is logged.
    """
    from cdp_integration.demo.job import capture_demo_tasks

    episodes: list[DemoEpisode] = []
    for task_id in task_ids:
        traces = out / "traces" if _traced(task_id) else None
        try:
            episodes += capture_demo_tasks(out / "sessions", task_ids=[task_id], trace_dir=traces)
        except Exception as exc:
            print(
                f"corpus: task {task_id} failed ({type(exc).__name__}: {exc}); playing it again", flush=True
            )
            episodes += capture_demo_tasks(out / "sessions", task_ids=[task_id], trace_dir=traces)
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
    """Worker processes recording the demo corpus in the background, in ``root``.

    One process of the test run starts them (:meth:`start`); any process of the run (a pytest-xdist
    worker too) can wait for their episodes (:meth:`episodes`) or stop them (:meth:`stop`): the plan
    (task order, worker folders and PIDs) is in ``root/plan.json``. The recorders run in sessions of
    their own, so they outlive the process that started them if it ends first.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        """The recorders this process started (it reaps them)."""
        self._episodes: list[DemoEpisode] | None = None
        self.seconds: float | None = None

    @classmethod
    def start(cls, root: Path, task_ids: list[int], *, workers: int) -> CorpusRecording:
        recording = cls(root)
        plan: dict[str, object] = {"task_ids": task_ids, "started": time.time(), "workers": []}
        for worker in range(min(workers, len(task_ids))):
            out = root / f"worker-{worker}"
            out.mkdir(parents=True)
            share = [str(task_id) for task_id in task_ids[worker::workers]]
            with (out / "log.txt").open("wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.integration.corpus", str(out), *share],
                    cwd=REPO,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: Chromium and the driver stop with it
                )
            recording._children[proc.pid] = proc
            plan["workers"].append({"out": str(out), "pid": proc.pid})  # type: ignore[attr-defined]
        partial = root / (PLAN + ".partial")
        partial.write_text(json.dumps(plan))
        partial.rename(root / PLAN)
        return recording

    def _plan(self, deadline: float) -> dict[str, object]:
        while not (self.root / PLAN).exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no corpus recording was started in {self.root}")
            time.sleep(0.2)
        plan: dict[str, object] = json.loads((self.root / PLAN).read_text())
        return plan

    def _running(self, pid: int) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        try:  # started by another process of the run: alive unless gone or a zombie
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"

    def episodes(self, timeout: float = 1800) -> list[DemoEpisode]:
        if self._episodes is None:
            deadline = time.monotonic() + timeout
            plan = self._plan(deadline)
            collected: list[DemoEpisode] = []
            for worker in plan["workers"]:  # type: ignore[attr-defined]
                out, pid = Path(worker["out"]), int(worker["pid"])
                while not (out / MANIFEST).exists() and self._running(pid):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"corpus worker {out.name} still recording after {timeout:.0f} s")
                    time.sleep(0.5)
                if not (out / MANIFEST).exists():
                    tail = (out / "log.txt").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"corpus worker {out.name} ended without its episodes:\n{tail}")
                collected += _read_manifest(out / MANIFEST)
            order = {task_id: index for index, task_id in enumerate(plan["task_ids"])}  # type: ignore[arg-type]
            trajectories = {"success": 0, "failure": 1}
            collected.sort(key=lambda e: (order[e.task_id], trajectories[e.trajectory]))
            self._episodes = collected
            self.seconds = round(time.time() - float(plan["started"]), 1)  # type: ignore[arg-type]
        return self._episodes

    def stop(self) -> None:
        """Stop every recorder of the plan still running (by its PID and process group)."""
        if not (self.root / PLAN).exists():
            return
        for worker in json.loads((self.root / PLAN).read_text())["workers"]:
            pid = int(worker["pid"])
            if self._running(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            child = self._children.get(pid)
            if child is not None:
                child.wait()


if __name__ == "__main__":
    record(Path(sys.argv[1]), [int(arg) for arg in sys.argv[2:]])
