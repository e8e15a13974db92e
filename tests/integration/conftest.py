"""Shared fixtures for tests with real Chromium: the set-up environment and one in-process demo site."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Playwright

from cdp_integration import environment
from cdp_integration.demo import DemoSite

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
        executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture(scope="session")
def demo_site() -> Iterator[DemoSite]:
    with DemoSite() as site:
        yield site


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
