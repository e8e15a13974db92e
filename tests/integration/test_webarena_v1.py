"""OpenHands V1 on WebArena's real task ids: ``run_infer.py --sdk v1 --dataset webarena`` on the stand-ins.

The run is in the V1 environment (``.venv-v1``); the sites are the stand-ins (``tests/standins``, in
this process), seen by run_infer only through ``WA_*`` variables, as a real deployment would be.
Per task: our Chromium, BrowserGym's own ``ui_login`` on each of the task's sites, the start page,
the openhands-sdk agent with openhands-tools' browser tools plus ``browser_select_option`` /
``browser_press_key`` on our ``cdp_url``, every step captured, the answer from ``finish``, the
official evaluator once at the end. The scripted model plays the curated trajectories as native
tool calls; ``--reset-cmd`` resets the stand-ins before every task.

Checked per task and trajectory: the live score is the scripted one (success 1, failure 0);
``eval_infer.py`` offline gives the same; ``eval_infer.py --scorer verified`` gives what
WebArena-Verified's own CLI (``webarena-verified eval-tasks``) gives on our export of the session
(where Verified's own evaluator fails on a task, e.g. 700's "Alternatives require 2+ items", the CLI
writes status "error" with score 0.0 and ours an error without a score: both must fail).

``make test`` runs a covering subset, the success trajectory only: 791 (sign-in on gitlab and reddit,
string_match), 680 (shopping_admin: url_match + program_html, ``select`` steps). A failure scored 0
live and offline is ``test_openhands_v1.py``'s (demo tasks, both trajectories); each run here costs a
run_infer start, two eval_infer runs and the Verified CLI, so the failure run is left to
``CDP_TEST_WEBARENA_V1=all`` (``make test-webarena``): all 41 curated ids, both trajectories, each
also with ``--num-workers 2``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from cdp_integration.evaluate.verified_export import export_verified
from tests.integration.test_openhands import MARKER, wait_for_no_marked_processes
from tests.standins import StandIns

pytestmark = [pytest.mark.integration, pytest.mark.timeout(7200)]

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "evaluation" / "benchmarks" / "webarena"
TRAJECTORIES = REPO / "tests" / "standins" / "tasks.json"
V1_PYTHON = REPO / ".venv-v1" / "bin" / "python"
VERIFIED_CLI = Path(sys.executable).with_name("webarena-verified")
SUBSET = (791, 680)
"""What ``make test`` runs (an episode costs 30-90 s on a loaded machine)."""
ALL = os.environ.get("CDP_TEST_WEBARENA_V1") == "all"
CURATED = tuple(entry["task_id"] for entry in json.loads(TRAJECTORIES.read_text()))


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[StandIns, str]]:
    """The stand-ins and the URL of a ``GET /reset`` that resets them (what ``--reset-cmd`` calls)."""
    with StandIns() as sites:

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                # only the task's sites, as a real per-site reset: tasks on other sites may be running
                names = parse_qs(urlsplit(self.path).query).get("sites", [""])[0].split(",")
                unknown = [name for name in names if name not in sites.sites and name != "wikipedia"]
                for name in names:
                    site = sites.sites.get(name)  # wikipedia (kiwix-serve) is read-only
                    if site is not None:
                        with site.app.lock:
                            site.app.sessions.clear()
                            site.app.reset()
                self.send_response(400 if unknown else 200)  # a reset of nothing fails the run
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield sites, f"http://127.0.0.1:{server.server_address[1]}/reset"
        finally:
            server.shutdown()
            server.server_close()
            thread.join()


RESET_SCRIPT = (
    "import os, urllib.request; e = os.environ; "
    "urllib.request.urlopen(e['TEST_RESET_URL'] + '?sites=' + e['WEBARENA_TASK_SITES'], timeout=60).close()"
)
"""What ``--reset-cmd`` runs: resets the task's sites (run_infer names them in ``WEBARENA_TASK_SITES``)."""


@dataclass
class Run:
    trajectory: str
    expected: float
    output: Path
    environ: dict[str, str]
    lines: dict[int, dict[str, Any]]
    task_ids: tuple[int, ...]
    workers: int
    seconds: float


RUNS = [("success", 1.0, 1)] + (
    [("failure", 0.0, 1), ("success", 1.0, 2), ("failure", 0.0, 2)] if ALL else []
)
"""(trajectory, expected score, --num-workers); with all 41 ids, each trajectory at N=2 too."""
FINISHED: dict[tuple[str, int], Run] = {}


