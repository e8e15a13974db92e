"""Which capture answers a fresh load of a page whose scripts the agent may have run (issue 19, class A).

A fresh load (the evaluator's own ``goto``) shows the page as the server sends it after its load
scripts. An agent tab at the same URL answers it only as its document loaded: a click whose listener
changed the DOM makes the tab's later captures wrong for a fresh load. These tests drive
``MockBrowserContext.fresh_load`` over sessions built in memory (no browser): the rule picks the
first capture of the document, the unchanged current one, or refuses loudly with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from cdp_integration.replay.page import MockBrowserContext
from cdp_integration.session import Cookie, NetworkExchange, RequestInfo, ResponseInfo, Step, TabState
from cdp_integration.session.store import Session, new_header

URL = "http://wiki.test/doku.php/rivers"
LOADED = (
    '<html><head><script src="/app.js"></script></head><body><div id="toc" aria-expanded="true">'
    "<h3>Contents</h3><ul><li>Nile</li></ul></div></body></html>"
)
COLLAPSED = LOADED.replace('aria-expanded="true"', 'aria-expanded="false"').replace(
    "<ul>", '<ul style="display: none">'
)
PLAIN = "<html><body><h1>Rivers</h1><form><input name=q></form></body></html>"


def _load(url: str, tab_id: str, started: float) -> NetworkExchange:
    return NetworkExchange(
        request_id=f"{tab_id}-{url}-{started}",
        tab_id=tab_id,
        started=started,
        duration_ms=5.0,
        request=RequestInfo(method="GET", url=url, headers={}, resource_type="Document"),
        response=ResponseInfo(status=200, mime_type="text/html"),
    )


def _step(
    index: int,
    tabs: Sequence[tuple[str, str, str]],
    *,
    loads: Sequence[tuple[str, str]] = (),
    cookies: Sequence[Cookie] = (),
    local: dict[str, dict[str, str]] | None = None,
) -> Step:
    """Step ``index`` showing ``tabs`` ((tab id, url, html)), whose traffic loaded ``loads`` ((tab id, url))."""
    return Step(
        index=index,
        trigger="action",
        action=f"action {index}",
        timestamp=1000.0 + index,
        url=tabs[0][1],
        title="t",
        tabs=[
            TabState(tab_id=t, url=u, title="t", active=i == 0, html=h) for i, (t, u, h) in enumerate(tabs)
        ],
        network=[_load(u, t, 1000.0 + index - 0.5) for t, u in loads],
        cookies=list(cookies),
        local_storage=local or {},
    )


def _context(*steps: Step) -> MockBrowserContext:
    return MockBrowserContext(Session(header=new_header(), steps=tuple(steps)), evaluation=None)


def _html(tab: TabState | None) -> str | None:
    return None if tab is None else tab.html


def test_a_changed_document_is_answered_by_its_first_capture() -> None:
    context = _context(
        _step(0, [("T0", URL, LOADED)], loads=[("T0", URL)]),
        _step(1, [("T0", URL, COLLAPSED)]),
    )
    answer = context.fresh_load(URL)
    assert answer is context._session.steps[0].tabs[0]
    assert _html(answer) == LOADED


def test_an_unchanged_document_answers_from_the_current_capture() -> None:
    marked = LOADED.replace("<h3>", '<h3 bid="12" browsergym_visibility_ratio="1">').replace(
        '<div id="toc"', '<div id="toc" aria-roledescription="browsergym_id_11 list"'
    )
    context = _context(
        _step(0, [("T0", URL, LOADED.replace('<div id="toc"', '<div id="toc" aria-roledescription="list"'))]),
        _step(1, [("T0", URL, marked)]),
    )
    assert context.fresh_load(URL) is context.step.tabs[0]


def test_the_document_starts_at_its_latest_load() -> None:
    """A reload makes a new document: captures of the old one are not its "as loaded"."""
    context = _context(
        _step(0, [("T0", URL, COLLAPSED)], loads=[("T0", URL)]),
        _step(1, [("T0", URL, LOADED)], loads=[("T0", URL)]),
        _step(2, [("T0", URL, COLLAPSED)]),
    )
    assert context.fresh_load(URL) is context._session.steps[1].tabs[0]
    fresh = _context(
        _step(0, [("T0", URL, COLLAPSED)], loads=[("T0", URL)]),
        _step(1, [("T0", URL, COLLAPSED)], loads=[("T0", URL)]),
    )
    assert fresh.fresh_load(URL) is fresh.step.tabs[0]


def test_a_page_without_scripts_answers_from_the_open_tab() -> None:
    changed = PLAIN.replace("Rivers", "Rivers!")  # only a script could, and there is none: kept as is
    context = _context(_step(0, [("T0", URL, PLAIN)], loads=[("T0", URL)]), _step(1, [("T0", URL, changed)]))
    assert context.fresh_load(URL) is context.step.tabs[0]


def test_another_unchanged_tab_answers_when_the_changed_one_is_refused() -> None:
    prefs = [Cookie(name="DOKU_PREFS", value="toc#1", domain="wiki.test")]
    context = _context(
        _step(0, [("T0", URL, LOADED)], loads=[("T0", URL)]),
        _step(1, [("T0", URL, COLLAPSED), ("T1", URL, LOADED)], loads=[("T1", URL)], cookies=prefs),
    )
    assert context.fresh_load(URL) is context.step.tabs[1]


@pytest.mark.parametrize(
    ("drift", "reason"),
    [
        ("cookie", "the cookies a load of it sends changed since \\(DOKU_PREFS\\)"),
        ("storage", "the local storage of http://wiki.test changed since"),
    ],
)
def test_a_changed_document_is_refused_when_client_state_moved(drift: str, reason: str) -> None:
    prefs = [Cookie(name="DOKU_PREFS", value="toc#1", domain="wiki.test")]
    later = _step(
        1,
        [("T0", URL, COLLAPSED)],
        cookies=prefs if drift == "cookie" else (),
        local={"http://wiki.test": {"toc": "closed"}} if drift == "storage" else None,
    )
    context = _context(_step(0, [("T0", URL, LOADED)], loads=[("T0", URL)]), later)
    assert context.fresh_load(URL) is None
    message = context._refused[URL]
    assert message.startswith("the agent changed this tab's document after it loaded: the open tab T0")
    assert 'aria-expanded="true"' in message and 'aria-expanded="false"' in message
    assert re.search(reason, message), message


def test_a_document_reached_without_a_load_is_refused() -> None:
    """The tab showed another URL, then this one without a load the capture saw (a script's
    ``history.pushState``): no capture shows this document as a fresh load would."""
    context = _context(
        _step(
            0,
            [("T0", "http://wiki.test/doku.php/start", LOADED)],
            loads=[("T0", "http://wiki.test/doku.php/start")],
        ),
        _step(1, [("T0", URL, LOADED)]),
    )
    assert context.fresh_load(URL) is None
    assert "without a document load the capture saw in that tab" in context._refused[URL]


def test_a_first_capture_at_another_fragment_is_refused() -> None:
    """On a page that runs scripts another fragment is another rendered state: the first capture
    at ``#a`` cannot answer a fresh load of ``#b``."""
    context = _context(
        _step(0, [("T0", URL + "#a", LOADED)], loads=[("T0", URL + "#a")]),
        _step(1, [("T0", URL + "#b", COLLAPSED)]),
    )
    assert context.fresh_load(URL + "#b") is None
    assert "another rendered state" in context._refused[URL + "#b"]


