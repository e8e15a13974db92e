"""Shared fixtures for tests with real Chromium: the set-up environment, one in-process demo site and
the demo corpus (every demo task played live once per test run)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright

from cdp_integration import environment
from cdp_integration.demo import DemoSite
from cdp_integration.demo.job import DemoEpisode

environment.prepare()

# Chromium and OpenHands write under $HOME (crash-report folders, settings); give this test run its own.
_home = tempfile.mkdtemp(prefix="cdp-tests-home-")
for _name in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
    os.environ[_name] = _home if _name == "HOME" else os.path.join(_home, _name.lower())
atexit.register(shutil.rmtree, _home, True)


@pytest.fixture(scope="session")
def playwright() -> Playwright:
    """The one Playwright driver of the test process.

    BrowserGym starts a process-wide sync Playwright and never stops it; a second
    ``sync_playwright()`` in the same thread then fails. Every test shares BrowserGym's.
    """
    import browsergym.core

    return browsergym.core._get_global_playwright()


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """One headless system Chromium per test module."""
    launched = playwright.chromium.launch(
        executable_path=environment.headless_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture(scope="session")
def demo_site() -> Iterator[DemoSite]:
    with DemoSite() as site:
        yield site


VIEWER_EPISODES = ("demo.search-and-review", "demo.feed-and-preferences")
"""The bundled episodes `viewer_sessions` records."""


@pytest.fixture(scope="session")
def viewer_sessions(demo_site: DemoSite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two bundled demo episodes captured with screenshots, accessibility trees and every response body,
    once per test worker (the debug viewer shows them; the replay API coverage asks the final page of
    one; the BrowserGym capture tests check them with the other bundled episodes). The modules that use
    them run in one worker (``GROUPS`` in ``tests/conftest.py``)."""
    from cdp_integration.demo.agent import load_episodes, run_episode

    out = tmp_path_factory.mktemp("viewer-sessions")
    options = {"screenshot": True, "accessibility_tree": True, "response_bodies": "all"}
    return {
        episode.id: run_episode(
            episode, demo_site.base_url, out, logger_options=options, reset=demo_site.reset
        )
        for episode in load_episodes()
        if episode.id in VIEWER_EPISODES
    }


@pytest.fixture(scope="session")
def demo_corpus(request: pytest.FixtureRequest) -> list[DemoEpisode]:
    """The 90 demo episodes (every demo task, both trajectories), recorded live once per test run.

    Recording started in the background when collection finished (``tests/conftest.py``); the demo
    shops of the recording processes are stopped by the time this returns.
    """
    from tests.conftest import CORPUS_TIMEOUT_S, RUN_DIR_VARIABLE
    from tests.integration.corpus import CorpusRecording

    recording = CorpusRecording(Path(os.environ[RUN_DIR_VARIABLE]) / "corpus")
    episodes = recording.episodes(timeout=CORPUS_TIMEOUT_S - 60)
    print(f"\ndemo corpus: {len(episodes)} live episodes recorded in {recording.seconds} s (wall clock)")
    return episodes
