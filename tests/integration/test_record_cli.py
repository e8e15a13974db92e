"""``cdp-session record --cdp``: a recorder process captures a Chromium this test drives over CDP.

The recorded session's HAR entries must be what WebArena-Verified scores: the demo NAVIGATE task
(20002, "go to the keyboard's product page") passes on the recorded trajectory, fails on one that
stops on the search results.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright

from cdp_integration import load_session
from cdp_integration.capture.cdp_attach import ChromiumProcess
from cdp_integration.demo import DemoSite
from cdp_integration.evaluate.verified import verified_score
from cdp_integration.har.export import session_har_entries

pytestmark = pytest.mark.integration

RECORD = [sys.executable, "-c", "from cdp_integration.cli import main; main()", "record"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[ChromiumProcess]:
    with ChromiumProcess() as process:
        yield process


@pytest.fixture(scope="module")
def driver(playwright: Playwright, chromium: ChromiumProcess) -> Iterator[Browser]:
    browser = playwright.chromium.connect_over_cdp(chromium.endpoint)
    yield browser
    with contextlib.suppress(Exception):
        browser.close()


def _record(chromium: ChromiumProcess, out: Path, name: str, base: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            *RECORD,
            "--cdp",
            chromium.endpoint,
            "-o",
            str(out),
            "--every-navigation",
            "--instance-id",
            name,
            "--task-id",
            "20002",
            "--site-url",
            f"shopping={base}",
            "--answer",
            "Here it is.",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until the first step is captured
        if line.startswith("step 0:"):
            break
    return proc


def _wait_for_step(proc: subprocess.Popen[str], url: str) -> None:
    """Read the recorder's progress lines until it reports a step on ``url``."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("step ") and line.rstrip().endswith(f": {url}"):
            return
    raise AssertionError(f"the recorder ended before a step on {url}")


def test_recorded_session_is_scored_by_webarena_verified(
    chromium: ChromiumProcess, driver: Browser, demo_site: DemoSite, tmp_path: Path
) -> None:
    base = demo_site.base_url
    page = driver.contexts[0].pages[0]
    page.goto("about:blank")
    proc = _record(chromium, tmp_path, "recorded", base)
    expected = [f"{base}/", f"{base}/search?q=keyboard", f"{base}/products/11"]
    try:
        # At a person's pace: each page is snapshotted before the next navigation starts.
        page.goto(expected[0])
        _wait_for_step(proc, expected[0])
        page.goto(expected[1])
        _wait_for_step(proc, expected[1])
        page.click("#results .product-link")
        page.wait_for_url(expected[2])
        _wait_for_step(proc, expected[2])
        assert proc.stdin is not None
        proc.stdin.write("\n")  # Enter: one more step
        proc.stdin.flush()
        _wait_for_step(proc, expected[2])
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0
    session = load_session(Path(out.strip()))
    assert [(s.trigger, s.url) for s in session.steps] == [
        ("start", "about:blank"),
        *(("navigation", url) for url in expected),
        ("enter", expected[2]),
    ]
    entries = session_har_entries(session)
    documents = [e for e in entries if e["request"]["url"] in expected]
    assert [e["request"]["url"] for e in documents] == expected
    for entry in documents:  # the wire headers WebArena-Verified tells navigations by
        headers = {h["name"].lower(): h["value"] for h in entry["request"]["headers"]}
        assert (headers["sec-fetch-mode"], headers["sec-fetch-dest"]) == ("navigate", "document")
        assert headers["accept"].startswith("text/html")
    result = verified_score(session)
    assert result.error is None, result.error
    assert result.score == 1.0
    (event,) = result.details["evaluators_results"][1]["actual_normalized"]
    assert event["url"]["base_url"] == "__SHOPPING__/products/11"
    assert chromium.running() and not page.is_closed()


def test_bad_endpoint_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for endpoint in ("localhost:9222", "http://127.0.0.1:9"):
        proc = subprocess.run(
            [*RECORD, "--cdp", endpoint, "-o", str(tmp_path)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,  # starting the CLI and Playwright's driver is slow on a loaded machine
        )
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1].startswith("cdp-session: error:")
        assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []
