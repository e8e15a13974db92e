"""``run_infer.py --dataset webarena`` end to end on real WebArena task ids, then ``eval_infer.py``.

The sites are the stand-ins (``tests/standins``, in this process); run_infer sees them only through
``WA_*`` variables, as it would see a real deployment. Each task is BrowserGym's own
``browsergym/webarena.<id>`` env (the unmodified ``test.raw.json`` config, real ``ui_login`` and
``validate``) inside OpenHands' ``BrowserEnv``, with capture on: in ``--mode direct`` stepped by
run_infer, in agent mode driven by OpenHands' agent loop and the scripted LLM. The scripted plans
come from the stand-ins' curated trajectories (``--trajectories tests/standins/tasks.json``).
``--reset-cmd`` calls a reset endpoint of this test, which resets the stand-ins and records what the
command saw. Isolation as in ``test_openhands.py``: private HOME/TMPDIR, a marker variable on every
process, none alive afterwards.

The tasks: 27 (reddit, string_match, Verified: retrieve), 377 (map, url_match, Verified: navigate),
404 (reddit, program_html, Verified: mutate, so the default ``--reset-when mutate`` resets for it).
Both modes run again with ``--num-workers 2`` (one child run_infer per task; in agent mode the
next child starts once the previous one's browser is up; the two read-only tasks on different sites
side by side, 404 never beside 27 on reddit): the same scores as one worker. The reset endpoint
resets only the task's sites (``WEBARENA_TASK_SITES``), as a real per-site reset must while tasks
on other sites run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
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

from tests.integration.test_openhands import MARKER, wait_for_no_marked_processes
from tests.standins import StandIns

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3000)]

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "evaluation" / "benchmarks" / "webarena"
TRAJECTORIES = REPO / "tests" / "standins" / "tasks.json"
TASK_IDS = (27, 377, 404)

VERIFIED_EXPECTED = {
    27: (
        0.0,
        "by design: Verified rewrote task 27 to ask for the latest post's username, title and count as "
        "structured data; the scripted answer is WebArena's free-text count '0'",
    ),
    377: (
        1.0,
        "same as WebArena: the last navigation is __MAP__/search?query=restaurants near CMU ArtPark Lab",
    ),
    404: (
        0.0,
        "differs: Verified checks the vote request real Postmill's script sends (POST __REDDIT__/sv/124260.json, "
        "choice=1); the stand-in's script-free vote form posts to /sv/<id> of its own newest post",
    ),
}
"""Verified's outcome for each success trajectory, worked out by hand from its dataset definition."""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_preflight_names_every_unreachable_site_and_exits_2(tmp_path: Path) -> None:
    """No site reachable: three refuse connections, three accept and never answer. One line, exit 2,
    before OpenHands starts; the probes run at once (what keeps the check within 10 s)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    hanging = f"http://127.0.0.1:{silent.getsockname()[1]}"
    urls = {
        "WA_SHOPPING": f"http://127.0.0.1:{_closed_port()}",
        "WA_SHOPPING_ADMIN": f"http://127.0.0.1:{_closed_port()}/admin",
        "WA_REDDIT": f"http://127.0.0.1:{_closed_port()}",
        "WA_GITLAB": hanging,
        "WA_WIKIPEDIA": hanging + "/wikipedia_en_all_maxi_2022-05/A/User:The_other_Kiwix_guy/Landing",
        "WA_MAP": hanging,
        "WA_HOMEPAGE": hanging,
    }
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WA_", "WEBARENA_"))}
    environ |= urls | {"WEBARENA_CDP_LOGGING": "true", "HOME": str(tmp_path)}
    started = time.monotonic()
    try:
        run = subprocess.run(
            [
                sys.executable,
                str(SCRIPTS / "run_infer.py"),
                "--dataset",
                "webarena",
                "--output-dir",
                str(tmp_path / "run"),
                "--trajectories",
                str(TRAJECTORIES),
                "--task-ids",
                "0",  # shopping_admin
                "27",  # reddit
                "173",  # gitlab
                "269",  # shopping
                "265",  # wikipedia + map
            ],
            env=environ,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        silent.close()
    elapsed = time.monotonic() - started
    print(f"\npreflight, no site reachable: exit {run.returncode} after {elapsed:.1f} s\n{run.stderr}")
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("run_infer.py: error: 6 of 6 WebArena sites unreachable")
    for site in ("shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map"):
        assert f" {site} (http://127.0.0.1:" in line
    assert line.count("connection refused") == 3 and line.count("no answer within") == 3
    assert not (tmp_path / "run").exists()
    # The 10 s bound holds because the six probes run at once, each limited to one connect and one
    # read timeout (3 s): timed here on the check alone, since the command's own start-up (imports)
    # takes what the machine's load gives it. One at a time, the three silent sites alone take 9 s.
    from cdp_integration.deployment import PROBE_TIMEOUT_S, probe_sites

    started = time.monotonic()
    unreachable = probe_sites({key.removeprefix("WA_").lower(): url for key, url in urls.items()})
    assert len(unreachable) == len(urls)
    assert time.monotonic() - started < 3 * PROBE_TIMEOUT_S


# -- end to end against the stand-ins ---------------------------------------------------------------


@dataclass
class ResetServer:
    """``GET /reset``: reset the stand-ins; remembers the variables the reset command passed on."""

    sites: StandIns
    calls: list[dict[str, str]]
    url: str = ""


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[StandIns, ResetServer]]:
    if os.environ.get("CDP_TEST_RUN_INFER_WEBARENA") != "1":
        pytest.skip("end-to-end run_infer --dataset webarena: set CDP_TEST_RUN_INFER_WEBARENA=1")
    with StandIns() as sites:
        resets = ResetServer(sites, [])

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                for name in query["WEBARENA_TASK_SITES"].split(","):  # only the task's sites
                    with sites.sites[name].app.lock:
                        sites.sites[name].app.sessions.clear()
                        sites.sites[name].app.reset()
                resets.calls.append(query)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = Thread(target=server.serve_forever, daemon=True)
        thread.start()
        resets.url = f"http://127.0.0.1:{server.server_address[1]}/reset"
        try:
            yield sites, resets
        finally:
            server.shutdown()
            server.server_close()
            thread.join()


RESET_SCRIPT = (
    "import os, urllib.parse, urllib.request; e = os.environ; "
    "q = {k: e[k] for k in ('WEBARENA_TASK_ID', 'WEBARENA_TASK_SITES', 'WA_REDDIT', 'REDDIT', 'WA_MAP')}; "
    "urllib.request.urlopen(e['TEST_RESET_URL'] + '?' + urllib.parse.urlencode(q), timeout=30).close()"
)


@dataclass
class Run:
    mode: str
    workers: int
    output: Path
    lines: dict[int, dict[str, Any]]
    resets: list[dict[str, str]]
    seconds: float
    environ: dict[str, str]


def _run_infer(mode: str, workers: int, root: Path, sites: StandIns, resets: ResetServer) -> Run:
    output, home, tmp = root / "run", root / "home", root / "tmp"
    home.mkdir(parents=True)
    tmp.mkdir()
    marker = uuid.uuid4().hex
    server_url = Path("/tmp/oh-server-url")
    server_url_before = server_url.read_bytes() if server_url.exists() else None
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WA_", "WEBARENA_"))}
    environ |= sites.environ() | {
        "WEBARENA_CDP_LOGGING": "true",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "TEST_RESET_URL": resets.url,
        MARKER: marker,
    }
    calls_before = len(resets.calls)
    started = time.perf_counter()
    command = [
        sys.executable,
        str(SCRIPTS / "run_infer.py"),
        "--dataset",
        "webarena",
        "--mode",
        mode,
        "--output-dir",
        str(output),
        "--trajectories",
        str(TRAJECTORIES),
        "--reset-cmd",
        f"{sys.executable} -c {json.dumps(RESET_SCRIPT)}",
        "--num-workers",
        str(workers),
        "--task-ids",
        *map(str, TASK_IDS),
    ]
    # A session of its own: if this test is stopped, the whole run (BrowserEnv, Chromium) goes with it.
    process = subprocess.Popen(
        command,
        env=environ,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=2400)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    run = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    seconds = time.perf_counter() - started
    print(
        f"\nrun_infer --dataset webarena --mode {mode} --num-workers {workers}, {len(TASK_IDS)} tasks: {seconds:.1f} s"
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert wait_for_no_marked_processes(marker) == []
    assert (server_url.read_bytes() if server_url.exists() else None) == server_url_before
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    lines = {}
    for text in (output / "output.jsonl").read_text().splitlines():
        line = json.loads(text)
        lines[line["instance"]["task_id"]] = line
    return Run(mode, workers, output, lines, resets.calls[calls_before:], seconds, environ)


E2E = os.environ.get("CDP_TEST_RUN_INFER_WEBARENA") == "1"
"""The end-to-end runs below take 5-10 minutes (OpenHands' start-up, BrowserGym's 1 s slow_mo per
action); ``make test`` leaves them out unless this variable is 1."""


RUNS = [("direct", 1), ("agent", 1), ("direct", 2), ("agent", 2)]
"""(mode, --num-workers); the N=2 run comes after the N=1 run it is compared with."""
FINISHED: dict[tuple[str, int], Run] = {}


@pytest.fixture(scope="module", params=RUNS, ids=["direct", "agent", "direct-n2", "agent-n2"])
def run(
    request: pytest.FixtureRequest,
    deployment: tuple[StandIns, ResetServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    if not E2E:
        pytest.skip("end-to-end run_infer --dataset webarena: set CDP_TEST_RUN_INFER_WEBARENA=1")
    sites, resets = deployment
    mode, workers = request.param
    root = tmp_path_factory.mktemp(f"webarena-{mode}-n{workers}")
    finished = _run_infer(mode, workers, root, sites, resets)
    FINISHED[(mode, workers)] = finished
    return finished


def test_every_task_ran_in_browsergyms_webarena_env_with_capture(run: Run) -> None:
    assert sorted(run.lines) == sorted(TASK_IDS)
    for task_id, line in run.lines.items():
        assert line["instance_id"] == f"webarena.{task_id}"
        assert line["instance"]["env_id"] == f"browsergym/webarena.{task_id}"
        assert line["metadata"]["dataset"] == "webarena"
        assert line["metadata"]["site_urls"]["REDDIT"] == run.environ["WA_REDDIT"]
        assert line["test_result"]["reward"] == 1.0, (task_id, line["test_result"], line["error"])
        assert line["test_result"]["session"] == f"sessions/webarena.{task_id}.session.jsonl.gz"
        if run.mode == "agent":
            browsed = [
                e["args"]["browser_actions"]
                for e in line["history"]
                if e.get("action") == "browse_interactive"
            ]
            assert browsed[: len(line["instance"]["plan"])] == line["instance"]["plan"]
        print(
            f"webarena.{task_id} ({run.mode}): {line['metadata']['duration_s']} s, rewards {line['test_result']['rewards']}"
        )


def test_reset_command_ran_for_the_mutate_task_with_its_sites(run: Run) -> None:
    """404 is 'mutate' for WebArena-Verified: reset before the rehearsal that resolves its plan and
    again before the run; 27 and 377 only read."""
    assert [call["WEBARENA_TASK_ID"] for call in run.resets] == ["404", "404"]
    for call in run.resets:
        assert call["WEBARENA_TASK_SITES"] == "reddit"
        assert call["WA_REDDIT"] == call["REDDIT"] == run.environ["WA_REDDIT"]
        assert call["WA_MAP"] == run.environ["WA_MAP"]
    assert run.lines[404]["metadata"]["reset_s"] is not None
    assert run.lines[27]["metadata"]["reset_s"] is None


def test_same_scores_with_two_workers(run: Run) -> None:
    """``--num-workers 2`` writes the same live and offline-relevant scores per task as one worker."""
    if run.workers == 1:
        pytest.skip("compared from the --num-workers 2 run")
    single = FINISHED[(run.mode, 1)]

    def scores(of: Run) -> dict[int, tuple[float, list[float]]]:
        return {
            t: (line["test_result"]["reward"], line["test_result"]["rewards"]) for t, line in of.lines.items()
        }

    assert scores(run) == scores(single)
    assert run.lines[404]["metadata"]["reset_s"] is not None
    for task_id, line in sorted(run.lines.items()):  # agent mode: each child's wait at the gate, start-up
        print(f"webarena.{task_id} ({run.mode}, N=2): {line['metadata'].get('phases')}")
    print(f"wall time N=2 / N=1 ({run.mode}, {len(TASK_IDS)} tasks): {run.seconds / single.seconds:.2f}")


def test_eval_infer_scores_the_output_as_live(run: Run) -> None:
    scored = subprocess.run(
        [sys.executable, str(SCRIPTS / "eval_infer.py"), str(run.output), "--no-progress"],
        env=run.environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    results = {
        r["instance_id"]: r
        for r in map(json.loads, (run.output / "eval_output" / "output.jsonl").read_text().splitlines())
    }
    assert sorted(results) == sorted(f"webarena.{task_id}" for task_id in TASK_IDS)
    for task_id, line in run.lines.items():
        result = results[f"webarena.{task_id}"]
        assert result["test_result"]["error"] is None, result["test_result"]["error"]
        assert result["test_result"]["max_score"] == line["test_result"]["reward"] == 1.0
        assert result["test_result"]["score"] == line["test_result"]["rewards"][-1]


def test_verified_scores_the_same_sessions(run: Run) -> None:
    out = run.output / "eval_verified"
    scored = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "eval_infer.py"),
            str(run.output / "sessions"),
            "--scorer",
            "verified",
            "--output-dir",
            str(out),
            "--no-progress",
        ],
        env=run.environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    results = {r["instance_id"]: r for r in map(json.loads, (out / "output.jsonl").read_text().splitlines())}
    for task_id, (expected, why) in VERIFIED_EXPECTED.items():
        result = results[f"webarena.{task_id}"]
        assert result["test_result"]["error"] is None, result["test_result"]["error"]
        assert result["test_result"]["score"] == expected, f"{task_id}: {why}"
