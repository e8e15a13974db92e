"""Each step of the trace format upgrade (4 -> 10) on small event lists shaped as the producers write them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cdp_integration.errors import SessionFormatError
from cdp_integration.imports.trace_formats import (
    LATEST_FORMAT,
    UPGRADES,
    trace_format,
    upgrade_events,
    upgrade_network,
)

P1, P2 = "page@agent", "page@evaluator"


def _snapshot(page: str, call: str, name: str) -> dict[str, Any]:
    return {
        "type": "frame-snapshot",
        "snapshot": {"callId": call, "snapshotName": name, "pageId": page, "frameId": f"frame-{page}",
                     "frameUrl": "http://shop.test/", "isMainFrame": True, "html": ["HTML", {}],
                     "resourceOverrides": [{"url": "http://shop.test/s.css", "sha1": "abc.css"}]},
    }  # fmt: skip


def _format_4() -> list[dict[str, Any]]:
    """Playwright 1.32: protocol events for pages, no monotonicTime, snapshot names, apiName."""
    return [
        {"type": "context-options", "version": 4, "wallTime": 1_000_000, "browserName": "chromium"},
        {"type": "before", "callId": "call@1", "startTime": 500.0, "wallTime": 1_000_250,
         "apiName": "BrowserContext.new_page", "class": "BrowserContext", "method": "newPage", "params": {}},
        {"type": "event", "class": "Frame", "method": "__create__", "params": {"guid": "frame@1"}, "time": 501},
        {"type": "event", "class": "BrowserContext", "method": "page", "params": {"page": {"guid": P1}},
         "time": 502},
        {"type": "after", "callId": "call@1", "endTime": 503, "log": [], "afterSnapshot": "after@call@1"},
        {"type": "before", "callId": "call@2", "startTime": 510, "apiName": "Page.goto", "class": "Frame",
         "method": "goto", "params": {"url": "http://shop.test/"}, "pageId": P1, "beforeSnapshot": "before@call@2"},
        _snapshot(P1, "call@2", "after@call@2"),
        {"type": "event", "class": "Page", "method": "close", "params": {}, "time": 600, "pageId": P1},
        {"type": "screencast-frame", "pageId": P1, "sha1": "page@agent-1.jpeg", "timestamp": 520},
    ]  # fmt: skip


def _format_7() -> list[dict[str, Any]]:
    """Playwright 1.45: no page events at all, only the ``newPage`` and ``Page.close`` calls."""
    return [
        {"type": "context-options", "version": 7, "wallTime": 1_000_000, "monotonicTime": 100.0},
        {"type": "before", "callId": "call@1", "startTime": 200, "apiName": "BrowserContext.new_page",
         "class": "BrowserContext", "method": "newPage", "params": {}},
        {"type": "after", "callId": "call@1", "endTime": 210, "result": {"page": "<Page>"}},
        {"type": "before", "callId": "call@2", "startTime": 220, "apiName": "Page.goto", "class": "Frame",
         "method": "goto", "params": {"url": "http://shop.test/"}, "pageId": P1},
        _snapshot(P1, "call@2", "after@call@2"),
        {"type": "before", "callId": "call@3", "startTime": 300, "apiName": "BrowserContext.new_page",
         "class": "BrowserContext", "method": "newPage", "params": {}},
        {"type": "after", "callId": "call@3", "endTime": 310, "result": {"page": "<Page>"}},
        {"type": "before", "callId": "call@4", "startTime": 320, "apiName": "Page.goto", "class": "Frame",
         "method": "goto", "params": {"url": "http://shop.test/cart"}, "pageId": P2},
        {"type": "after", "callId": "call@4", "endTime": 330},
        {"type": "before", "callId": "call@5", "startTime": 340, "apiName": "Page.close", "class": "Page",
         "method": "close", "params": {}, "pageId": P2},
        {"type": "after", "callId": "call@5", "endTime": 350},
    ]  # fmt: skip


def _page_events(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["method"], e["params"]["pageId"])
        for e in events
        if e.get("type") == "event" and e.get("method") in ("page", "pageClosed")
    ]


def test_4_to_5_page_lifecycle_from_protocol_events() -> None:
    events = UPGRADES[4](_format_4())
    assert _page_events(events) == [("page", P1), ("pageClosed", P1)]
    assert not any(e.get("method") == "__create__" for e in events)


def test_5_to_6_drops_the_log_of_after_events() -> None:
    events = UPGRADES[5](_format_4())
    assert all("log" not in e for e in events if e["type"] == "after")


def test_6_to_7_anchors_the_clock_on_the_first_call() -> None:
    options = UPGRADES[6](_format_4())[0]
    assert (options["monotonicTime"], options["wallTime"]) == (500.0, 1_000_250)
    # a trace that has it keeps it
    assert UPGRADES[6](_format_7())[0]["monotonicTime"] == 100.0


def test_7_to_8_api_name_becomes_title() -> None:
    before = next(e for e in UPGRADES[7](_format_7()) if e["type"] == "before")
    assert before["title"] == "BrowserContext.new_page" and "apiName" not in before


def test_8_to_9_snapshot_names_become_phases() -> None:
    events = UPGRADES[8](_format_4())
    snapshot = next(e["snapshot"] for e in events if e["type"] == "frame-snapshot")
    assert snapshot["phase"] == "after" and "snapshotName" not in snapshot
    assert all("beforeSnapshot" not in e and "afterSnapshot" not in e for e in events)


def test_9_to_10_rebuilds_page_lifecycle_from_calls() -> None:
    events = UPGRADES[9](_format_7())
    assert _page_events(events) == [("page", P1), ("page", P2), ("pageClosed", P2)]
    # each page opens right before the first event naming it, closes after its close call returned
    kinds = [(e["type"], e.get("callId"), e.get("method")) for e in events]
    assert kinds.index(("event", None, "page")) == kinds.index(("before", "call@2", "goto")) - 1
    assert kinds[-1] == ("event", None, "pageClosed")


def test_9_to_10_a_failed_close_leaves_the_page_open() -> None:
    events = _format_7()
    events[-1]["error"] = {"message": "Target closed"}
    assert ("pageClosed", P2) not in _page_events(UPGRADES[9](events))


def test_9_to_10_keeps_existing_page_events_and_adopts_step_ids() -> None:
    events: list[dict[str, Any]] = [
        {"type": "context-options", "version": 9, "wallTime": 1, "monotonicTime": 0},
        {"type": "event", "class": "BrowserContext", "method": "page", "params": {"pageId": P1}},
        {"type": "before", "callId": "c1", "stepId": "s1", "class": "Frame", "method": "goto", "pageId": P1},
        {"type": "after", "callId": "c1"},
    ]
    upgraded = UPGRADES[9](copy.deepcopy(events))
    assert _page_events(upgraded) == [("page", P1)]
    assert [e.get("callId") for e in upgraded[2:]] == ["s1", "s1"]


def test_a_whole_format_4_trace_reaches_the_latest_model() -> None:
    version, events = upgrade_events(_format_4(), "t")
    assert version == 4 and events[0]["version"] == LATEST_FORMAT
    assert _page_events(events) == [("page", P1), ("pageClosed", P1)]
    snapshot = next(e["snapshot"] for e in events if e["type"] == "frame-snapshot")
    assert snapshot["phase"] == "after"
    assert snapshot["resourceOverrides"] == [{"url": "http://shop.test/s.css", "file": "resources/abc.css"}]
    frame = next(e for e in events if e["type"] == "screencast-frame")
    assert frame["file"] == "resources/page@agent-1.jpeg"


def test_a_format_10_trace_is_left_as_it_is() -> None:
    events: list[dict[str, Any]] = [
        {"type": "context-options", "version": 10, "wallTime": 1, "monotonicTime": 5},
        {"type": "event", "class": "BrowserContext", "method": "page", "params": {"pageId": P1}},
        {"type": "before", "callId": "c1", "class": "Frame", "method": "goto", "params": {}},
    ]
    assert upgrade_events(copy.deepcopy(events), "t") == (10, events)


def test_network_resource_names() -> None:
    entry = {"request": {"postData": {"_sha1": "p.bin"}}, "response": {"content": {"_sha1": "b.html"}}}
    (event,) = upgrade_network([{"type": "resource-snapshot", "snapshot": entry}])
    assert event["snapshot"]["request"]["postData"] == {"_file": "resources/p.bin"}
    assert event["snapshot"]["response"]["content"] == {"_file": "resources/b.html"}


@pytest.mark.parametrize(
    ("first", "message"),
    [
        ({"type": "context-options", "version": 11}, "newer Playwright"),
        ({"type": "context-options", "version": 3}, "older than the oldest"),
        ({"type": "context-options"}, "missing or not a number"),
        ({"type": "context-options", "version": "10"}, "missing or not a number"),
        ({"type": "context-options", "version": True}, "missing or not a number"),
        ({"type": "before", "callId": "c1"}, "does not start with its context-options"),
    ],
)
def test_unknown_or_garbled_versions_are_refused(first: dict[str, Any], message: str) -> None:
    with pytest.raises(SessionFormatError, match=message):
        trace_format(first, "t")
    with pytest.raises(SessionFormatError, match=message):
        upgrade_events([first], "t")


def test_odd_shapes_are_upgraded_without_a_traceback() -> None:
    """Fields of the wrong type are left alone by every step (the importer then reads or refuses them)."""
    events: list[dict[str, Any]] = [
        {"type": "context-options", "version": 4, "wallTime": "x"},
        {"type": "before", "callId": ["x"], "stepId": "s", "startTime": None, "pageId": 5},
        {"type": "after", "callId": {"a": 1}, "error": "yes"},
        {"type": "event", "class": "BrowserContext", "method": "page", "params": {"page": "not an object"}},
        {"type": "event", "class": "Page", "method": "close", "params": [], "pageId": None},
        {"type": "frame-snapshot", "snapshot": {"resourceOverrides": 5, "snapshotName": 7}},
        {"type": "frame-snapshot", "snapshot": "nope"},
        {"type": "screencast-frame", "sha1": ["x"]},
        {"type": "resource-snapshot", "snapshot": {"request": [], "response": {"content": "x"}}},
    ]
    version, upgraded = upgrade_events(events, "t")
    assert version == 4 and upgraded[0]["monotonicTime"] == 0
    assert _page_events(upgraded) == []
