"""Chunked HTML and DOM snapshots: what a step did not change is not stored again; values read back."""

from __future__ import annotations

import copy
import gzip
import hashlib
import time
import zlib
from collections.abc import Iterator
from itertools import accumulate
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


# -- content-defined cuts inside large text -----------------------------------------------------


def app_page(rendered: str, data_items: int = 18_000) -> str:
    """A single-page app's HTML: its data inline in a ``<script>`` (one text node of ~1 MB, no
    closing tag inside), then the part the app rendered."""
    records = ",".join(
        f'{{"id":{i},"sku":"SKU-{i * 7919 % 100_000:05d}","price":{i % 997}.{i % 89:02d},"tags":["t{i % 31}"]}}'
        for i in range(data_items)
    )
    return (
        f'<html><head><script type="application/json" id="app-data">[{records}]</script></head>'
        f'<body><div id="app">{rendered}</div></body></html>'
    )


def rendered_part(step: int) -> str:
    return "".join(f'<li class="row">row {i} of step {step}</li>' for i in range(100))


def new_chunks(before: str, after: str) -> list[str]:
    known = set(split_text(before))
    return [piece for piece in split_text(after) if piece not in known]


def test_big_inline_script_is_cut_inside_and_joins_back() -> None:
    html = app_page(rendered_part(0))
    assert len(html) > 1_000_000
    pieces = split_text(html)
    assert "".join(pieces) == html
    script_start, script_end = html.index("<script"), html.index("</script>")
    cuts = list(accumulate(map(len, pieces)))[:-1]
    assert sum(script_start < cut < script_end for cut in cuts) > 40  # not only at closing tags
    assert max(map(len, pieces)) <= 64 * 1024 + 4


def test_a_step_that_changes_only_the_rendered_part_stores_a_small_fraction() -> None:
    before, after = app_page(rendered_part(0)), app_page(rendered_part(1))
    changed = new_chunks(before, after)
    assert 0 < sum(map(len, changed)) < len(after) * 0.05


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("edit", ["insert", "delete", "replace"])
def test_cuts_are_stable_under_a_local_edit(where: float, edit: str) -> None:
    """An edit anywhere (inside the script data too) changes the chunks around it, not the rest."""
    html = app_page(rendered_part(0))
    at = int(len(html) * where)
    edited = {
        "insert": html[:at] + '"inserted":1,' + html[at:],
        "delete": html[:at] + html[at + 40 :],
        "replace": html[:at] + "X" + html[at + 1 :],
    }[edit]
    changed = new_chunks(html, edited)
    assert 1 <= len(changed) <= 3
    assert sum(map(len, changed)) < 3 * 64 * 1024


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a" * 5_000_000, id="5MB-one-byte"),
        pytest.param("\x00" * 5_000_000, id="5MB-NUL"),
        pytest.param("".join(chr(0x20 + (i * 7919) % 0x3000) for i in range(300_000)), id="non-ASCII"),
        pytest.param("é€𝄞" * 200_000 + "\ud800x\udfff", id="astral-and-lone-surrogates"),
        pytest.param("<b>x</b>" * 600_000, id="many-tiny-pieces"),
    ],
)
def test_worst_case_texts_join_back_within_the_chunk_bounds(text: str) -> None:
    pieces = split_text(text)
    assert "".join(pieces) == text
    sizes = [len(piece.encode("utf-8", "surrogatepass")) for piece in pieces]
    assert all(size >= 2 * 1024 for size in sizes)
    assert all(size <= 64 * 1024 + 3 for size in sizes[:-1]) and sizes[-1] < 68 * 1024
    assert len(pieces) <= len(text.encode("utf-8", "surrogatepass")) // (2 * 1024) + 1


def test_short_and_boundary_texts() -> None:
    assert split_text("") == [""]
    just_under = "x" * (4 * 1024 - 1)
    assert split_text(just_under) == [just_under]
    text = "y" * (4 * 1024 + 7)
    assert "".join(split_text(text)) == text


