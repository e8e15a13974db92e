"""Reading and writing session files.

On disk a session is one gzip stream of JSON lines (``zcat`` shows it)::

    {"type": "header", ...SessionHeader}
    {"type": "blob", "id": "<hash>", "data": <str | object>}     once per distinct large value
    {"type": "blob", "id": "<hash>", "kind": "text" | "dom", "data": ...}   a value made of chunks
    {"type": "step", ...Step, large values replaced by {"$blob": "<hash>"}}
    ...
    {"type": "end", ...SessionEnd}

Format 2 stores a tab's HTML and DOM snapshot as chunks (``session/chunks.py``): a ``text`` blob's
data is the list of the string blobs it joins; a ``dom`` blob's data is an encoded snapshot whose
long lists are ``{"$chunks": [ids]}`` of list blobs. Chunks come before the blob made of them, and
the reader assembles it when it reads that blob. Format 1 files (no ``kind``) read unchanged.

The writer flushes the compressor (``Z_SYNC_FLUSH``) after every record, so a process killed at any
point leaves a file whose every completed step decompresses; the reader stops at the first
incomplete line. While capturing, the file is named ``*.partial``; finishing writes the end record,
fsyncs and renames it atomically.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pydantic

from cdp_integration._version import __version__
from cdp_integration.errors import SessionFormatError, SessionVersionError, StepIndexError
from cdp_integration.session.chunks import CHUNKS_KEY, SnapshotChunker, cut_text, decode_snapshot
from cdp_integration.session.limits import SessionLimits, check_depth, count_values
from cdp_integration.session.models import (
    FORMAT_VERSION,
    Evaluation,
    NetworkExchange,
    SessionEnd,
    SessionHeader,
    Step,
)
from cdp_integration.session.untrusted import JSON_DEPTH_CEILING, clean_text, open_input, open_output

__all__ = [
    "MAX_SESSION_BYTES",
    "PARTIAL_SUFFIX",
    "SESSION_SUFFIX",
    "Session",
    "SessionWriter",
    "load_session",
    "new_header",
    "read_header",
]

SESSION_SUFFIX = ".session.jsonl.gz"
PARTIAL_SUFFIX = ".partial"
MAX_SESSION_BYTES = 1024**3
"""Decompressed size beyond which a file is refused (a decompression-bomb guard)."""

_BLOB_KEY = "$blob"
_INLINE_LIMIT = 1024
"""Evaluator answers and judge responses longer than this are stored as blobs (page HTML repeats)."""
_TAB_BLOB_FIELDS = ("html", "dom_snapshot", "screenshot_png", "thumbnail_webp", "ax_tree")
_CHUNKED_TEXT_MIN = 64 * 1024
"""A body or answer at least this long is stored as content-defined chunks (``text`` blob), as the HTML."""


@dataclass(frozen=True)
class Session:
    """A loaded session: header, steps in order, and the end record if the episode finished."""

    header: SessionHeader
    steps: tuple[Step, ...]
    end: SessionEnd | None = None
    path: Path | None = None
    complete: bool = False
    """True when the file was finalized (end record present, stream closed)."""
    blob_count: int = 0

    @property
    def instance_id(self) -> str | None:
        if self.end is not None and self.end.instance_id:
            return self.end.instance_id
        return self.header.instance_id

    @property
    def task(self) -> dict[str, Any]:
        """The task as finally known: the header's, updated by what the end record adds."""
        return {**self.header.task, **(self.end.task if self.end else {})}

    @property
    def final_step(self) -> Step:
        if not self.steps:
            raise SessionFormatError(f"{self.path or 'session'}: has no captured steps")
        return self.steps[-1]

    @property
    def final_answer(self) -> str | None:
        return self.end.final_answer if self.end else None

    def step_index(self, step: int) -> int:
        """The position of ``step`` in ``steps``; negative counts from the end, like a list.

        Raises ``StepIndexError`` (an ``IndexError``) when the session has no such step.
        """
        count = len(self.steps)
        index = step + count if step < 0 else step
        if not 0 <= index < count:
            where = f"steps 0..{count - 1}" if count else "no steps"
            raise StepIndexError(f"step {step} is out of range: the session has {where}")
        return index

    def step(self, step: int) -> Step:
        """The step at ``step`` (negative from the end); ``StepIndexError`` when there is none."""
        return self.steps[self.step_index(step)]

    def _is_last(self, step: int) -> bool:
        return self.step_index(step) == len(self.steps) - 1

    def answer_at(self, step: int) -> str | None:
        """The agent's final answer as the chat holds it at ``step``: on the last step only."""
        return self.final_answer if self._is_last(step) else None

    def evaluation_at(self, step: int) -> Evaluation | None:
        """The recorded evaluator run on the state of ``step``: its own ``validate()``, or, on the last
        step when it had none, the logger's end-of-episode probe."""
        captured = self.step(step)
        if captured.evaluation is None and self._is_last(step) and self.end is not None:
            return self.end.probe
        return captured.evaluation

    def network_at(self, step: int) -> tuple[NetworkExchange, ...]:
        """The traffic captured with ``step`` (made since the previous step), in capture order; the
        last step also gets what completed after its capture (the end record's, e.g. a final POST)."""
        captured = self.step(step)
        if self.end is not None and self.end.network and self._is_last(step):
            return (*captured.network, *self.end.network)
        return tuple(captured.network)


