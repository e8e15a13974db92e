"""The debugger on real demo sessions: the HTML viewer in headless Chromium, the stepper in a real
terminal (tmux), and every ``cdp-session`` debug command's output.

The sessions are captured once per module, through BrowserGym with screenshots and all response bodies
(so the viewer can restyle the captured DOM with the stylesheet the page loaded).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, Page, Request, expect

from cdp_integration import load_session
from cdp_integration.cli import cli
from cdp_integration.demo import DemoSite
from cdp_integration.session import SessionWriter

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def sessions(viewer_sessions: dict[str, Path]) -> dict[str, Path]:
    return viewer_sessions


@pytest.fixture(scope="module")
def review(sessions: dict[str, Path]) -> Path:
    """Sign in (POST 302 + cookie), search, post a review (POST 302), answer: 13 steps."""
    return sessions["demo.search-and-review"]


def cdp_session(*args: str | Path) -> str:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result.stdout


# -- the commands, on a real session ------------------------------------------------------------


def test_steps_table_of_a_demo_episode(review: Path, demo_site: DemoSite) -> None:
    lines = cdp_session("steps", review).splitlines()
    rows = [line for line in lines if re.match(r"^\d+ ", line)]
    assert len(rows) == 13
    assert rows[0].split()[:2] == ["0", "reset"]
    login = rows[4]
    assert f"{demo_site.base_url}/account" in login and "My Account" in login and "302→200" in login
    requests = len(load_session(review).steps[4].network)  # the page's own count (favicon or not)
    assert re.search(rf"302→200\s+{requests}\s+\d+\.\d\s+0\s+-$", login)  # capture ms, reward 0, no faults
    assert requests >= 5  # the sign-in POST, the account page and what it loads
    assert "answer: '$24.00'" in lines


def test_show_views_of_a_demo_step(review: Path, demo_site: DemoSite) -> None:
    text = cdp_session("show", review, "4", "--text").splitlines()
    assert "My Account" in text and not any("<" in line for line in text)
    assert "Username [emma]" in cdp_session("show", review, "2", "--text")  # the filled field
    last = cdp_session("show", review, "-1", "--text")
    assert "Price: $24.00" in last and "Great mug" in last
    cookies = cdp_session("show", review, "4", "--cookies").splitlines()
    assert cookies[1].split()[:4] == ["session", "127.0.0.1", "/", "httpOnly"]
    network = cdp_session("show", review, "4", "--network").splitlines()
    assert re.fullmatch(
        rf"POST\s+302\s+Document\s+\d+ ms\s+{re.escape(demo_site.base_url)}/login", network[1]
    )
    assert network[2].split()[:3] == ["GET", "200", "Document"]
    assert cdp_session("show", review, "4", "--html").startswith("<!DOCTYPE html>")
    summary = cdp_session("show", review, "-1")
    assert "action    send_msg_to_user('$24.00')" in summary and "step      12 of 12" in summary


def test_diff_across_the_sign_in_and_the_review(review: Path, demo_site: DemoSite) -> None:
    base = demo_site.base_url
    sign_in = cdp_session("diff", review, "3", "4")
    assert f"url     {base}/login\n     →  {base}/account" in sign_in
    assert "title   'Customer Login' → 'My Account'" in sign_in
    assert re.search(r"^  \+ session \(127\.0\.0\.1/\) added: \S+$", sign_in, re.M)
    assert re.search(rf"^  4\s+POST\s+302\s+Document\s+\d+ ms\s+{re.escape(base)}/login$", sign_in, re.M)
    assert "\n+My Account\n" in sign_in and "\n-Customer Login\n" in sign_in
    posted = cdp_session("diff", review, "-3", "-2")  # steps 10 -> 11: the review form was submitted
    assert re.search(
        rf"^  11\s+POST\s+302\s+Document\s+\d+ ms\s+{re.escape(base)}/products/5/reviews$", posted, re.M
    )
    assert "\n+Great mug" in posted and "\n-Reviews (1)\n+Reviews (2)\n" in posted


def test_diff_shows_storage_writes(sessions: dict[str, Path], demo_site: DemoSite) -> None:
    out = cdp_session("diff", sessions["demo.feed-and-preferences"], "1", "3")
    origin = demo_site.base_url
    assert f"  + localStorage {origin} theme added: dark" in out
    assert f"  + localStorage {origin} newsletter added: yes" in out
    assert re.search(
        rf"^  \+ sessionStorage {re.escape(origin)} tab \w+ visit_token added: visit-", out, re.M
    )
    assert "requests (" in out and "Preferences" in out


def test_export_wabe_of_a_demo_episode(review: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.search-and-review"
    assert "(12 actions, 13 screenshots)" in cdp_session("export-wabe", review, "-o", out)
    result = orjson.loads((out / "result.json").read_bytes())
    assert result["steps_taken"] == 12 and result["final_result_response"] == "$24.00"
    assert result["action_history"][3] == "[button] Sign In -> CLICK"
    assert result["action_history"][1] == "[textbox] username -> TYPE: emma"
    assert result["action_history"][-1] == "ANSWER: $24.00"
    shots = sorted((out / "trajectory").iterdir())
    assert [p.name for p in shots] == [f"step_{i:03d}.png" for i in range(13)]
    png = shots[4].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and (int.from_bytes(png[16:20]), int.from_bytes(png[20:24])) == (
        1280,
        720,
    )


# -- the stepper, in a real terminal -------------------------------------------------------------


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """tmux on a private socket; the server is killed at the end whatever happened."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (scripts/setup.sh installs it)")
    socket = tmp_path / "tmux.sock"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", str(socket), *args], capture_output=True, text=True, check=False)

    try:
        yield run
    finally:
        run("kill-server")


