"""The conformance suite's environment: the set-up toolkit, a private HOME for Chromium, one fixture per
real application, and the per-application counts printed at the end of the run.

Fixtures ``dokuwiki_app``, ``trac_app``, ``tiddlywiki_app``, ``django_app`` and ``docsify_app`` (module scope) start
that application on a free port in a temp dir and yield an ``apps.App`` (``.url`` is its base URL);
``apps.sign_in(page, app)`` signs a page's browser context in as ``apps.USER`` (Trac's HTTP basic
auth needs ``apps.context_options(app)`` when the context is made). A missing application skips.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdp_integration import environment
from tests.conformance import apps

environment.prepare()

_home = tempfile.mkdtemp(prefix="cdp-conformance-home-")
for _name in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
    os.environ[_name] = _home if _name == "HOME" else os.path.join(_home, _name.lower())
atexit.register(shutil.rmtree, _home, True)

COUNTS: dict[str, Counter[str]] = {}
"""Per application: ``recorded matched``, ``reconstructed miss`` ... as the conformance test counts them."""


def _app(name: str) -> Iterator[apps.App]:
    reason = apps.missing(name)
    if reason is not None:
        pytest.skip(reason)
    with (
        tempfile.TemporaryDirectory(prefix=f"cdp-conformance-{name}-") as workdir,
        apps.running(apps.STARTERS[name], Path(workdir)) as app,
    ):
        yield app


@pytest.fixture(scope="module")
def dokuwiki_app() -> Iterator[apps.App]:
    yield from _app("dokuwiki")


@pytest.fixture(scope="module")
def trac_app() -> Iterator[apps.App]:
    yield from _app("trac")


@pytest.fixture(scope="module")
def tiddlywiki_app() -> Iterator[apps.App]:
    yield from _app("tiddlywiki")


@pytest.fixture(scope="module")
def django_app() -> Iterator[apps.App]:
    yield from _app("django")


@pytest.fixture(scope="module")
def docsify_app() -> Iterator[apps.App]:
    yield from _app("docsify")


@pytest.fixture(scope="session")
def conformance_counts() -> dict[str, Counter[str]]:
    return COUNTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per application that ran: the acceptance figures of issue 19."""
    for name, counts in COUNTS.items():
        recorded = counts["recorded matched"]
        total = recorded + counts["recorded wrong"] + counts["recorded miss"]
        terminalreporter.write_line(
            f"conformance {name}: recorded {recorded}/{total} == live; reconstructed: matched "
            f"{counts['reconstructed matched']} / loud misses {counts['reconstructed miss']} / "
            f"silent wrong {counts['reconstructed wrong']}"
        )
