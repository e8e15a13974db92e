"""A real Playwright trace whose last action's snapshots precede its navigation: the import scores as
live with a later snapshot of the new page, and loudly without one, never the page before the click.

The order is forced, not hoped for: the results page's request is held by the context's router until
the click has returned (its snapshots are in the trace by then), so the navigation commits after
them; ``wait_for_load_state`` follows (Playwright records no snapshot for it), then the evaluator's
``evaluate`` on the page, whose snapshot is the later one. Variants of the same recording: that
snapshot removed; the network log as Playwright before 1.63 writes it (no ``_resourceType``); the
click's last snapshot received after the navigation finished (a snapshot that raced it). And a page
that goes back to ``about:blank``, the URL it had before its load: a later snapshot, not a race.
"""

from __future__ import annotations

import contextlib
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.imports.common import write_episode
from cdp_integration.imports.playwright_trace import import_trace
from cdp_integration.replay import replay_step
from cdp_integration.session.store import Session, load_session

HOME = "http://shop.test/"
SEARCH = "http://shop.test/search?q=ocean&sort=year"
FORM = (
    "<title>Shop</title><form action='/search'><input name=q id=q><select name=sort id=sort>"
    "<option value=relevance>Relevance</option><option value=year>Year</option></select>"
    "<button id=go>Go</button></form>"
)
RESULTS = "Results for ocean, sorted by year"
READ = "() => document.querySelector('h1').textContent"

Events = list[dict[str, Any]]


