"""A trace is scored on the state it ends in: navigations after the last action's snapshot, later
snapshots, tabs opened after it; where no snapshot shows the end, a question about it is loud.

The traces here are event lists in the shapes Playwright 1.32 (format 4: protocol events, among them
each frame's ``Frame.navigated``) and 1.45 (format 7: no navigation events, network entries without
``_resourceType``) write, upgraded by ``trace_formats`` as every import is; the same order recorded
by a real Playwright is in ``tests/integration/test_trace_end.py``. Scoring runs on the replay mocks.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.imports.common import write_episode
from cdp_integration.imports.playwright_trace import import_trace
from cdp_integration.session.store import Session, load_session

P, POPUP = "page@agent", "page@popup"
MAIN, CHILD = "frame@main", "frame@child"
HOME = "http://shop.test/"
SEARCH = "http://shop.test/search?q=ocean&sort=year"
RESULTS = "Ocean, sorted by year"


def _html(title: str, heading: str) -> list[Any]:
    return ["HTML", {}, ["HEAD", {}, ["TITLE", {}, title]], ["BODY", {}, ["H1", {}, heading]]]


HOME_HTML = _html("Shop", "Search the shop")
SEARCH_HTML = _html("Results", RESULTS)


class Trace:
    """Events of one browser context in a format's shape, and its network log, written as a zip."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.events: list[dict[str, Any]] = [
            {"type": "context-options", "version": version, "browserName": "chromium", "wallTime": 1_000_000}
            | ({"monotonicTime": 0.0} if version >= 7 else {})
        ]
        self.network: list[dict[str, Any]] = []
        self.calls = 0

    def call(self, method: str, at: float, page: str = P, **params: Any) -> str:
        self.calls += 1
        call = f"call@{self.calls}"
        self.events.append(
            {"type": "before", "callId": call, "startTime": at, "wallTime": 1_000_000 + at, "apiName": method,
             "class": "Frame", "method": method, "params": params, "pageId": page}
        )  # fmt: skip
        return call

    def after(self, call: str, at: float) -> None:
        self.events.append({"type": "after", "callId": call, "endTime": at})

    def snapshot(self, call: str, phase: str, url: str, html: list[Any], at: float, page: str = P) -> None:
        self.events.append(
            {"type": "frame-snapshot", "snapshot": {
                "callId": call, "snapshotName": f"{phase}@{call}", "pageId": page,
                "frameId": MAIN if page == P else f"frame@{page}", "frameUrl": url, "isMainFrame": True,
                "html": html, "doctype": "html", "timestamp": at, "resourceOverrides": []}}
        )  # fmt: skip

    def page(self, page: str, at: float, frame: str) -> None:
        """A page opened: format 4's protocol events (later formats rebuild it from the first call)."""
        if self.version == 4:
            self.events += [
                {"type": "event", "class": "Frame", "method": "__create__", "time": at,
                 "params": {"type": "Frame", "guid": frame, "initializer": {"url": "about:blank"}}},
                {"type": "event", "class": "Page", "method": "__create__", "time": at,
                 "params": {"type": "Page", "guid": page, "initializer": {"mainFrame": {"guid": frame}}}},
                {"type": "event", "class": "BrowserContext", "method": "page", "time": at,
                 "params": {"page": {"guid": page}}},
            ]  # fmt: skip

    def load(
        self, url: str, start: float, wait: float, total: float, frame: str = MAIN, page: str = P
    ) -> None:
        """A navigation request: in the network log (no ``_resourceType``, as before format 9) and, in
        format 4, as a ``Request`` the navigation names."""
        headers = [
            {"name": "Accept", "value": "text/html"},
            {"name": "Upgrade-Insecure-Requests", "value": "1"},
        ]
        self.network.append(
            {"type": "resource-snapshot", "snapshot": {
                "pageref": page, "_frameref": frame, "_monotonicTime": start, "time": total,
                "startedDateTime": "2026-01-01T00:00:00Z",
                "timings": {"dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": wait, "receive": total - wait},
                "request": {"method": "GET", "url": url, "headers": headers},
                "response": {"status": 200, "statusText": "OK",
                             "headers": [{"name": "Content-Type", "value": "text/html"}],
                             "content": {"size": 0, "mimeType": "text/html"}}}}
        )  # fmt: skip
        if self.version == 4:
            self.events.append(
                {"type": "event", "class": "Request", "method": "__create__", "time": start,
                 "params": {"type": "Request", "guid": f"request@{len(self.network)}",
                            "initializer": {"frame": {"guid": frame}, "url": url, "resourceType": "document"}}}
            )  # fmt: skip

    def navigated(self, url: str, at: float, page: str = P, new_document: bool = True) -> None:
        """Format 4's commit event (later formats write none)."""
        if self.version == 4:
            params: dict[str, Any] = {"url": url, "name": ""}
            if new_document:
                params["newDocument"] = {"request": {"guid": f"request@{len(self.network)}"}}
            self.events.append(
                {"type": "event", "class": "Frame", "method": "navigated", "params": params, "time": at,
                 "pageId": page}
            )  # fmt: skip

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("trace.trace", "\n".join(json.dumps(e) for e in self.events) + "\n")
            archive.writestr("trace.network", "\n".join(json.dumps(e) for e in self.network) + "\n")
        return path


