"""The incremental HTML read's pure parts: putting texts back at markers, and spotting shadow roots in
``DOM.describeNode``'s tree. (The read itself, against real Chromium: tests/integration/test_capture_html_fast.py.)"""

from __future__ import annotations

from cdp_integration.capture.html import _assemble, _has_shadow_root

NONCE = "0123456789abcdef0123456789abcdef"


def marker(index: int) -> str:
    return f"cdphtml{NONCE}x{index}y"


def test_markers_are_replaced_by_cached_and_inline_texts() -> None:
    copy = f"<script>{marker(0)}</script><noscript>{marker(1)}</noscript><p>{marker(2)}</p>"
    marks = [{"tokens": ["w-1", "w-3"]}, {"text": "<b>a & b</b>"}, {"tokens": ["w-2"]}]
    texts = {"w-1": "var x = '</p>' ", "w-3": "< 2;", "w-2": "x" * 10}
    assert _assemble(copy, NONCE, marks, texts) == (
        "<script>var x = '</p>' < 2;</script><noscript><b>a & b</b></noscript><p>xxxxxxxxxx</p>"
    )


def test_a_missing_repeated_or_unknown_marker_refuses_the_fast_read() -> None:
    marks = [{"tokens": ["w-1"]}, {"tokens": ["w-2"]}]
    texts = {"w-1": "a", "w-2": "b"}
    assert _assemble(marker(0), NONCE, marks, texts) is None  # one marker lost
    assert _assemble(marker(0) + marker(0) + marker(1), NONCE, marks, texts) is None  # one twice
    assert _assemble(marker(0) + marker(1) + marker(2), NONCE, marks, texts) is None  # one unknown
    assert _assemble(marker(0) + marker(1), NONCE, marks, {"w-1": "a"}) is None  # a text not held
    assert _assemble(marker(0) + marker(1), "not-a-nonce", marks, texts) is None
    chunked = [{"tokens": ["w-1", "w-9"]}, {"tokens": ["w-2"]}]
    assert _assemble(marker(0) + marker(1), NONCE, chunked, texts) is None  # one chunk not held
    assert _assemble(marker(0) + marker(1), NONCE, [{"tokens": "w-1"}, {"tokens": ["w-2"]}], texts) is None


def test_only_user_agent_shadow_roots_are_allowed() -> None:
    ua = {"nodeName": "INPUT", "shadowRoots": [{"shadowRootType": "user-agent"}]}
    assert not _has_shadow_root({"children": [{"children": [ua]}]})
    for kind in ("open", "closed"):
        host = {"nodeName": "DIV", "shadowRoots": [{"shadowRootType": kind}]}
        assert _has_shadow_root({"children": [{"children": [ua, host]}]})
        assert _has_shadow_root({"children": [{"templateContent": {"children": [host]}}]})