def _digest(data: bytes | memoryview) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_LIST_ITEM_BYTES = 8
"""What one item of a list built from chunks costs beyond its JSON text (a pointer)."""
_VALUE_BYTES = 64
"""What one parsed JSON value costs at most beyond its text (an empty dict: 64 bytes; a float, an
int beyond the small ones, a short string: 24-56 bytes, plus the pointer that holds it)."""


class _Blobs:
    """The blobs read so far, with what each costs expanded, and the two budgets they count against.

    A blob's *expanded size* is known before it is built: a plain blob's record size (plus
    ``_VALUE_BYTES`` per JSON value), a ``text`` blob's sum of its chunks', a ``dom`` blob's own
    record plus a pointer per item of the lists its chunks join into (twice: joined, then decoded;
    the items themselves are the chunks', already counted). ``built`` counts every blob built, once (the reader's
    memory: shared values are never copied); ``referenced`` counts a blob's expanded size once per
    step or end record that refers to it (what a consumer walking every step would expand). Chunks
    may only name plain blobs, as the writer writes them: no text made of text, no chunks of chunks.
    """

    def __init__(self, source: str, limits: SessionLimits) -> None:
        self.source = source
        self.limits = limits
        self.values: dict[str, Any] = {}
        self.sizes: dict[str, int] = {}
        self.plain: set[str] = set()
        self.items: dict[str, int] = {}
        """Plain list blobs: their length (what a list joined from them costs: a pointer per item)."""
        self.built = 0
        self.referenced = 0

    def build(self, size: int, where: str) -> None:
        """Count ``size`` bytes about to be built; refuse once the session exceeds its budget."""
        self.built += size
        if self.built > self.limits.max_expanded_bytes:
            raise SessionFormatError(
                f"{self.source}: {where}: the session expands to more than "
                f"{self.limits.max_expanded_bytes} bytes (limit CDP_SESSION_MAX_EXPANDED_BYTES)"
            )

    def add(self, record: dict[str, Any], size: int, number: int) -> None:
        blob_id, data, kind = record.get("id"), record.get("data"), record.get("kind")
        where = f"line {number}"
        if not isinstance(blob_id, str) or "data" not in record:
            raise SessionFormatError(f"{self.source}: {where}: malformed blob record")
        if blob_id in self.values:
            raise SessionFormatError(f"{self.source}: {where}: blob {blob_id[:40]!r} defined twice")
        if kind is None:
            cost = size  # the record's text and its values, counted before it was parsed
            self.values[blob_id], self.sizes[blob_id] = data, cost
            self.plain.add(blob_id)
            if isinstance(data, list):
                self.items[blob_id] = len(data)
            return
        try:
            if kind == "text":
                ids = _id_list(data)
                cost = sum(self._chunk_size(chunk_id, str) for chunk_id in ids)
                self.build(cost, where)
                value: Any = "".join(self.values[chunk_id] for chunk_id in ids)
            elif kind == "dom":
                if not isinstance(data, dict):
                    raise ValueError("an encoded snapshot is an object")
                cost = size + 2 * _LIST_ITEM_BYTES * self._chunks_items(data)  # joined, then decoded
                self.build(cost, where)
                value = decode_snapshot(_expand_chunks(data, self.values))
            else:
                raise ValueError(f"unknown blob kind {str(kind)[:40]!r}")
        except SessionFormatError:
            raise
        except (LookupError, TypeError, ValueError) as exc:
            raise SessionFormatError(f"{self.source}: {where}: cannot assemble blob: {exc}") from None
        self.values[blob_id], self.sizes[blob_id] = value, cost

    def _chunk_size(self, chunk_id: Any, kind: type) -> int:
        if not isinstance(chunk_id, str) or chunk_id not in self.plain:
            raise ValueError(f"chunk {str(chunk_id)[:40]!r} is not a plain blob written before")
        if not isinstance(self.values[chunk_id], kind):
            raise ValueError(f"chunk {chunk_id[:40]!r} is not a {kind.__name__}")
        return self.sizes[chunk_id]

    def _chunks_items(self, value: Any) -> int:
        """The items of the ``$chunks`` lists of an encoded snapshot, joined (iterative walk)."""
        total = 0
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                if CHUNKS_KEY in item:
                    if len(item) != 1:
                        raise ValueError("a chunk list has other keys")
                    ids = _id_list(item[CHUNKS_KEY])
                    for chunk_id in ids:
                        self._chunk_size(chunk_id, list)
                        total += self.items[chunk_id]
                else:
                    stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
        return total

    def resolve(self, value: Any) -> Any:
        """``value`` with a ``{"$blob": id}`` reference replaced by that blob (shared, not copied)."""
        if isinstance(value, dict) and _BLOB_KEY in value:
            blob_id = value[_BLOB_KEY]
            if not isinstance(blob_id, str) or blob_id not in self.values:
                raise SessionFormatError(f"{self.source}: reference to missing blob {str(blob_id)[:40]!r}")
            self.referenced += self.sizes[blob_id]
            if self.referenced > self.limits.max_referenced_bytes:
                raise SessionFormatError(
                    f"{self.source}: its steps refer to more than {self.limits.max_referenced_bytes} "
                    "bytes of blobs (limit CDP_SESSION_MAX_REFERENCED_BYTES)"
                )
            return self.values[blob_id]
        return value


