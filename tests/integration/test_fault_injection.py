"""Fault injection: demo episodes in BrowserGym, captured while the logger's world breaks under it.

Faults: CDP commands that fail or never answer, tabs closed, crashed, hung or navigated in the middle
of a capture, a disk that fills up (writes go to ``/dev/full``, a real ENOSPC), and SIGKILL. Every
episode must end as it ends without faults (each demo task's scripted success scores 1.0 and its
failure 0.0: ``test_parity`` plays them all fault-free), every captured step must load, and every
injected fault must be recorded in the step (or end record) where it happened.

The logger's CDP commands are intercepted under its own timeout wrapper (``FaultyCDP``), so only the
logger sees the failures; the tabs the test closes, crashes or navigates are real. "Side" tabs are
extra tabs the test opens on the demo shop and keeps in the background, so the agent's tab and its
score are untouched; faults on the agent's own tab are injected in the last capture, after
BrowserGym has scored the episode.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from playwright.sync_api import Error as PlaywrightError

from cdp_integration import CDPSessionLogger, Session, load_session
from cdp_integration.demo import DemoSite
from cdp_integration.demo.agent import EPISODE_ATTEMPTS
from cdp_integration.demo.tasks import (
    DemoRun,
    DemoTask,
    configure_demo_environment,
    load_demo_tasks,
    run_demo_task,
)
from cdp_integration.errors import ActionFailed, CaptureError
from cdp_integration.session import store, untrusted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

CDP_TIMEOUT_MS = 2_000
"""Short, so the hung and crashed tabs cost little; demo pages answer every command in milliseconds."""

Action = Literal["fail", "hang", "close", "crash", "navigate", "busy"]
Where = int | Literal["end"]


@dataclass(frozen=True)
class Fault:
    """In the capture of step ``step``, the logger's first ``method`` command to ``tab`` meets ``action``."""

    step: int
    method: str
    tab: Literal["active", "side"]
    action: Action


@dataclass(frozen=True)
class Scenario:
    name: str
    task_id: int
    trajectory: Literal["success", "failure"]
    kind: str
    faults: tuple[Fault, ...] = ()
    disk_full: tuple[int, int | None] | None = None
    """Steps ``(first, until)``: the disk is full from the capture of ``first`` to that of ``until``
    (``None``: still full when the session is saved; the test frees it after a failed save)."""
    expected: tuple[tuple[Where, str, str], ...] = ()
    """``(step index or "end", stage, error_type)`` of the faults the session must hold."""

    @property
    def side_tab(self) -> bool:
        return any(f.tab == "side" for f in self.faults)


def fail(step: int, method: str, tab: Literal["active", "side"] = "active") -> Fault:
    return Fault(step, method, tab, "fail")