@contextlib.contextmanager
def _shared_playwright() -> Iterator[Any]:
    """The process's one sync Playwright: BrowserGym's (a second ``sync_playwright()`` in the same
    thread fails)."""
    import browsergym.core

    yield browsergym.core._get_global_playwright()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The trace, and what the live page answered at its end."""
    from playwright.sync_api import Route

    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable

    held: list[Route] = []
    clicked: list[bool] = []

    def results(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html", body=f"<title>Results</title><h1>{RESULTS}</h1>")

    def serve(route: Route) -> None:
        if not route.request.url.startswith(SEARCH):
            route.fulfill(status=200, content_type="text/html", body=FORM)
        elif clicked:
            results(route)
        else:
            held.append(route)  # answered once the click returned: it commits after the click's snapshots

    path = tmp_path_factory.mktemp("trace") / "7.zip"
    with _shared_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            context.route("**/*", serve)
            context.tracing.start(snapshots=True, screenshots=False)
            page = context.new_page()
            page.goto(HOME)
            page.fill("#q", "ocean")
            page.select_option("#sort", "year")
            page.click("#go", no_wait_after=True)
            clicked.append(True)
            for route in held:
                results(route)
            page.wait_for_url(SEARCH)
            page.wait_for_load_state()
            live = {"url": page.url, "heading": page.evaluate(READ)}  # the evaluator's read: a later snapshot
            context.tracing.stop(path=str(path))
        finally:
            browser.close()
    return path, live


def _rewrite(
    source: Path,
    target: Path,
    *,
    trace: Callable[[Events], Events] = list,
    network: Callable[[Events], Events] = list,
) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            edit = (
                trace
                if item.filename == "trace.trace"
                else network
                if item.filename == "trace.network"
                else None
            )
            if edit is not None:
                events = edit([json.loads(line) for line in data.splitlines() if line.strip()])
                data = "\n".join(json.dumps(e) for e in events).encode() + b"\n"
            new.writestr(item, data)
    return target


def _call(events: Events, method: str) -> str:
    return next(str(e["callId"]) for e in events if e.get("type") == "before" and e.get("method") == method)


def _snapshots(events: Events, call: str) -> list[dict[str, Any]]:
    return [
        e["snapshot"]
        for e in events
        if e.get("type") == "frame-snapshot" and e["snapshot"].get("callId") == call
    ]


def _without_later_snapshot(events: Events) -> Events:
    read = _call(events, "evaluateExpression")
    return [
        e for e in events if not (e.get("type") == "frame-snapshot" and e["snapshot"].get("callId") == read)
    ]


def _as_before_1_63(entries: Events) -> Events:
    for entry in entries:
        entry["snapshot"].pop("_resourceType", None)
    return entries


def _search_load(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        entries = [
            json.loads(line)["snapshot"]
            for line in archive.read("trace.network").splitlines()
            if line.strip()
        ]
    return next(e for e in entries if e["request"]["url"] == SEARCH)


def _session(path: Path) -> Session:
    return load_session(write_episode(import_trace(path), "playwright-trace", path.parent / "out"))


URL_MATCH = {"eval_types": ["url_match"], "reference_url": SEARCH, "url_note": "GOLD in PRED"}
ON_PAGE = {
    "eval_types": ["program_html"],
    "program_html": [{"url": "last", "locator": "", "required_contents": {"must_include": [RESULTS]}}],
}


def _score(session: Session, evaluation: dict[str, Any]) -> float | None:
    config = {
        "task_id": 7,
        "sites": ["shopping"],
        "intent": "search for ocean, sort by year, click Go",
        "eval": {"reference_answers": None, "reference_url": "", "program_html": [], **evaluation},
    }
    return evaluate_session(session, config, per_step=False).score


def test_the_order_is_forced(recorded: tuple[Path, dict[str, str]]) -> None:
    path, live = recorded
    assert live == {"url": SEARCH, "heading": RESULTS}
    with zipfile.ZipFile(path) as archive:
        events = [json.loads(line) for line in archive.read("trace.trace").splitlines() if line.strip()]
    click = _snapshots(events, _call(events, "click"))
    assert click and all(s["frameUrl"] == HOME for s in click)
    # every snapshot of the click was taken before the results page was even requested
    assert max(s["timestamp"] for s in click) < _search_load(path)["_monotonicTime"]
    assert [s["frameUrl"] for s in _snapshots(events, _call(events, "evaluateExpression"))][-1] == SEARCH


@pytest.mark.parametrize("network", ["as recorded", "before 1.63"])
def test_the_later_snapshot_is_the_end_state(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path, network: str
) -> None:
    path = _rewrite(
        recorded[0], tmp_path / "7.zip", network=_as_before_1_63 if network == "before 1.63" else list
    )
    session = _session(path)
    assert session.final_step.url == SEARCH and RESULTS in str(session.final_step.html)
    assert _score(session, URL_MATCH) == 1.0 and _score(session, ON_PAGE) == 1.0  # live: both 1.0


@pytest.mark.parametrize("network", ["as recorded", "before 1.63", "raced"])
def test_without_it_the_page_is_a_loud_miss_never_the_form(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path, network: str
) -> None:
    """No snapshot of the results page: its URL answers (recorded), its DOM is a loud miss. ``raced``:
    the click's last snapshot (of the form) received after the results had loaded."""
    load = _search_load(recorded[0])

    def trace(events: Events) -> Events:
        events = _without_later_snapshot(events)
        if network == "raced":
            _snapshots(events, _call(events, "click"))[-1]["timestamp"] = (
                load["_monotonicTime"] + load["time"] + 1
            )
        return events

    edit = list if network == "as recorded" else _as_before_1_63
    session = _session(_rewrite(recorded[0], tmp_path / "7.zip", trace=trace, network=edit))
    assert session.final_step.url == SEARCH and session.final_step.html is None
    assert _score(session, URL_MATCH) == 1.0
    with pytest.raises(
        ReplayMissError, match="lacks the DOM of a page loaded after the trace's last snapshot"
    ):
        _score(session, ON_PAGE)


