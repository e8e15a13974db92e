"""Shared fixtures for tests with real Chromium: the set-up environment and one in-process demo site."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdp_integration import environment
from cdp_integration.demo import DemoSite

environment.prepare()


@pytest.fixture(scope="session")
def demo_site() -> Iterator[DemoSite]:
    with DemoSite() as site:
        yield site