def test_inline_data_page_written_twice_stores_a_small_fraction(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    pages = [app_page(rendered_part(index)) for index in range(3)]
    written = [writer.write_step(step(index, tab(html=page))) for index, page in enumerate(pages)]
    writer.abort()
    assert all(later < written[0] * 0.05 for later in written[1:])
    assert [s.html for s in load_session(writer.partial_path).steps] == pages


def test_a_page_served_again_with_a_byte_changed_stores_its_body_once(tmp_path: Path) -> None:
    """A single-page app's document (megabytes of inline script) loaded again: each response body
    differs by a byte (a token the server writes), so the bodies are chunked like the HTML and only
    the chunks around the change are new; small bodies stay plain blobs."""
    from cdp_integration.session.models import NetworkExchange, RequestInfo, ResponseInfo

    def load(index: int, body: str) -> Step:
        exchange = NetworkExchange(
            request_id=str(index),
            tab_id="T1",
            started=1.0 + index,
            request=RequestInfo(method="GET", url="http://127.0.0.1/", headers={}),
            response=ResponseInfo(status=200, headers={"content-type": "text/html"}, body=body),
        )
        return step(index, tab(html="<p>rendered</p>")).model_copy(update={"network": [exchange]})

    bodies = [app_page(f"<p>served at load {index}</p>") for index in range(3)]
    assert len(bodies[0]) > 1_000_000
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    written = [writer.write_step(load(index, body)) for index, body in enumerate(bodies)]
    small = writer.write_step(load(3, "<p>small</p>"))
    writer.abort()
    assert all(later < written[0] * 0.05 for later in written[1:]), written
    session = load_session(writer.partial_path)
    assert [s.network[0].response.body for s in session.steps[:3]] == bodies
    assert session.steps[3].network[0].response.body == "<p>small</p>" and small < 2_000
    text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(writer.partial_path.read_bytes())
    records = [orjson.loads(line) for line in text.splitlines()]
    kinds = [r.get("kind", "plain") for r in records if r.get("type") == "blob"]
    assert kinds.count("text") == 3 and max(len(str(r.get("data"))) for r in records) < 200_000


# -- snapshot encoding is linear in its input ---------------------------------------------------


class CountingStrings(list[str]):
    """A string table that counts how many of its items encoding reads by iteration."""

    reads = 0

    def __iter__(self) -> Iterator[str]:
        for item in super().__iter__():
            self.reads += 1
            yield item


@pytest.mark.parametrize("encoder", ["encode_snapshot", "SnapshotChunker"])
def test_snapshot_encoding_reads_the_string_table_once(encoder: str) -> None:
    """Many documents over one big table (a page with thousands of frames): the table is indexed
    once per snapshot, not once per document (which made 20k documents x 100k strings take minutes)."""
    big = big_snapshot()
    strings = CountingStrings([*big["strings"], *(f"s{i}" for i in range(2_000))])
    snapshot = {"documents": [big["documents"][0]] + [{} for _ in range(499)], "strings": strings}
    encoded = (
        encode_snapshot(snapshot)
        if encoder == "encode_snapshot"
        else SnapshotChunker(Slices()).chunk(snapshot)
    )
    assert encoded is not None and len(encoded["documents"]) == 500
    assert strings.reads <= 3 * len(strings)  # a pass or two per snapshot, never one per document


def test_many_empty_documents_over_a_big_table_write_and_redact_fast(tmp_path: Path) -> None:
    """The hostile shape of issue 20 (20k empty documents x 100k strings), at capture time (the
    writer) and in ``redact``: seconds, where per-document tables took far over 30 s."""
    from cdp_integration.session.redact import redact_file

    snapshot = {"documents": [{} for _ in range(20_000)], "strings": [f"s{i}" for i in range(100_000)]}
    started = time.perf_counter()
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    writer.write_step(step(0, tab(snapshot=snapshot)))
    writer.abort()
    source = tmp_path / "s.session.jsonl.gz"
    writer.partial_path.rename(source)
    redact_file(source, tmp_path / "r.session.jsonl.gz")
    assert time.perf_counter() - started < 30
    loaded = load_session(tmp_path / "r.session.jsonl.gz").steps[0].active_tab.dom_snapshot
    assert loaded is not None and len(loaded["documents"]) == 20_000


def snapshot_with_inline_data(step_text: str) -> dict[str, Any]:
    """``big_snapshot`` whose node 5 is a 1 MB script text and node 6 a text the page renders."""
    snapshot = big_snapshot()
    strings = snapshot["strings"]
    values = snapshot["documents"][0]["nodes"]["nodeValue"]
    strings.append(app_page("", data_items=18_000))
    values[5] = len(strings) - 1
    strings.append(step_text)
    values[6] = len(strings) - 1
    return snapshot


def test_a_long_string_in_a_snapshot_is_stored_once_while_its_neighbours_change(tmp_path: Path) -> None:
    """BrowserGym's observation snapshot of an inline-data page: the script's text node sits in the
    same slice of node values as the text the page re-renders every step."""
    snapshots = [snapshot_with_inline_data(f"rendered at step {index}") for index in range(3)]
    assert len(snapshots[0]["strings"][-2]) > 1_000_000
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    written = [writer.write_step(step(index, tab(snapshot=s))) for index, s in enumerate(snapshots)]
    writer.abort()
    assert all(later < written[0] * 0.05 for later in written[1:])
    loaded = [s.active_tab.dom_snapshot for s in load_session(writer.partial_path).steps]
    assert [resolved(s) for s in loaded] == [resolved(s) for s in snapshots]  # type: ignore[arg-type]
    store = Slices()
    chunked = SnapshotChunker(store).chunk(snapshots[0])
    assert joined(chunked, store.stored) == encode_snapshot(snapshots[0])