SCENARIOS = (
    # CDP command errors
    Scenario(
        "cdp-cookies",
        10000,
        "success",
        "CDP error",
        (fail(1, "Network.getAllCookies"),),
        expected=((1, "cookies", "Error"),),
    ),
    Scenario(
        "cdp-html-storage",
        10001,
        "failure",
        "CDP error",
        (
            fail(2, "DOM.getDocument"),
            fail(2, "DOMStorage.getDOMStorageItems"),
            fail(2, "DOMStorage.getDOMStorageItems"),
        ),
        expected=((2, "html", "Error"), (2, "session_storage", "Error"), (2, "local_storage", "Error")),
    ),
    Scenario(
        "cdp-tab-body-origins",
        10002,
        "success",
        "CDP error",
        (
            fail(0, "Target.getTargetInfo"),
            fail(2, "Network.getResponseBody"),
            fail(3, "Page.getResourceTree"),
        ),
        expected=((0, "tab", "Error"), (2, "network.body", "Error"), (3, "origins", "Error")),
    ),
    # tabs closed in the middle of a capture
    Scenario(
        "close-side-mid-html",
        10003,
        "success",
        "page closed",
        (Fault(2, "DOM.getOuterHTML", "side", "close"),),
        expected=((2, "html", "TargetClosedError"),),
    ),
    Scenario(
        "close-side-first-command",
        10014,
        "success",
        "page closed",
        (Fault(1, "Page.getResourceTree", "side", "close"),),
        expected=((1, "origins", "TargetClosedError"), (1, "tab", "TargetClosedError")),
    ),
    Scenario(
        "close-active-last-capture",
        10004,
        "failure",
        "page closed",
        (Fault(3, "DOM.getDocument", "active", "close"),),
        expected=((3, "html", "TargetClosedError"), (3, "cookies", "TargetClosedError")),
    ),
    # renderer crashes
    Scenario(
        "crash-side-mid-capture",
        10005,
        "success",
        "renderer crash",
        (Fault(1, "DOM.getDocument", "side", "crash"),),
        expected=((1, "html", "TimeoutError"), (2, "tab", "TargetCrashed"), (3, "tab", "TargetCrashed")),
    ),
    Scenario(
        "crash-side-first-command",
        10006,
        "failure",
        "renderer crash",
        (Fault(2, "Page.getResourceTree", "side", "crash"),),
        expected=((2, "origins", "TimeoutError"), (2, "tab", "TargetCrashed"), (3, "tab", "TargetCrashed")),
    ),
    Scenario(
        "crash-active-last-capture",
        10015,
        "success",
        "renderer crash",
        (Fault(1, "DOM.getDocument", "active", "crash"),),
        expected=((1, "html", "TimeoutError"), (1, "cookies", "TimeoutError")),
    ),
    # navigations started inside a capture, between DOM.getDocument and DOM.getOuterHTML
    Scenario(
        "navigate-side-step1",
        10007,
        "success",
        "navigation",
        (Fault(1, "DOM.getOuterHTML", "side", "navigate"),),
        expected=((1, "html", "Error"),),
    ),
    Scenario(
        "navigate-side-step2",
        10008,
        "failure",
        "navigation",
        (Fault(2, "DOM.getOuterHTML", "side", "navigate"),),
        expected=((2, "html", "Error"),),
    ),
    Scenario(
        "navigate-active-last-capture",
        10016,
        "success",
        "navigation",
        (Fault(1, "DOM.getOuterHTML", "active", "navigate"),),
        expected=((1, "html", "Error"),),
    ),
    # disk full (the fault is recorded in the capture after the failed write)
    Scenario(
        "disk-full-from-start",
        10009,
        "success",
        "disk full",
        disk_full=(0, 2),
        expected=((1, "write", "OSError"),),
    ),
    Scenario(
        "disk-full-mid", 10010, "failure", "disk full", disk_full=(2, 3), expected=((3, "write", "OSError"),)
    ),
    Scenario(
        "disk-full-last-step",
        10017,
        "failure",
        "disk full",
        disk_full=(1, None),
        expected=(("end", "write", "OSError"),),
    ),
    Scenario(
        "disk-full-at-save",
        10011,
        "success",
        "disk full",
        disk_full=(1, None),
        expected=((2, "write", "OSError"),),
    ),
    # CDP commands that never answer
    Scenario(
        "hang-active-html",
        10012,
        "success",
        "hung CDP call",
        (Fault(1, "DOM.getDocument", "active", "hang"),),
        expected=(
            (1, "html", "TimeoutError"),
            (1, "session_storage", "TimeoutError"),
            (1, "cookies", "TimeoutError"),
        ),
    ),
    Scenario(
        "hang-response-body",
        10013,
        "failure",
        "hung CDP call",
        (Fault(2, "Network.getResponseBody", "active", "hang"),),
        expected=((2, "network.body", "TimeoutError"),),
    ),
    Scenario(
        "busy-side-renderer",
        10018,
        "success",
        "hung renderer",
        (Fault(1, "Page.getResourceTree", "side", "busy"),),
        expected=((1, "origins", "TimeoutError"), (1, "html", "TimeoutError")),
    ),
    # several kinds in one episode
    Scenario(
        "mixed",
        10019,
        "failure",
        "mixed",
        (
            fail(1, "Network.getAllCookies"),
            Fault(2, "DOM.getOuterHTML", "side", "navigate"),
            Fault(3, "DOM.getDocument", "side", "close"),
        ),
        disk_full=(1, 2),
        expected=(
            (1, "cookies", "Error"),
            (2, "write", "OSError"),
            (2, "html", "Error"),
            (3, "html", "TargetClosedError"),
        ),
    ),
    Scenario(
        "crash-and-disk-full",
        10020,
        "success",
        "mixed",
        (Fault(2, "DOM.getDocument", "side", "crash"),),
        disk_full=(2, None),
        expected=((2, "html", "TimeoutError"), (3, "tab", "TargetCrashed"), ("end", "write", "OSError")),
    ),
)


