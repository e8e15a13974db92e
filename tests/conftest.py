"""Session-wide set-up: one scratch directory per test run (``TMPDIR`` too), the demo corpus (recorded in the
background as soon as a collected test needs it), the order and grouping of test modules for
pytest-xdist, and the ``no_sockets`` fixture.

With pytest-xdist (``pytest -n N``) each test module runs whole in one worker process (its module
fixtures are set up once; ``GROUPS`` keeps modules that must not overlap in one worker), the slowest
modules are handed out first and the corpus users last, so the live recording overlaps with the rest
of the suite instead of blocking it. Without ``-n`` the same order applies in one process.
"""

from __future__ import annotations

import multiprocessing.util
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.integration.corpus import CorpusRecording

CORPUS_FIXTURE = "demo_corpus"
CORPUS_TIMEOUT_S = 1800
RUN_DIR_VARIABLE = "CDP_TEST_RUN_DIR"
"""The test run's scratch directory: made by the controlling pytest process, inherited by its workers."""

GROUPS = {
    "tests/integration/test_openhands.py": "openhands",
    "tests/integration/test_openhands_v1.py": "openhands",
    "tests/integration/test_webarena_run_infer.py": "openhands",
    "tests/integration/test_capture_browsergym.py": "bundled-episodes",
    "tests/integration/test_debug_viewer.py": "bundled-episodes",
    "tests/integration/test_replay_api_coverage.py": "bundled-episodes",
}
"""Modules that run in one worker, one after another: OpenHands writes ``/tmp/oh-server-url`` whatever
TMPDIR says, and each of these checks it restores the file; the bundled-episode modules share the
episodes ``viewer_sessions`` records once per worker."""

SLOWEST_FIRST = (
    "tests/integration/test_openhands.py",
    "tests/integration/test_openhands_v1.py",
    "tests/integration/test_browser_use.py",
    "tests/integration/test_capture_browsergym.py",
    "tests/integration/test_fault_injection.py",
    "tests/conformance/test_conformance.py",
)
"""Measured the longest (a minute or more each): handed out first to pytest-xdist workers, so no
worker starts one last."""

run_dir_key: pytest.StashKey[Path] = pytest.StashKey()
recording_key: pytest.StashKey[CorpusRecording] = pytest.StashKey()
saved_tmpdir_key: pytest.StashKey[str | None] = pytest.StashKey()


def _needs_corpus(item: pytest.Item) -> bool:
    return CORPUS_FIXTURE in getattr(item, "fixturenames", ())


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller made the directory
        return
    run_dir = Path(tempfile.mkdtemp(prefix="cdp-test-run-"))
    config.stash[run_dir_key] = run_dir
    os.environ[RUN_DIR_VARIABLE] = str(run_dir)
    # Every temporary file of the run (pytest's tmp_path, Chromium's and Playwright's profiles and
    # artifacts, a killed child's leftovers) lands in the run directory, removed at the end.
    # pytest's own tmp_path stays where it was: paths below it must stay short (Chromium's sockets).
    temporary = run_dir / "tmp"
    temporary.mkdir()
    config.stash[saved_tmpdir_key] = os.environ.get("TMPDIR")
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    # multiprocessing removes its own directory at exit, after this run directory is gone: it stays
    # where it was too.
    multiprocessing.util.get_temp_dir()
    os.environ["TMPDIR"] = tempfile.tempdir = str(temporary)


def _remove(run_dir: Path, within_s: float = 30.0) -> None:
    """Remove the run directory, again while it is still there: a process of the run that is ending
    (a Chromium, a corpus recorder) may still be deleting or writing its own files in it, which makes
    one ``rmtree`` leave an emptied directory behind."""
    deadline = time.monotonic() + within_s
    while True:
        shutil.rmtree(run_dir, ignore_errors=True)
        if not run_dir.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def pytest_unconfigure(config: pytest.Config) -> None:
    run_dir = config.stash.get(run_dir_key, None)
    if run_dir is None:
        return
    from tests.integration.corpus import CorpusRecording

    recording = config.stash.get(recording_key, None) or CorpusRecording(run_dir / "corpus")
    recording.stop()
    _remove(run_dir)
    os.environ.pop(RUN_DIR_VARIABLE, None)
    saved = config.stash.get(saved_tmpdir_key, None)
    if saved is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved
    tempfile.tempdir = None


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist hands out whole modules (``GROUPS`` joins some), in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return GROUPS.get(module, module)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    corpus_modules = {_module(item) for item in items if _needs_corpus(item)}
    distributed = hasattr(config, "workerinput")

    def order(item: pytest.Item) -> tuple[bool, int]:
        """Whole modules move (their module fixtures are set up once): corpus users last; with workers,
        the slowest first (in one process the order is kept: the heaviest ones would then start while
        the corpus recording loads the machine most)."""
        module = _module(item)
        rank = SLOWEST_FIRST.index(module) if distributed and module in SLOWEST_FIRST else len(SLOWEST_FIRST)
        return module in corpus_modules, rank

    items.sort(key=order)  # stable: each module's tests keep their order
    for item in items:
        if _needs_corpus(item):  # the first one's set-up may wait for the recording to finish
            item.add_marker(pytest.mark.timeout(CORPUS_TIMEOUT_S))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start recording the corpus if a collected test needs it and no other process of the run has."""
    if session.config.option.collectonly or not any(_needs_corpus(item) for item in session.items):
        return
    corpus = Path(os.environ[RUN_DIR_VARIABLE]) / "corpus"
    try:
        corpus.mkdir()
    except FileExistsError:  # another pytest-xdist worker started it
        return
    from cdp_integration import environment
    from cdp_integration.demo.tasks import load_demo_tasks
    from tests.integration.corpus import CorpusRecording, corpus_task_ids, default_workers

    environment.prepare()
    task_ids = corpus_task_ids([task.task_id for task in load_demo_tasks()])
    session.config.stash[recording_key] = CorpusRecording.start(corpus, task_ids, workers=default_workers())


@pytest.fixture(scope="module", autouse=True)
def module_environment() -> Iterator[None]:
    """Each test module starts from the process environment the one before it started from.

    A module that plays a live demo task in this process points ``WA_<SITE>`` and the evaluators' site
    globals at its own site for good (``configure_demo_environment``: a live task evaluates at every
    step). Scoring a session that names no sites takes them from the environment, so a later module's
    sessions, served on other ports, would be scored against the earlier module's site.
    """
    from cdp_integration.webarena import _URL_MODULES  # the modules whose site globals scoring points

    saved_environ = dict(os.environ)
    saved_globals = [
        (module, name, value)
        for module in (sys.modules.get(name) for name in _URL_MODULES)
        if module is not None
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, str)
    ]
    yield
    for key in set(os.environ) - set(saved_environ):
        del os.environ[key]
    os.environ.update(saved_environ)
    for module, name, value in saved_globals:
        setattr(module, name, value)


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """This process may not open a network connection (Playwright's driver talks over pipes);
    returns the refused addresses."""
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"network refused in an offline test: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The import tests' per-format counts (``tests/integration/import_checks.py``), when any ran."""
    run_dir = config.stash.get(run_dir_key, None)
    if run_dir is None:
        return
    from tests.integration.import_checks import summary_lines

    lines = summary_lines(run_dir)
    if lines:
        terminalreporter.section("recordings imported (issue 22)")
        for line in lines:
            terminalreporter.write_line(line)
