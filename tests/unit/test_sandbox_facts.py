"""Facts the sandbox decides from the capture, before it runs anything: does the page run scripts,
where would a stored meta refresh go."""

from __future__ import annotations

import pytest

from cdp_integration.replay.guard import captured_scripts
from cdp_integration.replay.offline import ReplayDocument, refresh_targets


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        ("<p>plain</p><img name=scripts><img name=querySelectorAll>", None),
        (
            '<script type="application/json">{"a": 1}</script><script type="text/x-magento-init">{}</script>',
            None,
        ),
        ("<script>go()</script>", "a <script> element"),
        ('<SCRIPT type="module" src="/m.js"></SCRIPT>', "a <script> element"),
        ('<script type="text/javascript; charset=utf-8"></script>', "a <script> element"),
        ('<button onclick="go()">b</button>', "an inline onclick handler"),
        ('<a href=" java\tscript:go()">a</a>', "a javascript: URL"),
        ('<iframe srcdoc="&lt;script&gt;go()&lt;/script&gt;"></iframe>', "a <script> in an iframe's srcdoc"),
    ],
)
def test_runs_scripts_is_decided_from_the_stored_markup(html: str, reason: str | None) -> None:
    assert captured_scripts(f"<html><body>{html}</body></html>") == reason


def test_a_frame_with_scripts_makes_the_page_scripted() -> None:
    document = ReplayDocument(
        url="http://a.test/", html="<p>x</p>", frames={"http://a.test/f": "<script></script>"}
    )
    assert document.scripted == "a <script> element"
    assert ReplayDocument(url="http://a.test/", html="<p>x</p>").scripted is None


def test_meta_refresh_targets_resolve_against_the_page() -> None:
    html = (
        "<meta http-equiv='refresh' content='0;url=/next#top'>"
        '<meta content="5; URL=\'http://b.test/x\'" http-equiv="Refresh">'
        '<meta http-equiv="refresh" content="30">'
    )
    assert refresh_targets(html, "http://a.test/dir/page") == {
        "http://a.test/next",
        "http://b.test/x",
        "http://a.test/dir/page",
    }
