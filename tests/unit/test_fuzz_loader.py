"""Hostile input: whatever bytes they are given, ``load_session`` and ``load_har`` raise only
``SessionFormatError`` (``SessionVersionError`` included), with a message naming the input.

Property-based (hypothesis), bounded: each test runs a fixed number of cases and asserts it ran them
all; together more than 10,000 cases in well under a minute. Inputs: random bytes, truncated and
bit-flipped real files (gzip and plain), records with values, types and keys replaced at random
places, hostile lines (deep nesting, huge numbers, unknown records and fields, future versions), HAR
documents mutated the same way. Then the size limits, the decompression-bomb guard and the exact
messages for unknown fields and future versions.
"""

from __future__ import annotations

import gzip
import json
import os
import tracemalloc
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdp_integration.errors import SessionFormatError, SessionVersionError
from cdp_integration.har.export import session_to_har
from cdp_integration.har.importer import HAR_VERSIONS, load_har
from cdp_integration.session import store
from cdp_integration.session.models import FORMAT_VERSION
from cdp_integration.session.store import Session, load_session
from tests.unit.test_redact import crafted_session, write

FUZZ = settings(
    deadline=None,  # a per-case time limit fails on a loaded machine, not on a slow loader
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
"""Fixed case counts (``max_examples``): the suite stays bounded."""

FULL = os.environ.get("CDP_HOSTILE_FULL") == "1"
"""``make test-hostile``: the case counts as written; ``make test`` runs a quarter of each (a new
sample every run: hypothesis keeps no database here)."""

_GZIP_MAGIC = b"\x1f\x8b"
_KEYS = [
    "type",
    "format_version",
    "id",
    "data",
    "$blob",
    "index",
    "tabs",
    "network",
    "evaluation",
    "probe",
    "calls",
    "http",
    "pages",
    "html",
    "dom_snapshot",
    "request",
    "response",
    "body",
    "headers",
    "cookies",
    "result",
    "log",
    "entries",
    "version",
    "postData",
    "content",
    "_step",
    "status",
    "url",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["header", "blob", "step", "end", "1.2", "2.0", *_KEYS]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=10,
)


@cache
def real_session_gzip() -> bytes:
    """A real session file: header, blobs, steps with tabs, DOM, network, evaluator calls; end record."""
    import tempfile

    session, _ = crafted_session()
    with tempfile.TemporaryDirectory() as directory:
        return write(session, Path(directory) / "real.session.jsonl.gz").read_bytes()


@cache
def real_session_plain() -> bytes:
    return gzip.decompress(real_session_gzip())


@cache
def real_har() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.session.jsonl.gz"
        path.write_bytes(real_session_gzip())
        return orjson.dumps(session_to_har(load_session(path), include_evaluator=True))


def session_outcome(path: Path) -> Session | SessionFormatError:
    """Load ``path``; anything but a session or a ``SessionFormatError`` fails the test."""
    try:
        return load_session(path)
    except SessionFormatError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: ") and "\n" not in message and "\r" not in message, message
        return exc


def har_outcome(data: bytes) -> object:
    try:
        return load_har(data)
    except SessionFormatError as exc:
        message = str(exc)
        assert message.startswith("<HAR bytes>: ") and "\n" not in message, message
        return exc


def run_counted(count: int, strategy: st.SearchStrategy[Any], check: Callable[[Any], object]) -> None:
    """Run ``check`` on ``count`` generated cases and prove they all ran."""
    ran: list[None] = []
    count = count if FULL else max(100, count // 4)

    @settings(FUZZ, max_examples=count)
    @given(strategy)
    def cases(case: Any) -> None:
        ran.append(None)
        check(case)

    cases()
    assert len(ran) >= count


@pytest.fixture
def target(tmp_path: Path) -> Callable[[bytes], Session | SessionFormatError]:
    path = tmp_path / "fuzz.session.jsonl.gz"

    def load(data: bytes) -> Session | SessionFormatError:
        path.write_bytes(data)
        return session_outcome(path)

    return load


# -- session loader -----------------------------------------------------------------------------


def test_random_bytes(target: Callable[[bytes], object]) -> None:
    inputs = st.one_of(
        st.binary(max_size=2048),
        st.binary(max_size=2048).map(lambda b: _GZIP_MAGIC + b),
        st.binary(max_size=2048).map(gzip.compress),
        st.binary(max_size=512).map(lambda b: gzip.compress(b)[: len(b) // 2 + 10]),
    )
    run_counted(1500, inputs, target)


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> bytes:
    """``original`` cut short, bit-flipped, with bytes inserted or deleted (1-4 edits)."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(["cut", "flip", "insert", "delete", "byte"]))
        if edit == "cut":
            del data[at:]
        elif edit == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


def test_damaged_gzip_session(target: Callable[[bytes], object]) -> None:
    run_counted(2000, damaged(real_session_gzip()), target)


def test_damaged_plain_session(target: Callable[[bytes], object]) -> None:
    run_counted(1500, damaged(real_session_plain()), target)


def _records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in real_session_plain().splitlines()]


@st.composite
def mutated_records(draw: st.DrawFn) -> bytes:
    """Real records with a value, type or key changed somewhere inside; then plain or gzip."""
    records = _records()
    for _ in range(draw(st.integers(1, 3))):
        record = records[draw(st.integers(0, len(records) - 1))]
        parent: Any = record
        for _depth in range(draw(st.integers(0, 6))):
            children = list(parent.items()) if isinstance(parent, dict) else list(enumerate(parent))
            children = [(key, child) for key, child in children if isinstance(child, dict | list) and child]
            if not children:
                break
            parent = draw(st.sampled_from(children))[1]
        keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
        edit = draw(st.sampled_from(["replace", "delete", "unknown key", "retype", "duplicate"]))
        if edit == "unknown key" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
        elif edit == "retype":
            record["type"] = draw(json_values)
        elif edit == "duplicate":
            records.insert(draw(st.integers(0, len(records))), json.loads(json.dumps(record)))
        elif keys:
            key = draw(st.sampled_from(keys))
            if edit == "delete":
                del parent[key]
            else:
                parent[key] = draw(json_values)
    lines = [json.dumps(record).encode() for record in records]
    if draw(st.booleans()):
        lines.pop(draw(st.integers(0, len(lines) - 1)))
    data = b"\n".join(lines) + b"\n" * draw(st.integers(0, 1))
    return gzip.compress(data) if draw(st.booleans()) else data


def test_mutated_records(target: Callable[[bytes], object]) -> None:
    run_counted(3000, mutated_records(), target)


HEADER = {"type": "header", "format_version": FORMAT_VERSION, "created": 1.0, "tool": "fuzz"}


def _step_line(**fields: str) -> bytes:
    base = {
        "type": "step",
        "index": 0,
        "trigger": "reset",
        "timestamp": 1.0,
        "url": "u",
        "title": "t",
        "tabs": [],
    }
    text = json.dumps(base)[:-1]
    return (text + "".join(f', "{key}": {value}' for key, value in fields.items()) + "}").encode()


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    """A valid header, then a line built to hurt: deep nesting, huge numbers, odd records."""
    depth = draw(st.integers(1, 3000))
    digits = draw(st.integers(1, 500))
    choice = draw(
        st.sampled_from(["nest", "nest in Any", "number", "exponent", "type", "version", "blob", "raw"])
    )
    if choice == "nest":
        line = _step_line(tabs="[" * depth + "]" * depth)
    elif choice == "nest in Any":
        line = _step_line(
            evaluation='{"kind": "probe", "calls": [{"page": 0, "op": "url", "url": "u", "result": '
            + "[" * depth
            + "]" * depth
            + "}]}"
        )
    elif choice == "number":
        line = _step_line(index=draw(st.sampled_from(["", "-"])) + "9" * digits)
    elif choice == "exponent":
        line = _step_line(timestamp=f"1e{draw(st.sampled_from(['', '-', '+']))}{'9' * min(digits, 30)}")
    elif choice == "type":
        line = json.dumps({"type": draw(json_values), "index": 1}).encode()
    elif choice == "version":
        header = {**HEADER, "format_version": draw(json_values), draw(st.text(max_size=5)): draw(json_values)}
        return json.dumps(header).encode() + b"\n"
    elif choice == "blob":
        reference = draw(json_values)
        line = _step_line(
            tabs=json.dumps(
                [{"tab_id": "T", "url": "u", "title": "", "active": True, "html": {"$blob": reference}}]
            )
        )
    else:
        line = draw(st.binary(max_size=256))
    data = orjson.dumps(HEADER) + b"\n" + line + b"\n" * draw(st.integers(0, 1))
    return gzip.compress(data) if draw(st.booleans()) else data


def test_hostile_lines(target: Callable[[bytes], object]) -> None:
    run_counted(1200, hostile_lines(), target)


# -- HAR importer --------------------------------------------------------------------------------


def test_har_random_input() -> None:
    inputs = st.one_of(
        st.binary(max_size=1024),
        json_values.map(lambda value: json.dumps(value).encode()),
        json_values.map(lambda value: json.dumps({"log": value}).encode()),
        json_values.map(lambda value: json.dumps({"log": {"version": "1.2", "entries": value}}).encode()),
        json_values.map(lambda value: gzip.compress(json.dumps({"log": {"entries": [value]}}).encode())),
    )
    run_counted(1200, inputs, har_outcome)


@st.composite
def mutated_har(draw: st.DrawFn) -> bytes:
    document = json.loads(real_har())
    for _ in range(draw(st.integers(1, 3))):
        parent: Any = document
        for _depth in range(draw(st.integers(0, 7))):
            children = list(parent.values()) if isinstance(parent, dict) else list(parent)
            children = [child for child in children if isinstance(child, dict | list) and child]
            if not children:
                break
            parent = draw(st.sampled_from(children))
        keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
        if not keys:
            continue
        key = draw(st.sampled_from(keys))
        if draw(st.booleans()):
            parent[key] = draw(json_values)
        else:
            del parent[key]
    data = json.dumps(document).encode()
    if draw(st.booleans()):
        return draw(damaged(data)) if draw(st.booleans()) else gzip.compress(data)
    return data


def test_har_mutations() -> None:
    run_counted(1600, mutated_har(), har_outcome)


# -- limits and messages ---------------------------------------------------------------------------


def _bomb(size: int, prefix: bytes = b"") -> bytes:
    """A small gzip that inflates to ``size`` bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    parts = [packer.compress(prefix)]
    for _ in range(size // len(chunk)):
        parts.append(packer.compress(chunk))
    return b"".join([*parts, packer.flush()])


def test_decompression_bomb_is_refused_without_inflating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 1 << 20
    monkeypatch.setattr(store, "MAX_SESSION_BYTES", limit)
    bomb = _bomb(256 << 20, orjson.dumps(HEADER) + b"\n")
    assert len(bomb) < limit // 2  # small on disk: the file size check alone would let it through
    path = tmp_path / "bomb.session.jsonl.gz"
    path.write_bytes(bomb)
    tracemalloc.start()
    try:
        with pytest.raises(SessionFormatError) as refused:
            load_session(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(refused.value) == f"{path}: decompresses to more than {limit} bytes"
    assert peak < 8 * limit  # 256 MiB inflated would show here


def test_har_decompression_bomb_is_refused_without_inflating_it() -> None:
    limit = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(SessionFormatError) as refused:
            load_har(_bomb(256 << 20, b'{"log": {"version": "1.2", "entries": ['), max_bytes=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(refused.value) == f"<HAR bytes>: decompresses to more than {limit} bytes"
    assert peak < 8 * limit


def test_bomb_guard_holds_when_zlib_has_consumed_all_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cut-short stream can end exactly where output reaches the limit, with more output still
    held inside zlib and no input left over: that is still "more than the limit", not a partial file."""
    limit = 1 << 16
    monkeypatch.setattr(store, "MAX_SESSION_BYTES", limit)
    full = gzip.compress(orjson.dumps(HEADER) + b"\n" + b"x" * (limit + 257), compresslevel=6)
    path = tmp_path / "cut.session.jsonl.gz"
    over = 0
    for cut in range(len(full) - 40, len(full) + 1):
        data = full[:cut]
        path.write_bytes(data)
        inflatable = len(zlib.decompressobj(47).decompress(data))
        outcome = session_outcome(path)
        refused = isinstance(outcome, SessionFormatError) and "decompresses to more than" in str(outcome)
        assert refused == (inflatable > limit), (cut, inflatable, outcome)
        over += refused
    assert over > 0


def test_files_over_the_size_limit_are_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "MAX_SESSION_BYTES", 1000)
    path = tmp_path / "big.session.jsonl"
    path.write_bytes(orjson.dumps(HEADER) + b"\n" + b" " * 2000)
    with pytest.raises(SessionFormatError, match=r"^.*big\.session\.jsonl: file is larger than 1000 bytes$"):
        load_session(path)
    with pytest.raises(SessionFormatError) as refused:
        load_har(b"{}" + b" " * 2000, max_bytes=1000)
    assert str(refused.value) == "<HAR bytes>: larger than 1000 bytes"


def test_future_format_version_names_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "future.session.jsonl"
    future = {**HEADER, "format_version": FORMAT_VERSION + 1, "field_from_the_future": {"x": 1}}
    path.write_bytes(orjson.dumps(future) + b"\n" + _step_line(new_thing="1") + b"\n")
    with pytest.raises(SessionVersionError) as refused:
        load_session(path)
    assert str(refused.value) == (
        f"{path}: written by session format {FORMAT_VERSION + 1}; this release reads up to {FORMAT_VERSION} "
        "(upgrade cdp-integration)"
    )


def test_unknown_fields_and_records_are_named(tmp_path: Path) -> None:
    path = tmp_path / "odd.session.jsonl"
    path.write_bytes(orjson.dumps(HEADER) + b"\n" + _step_line(new_thing="1") + b"\n")
    with pytest.raises(SessionFormatError) as refused:
        load_session(path)
    assert str(refused.value) == f"{path}: line 2: invalid record: new_thing: Extra inputs are not permitted"
    path.write_bytes(orjson.dumps(HEADER) + b"\n" + b'{"type": "attachment", "id": "x"}\n')
    with pytest.raises(SessionFormatError) as refused:
        load_session(path)
    assert str(refused.value) == f"{path}: line 2: unknown record type 'attachment'"


def test_har_versions_and_unknown_fields() -> None:
    document = json.loads(real_har())
    document["log"]["entries"][0]["request"]["_futureField"] = {"anything": [1, 2]}
    document["log"]["entries"][0]["brandNewField"] = True
    entries = load_har(json.dumps(document).encode())
    assert entries and entries[0].method == "POST" and entries[0].step == 1  # unknown fields: ignored
    document["log"]["version"] = "2.0"
    with pytest.raises(SessionFormatError) as refused:
        load_har(json.dumps(document).encode())
    assert str(refused.value) == (
        f"<HAR bytes>: HAR version '2.0' is not supported (this release reads {', '.join(HAR_VERSIONS)})"
    )
    document["log"]["version"] = "1.2"
    document["log"]["entries"][3]["request"]["url"] = 7
    with pytest.raises(SessionFormatError) as refused:
        load_har(json.dumps(document).encode())
    assert str(refused.value) == "<HAR bytes>: entries[3].request.url: expected a string, got a number"


def test_har_round_trip_of_an_exported_session(tmp_path: Path) -> None:
    path = tmp_path / "s.har.gz"
    path.write_bytes(gzip.compress(real_har()))
    entries = load_har(path)
    exported = json.loads(real_har())["log"]["entries"]
    assert [(e.method, e.url, e.status, e.step) for e in entries] == [
        (x["request"]["method"], x["request"]["url"], x["response"]["status"], x["_step"]) for x in exported
    ]
    assert all(name == name.lower() for e in entries for name in e.request_headers)
    with pytest.raises(SessionFormatError, match="is a directory"):
        load_har(tmp_path)