def test_the_tabs_first_capture_stands_for_a_load_before_the_capture_began() -> None:
    """Step 0 of a BrowserGym episode: its reset's traffic is not captured."""
    context = _context(_step(0, [("T0", URL, LOADED)]), _step(1, [("T0", URL, COLLAPSED)]))
    assert context.fresh_load(URL) is context._session.steps[0].tabs[0]


def test_a_fresh_load_has_no_browsergym_marking_and_the_agents_page_keeps_it() -> None:
    """BrowserGym's observation marks the agent's page (``bid``, ``browsergym_*``); a new page the
    evaluator opens is never observed, so a fresh load answered from that tab has none of it. A
    page's own ``bid`` attribute (no BrowserGym marking on the page) stays."""
    marked = (
        '<html><body><ul bid="3" browsergym_visibility_ratio="1" browsergym_set_of_marks="0">'
        '<li bid="4" browsergym_visibility_ratio="0.5" aria-description="browsergym_id_4 first">x</li></ul>'
        "</body></html>"
    )
    context = _context(_step(0, [("T0", URL, marked)]))
    fresh = context.document(URL)
    assert fresh is not None
    assert fresh.html == '<html><body><ul><li aria-description="first">x</li></ul></body></html>'
    as_left = context.document(URL, context.step.tabs[0])
    assert as_left is not None and as_left.html == marked
    auction = '<html><body><span bid="12.50">lot 4</span></body></html>'
    own = _context(_step(0, [("T0", URL, auction)])).document(URL)
    assert own is not None and own.html == auction


def test_a_document_that_answered_a_form_submission_is_not_a_fresh_load() -> None:
    """Post/Redirect/Get: the page after a save shows "changed successfully" once; a fresh GET of the
    same URL does not (Django 30304 in the differential run)."""
    listing = "http://admin.test/admin/library/book/"
    post = NetworkExchange(
        request_id="R1",
        tab_id="T0",
        started=999.0,
        duration_ms=5.0,
        request=RequestInfo(
            method="POST",
            url="http://admin.test/admin/library/book/2/change/",
            headers={},
            resource_type="Document",
        ),
        response=ResponseInfo(status=302, redirect_url=listing),
    )
    get = NetworkExchange(
        request_id="R1",
        tab_id="T0",
        started=999.1,
        duration_ms=5.0,
        request=RequestInfo(method="GET", url=listing, headers={}, resource_type="Document"),
        response=ResponseInfo(status=200, mime_type="text/html"),
    )
    saved = Step(
        index=0,
        trigger="action",
        action="submit",
        timestamp=1000.0,
        url=listing,
        title="t",
        tabs=[TabState(tab_id="T0", url=listing, title="t", active=True, html=PLAIN)],
        network=[post, get],
    )
    context = _context(saved)
    assert context.fresh_load(listing) is None
    assert (
        "its document is the response to POST http://admin.test/admin/library/book/2/change/"
        in (context._refused[listing])
    )
    plain = _context(_step(0, [("T0", listing, PLAIN)], loads=[("T0", listing)]))
    assert plain.fresh_load(listing) is plain.step.tabs[0]


def test_the_title_of_a_page_without_a_title_element_is_empty() -> None:
    """Chromium's target title falls back to the URL (``about:blank``); ``document.title`` is ""."""
    context = _context(
        _step(0, [("T0", "about:blank", "<html><head></head><body></body></html>"), ("T1", URL, LOADED)])
    )
    blank, _titled = context.pages
    assert blank.title() == ""
    titled_html = LOADED.replace("<head>", "<head><title>Rivers</title>")
    with_title = _context(_step(0, [("T0", URL, titled_html)]))
    assert with_title.pages[0].title() == "Rivers"  # document.title: the DOM's <title>, not the tab record