class Disk:
    """A disk that can be full: session-file descriptors then point at ``/dev/full`` (real ENOSPC)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        monkeypatch.setattr(store, "open_output", self._open_output)  # how SessionWriter opens its file

    def _open_output(self, path: Any, *args: Any, **kwargs: Any) -> Any:
        opened = untrusted.open_output(path, *args, **kwargs)
        if self.full:
            _to_dev_full(opened.fileno())
        return opened

    def fill(self, logger: CDPSessionLogger) -> None:
        self.full = True
        writer = logger._writer.current
        if writer is not None and not writer.closed:
            _to_dev_full(writer._file.fileno())

    def free(self) -> None:
        self.full = False


def _to_dev_full(fd: int) -> None:
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, fd)
    finally:
        os.close(full)


class FaultyCDP:
    """Stands under the logger's timeout wrapper for one tab: the episode decides each command's fate."""

    def __init__(self, session: Any, page: Any, episode: FaultyEpisode) -> None:
        self.session, self.page, self.episode = session, page, episode

    def send(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        if not timeout:  # without one, the hung and crashed tabs below would block the test forever
            self.episode.untimed.append(method)
            raise AssertionError(f"the logger sent {method} without a timeout")
        method, params = self.episode.intercept(self, method, params)
        return self.session.send(method, params, timeout=timeout)

    def on(self, event: str, handler: Any) -> None:
        self.session.on(event, handler)

    def detach(self) -> None:
        self.session.detach()


@dataclass
class Outcome:
    scenario: Scenario
    run: DemoRun | None
    session: Session | None
    error: str | None
    seconds: float
    replayed: tuple[str, ...] = ()
    """Why earlier attempts were played again: BrowserGym could not carry out an agent action."""
    failure: Exception | None = field(default=None, repr=False)


@dataclass
class FaultyEpisode:
    """One demo episode with a logger whose tabs' CDP sessions are ``FaultyCDP``s."""

    scenario: Scenario
    base_url: str
    disk: Disk
    logger: CDPSessionLogger
    pending: list[Fault] = field(default_factory=list)
    side: list[Any] = field(default_factory=list)
    untimed: list[str] = field(default_factory=list)
    core: Any = None
    opening_side_tab: bool = False
    saves_failed: int = 0

    def on_env(self, env: Any) -> None:
        self.logger.attach_to_browsergym_env(env)
        self.core = core = env.unwrapped
        # BrowserGym makes every page that loads the agent's active page; side tabs stay in the background
        activate = core._activate_page_from_js
        core._activate_page_from_js = lambda page: (
            None if self.opening_side_tab or page in self.side else activate(page)
        )
        attach, capture, step = self.logger._tracker.attach, self.logger.capture_state_snapshot, core.step

        def attach_faulty(page: Any) -> None:
            attach(page)
            tab = self.logger._tracker.tabs.get(page)
            if tab is not None and not isinstance(tab.cdp.session, FaultyCDP):
                tab.cdp.session = FaultyCDP(tab.cdp.session, page, self)

        def capture_on_a_disk(*args: Any, **kwargs: Any) -> Any:
            full = self.scenario.disk_full
            if full is not None and self.logger.steps_captured == full[0]:
                self.disk.fill(self.logger)
            elif full is not None and self.logger.steps_captured == full[1]:
                self.disk.free()
            return capture(*args, **kwargs)

        def step_with_side_tab(action: str, *args: Any, **kwargs: Any) -> Any:
            if self.scenario.side_tab and not self.side:
                self.opening_side_tab = True
                try:
                    page = core.context.new_page()
                    self.side.append(page)
                finally:
                    self.opening_side_tab = False
                page.goto(f"{self.base_url}/products/7")
            return step(action, *args, **kwargs)

        self.logger._tracker.attach = attach_faulty  # type: ignore[method-assign]
        self.logger.capture_state_snapshot = capture_on_a_disk  # type: ignore[method-assign]
        core.step = step_with_side_tab

    def intercept(self, cdp: FaultyCDP, method: str, params: dict[str, Any] | None) -> tuple[str, Any]:
        role = "active" if cdp.page is self.core.page else "side" if cdp.page in self.side else "other"
        fault = next(
            (
                f
                for f in self.pending
                if (f.step, f.method, f.tab) == (self.logger.steps_captured, method, role)
            ),
            None,
        )
        if fault is None:
            return method, params
        self.pending.remove(fault)
        if fault.action == "fail":
            raise PlaywrightError(f"Protocol error ({method}): injected failure")
        if fault.action == "hang":
            return "Runtime.evaluate", {"expression": "new Promise(() => {})", "awaitPromise": True}
        if fault.action == "close":
            cdp.page.close()
        elif fault.action == "crash":
            with contextlib.suppress(PlaywrightError):  # a crashing renderer never answers Page.crash
                cdp.session.send("Page.crash", None, timeout=300)
        elif fault.action == "navigate":
            cdp.page.goto(f"{self.base_url}/products/8")
        elif fault.action == "busy":
            busy = f"const end = Date.now() + {CDP_TIMEOUT_MS + 500}; while (Date.now() < end) {{}}"
            cdp.session.send("Runtime.evaluate", {"expression": f"setTimeout(() => {{ {busy} }}, 0)"})
        return method, params

    @property
    def full_at_save(self) -> bool:
        return self.scenario.disk_full is not None and self.scenario.disk_full[1] is None

    def save(self, env: Any) -> None:
        try:
            self.logger.save_session()
        except CaptureError:
            if not self.full_at_save:
                raise
            self.saves_failed += 1
            self.disk.free()  # space is back: a second save must write every step
            self.logger.save_session()


