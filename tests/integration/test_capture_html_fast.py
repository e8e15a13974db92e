"""The incremental HTML read (``capture.html``) against ``DOM.getOuterHTML`` of the live document, in
real Chromium, on pages of every shape the serializer treats specially: it is byte-identical, or it
falls back to the full read. Each page holds a large inline script, so the fast path is tried."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, unquote

import pytest
from playwright.sync_api import Browser, Page

from cdp_integration.capture.html import IncrementalHtml, read_full_html
from cdp_integration.capture.state import read_html_incremental

MAX = 50_000_000
ORIGIN = "http://fast.test"

DATA = json.dumps(
    [{"id": i, "name": f"Produit {i} <b>&amp; é 😀", "tags": ["a<b", "c&d", "</scrip"]} for i in range(5000)]
)
"""~400 KB of JSON with characters the serializer would escape outside a script."""

APP = """<script>
  let step = 0;
  function render() {
    document.getElementById('app').innerHTML = '<p class="row">step ' + step + ' &amp; <i>rows</i></p>';
  }
  window.next = () => { step++; render(); };
  render();
</script>"""

BIG = f'<script type="application/json" id="data">{DATA}</script>'

PAGES: dict[str, str] = {
    "plain": f"<!DOCTYPE html><html><head>{BIG}</head><body><div id=app></div>{APP}</body></html>",
    "big style": (
        "<!DOCTYPE html><html><head><style>"
        + "".join(f".c{i}::after {{ content: '<&\\u00e9>'; }}\n" for i in range(12000))
        + f"</style></head><body><div id=app></div>{APP}</body></html>"
    ),
    "noscript": (
        f"<!DOCTYPE html><html><head>{BIG}<noscript><link rel=stylesheet href=/ns.css>a < b & c</noscript>"
        f"</head><body><noscript><img src=/ns.png>Enable <b>JS</b> &amp; reload</noscript>"
        f"<div id=app></div>{APP}</body></html>"
    ),
    "template": (
        f"<!DOCTYPE html><html><head>{BIG}</head><body><template id=t><p>t &amp; <script>1<2</script>"
        f"<noscript>x<y</noscript><style>a>b{{}}</style></p></template><div id=app></div>{APP}</body></html>"
    ),
    "svg and mathml": (
        f"<!DOCTYPE html><html><head>{BIG}</head><body><svg viewBox='0 0 10 10'><script>a&lt;b</script>"
        "<style>c&gt;d</style><foreignObject><p>f</p></foreignObject><a xlink:href='#x'><text>t&amp;</text></a>"
        "</svg><math><mi>x</mi><annotation-xml encoding='text/html'><b>y</b></annotation-xml></math>"
        f"<div id=app></div>{APP}</body></html>"
    ),
    "comments outside html": (
        f"<!--before doctype--><!DOCTYPE html><!--after doctype--><html><head>{BIG}</head>"
        f"<body><div id=app></div>{APP}</body></html><!--after html-->"
    ),
    "no doctype (quirks)": f"<html><head>{BIG}</head><body><div id=app></div>{APP}</body></html>",
    "legacy doctype": (
        '<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01//EN" "http://www.w3.org/TR/html4/strict.dtd">'
        f"<html><head>{BIG}</head><body><div id=app></div>{APP}</body></html>"
    ),
    "legacy-compat doctype": (
        f'<!DOCTYPE html SYSTEM "about:legacy-compat"><html><head>{BIG}</head>'
        f"<body><div id=app></div>{APP}</body></html>"
    ),
    "iframes, images, forms, custom elements": (
        f"<!DOCTYPE html><html><head>{BIG}<link rel=stylesheet href=/s.css></head><body>"
        "<iframe srcdoc='<p>in frame</p>'></iframe><iframe src=/frame.html></iframe><img src=/i.png>"
        "<input value=typed><input type=checkbox checked><select><option selected>o</option></select>"
        "<textarea>a<b</textarea><details open><summary>s</summary>d</details><video controls></video>"
        "<x-el data-n=1>light</x-el><button is=x-btn>b</button>"
        "<script>window.constructed = 0; customElements.define('x-el', class extends HTMLElement {"
        " constructor() { super(); window.constructed++; } });</script>"
        f"<div id=app></div>{APP}</body></html>"
    ),
    "astral text": (  # pairs start at odd offsets: a cut every 64K code units would split one
        f"<!DOCTYPE html><html><head>{BIG}<script>var s = 'a{'😀' * 60000}';</script></head><body>"
        f"<div id=app></div>{APP}</body></html>"
    ),
    "open shadow root": (
        f"<!DOCTYPE html><html><head>{BIG}</head><body><div id=h></div><div id=app></div>{APP}"
        "<script>document.getElementById('h').attachShadow({mode: 'open'}).innerHTML = '<i>open</i>';</script>"
        "</body></html>"
    ),
    "closed shadow root": (
        f"<!DOCTYPE html><html><head>{BIG}</head><body><div id=h></div><div id=app></div>{APP}"
        "<script>document.getElementById('h').attachShadow({mode: 'closed'}).innerHTML = '<i>closed</i>';"
        "</script></body></html>"
    ),
    "declarative shadow root": (
        f"<!DOCTYPE html><html><head>{BIG}</head><body><div><template shadowrootmode=closed><b>dsd</b>"
        f"</template></div><div id=app></div>{APP}</body></html>"
    ),
}

ROWS_PAGE = (
    "<!DOCTYPE html><html><body>"
    + "".join(f"<p>row {i} &amp; {'text ' * 60}</p>" for i in range(1000))
    + "<script>let n = 0;</script></body></html>"
)
"""~300 KB of paragraphs and no large script."""

SERVED = {**PAGES, "rows": ROWS_PAGE}

FALLS_BACK = {"open shadow root", "closed shadow root", "declarative shadow root"}


@pytest.fixture(scope="module")
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    context.route(
        f"{ORIGIN}/**",
        lambda route: route.fulfill(
            body=SERVED.get(unquote(route.request.url.partition("?p=")[2]), "<p>frame</p>")
            if route.request.resource_type == "document"
            else "",
            content_type="text/html" if route.request.resource_type == "document" else "text/plain",
        ),
    )
    page = context.new_page()
    page.requests = requests  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()


def _reads(page: Page, name: str, mutate: list[str]) -> tuple[IncrementalHtml, list[str]]:
    """Load ``name``; after each expression of ``mutate``, an incremental read compared with the full one."""
    page.goto(f"{ORIGIN}/?p={quote(name)}")
    page.wait_for_function("document.readyState === 'complete'")
    cdp = page.context.new_cdp_session(page)
    reader, worlds = IncrementalHtml(), {}
    requests: list[str] = page.requests  # type: ignore[attr-defined]
    failures: list[str] = []
    try:
        for expression in ["0", *mutate]:
            page.evaluate(expression)
            before = len(requests)
            got = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
            if len(requests) != before:
                failures.append(f"requests during the read: {requests[before:]}")
            full = read_full_html(cdp, max_bytes=MAX)
            if got != full:
                at = next(i for i, (a, b) in enumerate(zip(got + "\0", full + "\0", strict=False)) if a != b)
                failures.append(
                    f"after {expression!r}: differs at {at}: {got[at - 40 : at + 40]!r} vs {full[at - 40 : at + 40]!r}"
                )
    finally:
        cdp.detach()
    return reader, failures


STEPS = [
    "next()",
    "next()",
    # the large text itself changes: sent again, then cached again
    "document.getElementById('data') && (document.getElementById('data').textContent += ' ')",
    "next()",
    # a small text node changes in place
    "document.querySelector('#app p').firstChild.data = 'changed <text> & more'",
]


@pytest.mark.parametrize("name", sorted(PAGES))
def test_incremental_read_equals_the_full_read(page: Page, name: str) -> None:
    reader, failures = _reads(page, name, STEPS)
    assert failures == []
    if name in FALLS_BACK:
        assert reader.stats.get("fast", 0) == 0, reader.stats
        assert reader.stats.get("fallback:shadow root", 0) >= 1, reader.stats
    else:
        # the first read is a full one, the next compares both (and learns that the live digest
        # vouches for this tab), the rest are fast
        assert reader.stats.get("verified") == 1, reader.stats
        assert reader.stats.get("fast", 0) >= len(STEPS) - 2, reader.stats
    if name.startswith("iframes"):
        assert page.evaluate("window.constructed") == 1  # the copy upgraded no custom element


def test_unchanged_large_text_is_transferred_once(page: Page) -> None:
    """The point of it: after the first fast read, a step moves only what is around the script."""
    page.goto(f"{ORIGIN}/?p=plain")
    cdp = page.context.new_cdp_session(page)
    sizes: list[int] = []
    reader, worlds = IncrementalHtml(), {}
    original = cdp.send

    def send(method: str, params: Any = None) -> Any:
        result = original(method, params)
        sizes.append(len(json.dumps(result)))
        return result

    cdp.send = send  # type: ignore[method-assign]
    try:
        for _ in range(4):
            page.evaluate("next()")
            sizes.clear()
            html = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
    finally:
        cdp.detach()
    assert reader.stats.get("fast") == 2, reader.stats
    assert len(html) > len(DATA)
    assert sum(sizes) < 50_000, sizes  # the last read: the copy, the described tree (texts cut at 10k)


def test_an_xhtml_document_is_read_in_full(page: Page) -> None:
    """An XML document is serialized as XML: never copied into an HTML one."""
    data = "var data = '" + "x" * 300_000 + "';"
    xhtml = f'<html xmlns="http://www.w3.org/1999/xhtml"><head><script>{data}</script></head><body><p>x</p></body></html>'
    page.route(
        f"{ORIGIN}/x.xhtml", lambda route: route.fulfill(body=xhtml, content_type="application/xhtml+xml")
    )
    page.goto(f"{ORIGIN}/x.xhtml")
    cdp = page.context.new_cdp_session(page)
    reader, worlds = IncrementalHtml(), {}
    try:
        for _ in range(3):
            assert read_html_incremental(
                cdp, reader, max_bytes=MAX, tree=None, worlds=worlds
            ) == read_full_html(cdp, max_bytes=MAX)
    finally:
        cdp.detach()
    assert reader.stats.get("fast", 0) == 0 and reader.stats.get("fallback:not an HTML document") == 2


def test_a_large_page_without_large_scripts_is_asked_once(page: Page) -> None:
    """A 300 KB page of paragraphs: the world is asked once, then full reads without asking (until
    the HTML grows by what the fast path would need)."""
    page.goto(f"{ORIGIN}/?p=rows")
    cdp = page.context.new_cdp_session(page)
    reader, worlds = IncrementalHtml(), {}
    try:
        for _ in range(4):
            page.evaluate("document.querySelector('p').textContent = 'row ' + (++n)")
            got = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
            assert got == read_full_html(cdp, max_bytes=MAX)
        assert reader.stats == {
            "full": 1,
            "fallback:no large script or style text": 1,
            "fallback:no large text": 2,
        }
        page.evaluate(
            f"document.body.append(Object.assign(document.createElement('script'), {{text: {DATA!r}}}))"
        )
        for _ in range(3):  # grown by a large script: asked again, and the fast path starts
            got = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
            assert got == read_full_html(cdp, max_bytes=MAX)
    finally:
        cdp.detach()
    assert reader.stats.get("verified") == 1 and reader.stats.get("fast") == 1, reader.stats


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_next_document_of_the_tab_is_read_fast_when_the_digest_vouches(page: Page, name: str) -> None:
    """A full-page load of the same app: the reader knows its large texts by content, and once the
    tab's live digest has matched a full read, the new document's first fast read is checked against
    the live document's digest instead of a full read. Whatever happens, the read equals the full one."""
    reader, worlds = IncrementalHtml(), {}
    for _ in range(3):
        page.goto(f"{ORIGIN}/?p={quote(name)}")  # a new document each time
        page.wait_for_function("document.readyState === 'complete'")
        cdp = page.context.new_cdp_session(page)
        try:
            for _ in range(2):
                page.evaluate("window.next && next()")
                got = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
                assert got == read_full_html(cdp, max_bytes=MAX), reader.stats
        finally:
            cdp.detach()
        worlds.clear()
    if name in FALLS_BACK:
        assert reader.stats.get("digest-verified", 0) == 0, reader.stats
    else:  # every other shape serializes in the page as getOuterHTML does
        assert reader.digest_trusted, reader.stats
        # load 0 taught the reader that (a full read matched the digest); the first reads of loads 1
        # and 2 are fast, checked by the digest
        assert reader.stats.get("digest-verified") == 2, reader.stats


