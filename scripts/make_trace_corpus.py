"""Record the Playwright trace corpus in ``tests/fixtures/traces/<producer>/``: real traces of demo episodes.

``.venv/bin/python scripts/make_trace_corpus.py [--producer NAME ...] [--out DIR]``

Each producer (a Playwright release) is installed in its own environment under
``.cache/trace-producers/`` (idempotent): Python Playwright at WebArena's pin (1.32.1, trace format 4,
on the machine's Python 3.11: its greenlet has no 3.12 wheel), a mid-2024 release (1.45.1, format 7
without page events), 1.50.0 (format 7 with them), 1.60.0 (format 8), 1.63.0 (format 9), the current
one (1.65.2, format 10), and ``@playwright/test`` (1.65.1, Debian's node). Each records
the demo tasks below in the shape WebArena's ``run.py`` gives its traces: the context is created signed
in (``storage_state``), tracing starts, the agent's page opens the start URL and plays the task's
scripted trajectory, the **official evaluator** runs on the live page, then tracing stops, so the
evaluator's own ``program_html`` pages are in the trace.

The evaluator is libwebarena's, unmodified, run here in the project's environment (an old
producer's environment cannot hold it): its ``page`` is a ``playwright.sync_api.Page`` subclass whose
every call the evaluator makes (``url``, ``context.new_page``, ``goto``, ``content``, ``evaluate``,
``close``) is carried out, in the same order, by the producer's own Playwright on the live page over a
loopback socket (``trace_producers/python_episode.py``, ``trace_producers/node/episode.spec.js``).
So the score is the official evaluator's verdict on the live page, and the trace records those calls
as an in-process evaluator's. ``expected.json`` holds each episode's live score.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import playwright.sync_api

ROOT = Path(__file__).resolve().parent.parent
PRODUCERS_DIR = ROOT / ".cache" / "trace-producers"
SCRIPTS = Path(__file__).resolve().parent / "trace_producers"

PRODUCERS: dict[str, dict[str, Any]] = {
    "python-1.32.1": {"kind": "python", "package": "playwright==1.32.1", "screenshots": (10039,)},
    "python-1.45.1": {"kind": "python", "package": "playwright==1.45.1", "screenshots": ()},
    "python-1.50.0": {"kind": "python", "package": "playwright==1.50.0", "screenshots": ()},
    "python-1.60.0": {"kind": "python", "package": "playwright==1.60.0", "screenshots": ()},
    "python-1.63.0": {"kind": "python", "package": "playwright==1.63.0", "screenshots": ()},
    "python-1.65.2": {"kind": "python", "package": "playwright==1.65.2", "screenshots": ()},
    "test-1.65.1": {"kind": "node", "package": "@playwright/test@1.65.1", "screenshots": (10039,)},
}
"""Producer name -> how it is installed; ``screenshots``: the tasks recorded with the screencast on
(WebArena's run.py records it; a screencast costs ~0.2-0.5 MB a trace, so most fixtures go without)."""

TASKS = (10024, 10033, 10036, 10039)
"""program_html on pages the evaluator opens (storefront, admin form, cart), with ``prep_actions``,
and url_match + program_html on the agent's last page and another."""

PYTHON_FOR_PRODUCERS = "python3.11"
STEP_TIMEOUT = 300


def install(name: str) -> Path:
    """The producer's environment (installed once): its interpreter, or its node project directory."""
    spec = PRODUCERS[name]
    where = PRODUCERS_DIR / name
    done = where / ".complete"
    if spec["kind"] == "python":
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            subprocess.run([PYTHON_FOR_PRODUCERS, "-m", "venv", str(where)], check=True)
            subprocess.run([str(where / "bin" / "pip"), "install", "-q", spec["package"]], check=True)
            done.touch()
        return where / "bin" / "python"
    if not done.exists():
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        (where / "package.json").write_text('{"name": "trace-producer", "private": true}\n')
        env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", spec["package"]], cwd=where, env=env, check=True
        )
        done.touch()
    return where