def _id_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("chunk ids are not a list")
    return value


def _expand_chunks(value: Any, blobs: dict[str, Any]) -> Any:
    """An encoded snapshot with its ``{"$chunks": [ids]}`` lists joined from the list blobs (whose
    shape and size ``_Blobs`` checked)."""
    if isinstance(value, dict):
        if CHUNKS_KEY in value:
            joined: list[Any] = []
            for chunk_id in value[CHUNKS_KEY]:
                joined += blobs[chunk_id]
            return joined
        return {key: _expand_chunks(item, blobs) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_chunks(item, blobs) for item in value]
    return value


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a step is encoded.

    Encoding a 15,000-node DOM snapshot allocates ~60,000 short-lived lists (freed by reference
    counting when the write returns, none in a cycle); in a process whose heap already holds a few
    such snapshots that triggers full collections over all of them: 20-30 ms writes became ~100 ms
    every third step (measured). A collector that is already disabled stays disabled.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class SessionWriter:
    """Appends records to a ``*.partial`` session file; ``finish()`` finalizes it atomically.

    Large values equal to one written before are referenced, not written again; a tab's HTML and
    DOM snapshot are written as chunks, so only the parts a step changed are new.
    """

    def __init__(self, partial_path: Path, header: SessionHeader, *, compresslevel: int = 3) -> None:
        self.partial_path = partial_path
        try:
            partial_path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise SessionFormatError(f"{partial_path.parent}: exists and is not a directory") from None
        self._file: BinaryIO = open_output(
            partial_path
        )  # never through a symlink; closed in finish()/abort()
        self._zip = zlib.compressobj(compresslevel, zlib.DEFLATED, 31)
        self._blobs: set[str] = set()
        self._last_html: tuple[str, dict[str, str]] | None = None
        """The last HTML written and its reference (an unchanged page skips the work)."""
        self._snapshots = SnapshotChunker(self._blob)
        self.bytes_written = 0
        self.closed = False
        self._write({"type": "header", **header.model_dump(mode="json")})

    def _write(self, record: dict[str, Any]) -> None:
        self._write_line(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")

    def _write_line(self, line: bytes) -> None:
        chunk = self._zip.compress(line) + self._zip.flush(zlib.Z_SYNC_FLUSH)
        self._file.write(chunk)
        self._file.flush()
        self.bytes_written += len(chunk)

    def _blob(self, value: Any, kind: str | None = None) -> str:
        """Write ``value`` once (serialized once) and return its id."""
        if isinstance(value, str) and kind is None:
            data, blob_id = None, _digest(value.encode())
        else:
            data = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
            blob_id = _digest(f"{kind or 'json'}\0".encode() + data)
        if blob_id not in self._blobs:
            head: dict[str, Any] = {"type": "blob", "id": blob_id}
            if kind is not None:
                head["kind"] = kind
            if data is None:
                data = orjson.dumps(value)
            self._write_line(orjson.dumps(head)[:-1] + b',"data":' + data + b"}\n")
            self._blobs.add(blob_id)
        return blob_id

    def write_step(self, step: Step) -> int:
        """Append one step; returns the compressed bytes it added to the file."""
        with _collector_paused():
            return self._write_step(step)

    def _write_step(self, step: Step) -> int:
        before = self.bytes_written
        # The bulky tab values are taken from the model as they are: dumping a 15,000-node DOM
        # snapshot through pydantic costs more than writing it.
        record = step.model_dump(
            mode="json", by_alias=True, exclude={"tabs": {"__all__": set(_TAB_BLOB_FIELDS)}}
        )
        for tab_record, tab in zip(record["tabs"], step.tabs, strict=True):
            for name in _TAB_BLOB_FIELDS:
                tab_record[name] = self._externalize(getattr(tab, name), name)
            for frame in _dicts(tab_record.get("frames")):
                frame["html"] = self._externalize(frame.get("html"), "html")
        _map_large_values(record, self._externalize, skip_tabs=True)
        self._write({"type": "step", **record})
        return self.bytes_written - before

    def _externalize(self, value: Any, kind: str) -> Any:
        if value is None or (
            kind == "answer" and not (isinstance(value, str) and len(value) > _INLINE_LIMIT)
        ):
            return value
        if kind == "html":
            if self._last_html is not None and self._last_html[0] == value:
                return dict(self._last_html[1])
            ref = self._chunked(value, kind)
            self._last_html = (value, ref)
            return dict(ref)
        if kind == "dom_snapshot":
            # Not kept for a comparison with the next one: comparing two 15,000-node snapshots
            # costs about what chunking one does (whose unchanged slices are recognised by the
            # chunker), and holding it would move the cost of freeing it into the next write.
            return self._chunked(value, kind)
        if kind in ("body", "answer") and isinstance(value, str) and len(value) >= _CHUNKED_TEXT_MIN:
            # A response body or an answer as long as a page (a 2.6 MB single-page app served again
            # with one byte changed): chunked like the HTML, so what repeats is stored once.
            return self._chunked(value, "html")
        return {_BLOB_KEY: self._blob(value)}

    def _chunked(self, value: Any, kind: str) -> dict[str, str]:
        if kind == "html" and isinstance(value, str):
            data, cuts = cut_text(value)
            if len(cuts) > 2:
                ascii_only = len(data) == len(value)
                view = memoryview(data)
                ids = []
                for start, end in pairwise(cuts):
                    blob_id = _digest(view[start:end])  # the id _blob gives the piece's string
                    if blob_id not in self._blobs:
                        piece = value[start:end] if ascii_only else data[start:end].decode("utf-8")
                        self._blob(piece)
                    ids.append(blob_id)
                return {_BLOB_KEY: self._blob(ids, "text")}
        if kind == "dom_snapshot" and isinstance(value, dict):
            encoded = self._snapshots.chunk(value)
            if encoded is not None:
                return {_BLOB_KEY: self._blob(encoded, "dom")}
        return {_BLOB_KEY: self._blob(value)}

    def finish(self, end: SessionEnd, final_path: Path) -> Path:
        """Write the end record, close the stream, fsync, and rename to ``final_path``."""
        record = end.model_dump(mode="json", by_alias=True)
        _map_large_values(record, self._externalize)
        self._write({"type": "end", **record})
        tail = self._zip.flush(zlib.Z_FINISH)
        self._file.write(tail)
        self.bytes_written += len(tail)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self.closed = True
        final_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.partial_path, final_path)
        return final_path

    def abort(self) -> None:
        """Close without finalizing; the partial file stays readable."""
        if not self.closed:
            self._file.close()
            self.closed = True