def play(scenario: Scenario, task: DemoTask, base_url: str, out: Path, disk: Disk) -> Outcome:
    """One scenario, played again from a fresh logger (the task's setup resets the shop) when BrowserGym
    could not carry out one of the agent's actions: on a loaded machine a click can miss BrowserGym's
    500 ms action timeout, which says nothing of the logger. An attempt broken any other way is reported
    as it is, and so is the last one."""
    replayed: list[str] = []
    while True:
        outcome = _play_once(scenario, task, base_url, out, disk)
        if not isinstance(outcome.failure, ActionFailed) or len(replayed) + 1 == EPISODE_ATTEMPTS:
            outcome.replayed = tuple(replayed)
            return outcome
        replayed.append(str(outcome.error))
        print(f"fault injection: {scenario.name}: {outcome.error}; playing it again", file=sys.stderr)


def _play_once(scenario: Scenario, task: DemoTask, base_url: str, out: Path, disk: Disk) -> Outcome:
    logger = CDPSessionLogger(out, instance_id=scenario.name, cdp_timeout_ms=CDP_TIMEOUT_MS)
    episode = FaultyEpisode(scenario, base_url, disk, logger, pending=list(scenario.faults))
    started = time.perf_counter()
    run, session, error, failure = None, None, None, None
    try:
        run = run_demo_task(
            task, scenario.trajectory, base_url, on_env=episode.on_env, before_close=episode.save
        )
        assert episode.saves_failed == episode.full_at_save, "a save should have met the full disk"
        assert not episode.untimed, f"CDP commands sent without a timeout: {episode.untimed}"
        assert not episode.pending, f"faults never injected: {episode.pending}"
        assert logger.saved_path is not None
        session = load_session(logger.saved_path)
    except Exception as exc:  # reported per episode by the tests below
        error, failure = f"{type(exc).__name__}: {exc}", exc
    finally:
        disk.free()
        if isinstance(failure, ActionFailed) and logger.partial_path is not None:
            logger.partial_path.unlink(missing_ok=True)  # the attempt played again leaves nothing behind
    return Outcome(scenario, run, session, error, round(time.perf_counter() - started, 1), failure=failure)