class _Bridge:
    """The producer's end of the evaluator's page calls: one JSON request and one reply per call."""

    def __init__(self, connection: socket.socket) -> None:
        self.reader = connection.makefile("r", encoding="utf-8")
        self.writer = connection.makefile("w", encoding="utf-8")

    def call(self, **request: Any) -> Any:
        self.writer.write(json.dumps(request) + "\n")
        self.writer.flush()
        line = self.reader.readline()
        if not line:
            raise RuntimeError("the producer closed the evaluator's connection")
        reply = json.loads(line)
        if "error" in reply:
            raise playwright.sync_api.Error(reply["error"])
        return reply["ok"]


class _LivePageContext:
    def __init__(self, bridge: _Bridge, page: int) -> None:
        self._bridge, self._page = bridge, page

    def new_page(self) -> LivePage:
        return LivePage(self._bridge, self._bridge.call(op="new_page", page=self._page))


class LivePage(playwright.sync_api.Page):
    """A live page of the producer's browser, as the evaluator uses it (the type its beartype check
    asks for); each call runs on the live page in the producer."""

    _bridge: _Bridge
    _number: int

    def __init__(self, bridge: _Bridge, number: int) -> None:  # no Playwright object behind it here
        self.__dict__["_bridge"], self.__dict__["_number"] = bridge, number

    @property
    def url(self) -> str:
        return str(self._bridge.call(op="url", page=self._number))

    @property
    def context(self) -> Any:
        return _LivePageContext(self._bridge, self._number)

    def goto(self, url: str, **_: Any) -> None:  # type: ignore[override]
        self._bridge.call(op="goto", page=self._number, url=url)

    def content(self, **_: Any) -> str:
        return str(self._bridge.call(op="content", page=self._number))

    def evaluate(self, expression: str, arg: Any = None) -> Any:
        return self._bridge.call(op="evaluate", page=self._number, expression=expression)

    def close(self, **_: Any) -> None:
        self._bridge.call(op="close", page=self._number)


def _signed_in_state(base_url: str, site: str, path: Path) -> None:
    """A ``storage_state`` signed in to ``site`` (what WebArena's ``auto_login`` saves), with the
    sign-in forms BrowserGym's ``ui_login`` drives (the demo shop keeps one user per visitor)."""
    from webarena.browser_env.env_config import ACCOUNTS

    from cdp_integration.environment import CHROMIUM_ARGS, chromium_executable

    account = ACCOUNTS[site]
    with playwright.sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            page = context.new_page()
            if site == "shopping":
                page.goto(f"{base_url}/customer/account/login/")
                page.get_by_label("Email", exact=True).fill(account["username"])
                page.get_by_label("Password", exact=True).fill(account["password"])
            else:
                page.goto(f"{base_url}/admin")
                page.get_by_label("Username").fill(account["username"])
                page.get_by_label("Password").fill(account["password"])
            page.get_by_role("button", name="Sign In").click()
            page.wait_for_load_state("load")
            context.storage_state(path=str(path))
        finally:
            browser.close()


def _evaluate_live(connection: socket.socket, config: dict[str, Any]) -> float:
    """The official evaluator (libwebarena's ``evaluator_router``) on the producer's live page."""
    from webarena.evaluation_harness.evaluators import evaluator_router

    from cdp_integration.capture.probes import build_trajectory
    from cdp_integration.webarena import webarena_config_file

    bridge = _Bridge(connection)
    if json.loads(bridge.reader.readline()).get("ready") is not True:
        raise RuntimeError("the producer did not hand over its page")
    with webarena_config_file(config) as config_file:
        evaluator = evaluator_router(config_file)
        score = float(evaluator(build_trajectory("", stopped=True), config_file, LivePage(bridge, 0), None))
    bridge.writer.write(json.dumps({"op": "done"}) + "\n")
    bridge.writer.flush()
    return score


def _trace_version(path: Path) -> int | None:
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".trace") and "/" not in n)
        with archive.open(name) as member:
            first = json.loads(member.readline())
    version = first.get("version")
    return version if isinstance(version, int) else None


