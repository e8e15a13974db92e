"""Playwright snapshot nodes -> HTML, and cookies from headers: the rules the trace importer relies on.

The node format is Playwright's (``[name, attrs, ...children]``, text, or ``[[snapshotsAgo,
nodeIndex]]`` counting earlier snapshots' non-reference nodes in post-order); the real-trace tests
are in ``tests/integration/test_imports.py``.
"""

from __future__ import annotations

import pytest

from cdp_integration.errors import SessionFormatError
from cdp_integration.imports.common import CookieJar
from cdp_integration.imports.playwright_trace import (
    DROPPED_SCRIPTS_MARKER,
    _FrameSnapshots,
    render_snapshot_html,
)


def _frame(*htmls: object) -> _FrameSnapshots:
    frame = _FrameSnapshots(where="test")
    frame.raw.extend({"html": html, "doctype": "html"} for html in htmls)
    return frame


def test_references_resolve_in_post_order_against_earlier_snapshots() -> None:
    first = ["HTML", {}, ["HEAD", {}, ["TITLE", {}, "Shop"]], ["BODY", {}, ["P", {}, "a"], ["P", {}, "b"]]]
    # post-order of the first: "Shop"0 TITLE1 HEAD2 "a"3 P4 "b"5 P6 BODY7 HTML8
    second = ["HTML", {}, [[1, 2]], ["BODY", {}, [[1, 6]], "new", [[1, 3]]]]
    frame = _frame(first, second)
    rendered = render_snapshot_html(frame, 1)
    assert rendered.html == (
        "<!DOCTYPE html><HTML><HEAD><TITLE>Shop</TITLE></HEAD><BODY><P>b</P>new"
        + "a</BODY></HTML>"
        + DROPPED_SCRIPTS_MARKER
    )
    assert rendered.title == "Shop"
    # a reference inside a referenced node resolves against the snapshot that node belongs to
    # the second's non-reference nodes in post-order: "new"0 BODY1 HTML2 (references are not counted)
    third = ["HTML", {}, [[1, 1]]]
    frame = _frame(first, second, third)
    assert render_snapshot_html(frame, 2).html.startswith("<!DOCTYPE html><HTML><BODY><P>b</P>newa</BODY>")


def test_typed_values_checked_and_selected_become_form_state() -> None:
    html = [
        "HTML", {}, ["BODY", {},
            ["INPUT", {"value": "", "__playwright_value_": "Keeps ice"}],
            ["TEXTAREA", {"__playwright_value_": "typed <text>"}, "default"],
            ["INPUT", {"type": "checkbox", "checked": "", "__playwright_checked_": "false"}],
            ["SELECT", {}, ["OPTION", {"selected": "", "__playwright_selected_": "false"}, "1"],
                           ["OPTION", {"__playwright_selected_": "true"}, "2"]],
            ["SCRIPT", {}, "alert(1)"],
            ["STYLE", {}, "p { color: red } </style><b>"],
            ["IMG", {"__playwright_current_src__": "/logo.png", "__playwright_bounding_rect__": "{}"}],
        ],
    ]  # fmt: skip
    rendered = render_snapshot_html(_frame(html), 0)
    # the markup keeps the page's defaults (what a fresh load shows) ...
    assert '<INPUT value="">' in rendered.html
    assert "<TEXTAREA>default</TEXTAREA>" in rendered.html
    assert '<INPUT type="checkbox" checked>' in rendered.html
    assert "<OPTION selected>1</OPTION><OPTION>2</OPTION>" in rendered.html
    # ... and what the agent typed, checked and selected is form state, addressed like the capture's
    state = {tuple(c.path): c for c in rendered.form_state}
    assert state[(2,)].tag == "input" and state[(2,)].value == "Keeps ice"
    assert state[(3,)].tag == "textarea" and state[(3,)].value == "typed <text>"
    assert state[(4,)].type == "checkbox" and state[(4,)].checked is False
    assert state[(5,)].selected == [1] and state[(5,)].selected_text == ["2"]
    assert "alert(1)" not in rendered.html and "__playwright" not in rendered.html
    assert "p { color: red } <\\/style><b>" in rendered.html
    assert '<IMG src="/logo.png">' in rendered.html
    assert rendered.typed_values == 5  # the input, the textarea, the checkbox, both options
    assert rendered.html.endswith(DROPPED_SCRIPTS_MARKER)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ([[0, 0]], "own snapshot"),
        ([[-2, 0]], "later snapshot"),
        ([[5, 0]], "before the frame's first"),
        ([[1, 99]], "which has"),
    ],
)
def test_bad_references_are_refused(reference: object, message: str) -> None:
    frame = _frame(["HTML", {}, "x"], ["HTML", {}, reference])
    with pytest.raises(SessionFormatError, match=message):
        render_snapshot_html(frame, 1)


def test_cookies_come_from_headers_in_order() -> None:
    jar = CookieJar()
    jar.sent("http://shop.test/", "session=abc; theme=dark")
    jar.set("http://shop.test/login", "session=xyz; Path=/; HttpOnly; SameSite=Lax", now=100.0)
    jar.set("http://shop.test/", "theme=; Max-Age=0", now=101.0)
    cookies = {c.name: c for c in jar.cookies()}
    assert set(cookies) == {"session"}
    assert cookies["session"].value == "xyz" and cookies["session"].http_only
    assert cookies["session"].same_site == "Lax"


def test_the_snapshotters_own_base_is_left_out_and_the_pages_is_kept() -> None:
    """Playwright puts ``<base href=document.baseURI>`` first in every ``<head>`` it serializes; the page's
    own ``<base>`` (if any) follows it. A reference to it (later snapshots) is left out too."""
    fake = ["BASE", {"href": "http://shop/a/"}]
    own = ["BASE", {"href": "/static/"}]
    first = ["HTML", {}, ["HEAD", {}, fake, own, ["TITLE", {}, "Shop"]], ["BODY", {}, "x"]]
    # post-order of the first: BASE0 BASE1 "Shop"2 TITLE3 HEAD4 "x"5 BODY6 HTML7
    second = ["HTML", {}, ["HEAD", {}, [[1, 0]], ["TITLE", {}, "Shop"]], ["BODY", {}, "y"]]
    frame = _frame(first, second)
    assert render_snapshot_html(frame, 0).html.startswith(
        '<!DOCTYPE html><HTML><HEAD><BASE href="/static/"><TITLE>Shop</TITLE></HEAD>'
    )
    assert render_snapshot_html(frame, 1).html.startswith(
        "<!DOCTYPE html><HTML><HEAD><TITLE>Shop</TITLE></HEAD>"
    )
    # a <base> with more than an href, or not first in <head>, is the page's
    page = ["HTML", {}, ["HEAD", {}, ["BASE", {"href": "/x/", "target": "_top"}]], ["BODY", {}]]
    assert '<BASE href="/x/" target="_top">' in render_snapshot_html(_frame(page), 0).html


@pytest.mark.parametrize(
    ("selector", "structural"),
    [
        ("#price", False),
        (".product-meta .link-list > li", False),
        ('[data-x="a + b:nth-child(2)"]', False),
        ("[class~=x]", False),
        ("body > div:nth-child(3)", True),
        ("li:last-child", True),
        ("h1 + p", True),
        ("h1 ~ p", True),
        ("div:empty", True),
        ("script", True),
        ("head > meta", True),
        ("div >> nth=2", True),
    ],
)
def test_selectors_that_count_siblings_or_name_left_out_elements(selector: str, structural: bool) -> None:
    from cdp_integration.replay.guard import structural_selector

    assert structural_selector(selector) is structural