_READ_CHUNK = 1 << 20


def _iter_lines(
    fd: int, source: str, limits: SessionLimits, complete: list[bool], blobs: _Blobs | None = None
) -> Iterator[bytes | bytearray]:
    """The lines of the (gzip or plain) file ``fd``, inflated incrementally and bounded.

    Memory holds one line at a time: each piece (at most ``_READ_CHUNK`` bytes, inflated or read) is
    counted and split into lines before the next is made, so a bomb is refused within a piece of the
    limit it passes, never after holding what it counts. Sets ``complete[0]`` to whether the stream
    ended properly; a last line without its newline is yielded only then (a cut-short file ends
    mid-record). ``blobs``: what the records read so far hold; a line that would take it past
    ``max_expanded_bytes`` is refused while it is still coming in.
    """
    pending = bytearray()
    values = number = 0
    state = {"gzipped": False, "eof": False}
    for piece in _pieces(fd, source, state):
        values += count_values(piece)  # counted before any of it is parsed: a bomb stops here
        if values > limits.max_values:
            raise SessionFormatError(
                f"{source}: more than {limits.max_values} JSON values (limit CDP_SESSION_MAX_VALUES)"
            )
        scan = len(pending)  # only the new piece is searched: a long line costs linear time
        pending += piece
        start = 0
        while (end := pending.find(b"\n", scan)) >= 0:
            number += 1
            if end - start < _READ_CHUNK:
                yield bytes(pending[start:end])
                start = scan = end + 1
                continue
            # a long line is handed over as it is, never copied: the piece's rest goes on alone
            del pending[:start]
            end -= start
            rest = pending[end + 1 :]
            del pending[end:]
            line = [pending]
            pending = rest
            start = scan = 0
            yield line.pop()  # not kept here while it is parsed
        del pending[:start]
        if blobs is not None and blobs.built + len(pending) > limits.max_expanded_bytes:
            blobs.build(len(pending), f"line {number + 1}")  # refused before the line is held whole
        if len(pending) > limits.max_record_bytes:
            raise SessionFormatError(
                f"{source}: a record is longer than {limits.max_record_bytes} bytes "
                "(limit CDP_SESSION_MAX_RECORD_BYTES)"
            )
    complete[0] = not state["gzipped"] or state["eof"]
    if pending and complete[0]:
        yield bytes(pending)