def record_episode(
    producer: str, runner: Path, job: dict[str, Any], config: dict[str, Any], work: Path
) -> tuple[float, Path]:
    """Play one episode in the producer; return the live score and the trace it wrote."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(STEP_TIMEOUT)
        job = {**job, "evaluator_port": server.getsockname()[1]}
        job_file = work / "job.json"
        job_file.write_text(json.dumps(job))
        if PRODUCERS[producer]["kind"] == "python":
            command = [str(runner), str(SCRIPTS / "python_episode.py"), str(job_file)]
            cwd = work
        else:
            command = [
                str(runner / "node_modules" / ".bin" / "playwright"), "test",
                "--config", str(SCRIPTS / "node" / "playwright.config.js"),
            ]  # fmt: skip
            cwd = runner
        env = {**os.environ, "TRACE_JOB": str(job_file), "NODE_PATH": str(runner / "node_modules")}
        log = (work / "producer.log").open("w")
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            connection, _ = server.accept()
            with connection:
                connection.settimeout(STEP_TIMEOUT)
                score = _evaluate_live(connection, config)
            status = process.wait(timeout=STEP_TIMEOUT)
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            log.close()
        if status != 0:
            raise RuntimeError(f"{producer}: exited {status}:\n{(work / 'producer.log').read_text()[-3000:]}")
    if PRODUCERS[producer]["kind"] == "python":
        return score, Path(job["trace_path"])
    traces = sorted(Path(job["output_dir"]).glob("*/trace.zip"))
    if len(traces) != 1:
        raise RuntimeError(f"{producer}: expected one test-results/<test>/trace.zip, found {traces}")
    return score, traces[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producer", action="append", choices=sorted(PRODUCERS))
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "traces")
    parser.add_argument("--task", action="append", type=int)
    args = parser.parse_args()

    from cdp_integration.demo import DemoSite
    from cdp_integration.demo.tasks import configure_demo_environment, instantiate_config, load_demo_tasks
    from cdp_integration.environment import CHROMIUM_ARGS, chromium_executable

    tasks = [t for t in load_demo_tasks() if t.task_id in (args.task or TASKS)]
    for producer in args.producer or list(PRODUCERS):
        runner = install(producer)
        out = args.out / producer
        shutil.rmtree(out, ignore_errors=True)
        expected: dict[str, Any] = {}
        configs: list[dict[str, Any]] = []
        with DemoSite() as site, tempfile.TemporaryDirectory(prefix="trace-corpus-") as tmp:
            configure_demo_environment(site.base_url)
            for task in tasks:
                config = instantiate_config(task.config, site.base_url)
                configs.append(config)
                for trajectory in ("success", "failure"):
                    site.reset()
                    work = Path(tmp) / f"{task.task_id}.{trajectory}"
                    work.mkdir()
                    _signed_in_state(site.base_url, task.config["sites"][0], work / "state.json")
                    job = {
                        "base_url": site.base_url,
                        "start_url": config["start_url"],
                        "steps": [list(s) for s in getattr(task, trajectory)],
                        "storage_state": str(work / "state.json"),
                        "screenshots": task.task_id in PRODUCERS[producer]["screenshots"],
                        "chromium": chromium_executable(),
                        "chromium_args": list(CHROMIUM_ARGS),
                        "trace_path": str(work / "trace.zip"),
                        "output_dir": str(work / "test-results"),
                        "test_name": f"{task.task_id} {trajectory}",
                    }
                    score, trace = record_episode(producer, runner, job, config, work)
                    name = f"{trajectory}/{task.task_id}.zip"
                    (out / trajectory).mkdir(parents=True, exist_ok=True)
                    shutil.copy(trace, out / name)
                    expected[name] = {
                        "task_id": task.task_id,
                        "trajectory": trajectory,
                        "eval_types": task.config["eval"]["eval_types"],
                        "live": score,
                        "trace_format": _trace_version(trace),
                    }
                    size = (out / name).stat().st_size
                    print(f"{producer} {name}: live {score} ({size // 1024} KiB)", flush=True)
        (out / "configs.json").write_text(json.dumps(configs, indent=1) + "\n")
        (out / "expected.json").write_text(
            json.dumps({"producer": PRODUCERS[producer]["package"], "episodes": expected}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
