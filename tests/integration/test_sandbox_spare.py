"""The sandbox's pre-started page (``OfflineBrowser._spare``): the next question gets a page created
after the wipe, found by its own random URL, and it carries nothing of the previous question, not even
a popup that question opened just before it was released."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdp_integration.replay.offline import OfflineBrowser, ReplayDocument

READ = (
    "[window.name, sessionStorage.length, localStorage.length, document.cookie, history.length,"
    " String(window.leaked), String(window.opener)]"
)


@pytest.fixture
def sandbox() -> Iterator[OfflineBrowser]:
    browser = OfflineBrowser()
    try:
        yield browser
    finally:
        browser.close()


def test_the_next_question_gets_a_fresh_prestarted_page(sandbox: OfflineBrowser) -> None:
    document = ReplayDocument(url="http://shop.test/a", html="<!DOCTYPE html><p>a</p>")
    first = sandbox.open(document)
    fresh = first.evaluate(READ)
    first.evaluate(
        """() => { window.name = 'n'; sessionStorage.setItem('s', '1'); localStorage.setItem('k', 'v');
        document.cookie = 'c=1; path=/'; history.pushState({}, '', '/moved'); window.leaked = 1;
        window.open('about:blank', 'popup'); window.open('http://shop.test/a', 'other'); }"""
    )
    context = first.context
    sandbox.release(first)
    assert context in sandbox._idle and context in sandbox._spares
    marker = sandbox._spares[context]
    opened: list[object] = []
    context.new_page = lambda: opened.append(1)  # type: ignore[method-assign]  # a page of its own: refused
    for _ in range(3):
        page = sandbox.open(document)
        assert page is not None and opened == [] and context not in sandbox._spares  # the spare was used
        assert page.url == "http://shop.test/a" and page.url != marker
        assert page.evaluate(READ) == fresh == ["", 0, 0, "", fresh[4], "undefined", "null"]
        page.evaluate("() => { window.name = 'again'; localStorage.setItem('k', 'v'); }")
        sandbox.release(page)
    if not page.is_closed():  # release closes it without waiting
        page.wait_for_event("close", timeout=30_000)
    spares = [p for p in context.pages if not p.is_closed()]
    if not spares:  # Chromium created it; Playwright may not have announced it yet
        context.wait_for_event("page", timeout=30_000)
        spares = [p for p in context.pages if not p.is_closed()]
    assert len(spares) == 1  # only the next spare: every answered page and popup closed


def test_a_blank_document_never_shows_the_spare_pages_marker(sandbox: OfflineBrowser) -> None:
    """A tab that never navigated is ``about:blank`` live; the spare page's URL has a marker fragment,
    which a document set as content would keep (found by the differential sample: ``location.href``
    of a new tab answered ``about:blank#cdp-integration-...``)."""
    first = sandbox.open(ReplayDocument(url="http://shop.test/a", html="<p>a</p>"))
    sandbox.release(first)
    blank = sandbox.open(ReplayDocument(url="about:blank", html="<html><head></head><body></body></html>"))
    try:
        assert blank.evaluate("[location.href, location.hash, history.length]") == ["about:blank", "", 1]
    finally:
        sandbox.release(blank)