ALL_VARIABLE = "CDP_TEST_FAULTS"
SUBSET = (
    "cdp-html-storage",
    "hang-active-html",
    "crash-and-disk-full",
)
"""What ``make test`` plays: CDP errors, a hung renderer, a crash with a full disk
(``test_capture_browsergym.py`` injects faults in ``make test`` too: a page over the size limit and the CDP
connection broken mid-episode).
``CDP_TEST_FAULTS=all`` (``make test-faults``) plays every scenario: at least 20 episodes, several of
each kind, CDP errors, busy renderers and a full disk alone among them."""
FULL = os.environ.get(ALL_VARIABLE) == "all"
PLAYED = SCENARIOS if FULL else tuple(s for s in SCENARIOS if s.name in SUBSET)


@pytest.fixture(scope="module")
def outcomes(demo_site: DemoSite, tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    configure_demo_environment(demo_site.base_url)
    tasks = {task.task_id: task for task in load_demo_tasks()}
    out = tmp_path_factory.mktemp("faulty-sessions")
    with pytest.MonkeyPatch.context() as monkeypatch:
        disk = Disk(monkeypatch)
        results = [play(s, tasks[s.task_id], demo_site.base_url, out, disk) for s in PLAYED]
    print("\n" + table(results))
    return results


def table(results: list[Outcome]) -> str:
    lines = [f"{'episode':<28} {'fault':<15} {'steps':>5} {'faults recorded':<56} {'live':>5} {'s':>5}"]
    for o in results:
        session = o.session
        recorded = [] if session is None else [f for s in session.steps for f in s.faults]
        recorded += [] if session is None or session.end is None else session.end.faults
        stages = ",".join(sorted({f.stage for f in recorded}))
        live = "-" if o.run is None else f"{o.run.final_reward:.1f}"
        steps = "-" if session is None else str(len(session.steps))
        lines.append(
            f"{o.scenario.name:<28} {o.scenario.kind:<15} {steps:>5} {f'{len(recorded)}: {stages}':<56} "
            f"{live:>5} {o.seconds:>5.1f}"
            + (f"  BROKEN {o.error}" if o.error else "")
            + "".join(f"  (played again after {why})" for why in o.replayed)
        )
    return "\n".join(lines)


def _recorded_faults(outcome: Outcome) -> int:
    session = outcome.session
    if session is None:
        return 0
    return sum(len(step.faults) for step in session.steps) + len(session.end.faults if session.end else [])


def test_at_least_20_episodes_with_several_recorded_faults_of_each_kind(outcomes: list[Outcome]) -> None:
    """Counted over what the played episodes recorded, not over the scenario table (the subset of
    ``make test``: each kind it plays at least once)."""
    assert len(outcomes) + len(KILLS) >= (20 if FULL else len(SUBSET) + len(KILLS))
    kinds = ("CDP error", "page closed", "renderer crash", "navigation", "disk full", "hung CDP call")
    for kind in kinds if FULL else sorted({s.kind for s in PLAYED} - {"mixed"}):
        recorded = [o for o in outcomes if o.scenario.kind == kind and _recorded_faults(o)]
        assert len(recorded) >= (2 if FULL else 1), kind


def test_no_episode_is_broken_by_the_logger(outcomes: list[Outcome]) -> None:
    """Every episode plays all its steps and scores what it scores without faults."""
    broken = [f"{o.scenario.name}: {o.error}" for o in outcomes if o.error or o.run is None]
    assert not broken, "\n".join(broken)
    tasks = {task.task_id: task for task in load_demo_tasks()}
    for o in outcomes:
        assert o.run is not None
        task = tasks[o.scenario.task_id]
        expected_steps = task.success if o.scenario.trajectory == "success" else task.failure
        assert len(o.run.rewards) == len(expected_steps), o.scenario.name
        assert o.run.final_reward == (1.0 if o.scenario.trajectory == "success" else 0.0), o.scenario.name


def test_every_captured_step_is_readable(outcomes: list[Outcome]) -> None:
    """The finished file holds the reset and every action, with the live rewards, whatever failed."""
    for o in outcomes:
        session, run = o.session, o.run
        assert session is not None and run is not None and session.complete, o.scenario.name
        assert [s.index for s in session.steps] == list(range(len(run.rewards) + 1)), o.scenario.name
        assert [s.trigger for s in session.steps] == ["reset"] + ["action"] * len(run.rewards)
        assert [s.reward for s in session.steps[1:]] == run.rewards, o.scenario.name
        assert session.end is not None and session.end.rewards == run.rewards
        exchanges = [
            (e.request_id, e.request.method, e.request.url) for s in session.steps for e in s.network
        ]
        assert len(exchanges) == len(set(exchanges)), f"{o.scenario.name}: a request recorded twice"


@pytest.mark.skipif(
    not FULL,
    reason="make test-faults: a wall-clock bound, which 2 of 5 loaded clean runs of make test missed (4-5 s)",
)
def test_an_unresponsive_tab_costs_one_timeout_per_capture(outcomes: list[Outcome]) -> None:
    """After one timeout the tab's other commands fail at once; a crashed tab is not waited for again.

    A capture's own work is measured by the same episode's captures without a fault (a loaded machine
    slows both alike): a hung tab adds one timeout to it, not one per command (three here)."""
    for o in outcomes:
        assert o.session is not None
        ordinary = max((s.capture_ms for s in o.session.steps if not s.faults), default=0.0)
        for step in o.session.steps:
            assert step.capture_ms < ordinary + 2 * CDP_TIMEOUT_MS, (o.scenario.name, step.index, ordinary)
            types = {f.error_type for f in step.faults}
            if "TargetCrashed" in types and "TimeoutError" not in types:  # crashed before this capture
                assert step.capture_ms < ordinary + CDP_TIMEOUT_MS, (o.scenario.name, step.index, ordinary)


def test_each_injected_fault_is_recorded_where_it_happened(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        session = o.session
        assert session is not None and session.end is not None
        for where, stage, error_type in o.scenario.expected:
            faults = session.end.faults if where == "end" else session.steps[where].faults
            found = [(f.stage, f.error_type) for f in faults]
            assert (stage, error_type) in found, f"{o.scenario.name} step {where}: {found}"
        first = min((w for w, _, _ in o.scenario.expected if w != "end"), default=len(session.steps))
        assert all(not s.faults for s in session.steps[:first]), f"{o.scenario.name}: faults before injection"


KILLS = ("hung-call", "mid-write") if FULL else ("mid-write",)
"""Where the process is killed: while a capture waits on CDP, and while a record is half written
(``make test`` kills mid-write only: the file's crash safety; ``make test-faults`` both)."""

KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cdp_integration import environment
    environment.prepare()
    from cdp_integration import CDPSessionLogger
    from cdp_integration.demo.agent import EPISODE_ATTEMPTS, ActionFailed
    from cdp_integration.demo.tasks import load_demo_tasks, run_demo_task
    from cdp_integration.session.store import SessionWriter

    base, out, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    task = next(t for t in load_demo_tasks() if t.task_id == 10000)
    logger = CDPSessionLogger(out, instance_id=mode, cdp_timeout_ms=600_000)

    def killed_here():
        print(logger.partial_path, flush=True)
        time.sleep(600)

    class HangingCDP:
        def __init__(self, session):
            self.session = session
        def send(self, method, params=None, *, timeout=None):
            if logger.steps_captured == 2:  # the capture of the second action never gets an answer
                killed_here()
            return self.session.send(method, params, timeout=timeout)
        def on(self, event, handler):
            self.session.on(event, handler)
        def detach(self):
            self.session.detach()

    class HalfWritingFile:
        def __init__(self, file):
            self.file = file
        def write(self, data):  # the process dies in the middle of a record
            self.file.write(data[: len(data) // 2])
            self.file.flush()
            killed_here()

    def on_env(env):
        logger.attach_to_browsergym_env(env)
        if mode == "hung-call":
            attach = logger._tracker.attach
            def attach_hanging(page):
                attach(page)
                tab = logger._tracker.tabs.get(page)
                if tab is not None and not isinstance(tab.cdp.session, HangingCDP):
                    tab.cdp.session = HangingCDP(tab.cdp.session)
            logger._tracker.attach = attach_hanging

    if mode == "mid-write":
        write_step = SessionWriter.write_step
        def write_half_of_step_2(self, step):
            if step.index == 2:
                self._file = HalfWritingFile(self._file)
            return write_step(self, step)
        SessionWriter.write_step = write_half_of_step_2

    # played again from a fresh logger if a loaded machine made BrowserGym miss an action's timeout
    for attempt in range(1, EPISODE_ATTEMPTS + 1):
        try:
            run_demo_task(task, "success", base, on_env=on_env)
            break
        except ActionFailed as exc:
            if attempt == EPISODE_ATTEMPTS:
                raise
            print(f"playing it again after {exc}", file=sys.stderr, flush=True)
            logger.partial_path.unlink(missing_ok=True)
            logger = CDPSessionLogger(out, instance_id=mode, cdp_timeout_ms=600_000)
    print("not killed", flush=True)
""")


def kill_group(pgid: int) -> None:
    """The killed process, its Playwright driver and Chromium share the process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def test_sigkill_mid_capture_leaves_every_completed_step_readable(
    demo_site: DemoSite, tmp_path: Path
) -> None:
    """SIGKILL to the process group while a capture waits on CDP, and while a record is half written."""
    partials: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        procs = {}
        for mode in KILLS:
            stderr = stack.enter_context((tmp_path / f"{mode}.stderr").open("w"))
            procs[mode] = proc = stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", KILL_SCRIPT, demo_site.base_url, str(tmp_path), mode],
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                    start_new_session=True,
                )
            )
            stack.callback(kill_group, proc.pid)  # before the Popen's exit waits for it
            deadline = threading.Timer(120, kill_group, [proc.pid])  # should the child never get there
            deadline.start()
            stack.callback(deadline.cancel)
        for mode, proc in procs.items():
            assert proc.stdout is not None
            partials[mode] = proc.stdout.readline().strip()  # the child is now stuck mid-capture
            kill_group(proc.pid)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL, (
                mode,
                (tmp_path / f"{mode}.stderr").read_text()[-2000:],
            )
    rows = []
    for mode in KILLS:
        partial = Path(partials[mode])
        assert partial.name == f"{mode}.session.jsonl.gz.partial"
        session = load_session(partial)
        assert not session.complete and session.end is None
        # reset and the first action were captured; the kill hit the second action's capture
        assert [s.index for s in session.steps] == [0, 1], mode
        assert session.steps[1].url.endswith("/search?q=skillet") and session.steps[1].html
        assert session.steps[1].reward == 0.0
        rows.append(f"{'killed-' + mode:<28} {'SIGKILL':<15} {len(session.steps):>5} {'0':<56} {'-':>5}")
    print("\n" + "\n".join(rows))
