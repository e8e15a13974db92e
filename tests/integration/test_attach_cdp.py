"""``attach_to_cdp``: capture a Chromium someone else drives, found only by its DevTools endpoint.

Chromium runs as a subprocess with ``--remote-debugging-port=0`` (its port read from
``DevToolsActivePort``); a separate Playwright client (``driver``) plays the agent over CDP. The
logger must follow every tab of every context (existing, new, other contexts), record the wire
headers and a new tab's first request, record faults without raising them, leave a readable
``.partial`` when its process is SIGKILLed, and leave the browser running when it detaches.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright

from cdp_integration import CDPSessionLogger, load_session
from cdp_integration.capture.cdp_attach import ChromiumProcess
from cdp_integration.demo import DemoSite
from cdp_integration.errors import CaptureError
from cdp_integration.session.models import NetworkExchange, Step

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chromium() -> Iterator[ChromiumProcess]:
    with ChromiumProcess() as process:
        yield process
    assert not process.running()


@pytest.fixture(scope="module")
def driver(playwright: Playwright, chromium: ChromiumProcess) -> Iterator[Browser]:
    """The "agent": another CDP client of the same browser."""
    browser = playwright.chromium.connect_over_cdp(chromium.endpoint)
    yield browser
    with contextlib.suppress(Exception):
        browser.close()


@pytest.fixture
def tab(driver: Browser) -> Iterator[Page]:
    """The browser's existing first tab, left with only itself open after the test."""
    (context,) = driver.contexts
    page = context.pages[0]
    yield page
    for context in driver.contexts:
        for other in context.pages:
            if other is not page:
                with contextlib.suppress(Exception):
                    other.close()


def documents(step: Step) -> list[NetworkExchange]:
    return [e for e in step.network if e.request.resource_type == "Document" and e.origin == "agent"]


def test_follows_existing_and_new_tabs_of_every_context_with_wire_headers(
    chromium: ChromiumProcess, driver: Browser, tab: Page, demo_site: DemoSite, tmp_path: Path
) -> None:
    base = demo_site.base_url
    tab.goto(f"{base}/links")
    logger = CDPSessionLogger(tmp_path, instance_id="tabs")
    logger.attach_to_cdp(chromium.endpoint)
    try:
        first = logger.capture_state_snapshot("attach")
        tab.goto(f"{base}/search?q=mug")
        second = logger.capture_state_snapshot("search")
        with tab.context.expect_page() as opened:
            tab.goto(f"{base}/links")
            tab.click("#open-help")
        opened.value.wait_for_load_state()
        other_context = driver.new_context()
        isolated = other_context.new_page()
        isolated.goto(f"{base}/products/3")
        third = logger.capture_state_snapshot("tabs")
        path = logger.save_session()
    finally:
        logger.detach()
    assert first is not None and second is not None and third is not None
    assert [t.url for t in first.tabs] == [f"{base}/links"]
    assert first.tabs[0].html and "open-help" in first.tabs[0].html

    (search,) = documents(second)
    headers = search.request.headers
    assert search.request.headers_source == "wire"
    assert headers["accept"].startswith("text/html")
    assert (headers["sec-fetch-mode"], headers["sec-fetch-dest"]) == ("navigate", "document")

    assert sorted(t.url for t in third.tabs) == sorted(
        [f"{base}/links", f"{base}/help", f"{base}/products/3"]
    )
    help_tab = next(t for t in third.tabs if t.url.endswith("/help"))
    urls = {e.request.url: e for e in documents(third)}
    assert set(urls) == {f"{base}/links", f"{base}/help", f"{base}/products/3"}
    assert urls[f"{base}/help"].tab_id == help_tab.tab_id  # the new tab's first request
    assert urls[f"{base}/help"].request.headers["accept"].startswith("text/html")
    assert urls[f"{base}/products/3"].request.headers["sec-fetch-mode"] == "navigate"
    session = load_session(path)
    assert session.complete and len(session.steps) == 3
    assert session.header.browser_version and "Chrome" in session.header.browser_version
    other_context.close()