def _search_then_go(version: int, *, later_snapshot: bool, raced: bool = False) -> Trace:
    """Open the shop, click Go: the click's after-snapshot is taken (at 151) before its navigation to
    the results commits (at 160); with ``later_snapshot`` a later read of the page (the evaluator's
    ``evaluate``) snapshots the results. ``raced``: the click's after-snapshot, of the old page, is
    written after the commit (it was taken before it, received after)."""
    trace = Trace(version)
    trace.page(P, 1, MAIN)
    goto = trace.call("goto", 10, url=HOME)
    trace.load(HOME, 11, 5, 8)
    trace.navigated(HOME, 17)
    trace.after(goto, 20)
    trace.snapshot(goto, "after", HOME, HOME_HTML, 21)
    click = trace.call("click", 40, selector="#go")
    trace.snapshot(click, "before", HOME, HOME_HTML, 41)
    trace.load(SEARCH, 145, 14, 20)
    trace.after(click, 150)
    if raced:
        trace.navigated(SEARCH, 160)
        trace.snapshot(click, "after", HOME, [[1, 6]], 170)  # the old page, received after the commit
    else:
        trace.snapshot(click, "after", HOME, [[1, 6]], 151)
        trace.navigated(SEARCH, 160)
    trace.call("waitForEventInfo", 162, info={"phase": "before"})
    if later_snapshot:
        read = trace.call("evaluateExpression", 200, expression="() => document.title")
        trace.snapshot(read, "before", SEARCH, SEARCH_HTML, 201)
        trace.after(read, 202)
        trace.snapshot(read, "after", SEARCH, [[1, 6]], 203)
    return trace


def _session(trace: Trace, tmp_path: Path) -> Session:
    episode = import_trace(trace.write(tmp_path / "7.zip"))
    return load_session(write_episode(episode, "playwright-trace", tmp_path / "out"))