def test_stepper_in_tmux(
    review: Path, demo_site: DemoSite, tmux: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    command = f"{Path(sys.executable).with_name('cdp-session')} debug {review}"
    started = tmux("new-session", "-d", "-s", "dbg", "-x", "180", "-y", "60", command)
    assert started.returncode == 0, started.stderr

    def screen() -> str:
        return tmux("capture-pane", "-p", "-J", "-t", "dbg", "-S", "-500").stdout

    def send(keys: str, until: str, timeout: float = 20.0) -> str:
        before = screen().count(until)
        tmux("send-keys", "-t", "dbg", "-l", keys)
        tmux("send-keys", "-t", "dbg", "Enter")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = screen()
            if text.count(until) > before:
                return text.rsplit(f"> {keys}\n", 1)[-1]
            time.sleep(0.05)
        pytest.fail(f"no {until!r} after {keys!r}; screen:\n{screen()}")

    base = demo_site.base_url
    deadline = time.monotonic() + 20
    while "[0/12]" not in screen() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "13 steps; h for help, q to quit" in screen() and "step      0 of 12   (reset)" in screen()
    assert "action    goto(" in send("n", "[1/12]")
    shown = send("g 4", "[4/12]")
    assert f"url       {base}/account" in shown and "document  302→200" in shown
    changes = send("d", f"[4/12] {base}/account >")
    assert "step 3 → step 4" in changes and re.search(r"\+ session \(127\.0\.0\.1/\) added:", changes)
    assert "+My Account" in changes
    assert "My Account" in send("text", f"[4/12] {base}/account >")
    assert "POST    302" in send("net", f"[4/12] {base}/account >")
    assert "step      3 of 12" in send("p", "[3/12]")
    answer = send("js document.title", f"[3/12] {base}/login >", timeout=60)
    assert "'Customer Login'" in answer
    assert "step      12 of 12" in send("g -1", "[12/12]")
    tmux("send-keys", "-t", "dbg", "q", "Enter")
    deadline = time.monotonic() + 10
    while tmux("has-session", "-t", "dbg").returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tmux("has-session", "-t", "dbg").returncode != 0, "the stepper did not quit on q"


# -- the HTML viewer, in Chromium ----------------------------------------------------------------


def open_viewer(browser: Browser, html: Path, network: list[str]) -> tuple[Page, float]:
    page = browser.new_page(viewport={"width": 1440, "height": 1000})

    def record(request: Request) -> None:
        if not request.url.startswith(("file:", "data:", "about:")):
            network.append(request.url)

    page.on("request", record)
    page.context.route(re.compile(r"^https?://"), lambda route: route.abort())
    started = time.perf_counter()
    page.goto(html.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return page, time.perf_counter() - started


def test_viewer_steps_through_the_episode_in_chromium(
    review: Path, demo_site: DemoSite, browser: Browser, tmp_path: Path
) -> None:
    base = demo_site.base_url
    html = tmp_path / "episode.html"
    cdp_session("view", review, "-o", html)
    network: list[str] = []
    page, _ = open_viewer(browser, html, network)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        expect(page.locator("#timeline li")).to_have_count(13)
        expect(page.locator("#final-answer")).to_have_text("$24.00")
        expect(page.locator("#timeline li.selected")).to_have_attribute("data-step", "0")

        page.click('#timeline li[data-step="4"]')
        expect(page.locator("#step-url")).to_have_text(f"{base}/account")
        expect(page.locator("#step-target")).to_have_text("[button] Sign In")
        expect(page.locator("#doc-status")).to_have_text("302→200")
        expect(page.locator("#change-url")).to_contain_text(f"{base}/login")
        added = page.locator('#change-cookies tr[data-kind="added"]')
        expect(added).to_have_count(1)
        expect(added).to_contain_text("session")
        first_request = page.locator("#network tbody tr").first
        expect(first_request).to_contain_text("POST")
        expect(first_request).to_contain_text("302")
        expect(first_request).to_contain_text(f"{base}/login")
        expect(page.locator("#text-diff")).to_contain_text("+My Account")
        assert page.get_attribute("#screenshot", "src").startswith("data:image/png;base64,")  # type: ignore[union-attr]

        # the captured DOM: one sandboxed iframe (only the selected step's), scripts and URLs gone
        expect(page.locator("#step iframe")).to_have_count(1)
        frame = page.locator("#dom-frame")
        assert frame.get_attribute("sandbox") == ""
        srcdoc = frame.get_attribute("srcdoc") or ""
        assert "<script" not in srcdoc and "Content-Security-Policy" in srcdoc
        assert not re.search(r'\s(src|href|action)="(?!#|data:)', srcdoc)
        expect(page.frame_locator("#dom-frame").locator("h1")).to_have_text("My Account")
        page.screenshot(path=ARTIFACTS / "viewer-step-4.png")

        page.keyboard.press("ArrowDown")
        expect(page.locator("#timeline li.selected")).to_have_attribute("data-step", "5")
        expect(page.locator("#step-url")).to_have_text(f"{base}/search")
        assert page.evaluate("location.hash") == "#step-5"

        page.click('#timeline li[data-step="10"]')  # the agent clicks "Submit Review" next
        expect(page.locator("#next-target")).to_contain_text("click(")
        outlined = re.search(
            r'\[bid="([^"]+)"\]\{outline', page.locator("#dom-frame").get_attribute("srcdoc") or ""
        )
        assert outlined is not None
        target = page.frame_locator("#dom-frame").locator(f'[bid="{outlined.group(1)}"]')
        expect(target).to_have_text("Submit Review")
        page.click("button[data-mode=text]")
        expect(page.locator("#visible-text")).to_contain_text("Title [Great mug]")
        expect(page.locator("#step iframe")).to_have_count(0)
        page.click("button[data-mode=dom]")

        page.keyboard.press("j")
        expect(page.locator("#timeline li.selected")).to_have_attribute("data-step", "11")
        expect(page.locator("#step-target")).to_have_text("[button] Submit Review")
        expect(page.locator("#text-diff")).to_contain_text("+Great mug")
        expect(page.locator("#network tbody tr").first).to_contain_text(f"{base}/products/5/reviews")
        page.screenshot(path=ARTIFACTS / "viewer-step-11.png")

        page.keyboard.press("End")
        expect(page.locator("#step-action")).to_have_text("send_msg_to_user('$24.00')")
        expect(page.locator("#network")).to_contain_text("No requests.")
        page.keyboard.press("Home")
        expect(page.locator("#changes")).to_contain_text("First step")
    finally:
        page.close()
    assert network == [], f"the viewer tried to fetch {network}"


GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "v2"


def test_viewer_shows_why_a_failing_demo_episode_scored_0(browser: Browser, tmp_path: Path) -> None:
    """The Evaluation panel of the final state: the failed checks in red with expected and found, the
    failure class, and the page that answered one click away (the evaluator's own captured page)."""
    html = tmp_path / "failure.html"
    cdp_session("view", GOLDEN / "10024.failure.session.jsonl.gz", "-o", html)
    network: list[str] = []
    page, _ = open_viewer(browser, html, network)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        expect(page.locator("#header-why")).to_have_text("why 0: state_not_saved")
        page.keyboard.press("End")
        panel = page.locator("#evaluation")
        expect(panel.locator("h3")).to_contain_text("Evaluation of the final state")
        expect(panel.locator("h3")).to_contain_text("2 of 2 checks failed")
        expect(page.locator("#attribution")).to_contain_text("state_not_saved")
        expect(panel.locator("#check-timeline tr.timeline-row")).to_have_count(2)  # each check, each step
        failed = panel.locator("tr.check.fail")
        expect(failed).to_have_count(2)
        first = failed.first
        expect(first.locator(".verdict")).to_have_text("FAIL")
        expect(first).to_contain_text("program_html[0] exact_match")
        expect(first.locator(".expected")).to_have_text('"$39.99"')
        expect(first.locator(".found")).to_have_text('"$45.50"')
        assert "rgb(254, 226, 226)" in first.locator("td").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        first.locator(".page-link").click()
        answered = page.frame_locator("#answering-frame")
        expect(answered.locator("body")).to_contain_text("Price: $45.50")
        expect(page.locator("#answering-page h3")).to_contain_text("/products/3 at step 3")
        page.locator("#evaluation").scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / "viewer-evaluation.png")
        first.locator(".step-link").click()
        expect(page.locator("#timeline li.selected")).to_have_attribute("data-step", "3")
    finally:
        page.close()
    assert network == [], f"the viewer tried to fetch {network}"


def test_the_filmstrip_draws_each_steps_page_and_steps_through_it(browser: Browser, tmp_path: Path) -> None:
    """Without screenshots (the logger's default), each step's thumbnail is its captured page drawn
    small, sandboxed like the main view; a click or the keyboard moves through the steps, and the
    page opens at its own size."""
    html = tmp_path / "filmstrip.html"
    session = GOLDEN / "10024.failure.session.jsonl.gz"
    steps = len(load_session(session).steps)
    cdp_session("view", session, "-o", html)
    network: list[str] = []
    page, _ = open_viewer(browser, html, network)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        thumbs = page.locator("#filmstrip .thumb")
        expect(thumbs).to_have_count(steps)
        expect(thumbs.first).to_have_class(re.compile("selected"))
        expect(page.locator("#screenshot")).to_have_count(0)  # no screenshot pane without one
        expect(page.locator("#screenshot-missing")).to_be_visible()
        third = page.locator('#filmstrip .thumb[data-step="3"]')
        frame = third.locator("iframe")
        expect(frame).to_have_count(1)
        assert frame.get_attribute("sandbox") == ""
        srcdoc = frame.get_attribute("srcdoc") or ""
        assert "<script" not in srcdoc and "Content-Security-Policy" in srcdoc
        drawn = page.frame_locator('#filmstrip .thumb[data-step="3"] iframe').locator("h1")
        expect(drawn).to_have_text("Edit Bluetooth Portable Speaker")
        third.click()
        expect(page.frame_locator("#dom-frame").locator("h1")).to_have_text(drawn.inner_text())
        expect(page.locator("#timeline li.selected")).to_have_attribute("data-step", "3")
        expect(third).to_have_attribute("aria-selected", "true")
        page.keyboard.press("ArrowLeft")
        expect(page.locator('#filmstrip .thumb[data-step="2"]')).to_have_class(re.compile("selected"))
        expect(third).not_to_have_class(re.compile("selected"))
        page.keyboard.press("ArrowRight")
        scaled = page.locator("#dom-frame").evaluate("e => e.style.transform")
        page.keyboard.press("f")
        expect(page.locator("#full-size")).to_have_class(re.compile("on"))
        expect(page.locator("#dom-frame")).to_have_attribute("style", re.compile(r"scale\(1\)"))
        assert scaled != "scale(1)", scaled  # it was scaled to fit before
        page.screenshot(path=ARTIFACTS / "viewer-filmstrip.png")
        page.locator("#full-size").click()
        expect(page.locator("#full-size")).not_to_have_class(re.compile("on"))
    finally:
        page.close()
    assert network == [], f"the viewer tried to fetch {network}"


def test_a_30_step_episode_opens_and_reaches_its_last_step(
    sessions: dict[str, Path], browser: Browser, tmp_path: Path
) -> None:
    """30 real captured steps (the two demo episodes' steps, repeated) with screenshots and DOMs.

    How fast it opens is printed, not asserted: a timing is a benchmark, not a test."""
    review, feed = (
        load_session(sessions[name]) for name in ("demo.search-and-review", "demo.feed-and-preferences")
    )
    pool = list(review.steps) + list(feed.steps)
    path = tmp_path / "long.session.jsonl.gz"
    writer = SessionWriter(tmp_path / "long.partial", review.header)
    for index in range(30):
        writer.write_step(pool[index % len(pool)].model_copy(update={"index": index}))
    assert review.end is not None
    writer.finish(review.end, path)
    html = tmp_path / "long.html"
    started = time.perf_counter()
    cdp_session("view", path, "-o", html)
    written = time.perf_counter() - started
    network: list[str] = []
    page, opened = open_viewer(browser, html, network)
    try:
        expect(page.locator("#timeline li")).to_have_count(30)
        page.keyboard.press("End")
        expect(page.locator("#timeline li.selected")).to_have_attribute("data-step", "29")
        expect(page.locator("#step iframe")).to_have_count(1)
        # the filmstrip draws only what is in view: not 30 pages at once
        expect(page.locator("#filmstrip .thumb")).to_have_count(30)
        expect(page.locator('#filmstrip .thumb[data-step="29"]')).to_have_class(re.compile("selected"))
        expect(page.locator('#filmstrip .thumb[data-step="29"] .shot img')).to_have_count(1)
        drawn = page.locator("#filmstrip .shot[data-drawn]").count()
        assert 0 < drawn < 30, drawn
    finally:
        page.close()
    size = html.stat().st_size
    print(f"\n30-step viewer: {size / 1024:,.0f} KiB written in {written:.2f} s, opened in {opened:.2f} s")
    assert network == []