@pytest.fixture(scope="module", params=RUNS, ids=[f"{t}-n{n}" for t, _, n in RUNS])
def v1_run(
    request: pytest.FixtureRequest,
    deployment: tuple[StandIns, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    trajectory, expected, workers = request.param
    task_ids = CURATED if ALL else SUBSET
    sites, reset_url = deployment
    root = tmp_path_factory.mktemp(f"webarena-v1-{trajectory}-n{workers}")
    output, home, tmp = root / "run", root / "home", root / "tmp"
    home.mkdir()
    tmp.mkdir()
    marker = uuid.uuid4().hex
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WA_", "WEBARENA_"))}
    environ |= sites.environ() | {
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "TEST_RESET_URL": reset_url,
        MARKER: marker,
    }
    assert V1_PYTHON.exists(), "no V1 environment: run scripts/setup.sh"
    command = [
        str(V1_PYTHON),
        str(SCRIPTS / "run_infer.py"),
        "--sdk",
        "v1",
        "--dataset",
        "webarena",
        "--output-dir",
        str(output),
        "--trajectory",
        trajectory,
        "--trajectories",
        str(TRAJECTORIES),
        "--reset-cmd",
        f"{sys.executable} -c {json.dumps(RESET_SCRIPT)}",
        "--reset-when",
        "always",
        "--num-workers",
        str(workers),
        "--task-ids",
        *map(str, task_ids),
    ]
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        env=environ,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # if this test is stopped, the whole run goes with it
    )
    try:
        _stdout, stderr = process.communicate(timeout=300 + 240 * len(task_ids))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    seconds = time.perf_counter() - started
    print(
        f"\nrun_infer --sdk v1 --dataset webarena ({trajectory}, {len(task_ids)} tasks, N={workers}): {seconds:.1f} s"
    )
    assert process.returncode == 0, stderr[-4000:]
    assert wait_for_no_marked_processes(marker) == []
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    lines = {}
    for text in (output / "output.jsonl").read_text().splitlines():
        line = json.loads(text)
        lines[line["instance"]["task_id"]] = line
    run = Run(trajectory, expected, output, environ, lines, task_ids, workers, seconds)
    FINISHED[(trajectory, workers)] = run
    return run


def _eval_infer(run: Run, *options: str) -> dict[int, dict[str, Any]]:
    out = run.output / ("eval-" + "-".join(options).strip("-") if options else "eval_output")
    scored = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "eval_infer.py"),
            str(run.output),
            "--no-progress",
            "--output-dir",
            str(out),
            *options,
        ],
        env=run.environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    results = [json.loads(t) for t in (out / "output.jsonl").read_text().splitlines()]
    return {int(r["instance_id"].removeprefix("webarena.")): r["test_result"] for r in results}


def test_live_scores_as_scripted_with_every_step_captured(v1_run: Run) -> None:
    from cdp_integration.session.store import load_session

    assert sorted(v1_run.lines) == sorted(v1_run.task_ids)
    for task_id, line in v1_run.lines.items():
        assert line["instance_id"] == f"webarena.{task_id}"
        assert line["metadata"]["dataset"] == "webarena" and line["metadata"]["sdk"] == "v1"
        assert line["error"] is None, (task_id, line["error"])
        assert line["test_result"]["reward"] == v1_run.expected, (task_id, line["test_result"])
        tools = [entry["tool"] for entry in line["history"]]
        assert tools == line["instance"]["plan"] and tools[-1] == "finish"
        session = load_session(v1_run.output / line["test_result"]["session"])
        assert session.complete and session.end is not None and session.end.probe is not None
        assert session.task["site_urls"]["REDDIT"] == v1_run.environ["WA_REDDIT"]
        browser_calls = [tool for tool in tools if tool.startswith("browser_")]
        assert [step.trigger for step in session.steps] == ["reset"] + ["action"] * len(browser_calls)
        print(f"webarena.{task_id} ({v1_run.trajectory}): {line['metadata']['duration_s']} s")
    if 680 in v1_run.lines and v1_run.trajectory == "success":
        tools = [entry["tool"] for entry in v1_run.lines[680]["history"]]
        assert "browser_select_option" in tools


def test_offline_score_equals_live(v1_run: Run) -> None:
    offline = _eval_infer(v1_run)
    assert sorted(offline) == sorted(v1_run.task_ids)
    for task_id, line in v1_run.lines.items():
        assert offline[task_id]["error"] is None, offline[task_id]["error"]
        assert offline[task_id]["score"] == line["test_result"]["reward"], task_id


def test_verified_scorer_equals_webarena_verifieds_own_cli(v1_run: Run, tmp_path: Path) -> None:
    ours = _eval_infer(v1_run, "--scorer", "verified")
    sessions = [v1_run.output / line["test_result"]["session"] for line in v1_run.lines.values()]
    export = tmp_path / "export"
    exported = export_verified(sessions, export)
    cli = subprocess.run(
        [str(VERIFIED_CLI), "eval-tasks", "--output-dir", str(export)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    errors = []
    for task in exported:
        result = json.loads((export / str(task.task_id) / "eval_result.json").read_text())
        mine = ours[task.task_id]
        if result["status"] == "error":  # Verified's own evaluator fails: the CLI writes 0.0, we an error
            assert mine["error"] is not None and mine["score"] is None, (task.task_id, result, mine)
            errors.append(task.task_id)
        else:
            assert mine["error"] is None and float(result["score"]) == mine["score"], (
                task.task_id,
                result,
                mine,
            )
    assert sorted(t.task_id for t in exported) == sorted(v1_run.task_ids)
    print(
        f"\nVerified ({v1_run.trajectory}): CLI == ours for {len(exported)} tasks; its evaluator errs on {errors}"
    )


def test_same_scores_at_any_number_of_workers(v1_run: Run) -> None:
    """``--num-workers 2`` writes the same score per task as one worker (the N=1 run came first)."""
    if v1_run.workers == 1:
        pytest.skip("compared from the --num-workers 2 run")
    single = FINISHED[(v1_run.trajectory, 1)]
    assert {t: line["test_result"]["reward"] for t, line in v1_run.lines.items()} == {
        t: line["test_result"]["reward"] for t, line in single.lines.items()
    }
    print(f"wall time N=2 / N=1 ({v1_run.trajectory}): {v1_run.seconds / single.seconds:.2f}")