def _config(*evaluations: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {
        "eval_types": [],
        "reference_answers": None,
        "reference_url": "",
        "program_html": [],
    }
    for evaluation in evaluations:
        merged["eval_types"] += evaluation["eval_types"]
        merged.update({k: v for k, v in evaluation.items() if k != "eval_types"})
    return {"task_id": 7, "sites": ["shopping"], "intent": "search, sort by year, go", "eval": merged}


URL_MATCH = {"eval_types": ["url_match"], "reference_url": SEARCH, "url_note": "GOLD in PRED"}
ON_PAGE = {
    "eval_types": ["program_html"],
    "program_html": [
        {
            "url": "last",
            "locator": "document.body.outerText",
            "required_contents": {"must_include": [RESULTS]},
        }
    ],
}


def _score(session: Session, *evaluations: dict[str, Any]) -> float | None:
    return evaluate_session(session, _config(*evaluations), per_step=False).score


@pytest.mark.parametrize("version", [4, 7])
def test_a_later_snapshot_after_the_last_actions_navigation_is_the_end_state(
    version: int, tmp_path: Path
) -> None:
    session = _session(_search_then_go(version, later_snapshot=True), tmp_path)
    final = session.final_step
    assert final.url == SEARCH and final.html is not None and RESULTS in final.html
    assert final.current_tab_source == "only_tab"
    assert _score(session, URL_MATCH) == 1.0  # as live
    assert _score(session, URL_MATCH, ON_PAGE) == 1.0


@pytest.mark.parametrize("version", [4, 7])
@pytest.mark.parametrize("raced", [False, True])
def test_a_navigation_no_snapshot_shows_is_a_loud_miss_never_the_old_page(
    version: int, raced: bool, tmp_path: Path
) -> None:
    """The order of Playwright 1.32's "search, sort by year, click Go" scored 0.0 silently: the click's
    after-snapshot (the search form) taken before its navigation committed, nothing later."""
    session = _session(_search_then_go(version, later_snapshot=False, raced=raced), tmp_path)
    final = session.final_step
    assert final.url == SEARCH and final.html is None
    assert _score(session, URL_MATCH) == 1.0  # the URL is recorded: as live
    with pytest.raises(
        ReplayMissError, match="lacks the DOM of a page loaded after the trace's last snapshot"
    ):
        _score(session, ON_PAGE)


def test_format_7_a_snapshot_with_the_new_url_shows_the_new_document(tmp_path: Path) -> None:
    """Without navigation events, a snapshot taken once the response arrived, with the load's URL,
    shows it; one taken before the response arrived cannot, whatever its URL."""
    trace = _search_then_go(7, later_snapshot=False)
    after = trace.events[-2]["snapshot"]
    assert after["snapshotName"].startswith("after@")
    after.update(frameUrl=SEARCH, html=SEARCH_HTML, timestamp=166)  # after the response (145 + 14)
    assert RESULTS in str(_session(trace, tmp_path / "shown").final_step.html)
    after["timestamp"] = 155  # before the response could commit
    assert _session(trace, tmp_path / "early").final_step.html is None


def test_format_4_a_same_document_navigation_after_the_last_snapshot(tmp_path: Path) -> None:
    """A route change (``pushState``) after the last snapshot: the URL is known, the DOM is not. On a
    page with a child frame the trace cannot tell whose route changed: the URL is not known either."""
    cart = "http://shop.test/#/cart"
    trace = _search_then_go(4, later_snapshot=True)
    trace.navigated(cart, 300, new_document=False)
    session = _session(trace, tmp_path / "main")
    assert (session.final_step.url, session.final_step.html) == (cart, None)
    with pytest.raises(ReplayMissError, match="same-document navigation the trace has no later snapshot"):
        _score(session, ON_PAGE)

    framed = _search_then_go(4, later_snapshot=True)
    framed.events.insert(
        1,
        {"type": "event", "class": "Frame", "method": "__create__", "time": 1,
         "params": {"type": "Frame", "guid": CHILD, "initializer": {"parentFrame": {"guid": MAIN}}}},
    )  # fmt: skip
    framed.navigated(cart, 300, new_document=False)
    session = _session(framed, tmp_path / "framed")
    assert session.header.options["imported"]["final_url_known"] is False
    with pytest.raises(ReplayMissError, match="url_match needs the final URL"):
        _score(session, URL_MATCH)
    # a child frame's own navigation (its request names it) leaves the page as its snapshot shows it
    child = _search_then_go(4, later_snapshot=True)
    child.load("http://shop.test/ad.html", 300, 1, 2, frame=CHILD)
    child.navigated("http://shop.test/ad.html", 305)
    assert _session(child, tmp_path / "child").final_step.url == SEARCH
    assert _score(_session(child, tmp_path / "child2"), URL_MATCH, ON_PAGE) == 1.0


@pytest.mark.parametrize("version", [4, 7])
def test_a_tab_opened_after_the_last_action_makes_the_current_tab_unknown(
    version: int, tmp_path: Path
) -> None:
    """The agent's click opened a popup: whether its harness went on in it the trace does not say, so
    a question about the current tab is loud; a question about a given URL is not."""
    trace = _search_then_go(version, later_snapshot=True)
    trace.page(POPUP, 210, f"frame@{POPUP}")
    read = trace.call("evaluateExpression", 220, page=POPUP, expression="() => 1")
    trace.snapshot(read, "after", "http://shop.test/help", _html("Help", "Help"), 221, page=POPUP)
    session = _session(trace, tmp_path)
    final = session.final_step
    assert [t.tab_id for t in final.tabs] == [P, POPUP] and final.current_tab_source == "unknown"
    with pytest.raises(ReplayMissError, match="could not tell which one the agent"):
        _score(session, URL_MATCH)
    given = {
        "eval_types": ["program_html"],
        "program_html": [
            {
                "url": SEARCH,
                "locator": "document.body.outerText",
                "required_contents": {"must_include": ["Ocean"]},
            }
        ],
    }
    assert _score(session, given) == 1.0
    # the steps before: the page the agent acted in
    assert {s.current_tab_source for s in session.steps[:-1]} == {"only_tab"}