def _pieces(fd: int, source: str, state: dict[str, bool]) -> Iterator[bytes]:
    """The file's content in pieces of at most ``_READ_CHUNK`` bytes, gzip inflated one piece at a time
    (members concatenated, as zcat reads them, are read whole), bounded by ``MAX_SESSION_BYTES``.
    ``state``: ``gzipped`` and ``eof`` (the last gzip member ended), set as it goes."""
    max_bytes = MAX_SESSION_BYTES
    inflater: Any = None
    total = 0
    first = True
    while True:
        chunk = os.read(fd, _READ_CHUNK)
        if first:
            first = False
            if not chunk:
                raise SessionFormatError(f"{source}: file is empty")
            if chunk[:2] == b"\x1f\x8b":
                state["gzipped"] = True
                inflater = zlib.decompressobj(47)
        if not chunk:
            break
        if not state["gzipped"]:
            total += len(chunk)
            if total > max_bytes:
                raise SessionFormatError(f"{source}: file is larger than {max_bytes} bytes")
            yield chunk
            continue
        data = chunk
        while data:  # max_length keeps each piece small; each is handled before the next is made
            if state["eof"]:  # another member follows the one that ended
                if data[:2] != b"\x1f\x8b" and len(data) >= 2:
                    raise SessionFormatError(f"{source}: data after the end of the compressed stream")
                inflater, state["eof"] = zlib.decompressobj(47), False
            try:
                piece = inflater.decompress(data, _READ_CHUNK)
            except zlib.error as exc:
                raise SessionFormatError(f"{source}: corrupt compressed data ({exc})") from None
            total += len(piece)
            if total > max_bytes:
                raise SessionFormatError(f"{source}: decompresses to more than {max_bytes} bytes")
            if inflater.eof:
                state["eof"] = True
                data = inflater.unused_data
            else:
                data = inflater.unconsumed_tail
                if not piece:
                    break
            if piece:
                yield piece
    if state["gzipped"] and not state["eof"]:
        # Whatever zlib still holds counts towards the limit: "more than" is not a cut-short file.
        try:
            rest = inflater.flush()
        except zlib.error:
            rest = b""
        if total + len(rest) > max_bytes:
            raise SessionFormatError(f"{source}: decompresses to more than {max_bytes} bytes")


