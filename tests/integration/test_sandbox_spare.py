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
    assert len([p for p in context.pages if not p.is_closed()]) == 1  # only the next spare
