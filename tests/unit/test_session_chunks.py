"""Chunked HTML and DOM snapshots: what a step did not change is not stored again; values read back."""

from __future__ import annotations

import copy
import gzip
import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdp_integration.errors import SessionFormatError
from cdp_integration.session import SessionWriter, Step, TabState, load_session, new_header
from cdp_integration.session.chunks import (
    CHUNKS_KEY,
    SnapshotChunker,
    decode_snapshot,
    encode_snapshot,
    split_list,
    split_text,
)

ITEMS = 1500


def big_html(marker: str = "") -> str:
    rows = "".join(
        f'<div class="item" id="i{i}"><span>Item {i}</span><a href="/p/{i % 12}">P{i % 12}</a></div>'
        + (marker if i == ITEMS // 2 else "")
        for i in range(ITEMS)
    )
    return f"<!DOCTYPE html><html><head><title>t</title></head><body>{rows}</body></html>"


def big_snapshot(*, visible: int = 0, early_string: str | None = None) -> dict[str, Any]:
    """A ``DOMSnapshot.captureSnapshot`` shape: one document, interned strings, ``visible`` marks one node.

    ``early_string`` puts a new string at the start of the table, which renumbers every index, as
    Chromium's table does when a new attribute value appears early in the document.
    """
    strings: list[str] = []
    table: dict[str, int] = {}

    def intern(value: str) -> int:
        if value not in table:
            table[value] = len(strings)
            strings.append(value)
        return table[value]

    if early_string is not None:
        intern(early_string)
    names, values, attributes, parents, texts, nodes_index = [], [], [], [], [], []
    for i in range(ITEMS):
        names.append(intern("DIV"))
        values.append(-1)
        ratio = "1" if i == visible else "0"
        attributes.append([intern("id"), intern(f"i{i}"), intern("ratio"), intern(ratio)])
        parents.append(i - 1)
        texts.append(intern(f"Item {i}"))
        nodes_index.append(i)
    document = {
        "documentURL": intern("http://127.0.0.1/big"),
        "title": intern("Big"),
        "frameId": intern("F1"),
        "nodes": {
            "parentIndex": parents,
            "nodeType": [1] * ITEMS,
            "nodeName": names,
            "nodeValue": values,
            "backendNodeId": list(range(10, 10 + ITEMS)),
            "attributes": attributes,
            "inputValue": {"index": [3], "value": [intern("typed")]},
            "isClickable": {"index": [5, 6]},
        },
        "layout": {
            "nodeIndex": nodes_index,
            "styles": [[] for _ in range(ITEMS)],
            "bounds": [[0, i * 20, 100, 20] for i in range(ITEMS)],
            "text": texts,
            "stackingContexts": {"index": [0]},
        },
        "textBoxes": {"layoutIndex": [], "bounds": [], "start": [], "length": []},
        "scrollOffsetX": 0,
        "scrollOffsetY": 400,
    }
    return {"documents": [document], "strings": strings}


def resolved(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Every string index of the fields ``big_snapshot`` uses, replaced by its string."""
    strings = snapshot["strings"]

    def one(i: int) -> str | None:
        return None if i == -1 else strings[i]

    doc = copy.deepcopy(snapshot["documents"][0])
    for key in ("documentURL", "title", "frameId"):
        doc[key] = one(doc[key])
    nodes, layout = doc["nodes"], doc["layout"]
    nodes["nodeName"] = [one(i) for i in nodes["nodeName"]]
    nodes["nodeValue"] = [one(i) for i in nodes["nodeValue"]]
    nodes["attributes"] = [[one(i) for i in item] for item in nodes["attributes"]]
    nodes["inputValue"]["value"] = [one(i) for i in nodes["inputValue"]["value"]]
    layout["text"] = [one(i) for i in layout["text"]]
    return doc


def tab(html: str | None = None, snapshot: dict[str, Any] | None = None) -> TabState:
    return TabState(
        tab_id="T", url="http://127.0.0.1/big", title="Big", active=True, html=html, dom_snapshot=snapshot
    )


def step(index: int, tab_state: TabState) -> Step:
    return Step(
        index=index, trigger="action", timestamp=1.0, url=tab_state.url, title="Big", tabs=[tab_state]
    )


def test_html_chunks_join_back_to_the_same_text() -> None:
    html = big_html()
    pieces = split_text(html)
    assert len(pieces) > 4 and "".join(pieces) == html
    assert split_text("<p>short</p>") == ["<p>short</p>"]


def test_a_small_html_change_stores_a_few_chunks_not_the_page(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    first = writer.write_step(step(0, tab(html=big_html())))
    changed = big_html('<p class="new">added by the step</p>')
    second = writer.write_step(step(1, tab(html=changed)))
    writer.abort()
    assert second < first / 5
    session = load_session(writer.partial_path)
    assert session.steps[0].html == big_html() and session.steps[1].html == changed


def test_snapshot_renumbered_by_an_early_string_still_dedupes(tmp_path: Path) -> None:
    before = big_snapshot(visible=0)
    after = big_snapshot(visible=1, early_string="0.5")  # every index shifts by one
    assert (
        before["documents"][0]["nodes"]["attributes"][700]
        != after["documents"][0]["nodes"]["attributes"][700]
    )
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    first = writer.write_step(step(0, tab(snapshot=before)))
    second = writer.write_step(step(1, tab(snapshot=after)))
    third = writer.write_step(step(2, tab(snapshot=after)))
    writer.abort()
    assert second < first / 4 and third < 300
    loaded = [s.active_tab.dom_snapshot for s in load_session(writer.partial_path).steps]
    assert all(snapshot is not None for snapshot in loaded)
    assert resolved(loaded[0]) == resolved(before)  # type: ignore[arg-type]
    assert resolved(loaded[1]) == resolved(after) == resolved(loaded[2])  # type: ignore[arg-type]


def test_snapshot_encoding_round_trips_its_strings() -> None:
    snapshot = big_snapshot(visible=3, early_string="x")
    encoded = encode_snapshot(snapshot)
    assert encoded is not None and "strings" not in encoded
    assert encoded["documents"][0]["nodes"]["attributes"][3][3] == "1"
    assert resolved(decode_snapshot(encoded)) == resolved(snapshot)


def joined(value: Any, slices: dict[str, Any]) -> Any:
    """``value`` with every ``{CHUNKS_KEY: ids}`` replaced by the list its slices join into."""
    if isinstance(value, dict):
        if CHUNKS_KEY in value:
            return [item for slice_id in value[CHUNKS_KEY] for item in slices[slice_id]]
        return {key: joined(item, slices) for key, item in value.items()}
    if isinstance(value, list):
        return [joined(item, slices) for item in value]
    return value


class Slices:
    """A ``store`` for the chunker that records what it was asked to store."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] = {}
        self.calls = 0

    def __call__(self, value: list[Any]) -> str:
        self.calls += 1
        slice_id = hashlib.blake2b(orjson.dumps(value), digest_size=16).hexdigest()
        self.stored[slice_id] = value
        return slice_id


def test_the_chunker_stores_what_encoding_gives_and_each_slice_once() -> None:
    store = Slices()
    chunker = SnapshotChunker(store)
    first = big_snapshot(visible=0)
    chunked = chunker.chunk(first)
    assert chunked is not None
    assert chunked["documents"][0]["nodes"]["attributes"].keys() == {CHUNKS_KEY}
    assert joined(chunked, store.stored) == encode_snapshot(first)
    slices_of_one = store.calls
    assert slices_of_one >= len(split_list(first["documents"][0]["nodes"]["attributes"]))

    # Renumbered by an early string and one node changed: only the slice holding it is new among
    # the string lists (the plain lists are stored through `store` every time, as before).
    after = big_snapshot(visible=1, early_string="0.5")
    before_calls = store.calls
    chunked_after = chunker.chunk(after)
    assert joined(chunked_after, store.stored) == encode_snapshot(after)
    string_lists = ("nodeName", "nodeValue", "attributes")
    new_string_slices = [
        slice_id
        for key in string_lists
        for slice_id in chunked_after["documents"][0]["nodes"][key][CHUNKS_KEY]  # type: ignore[index]
        if slice_id not in chunked["documents"][0]["nodes"][key][CHUNKS_KEY]
    ]
    assert len(new_string_slices) == 1
    assert store.calls - before_calls < slices_of_one


def test_the_chunker_refuses_what_encoding_refuses() -> None:
    bad = big_snapshot()
    bad["documents"][0]["nodes"]["attributes"][700][1] = -5  # would read a string from the end
    assert encode_snapshot(bad) is None and SnapshotChunker(Slices()).chunk(bad) is None
    past = big_snapshot()
    past["documents"][0]["layout"]["text"][900] = len(past["strings"])
    assert encode_snapshot(past) is None and SnapshotChunker(Slices()).chunk(past) is None


def test_snapshots_it_does_not_know_are_stored_whole(tmp_path: Path) -> None:
    unknown = big_snapshot()
    unknown["documents"][0]["nodes"]["futureField"] = [1, 2, 3]
    small = {"documents": [], "strings": ["a", "b"]}
    assert encode_snapshot(unknown) is None and encode_snapshot(small) is None
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    writer.write_step(step(0, tab(snapshot=unknown)))
    writer.write_step(step(1, tab(snapshot=small)))
    writer.abort()
    loaded = load_session(writer.partial_path)
    assert loaded.steps[0].active_tab.dom_snapshot == unknown  # type: ignore[union-attr]
    assert loaded.steps[1].active_tab.dom_snapshot == small  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "blob",
    [
        {"type": "blob", "id": "c", "kind": "text", "data": ["missing"]},
        {"type": "blob", "id": "c", "kind": "text", "data": 5},
        {"type": "blob", "id": "c", "kind": "dom", "data": {"documents": 3}},
        {
            "type": "blob",
            "id": "c",
            "kind": "dom",
            "data": {"documents": [{"nodes": {"nodeName": {"$chunks": ["x"]}}}]},
        },
        {"type": "blob", "id": "c", "kind": "zip", "data": []},
    ],
)
def test_malformed_chunked_blobs_are_one_line_errors(tmp_path: Path, blob: dict[str, Any]) -> None:
    header = {"type": "header", **new_header().model_dump(mode="json")}
    lines = [header, {"type": "blob", "id": "x", "data": "not a list"}, blob]
    path = tmp_path / "bad.session.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(orjson.dumps(line) + b"\n" for line in lines)))
    with pytest.raises(SessionFormatError, match=r"line 3: .*(blob|kind)") as caught:
        load_session(path)
    assert "\n" not in str(caught.value)