def _iter_records(
    lines: Iterator[bytes | bytearray], blobs: _Blobs, limits: SessionLimits, complete: list[bool]
) -> Iterator[tuple[int, dict[str, Any], int]]:
    """Parsed records with what each costs in memory (bytes, plus ``_VALUE_BYTES`` per JSON value),
    each bounded in values, in that cost (counted as built before it is parsed: every record of a
    session stays in memory) and, right after parsing, in depth."""
    source = blobs.source
    failed: SessionFormatError | None = None
    number = 0
    for number, line in enumerate(lines, 1):
        if failed is not None:
            raise failed
        if number > limits.max_records:
            raise SessionFormatError(
                f"{source}: more than {limits.max_records} records (limit CDP_SESSION_MAX_RECORDS)"
            )
        cost = len(line) + _VALUE_BYTES * count_values(line)
        blobs.build(cost, f"line {number}")
        nesting = line.count(b"[") + line.count(b"{")
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            failed = SessionFormatError(f"{source}: line {number} is not JSON ({exc})")
            continue  # a cut-short file may end in a damaged record: decided once the stream ends
        del line  # the text is not held beside what was parsed from it
        depth = min(limits.max_depth, JSON_DEPTH_CEILING)
        if nesting > depth:
            check_depth(record, depth, f"{source}: line {number}")
        if not isinstance(record, dict) or "type" not in record:
            raise SessionFormatError(f"{source}: line {number} is not a session record")
        yield number, record, cost
    if failed is not None and complete[0]:
        raise failed


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The objects of a list that should hold records; anything else is left to the models to refuse."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _map_large_values(
    record: dict[str, Any], convert: Callable[[Any, str], Any], *, skip_tabs: bool = False
) -> None:
    """Apply ``convert(value, kind)`` to every place a step or end record keeps a large value.

    ``kind``: the tab field name (``html``, ``dom_snapshot``, ...) or ``body``: bulk data stored as
    a blob whatever its size; ``answer``: evaluator answers and judge responses, stored as blobs
    only when long. ``skip_tabs``: the record's own tabs were converted already.
    """

    def tabs(items: Any) -> None:
        for tab in _dicts(items):
            for name in _TAB_BLOB_FIELDS:
                if name in tab:
                    tab[name] = convert(tab[name], name)
            for frame in _dicts(tab.get("frames")):
                if "html" in frame:
                    frame["html"] = convert(frame["html"], "html")

    if not skip_tabs:
        tabs(record.get("tabs"))
    for exchange in _dicts(record.get("network")):
        response = exchange.get("response")
        if isinstance(response, dict) and "body" in response:
            response["body"] = convert(response["body"], "body")
    for resource in _dicts(record.get("resources")):
        if "body" in resource:
            resource["body"] = convert(resource["body"], "body")
    for name in ("evaluation", "probe"):
        evaluation = record.get(name)
        if not isinstance(evaluation, dict):
            continue
        tabs(evaluation.get("pages"))
        for call in _dicts(evaluation.get("calls")):
            if "result" in call:
                call["result"] = convert(call["result"], "answer")
        for call in _dicts(evaluation.get("http")):
            if "response_body" in call:
                call["response_body"] = convert(call["response_body"], "answer")