def test_detach_leaves_the_browser_running(
    chromium: ChromiumProcess, driver: Browser, tab: Page, demo_site: DemoSite, tmp_path: Path
) -> None:
    tab.goto(f"{demo_site.base_url}/")
    logger = CDPSessionLogger(tmp_path)
    logger.attach_to_cdp(chromium.endpoint)
    logger.capture_state_snapshot("one")
    logger.detach()
    assert chromium.running()
    assert not tab.is_closed() and tab.evaluate("1 + 1") == 2
    tab.goto(f"{demo_site.base_url}/search?q=bottle")
    assert tab.url.endswith("/search?q=bottle")
    logger.save_session("after-detach")  # what was captured is still saved


def test_usable_from_inside_a_running_asyncio_loop(
    chromium: ChromiumProcess, tab: Page, demo_site: DemoSite, tmp_path: Path
) -> None:
    """Agents built on asyncio call the logger from their loop; Playwright's sync API alone refuses."""
    tab.goto(f"{demo_site.base_url}/products/2")

    async def agent() -> Path:
        logger = CDPSessionLogger(tmp_path, instance_id="in-loop")
        logger.attach_to_cdp(chromium.endpoint)
        try:
            logger.capture_state_snapshot("in-loop")
            await asyncio.to_thread(logger.capture_state_snapshot, "from-a-worker-thread")
            return logger.save_session()
        finally:
            logger.detach()

    # In a thread of its own: this test thread is already inside the driver's Playwright loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        session = load_session(pool.submit(asyncio.run, agent()).result(timeout=120))
    assert [s.url for s in session.steps] == [f"{demo_site.base_url}/products/2"] * 2
    assert not any(s.faults for s in session.steps)


def test_faults_are_recorded_not_raised(
    chromium: ChromiumProcess, driver: Browser, tab: Page, demo_site: DemoSite, tmp_path: Path
) -> None:
    with pytest.raises(CaptureError):
        CDPSessionLogger(tmp_path).attach_to_cdp("127.0.0.1:9222")  # bad input: no scheme

    nobody = CDPSessionLogger(tmp_path, instance_id="nobody")
    nobody.attach_to_cdp("http://127.0.0.1:9", timeout_ms=2_000)  # nothing listens there
    step = nobody.capture_state_snapshot("orphan")
    assert step is not None and [f.stage for f in step.faults] == ["attach"]
    assert load_session(nobody.save_session()).complete

    tab.goto(f"{demo_site.base_url}/")
    hung = tab.context.new_page()
    hung.goto(f"{demo_site.base_url}/help")
    logger = CDPSessionLogger(tmp_path, instance_id="hung", cdp_timeout_ms=1_500)
    logger.attach_to_cdp(chromium.endpoint)
    try:
        hung.evaluate("setTimeout(() => { while (true) {} }, 0)")  # the renderer stops answering
        step = logger.capture_state_snapshot("hung")
        path = logger.save_session()
    finally:
        logger.detach()
        with contextlib.suppress(Exception):
            hung.close(run_before_unload=False)
    assert step is not None
    assert any(f.error_type == "TimeoutError" for f in step.faults)
    assert any(t.url == f"{demo_site.base_url}/" and t.html for t in step.tabs)  # the healthy tab
    assert load_session(path).complete
    assert chromium.running()


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from cdp_integration import CDPSessionLogger
    endpoint, out = sys.argv[1], Path(sys.argv[2])
    logger = CDPSessionLogger(out, instance_id="killed")
    logger.attach_to_cdp(endpoint)
    logger.capture_state_snapshot("one")
    logger.capture_state_snapshot("two")
    print(logger.partial_path, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_sigkill_of_the_capturing_process_leaves_a_readable_partial(
    chromium: ChromiumProcess, tab: Page, demo_site: DemoSite, tmp_path: Path
) -> None:
    tab.goto(f"{demo_site.base_url}/products/4")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, chromium.endpoint, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):  # its Playwright driver, left behind
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    session = load_session(Path(out.strip()))
    assert not session.complete and len(session.steps) == 2
    assert session.steps[1].url == f"{demo_site.base_url}/products/4"
    assert chromium.running() and tab.evaluate("document.title")