def test_a_digest_that_differs_falls_back_to_the_full_read(
    page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The assembled page not matching the live digest (a token naming another text, a serializer
    difference): the document's fast path is off and the full read is returned."""
    from cdp_integration.capture import html as html_module

    reader, worlds = IncrementalHtml(), {}
    sizes: list[int] = []
    for load in range(3):
        page.goto(f"{ORIGIN}/?p=plain")
        cdp = page.context.new_cdp_session(page)
        original = cdp.send

        def send(method: str, params: Any = None, original: Any = original) -> Any:
            result = original(method, params)
            sizes.append(len(json.dumps(result)))
            return result

        cdp.send = send  # type: ignore[method-assign]
        try:
            if load == 2:
                monkeypatch.setattr(html_module, "_digest", lambda html: [0, 0, len(html)])
            page.evaluate("next()")
            sizes.clear()
            got = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
            moved = sum(sizes)
            page.evaluate("next()")
            assert got != read_full_html(cdp, max_bytes=MAX)  # it moved on: the read was of before
            again = read_html_incremental(cdp, reader, max_bytes=MAX, tree=None, worlds=worlds)
            assert again == read_full_html(cdp, max_bytes=MAX)
        finally:
            cdp.detach()
        worlds.clear()
        if load == 1:  # the first read of a new document moved no large text: the reader knew it
            assert reader.stats.get("digest-verified") == 1 and moved < 60_000, (reader.stats, moved)
    assert reader.stats.get("disabled") == 1, reader.stats