def _one_line(exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    text = f"{where}: {first['msg']}{more}"
    return text.replace("\r", "\\r").replace("\n", "\\n")  # keys come from the file: keep one line


def _parse(kind: Callable[..., Any], record: dict[str, Any], source: str, number: int) -> Any:
    try:
        return kind(**record)
    except pydantic.ValidationError as exc:
        raise SessionFormatError(f"{source}: line {number}: invalid record: {_one_line(exc)}") from None
    except TypeError as exc:
        raise SessionFormatError(f"{source}: line {number}: invalid record: {exc}") from None


def load_session(
    path: str | os.PathLike[str],
    *,
    limits: SessionLimits | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Session:
    """Read a session file (finished or ``*.partial``); raise ``SessionFormatError`` if it is not one.

    The file is untrusted: only a regular file is opened (never a FIFO or device), and ``limits``
    (default: ``SessionLimits.from_env()``) bound records, steps, JSON values and nesting before
    they are materialized; ``MAX_SESSION_BYTES`` bounds the file and its decompressed content (streamed:
    one line is held at a time). ``root``: the folder the file was found in (no symlink below it is followed).
    """
    path = Path(path)
    source = clean_text(str(path))
    limits = limits or SessionLimits.from_env()
    fd = open_input(path, root=root, what="session file")
    try:
        size = os.fstat(fd).st_size
        if size > MAX_SESSION_BYTES:
            raise SessionFormatError(f"{source}: file is larger than {MAX_SESSION_BYTES} bytes")
        if size == 0:
            raise SessionFormatError(f"{source}: file is empty")
        complete = [False]
        try:
            blobs = _Blobs(source, limits)
            return _read_records(
                _iter_records(_iter_lines(fd, source, limits, complete, blobs), blobs, limits, complete),
                blobs,
                path,
                source,
                limits,
                complete,
            )
        except OSError as exc:
            raise SessionFormatError(f"{source}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_header(path: str | os.PathLike[str], *, limits: SessionLimits | None = None) -> SessionHeader:
    """The header record of a session file alone (its first record), without reading the steps: what
    a caller needs about a session that could not be scored (e.g. its provenance)."""
    path = Path(path)
    source = clean_text(str(path))
    limits = limits or SessionLimits.from_env()
    fd = open_input(path, what="session file")
    try:
        complete = [False]
        blobs = _Blobs(source, limits)
        lines = _iter_lines(fd, source, limits, complete, blobs)
        for number, record, _size in _iter_records(lines, blobs, limits, complete):
            if record.pop("type") != "header":
                raise SessionFormatError(f"{source}: not a session file (the first record is no header)")
            parsed: SessionHeader = _parse(SessionHeader, record, source, number)
            return parsed
        raise SessionFormatError(f"{source}: not a session file (no header record)")
    except OSError as exc:
        raise SessionFormatError(f"{source}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _read_records(
    records: Iterator[tuple[int, dict[str, Any], int]],
    blobs: _Blobs,
    path: Path,
    source: str,
    limits: SessionLimits,
    complete: list[bool],
) -> Session:
    header: SessionHeader | None = None
    steps: list[Step] = []
    end: SessionEnd | None = None
    for number, record, size in records:
        kind = record.pop("type")
        if header is None:
            if kind != "header":
                raise SessionFormatError(f"{source}: not a session file (first record is {str(kind)[:40]!r})")
            version = record.get("format_version")
            if type(version) is not int or version < 1:
                raise SessionFormatError(
                    f"{source}: header has no valid format_version ({str(version)[:20]!r}; expected 1..{FORMAT_VERSION})"
                )
            if version > FORMAT_VERSION:
                raise SessionVersionError(
                    f"{source}: written by session format {version}; this release reads up to "
                    f"{FORMAT_VERSION} (upgrade cdp-integration)"
                )
            header = _parse(SessionHeader, record, source, number)
        elif kind == "blob":
            blobs.add(record, size, number)
        elif kind == "step":
            if len(steps) >= limits.max_steps:
                raise SessionFormatError(
                    f"{source}: more than {limits.max_steps} steps (limit CDP_SESSION_MAX_STEPS)"
                )
            cookies = record.get("cookies")
            if isinstance(cookies, list) and len(cookies) > limits.max_cookies_per_step:
                raise SessionFormatError(
                    f"{source}: line {number}: more than {limits.max_cookies_per_step} cookies in one step "
                    "(limit CDP_SESSION_MAX_COOKIES_PER_STEP)"
                )
            _map_large_values(record, lambda value, _always: blobs.resolve(value))
            steps.append(_parse(Step, record, source, number))
        elif kind == "end":
            _map_large_values(record, lambda value, _always: blobs.resolve(value))
            end = _parse(SessionEnd, record, source, number)
        else:
            raise SessionFormatError(f"{source}: line {number}: unknown record type {str(kind)[:40]!r}")
    stream_complete = complete[0]
    if header is None:
        if not stream_complete:
            raise SessionFormatError(f"{source}: truncated before its first complete record")
        raise SessionFormatError(f"{source}: not a session file (no header record)")
    return Session(
        header=header,
        steps=tuple(steps),
        end=end,
        path=path,
        complete=stream_complete and end is not None,
        blob_count=len(blobs.values),
    )


def new_header(**fields: Any) -> SessionHeader:
    """A header for a session starting now, stamped with this format version."""
    return SessionHeader(
        format_version=FORMAT_VERSION, created=time.time(), tool=f"cdp-integration {__version__}", **fields
    )
