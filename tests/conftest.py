"""Session-wide set-up: the demo corpus starts recording as soon as a collected test needs it; the
``no_sockets`` fixture.

Tests that use the ``demo_corpus`` fixture run last, so the live recording (worker processes, see
``tests/integration/corpus.py``) overlaps with the rest of the suite instead of blocking it.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.integration.corpus import CorpusRecording

CORPUS_FIXTURE = "demo_corpus"
CORPUS_TIMEOUT_S = 1800
corpus_key: pytest.StashKey[CorpusRecording] = pytest.StashKey()


def _needs_corpus(item: pytest.Item) -> bool:
    return CORPUS_FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    items.sort(key=_needs_corpus)  # stable: the corpus users keep their order, after everything else
    for item in items:
        if _needs_corpus(item):  # the first one's set-up may wait for the recording to finish
            item.add_marker(pytest.mark.timeout(CORPUS_TIMEOUT_S))


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or not any(_needs_corpus(item) for item in session.items):
        return
    from cdp_integration import environment
    from cdp_integration.demo.tasks import load_demo_tasks
    from tests.integration.corpus import CorpusRecording, default_workers

    environment.prepare()
    root = Path(tempfile.mkdtemp(prefix="cdp-demo-corpus-"))
    task_ids = [task.task_id for task in load_demo_tasks()]
    session.config.stash[corpus_key] = CorpusRecording(root, task_ids, workers=default_workers())


def pytest_sessionfinish(session: pytest.Session) -> None:
    recording = session.config.stash.get(corpus_key, None)
    if recording is not None:
        recording.stop()
        shutil.rmtree(recording.root, ignore_errors=True)


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
