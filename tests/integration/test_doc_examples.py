"""Every example of README.md and docs/**/*.md runs and does what the page says (tests/doc_examples.py).

The selected pages run three at a time in threads (each in its own scratch directory and processes), so
the slowest page, not their sum, sets this module's time.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.doc_examples import REPO, Failure, documented_pages, run_page

PAGES = documented_pages()
PARALLEL_PAGES = 3


@pytest.fixture(scope="module")
def page_runs(request: pytest.FixtureRequest) -> dict[Path, Future[list[Failure]]]:
    selected = [
        item.callspec.params["page"]
        for item in request.session.items
        if item.nodeid.startswith(request.module.__name__.replace(".", "/")) and hasattr(item, "callspec")
    ]
    pool = ThreadPoolExecutor(max_workers=PARALLEL_PAGES)
    request.addfinalizer(lambda: pool.shutdown(wait=True, cancel_futures=True))
    return {page: pool.submit(run_page, page) for page in dict.fromkeys(selected or PAGES)}


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO)) for page in PAGES])
def test_examples_run(page: Path, page_runs: dict[Path, Future[list[Failure]]]) -> None:
    failures = page_runs[page].result()
    assert not failures, "\n".join(str(failure) for failure in failures)