@pytest.fixture(scope="module")
def back_to_blank(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A trace whose page, opened blank, loads the shop and goes back to ``about:blank``; and the live
    page's URL at its end."""
    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable

    path = tmp_path_factory.mktemp("trace-back") / "8.zip"
    with _shared_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            context.route(
                "**/*", lambda route: route.fulfill(status=200, content_type="text/html", body=FORM)
            )
            context.tracing.start(snapshots=True, screenshots=False)
            page = context.new_page()
            page.goto(HOME + "#/start")  # requested without its fragment, shown with it
            page.reload()
            page.fill("#q", "ocean")
            page.go_back()
            live = page.url
            context.tracing.stop(path=str(path))
        finally:
            browser.close()
    return path, live


def test_a_page_gone_back_to_about_blank_is_scored_there(back_to_blank: tuple[Path, str]) -> None:
    """Its last snapshot shows ``about:blank``, the URL it had before the shop's load: a snapshot taken
    after that load was shown is the page going back, not one that raced the load."""
    path, live = back_to_blank
    assert live == "about:blank"
    session = _session(path)
    reloaded = next(step for step in session.steps if step.action and step.action.startswith("reload"))
    assert reloaded.url == HOME + "#/start" and reloaded.html is not None  # the reload's snapshot shows it
    assert session.final_step.url == "about:blank"
    home = {"eval_types": ["url_match"], "reference_url": HOME, "url_note": "GOLD in PRED"}
    assert _score(session, home) == 0.0  # live: page.url is about:blank


ROUTER = (
    "<title>Router</title><input id=note><button id=go>Go</button><script>"
    "let n = 0; document.getElementById('go').onclick = () => "
    "setTimeout(() => { location.hash = '#/view' + (++n); }, 50);</script>"
)


@pytest.fixture(scope="module")
def late_router(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A trace of a page whose router sets the URL's hash 50 ms after a click (after the click's
    snapshots): once mid-trace, where a later call's snapshot shows it, and once at the end, where
    no snapshot does; and the live page's URL at its end."""
    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable

    path = tmp_path_factory.mktemp("trace-router") / "9.zip"
    with _shared_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            context.route(
                "**/*", lambda route: route.fulfill(status=200, content_type="text/html", body=ROUTER)
            )
            context.tracing.start(snapshots=True, screenshots=False)
            page = context.new_page()
            page.goto(HOME)
            page.click("#go")
            page.wait_for_url("**#/view1")
            page.fill("#note", "seen")  # its snapshots show #/view1: the URL changed between calls
            page.click("#go")
            page.wait_for_url("**#/view2")
            live = page.url
            context.tracing.stop(path=str(path))
        finally:
            browser.close()
    return path, live


def test_a_page_that_changes_its_url_by_itself_is_loud_at_the_trace_end(
    late_router: tuple[Path, str],
) -> None:
    """Formats after 4 record no same-document navigation: the last click's snapshots show
    ``#/view1`` where the live page is at ``#/view2``. The trace shows the page changing its URL by
    itself earlier, so its final URL and DOM are a loud miss, never ``#/view1``."""
    path, live = late_router
    assert live == HOME + "#/view2"
    with zipfile.ZipFile(path) as archive:
        events = [json.loads(line) for line in archive.read("trace.trace").splitlines() if line.strip()]
    clicks = [e["callId"] for e in events if e.get("type") == "before" and e.get("method") == "click"]
    assert {s["frameUrl"] for s in _snapshots(events, clicks[-1])} == {HOME + "#/view1"}  # the order held
    session = _session(path)
    assert session.final_step.url == HOME + "#/view1" and session.final_step.html is None
    url = {"eval_types": ["url_match"], "reference_url": HOME + "#/view2", "url_note": "EXACT"}
    with pytest.raises(ReplayMissError, match="url_match needs the final URL"):
        _score(session, url)
    with pytest.raises(ReplayMissError, match="changes its URL by itself"):
        _score(session, {**ON_PAGE, "program_html": [{**ON_PAGE["program_html"][0], "locator": ""}]})
    with pytest.raises(ReplayMissError, match="changes its URL by itself"):
        replay_step(session, -1).title()  # nor its title
