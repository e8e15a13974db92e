"""The offline sandbox under hostile sessions: time limits, no network, one fresh document per question.

Every case runs the real CLI (``cdp-session eval DIR``, ``rescore``, ``eval-at``) in a fresh process
under an address-space limit, on sessions crafted here (``sandbox_sessions``), and checks exit code,
stderr, peak RSS and wall time (issue 20's acceptance). The network cases count what reached a
loopback TCP and a UDP listener: nothing may. The order case scores one corpus forward, reversed and
shuffled through ``eval`` and compares the scores (issue 19: no state from another question).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.integration.sandbox_sessions import target, write_session

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sessions" / "v1"
MAX_RSS = 1024**3
MAX_SECONDS = 30.0
ADDRESS_SPACE = 64 * 1024**3
"""``RLIMIT_AS`` of the CLI and everything it starts: Chromium's V8 reserves large virtual regions
(its sandbox, per process), so a few GB would stop the browser itself from starting; 64 GB still
stops a runaway allocation long before it exhausts this machine's memory and swap."""
QUESTION_SECONDS = "3"

_LAUNCHER = """
import os, resource, sys
rss_file, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
open(rss_file, "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""
"""Forks the CLI and reports its peak RSS from ``wait4`` (an exec'd child of the test process would
report the test process's own high-water mark)."""


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    peak_rss: int
    seconds: float


def cli(*args: str | Path, tmp: Path, env: dict[str, str] | None = None) -> Run:
    """``cdp-session ARGS`` in a fresh process under ``RLIMIT_AS``; its peak RSS and wall time."""
    rss_file = tmp / f"rss-{time.monotonic_ns()}"
    child = [sys.executable, "-c", "from cdp_integration.cli import main; main()", *map(str, args)]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(rss_file), str(ADDRESS_SPACE), *child],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "CDP_SESSION_MAX_QUESTION_SECONDS": QUESTION_SECONDS,
            **(env or {}),
        },
        timeout=6 * MAX_SECONDS,
        cwd=tmp,
    )
    seconds = time.monotonic() - started
    peak = int(rss_file.read_text()) * 1024 if rss_file.exists() else -1
    return Run(done.returncode, done.stdout, done.stderr, peak, seconds)


def assert_bounded(run: Run) -> None:
    assert 0 < run.peak_rss < MAX_RSS, run.peak_rss
    assert run.seconds < MAX_SECONDS, f"{run.seconds:.1f} s"


def assert_one_line_error(run: Run, *needles: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert_bounded(run)


def rows(output: Path) -> dict[str, dict[str, object]]:
    found = {}
    for line in (output / "output.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        found[str(record["instance_id"])] = record["test_result"]
    return found


PAGE = "<html><head><title>crafted</title></head><body><h1>Stored</h1></body></html>"
SCRIPTED = "<html><head><script src='/app.js'></script></head><body><h1>{}</h1></body></html>"

# -- D: a time limit on every question ---------------------------------------------------------

LOOP = "document.title + (() => { for (;;) {} })()"
NEVER = "document.title + (await new Promise(() => {}))"


@pytest.fixture(scope="module")
def hangs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three sessions: a locator that loops, a prep action that never settles, and a good one."""
    directory = tmp_path_factory.mktemp("hangs")
    url = "http://shop.test/item"
    write_session(
        directory / "a-loop.session.jsonl.gz", task_id=1, tabs=[(url, PAGE)], targets=[target(LOOP)]
    )
    never = target("document.title", exact_match="crafted")
    never["prep_actions"] = ["new Promise(() => {})"]
    write_session(directory / "b-never.session.jsonl.gz", task_id=2, tabs=[(url, PAGE)], targets=[never])
    good = target("document.querySelector('h1').textContent", exact_match="Stored")
    write_session(directory / "c-good.session.jsonl.gz", task_id=3, tabs=[(url, PAGE)], targets=[good])
    return directory


def test_eval_stops_a_loop_and_a_never_settling_promise_and_goes_on(hangs: Path, tmp_path: Path) -> None:
    run = cli("eval", hangs, "-o", tmp_path / "out", tmp=tmp_path)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert_bounded(run)
    scored = rows(tmp_path / "out")
    for hung in ("a-loop", "b-never"):
        assert scored[hung]["score"] is None, scored[hung]
        assert "CDP_SESSION_MAX_QUESTION_SECONDS" in str(scored[hung]["error"]), scored[hung]
    assert scored["c-good"]["score"] == 1.0, scored["c-good"]


def test_rescore_of_a_looping_locator_is_a_one_line_error(hangs: Path, tmp_path: Path) -> None:
    run = cli("rescore", hangs / "a-loop.session.jsonl.gz", tmp=tmp_path)
    assert_one_line_error(run, "CDP_SESSION_MAX_QUESTION_SECONDS")


@pytest.mark.parametrize("expression", ["for (;;) {}", "new Promise(() => {})"])
def test_eval_at_ends_at_the_sandbox_limit_not_its_timeout(
    hangs: Path, tmp_path: Path, expression: str
) -> None:
    run = cli("eval-at", hangs / "c-good.session.jsonl.gz", "0", expression, "--timeout", "600", tmp=tmp_path)
    assert_one_line_error(run, "did not finish within 3 s", "CDP_SESSION_MAX_QUESTION_SECONDS")


# -- E: no network of any kind -----------------------------------------------------------------


class Listeners:
    """A loopback TCP listener and a UDP listener on free ports, counting what reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.tcp_port = self.tcp.getsockname()[1]
        self.udp_port = self.udp.getsockname()[1]
        self.connections = 0
        self.packets = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept), threading.Thread(target=self._receive)]
        for thread in self._threads:
            thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.tcp.accept()
            except TimeoutError:
                continue
            self.connections += 1
            connection.close()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                self.udp.recvfrom(4096)
            except TimeoutError:
                continue
            self.packets += 1

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    found = Listeners()
    try:
        yield found
    finally:
        found.close()


def _busy(ms: int) -> str:
    """Keep the question running ``ms`` so asynchronous sends (ICE gathering) get their chance
    (timers never fire in the sandbox)."""
    return f"(() => {{ const t = Date.now(); while (Date.now() - t < {ms}) {{}} }})()"


def network_attempts(tcp: int, udp: int) -> list[str]:
    http = f"http://127.0.0.1:{tcp}"
    return [
        f"(async () => {{ try {{ await fetch('{http}/fetch', {{mode: 'no-cors'}}); }} catch (e) {{}} }})()",
        f"(async () => {{ try {{ await fetch('http://localhost:{tcp}/fetch'); }} catch (e) {{}} }})()",
        f"(() => {{ new WebSocket('ws://127.0.0.1:{tcp}/ws'); }})()",
        f"(() => {{ const i = new Image(); i.src = '{http}/image.png'; document.body.append(i); }})()",
        f"(() => navigator.sendBeacon('{http}/beacon', 'x'))()",
        f"(() => {{ const f = document.createElement('iframe'); f.src = '{http}/frame'; document.body.append(f); }})()",
        f"(() => {{ new EventSource('{http}/events'); }})()",
        f"(() => {{ window.open('{http}/popup'); }})()",
        "(async () => { const pc = new RTCPeerConnection({iceServers: ["
        f"{{urls: 'stun:127.0.0.1:{udp}'}}, {{urls: 'turn:127.0.0.1:{udp}?transport=udp', username: 'u', "
        f"credential: 'p'}}, {{urls: 'turn:127.0.0.1:{tcp}?transport=tcp', username: 'u', credential: 'p'}}]}});"
        " pc.createDataChannel('x'); await pc.setLocalDescription(await pc.createOffer()); })()",
        _busy(2000),
    ]


def test_locators_reach_no_network_and_a_meta_refresh_does_not_empty_the_page(
    listeners: Listeners, tmp_path: Path
) -> None:
    refresh = (
        f"<html><head><meta http-equiv='refresh' content='0;url=http://127.0.0.1:{listeners.tcp_port}/away'>"
        "<title>crafted</title></head><body><h1>Stored</h1></body></html>"
    )
    attempts = target("document.querySelector('h1').textContent", exact_match="Stored")
    attempts["prep_actions"] = network_attempts(listeners.tcp_port, listeners.udp_port)
    session = write_session(
        tmp_path / "network.session.jsonl.gz",
        task_id=7,
        tabs=[("http://shop.test/item", refresh)],
        targets=[attempts],
    )
    run = cli("rescore", session, tmp=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "final-state score 1.0" in run.stdout, run.stdout
    assert_bounded(run)
    assert (listeners.connections, listeners.packets) == (0, 0)


def test_the_udp_listener_does_see_webrtc_outside_the_sandbox(listeners: Listeners) -> None:
    """The control: the same STUN attempt from a Chromium without the sandbox's flags reaches it."""
    from playwright.sync_api import sync_playwright

    from cdp_integration import environment

    environment.prepare()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS)
        )
        try:
            page = browser.new_page()
            page.evaluate(network_attempts(listeners.tcp_port, listeners.udp_port)[-2])
            deadline = time.monotonic() + 20
            while listeners.packets == 0 and time.monotonic() < deadline:
                page.wait_for_timeout(100)
        finally:
            browser.close()
    assert listeners.packets > 0
