"""Large values split into content-addressed chunks, so the parts a step did not change are stored once.

Consecutive steps of an episode mostly repeat the page: a scroll changes a few attributes of a
15,000-node DOM, yet the whole HTML and DOM snapshot differ by hash. Split into chunks, only the
chunks that changed are new; the others are references to blobs already written.

- **HTML** (``split_text``): cut where a rolling hash of the preceding bytes takes a chosen value
  (content-defined, so an edit moves only the cuts around it), anywhere in the text: a multi-MB
  inline ``<script>`` of app data is cut like the markup around it, so a step that changes only
  the rendered part stores a few chunks, not the script. Joined back, the chunks are the original
  string.
- **DOMSnapshot** (``encode_snapshot`` / ``decode_snapshot``): Chromium interns every string in one
  table whose order shifts as soon as one new string appears early (a scroll adds a visibility
  value), which renumbers every node. Encoding replaces each string index by the string itself
  (the fields are those of the CDP ``DOMSnapshot`` domain); decoding interns them again in a
  table of its own. The decoded snapshot is equivalent to the captured one (every index resolves
  to the same string), not byte-identical. A snapshot with a field this module does not know is
  not encoded (stored whole), so nothing is ever misread.
- Long lists of an encoded snapshot are cut into slices of ``_LIST_ITEMS`` items (``split_list``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from itertools import accumulate, chain, pairwise
from typing import Any

__all__ = [
    "CHUNKED_MIN",
    "CHUNKS_KEY",
    "SnapshotChunker",
    "cut_text",
    "decode_snapshot",
    "encode_snapshot",
    "split_list",
    "split_text",
]

_MIN_TEXT = 2 * 1024
"""Bytes (of the UTF-8 text) a chunk has at least, except the last; texts under twice this are one chunk."""
_MAX_TEXT = 64 * 1024
"""Bytes after which a chunk ends wherever it is, when the hash picked no cut (a run of one byte)."""
_HASH_MULTIPLIER = (
    int.from_bytes(hashlib.blake2b(b"cdp-integration text chunks", digest_size=16).digest()) | 1
)
"""Odd 128-bit constant: byte i of text x this (as little-endian integers) mixes bytes i-15..i."""
_CUT = re.compile(b"\x00[\x00-\x0f]")
"""Two consecutive hash bytes that end a chunk: 1 position in 4,096, so chunks average ~6 KB."""
_LIST_ITEMS = 1024
_LONG_STRING = 16 * 1024
"""A string this long in a node-value or layout-text list is a slice of its own (its neighbours change
more often than it does: a page's inline data beside the text nodes the page renders)."""
CHUNKED_MIN = 64
"""Lists of an encoded snapshot up to this long stay inline; longer ones are stored as slices."""
CHUNKS_KEY = "$chunks"
"""``{CHUNKS_KEY: [ids]}`` stands for the list the slices with those blob ids join into."""
_MIN_SNAPSHOT_STRINGS = 512
"""Smaller snapshots are stored whole (and read back exactly): chunking would not pay for itself."""

_DOCUMENT_STRINGS = (
    "documentURL",
    "title",
    "baseURL",
    "contentLanguage",
    "encodingName",
    "publicId",
    "systemId",
    "frameId",
)
_DOCUMENT_PLAIN = ("scrollOffsetX", "scrollOffsetY", "contentWidth", "contentHeight", "textBoxes")
_NODE_STRING_LISTS = ("nodeName", "nodeValue")
_NODE_STRING_LIST_LISTS = ("attributes",)
_NODE_RARE_STRINGS = (
    "shadowRootType",
    "textValue",
    "inputValue",
    "pseudoType",
    "pseudoIdentifier",
    "currentSourceURL",
    "originURL",
)
_NODE_PLAIN = (
    "parentIndex",
    "nodeType",
    "backendNodeId",
    "inputChecked",
    "optionSelected",
    "contentDocumentIndex",
    "isClickable",
)
_LAYOUT_STRING_LISTS = ("text", "blendedBackgroundColors")
_LAYOUT_STRING_LIST_LISTS = ("styles",)
_LAYOUT_PLAIN = (
    "nodeIndex",
    "bounds",
    "stackingContexts",
    "paintOrders",
    "offsetRects",
    "scrollRects",
    "clientRects",
    "textColorOpacities",
)


def split_text(text: str) -> list[str]:
    """``text`` cut into content-defined chunks (one chunk when it is short)."""
    data, cuts = cut_text(text)
    if len(data) == len(text):  # ASCII: byte offsets are character offsets
        return [text[a:b] for a, b in pairwise(cuts)]
    return [data[a:b].decode("utf-8", "surrogatepass") for a, b in pairwise(cuts)]


def cut_text(text: str) -> tuple[bytes, list[int]]:
    """The UTF-8 bytes of ``text`` and where ``split_text`` cuts them: byte offsets from 0 to the
    end, each on a character boundary (a writer hashes the byte slices without encoding again).

    The rolling hash is one multiplication: the UTF-8 bytes read as a little-endian integer, times
    ``_HASH_MULTIPLIER``; byte i of the product is a function of bytes i-15..i plus a carry from
    below, and a change to the carry shrinks by a factor 256 per byte, so a cut depends on the
    bytes just before it (an edit moves the cuts within a few bytes of it, and those past the next
    cut stay). Python's big-integer product, ``to_bytes`` and a ``re`` search for the cut pattern
    all run in C (measured in the module's tests and ``benchmarks/inline_data_page.py``), where a
    byte loop in Python would take about a second per MB.
    """
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    if len(text) < 2 * _MIN_TEXT:
        return data, [0, size]
    marks = (int.from_bytes(data, "little") * _HASH_MULTIPLIER).to_bytes(size + 16, "little")
    cuts = [0]
    start = 0
    while size - start >= 2 * _MIN_TEXT:
        found = _CUT.search(marks, start + _MIN_TEXT - 2, start + _MAX_TEXT)
        cut = found.end() if found else start + _MAX_TEXT
        while cut < size and data[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte
            cut += 1
        if size - cut < _MIN_TEXT:
            break
        cuts.append(cut)
        start = cut
    cuts.append(size)
    return data, cuts


def split_list(items: list[Any]) -> list[list[Any]]:
    """``items`` in slices of ``_LIST_ITEMS``."""
    return [items[i : i + _LIST_ITEMS] for i in range(0, len(items), _LIST_ITEMS)] or [[]]


def _known(mapping: Any, *groups: tuple[str, ...]) -> bool:
    return isinstance(mapping, dict) and all(any(key in group for group in groups) for key in mapping)


def encode_snapshot(snapshot: dict[str, Any]) -> dict[str, Any] | None:
    """The snapshot with every string index replaced by its string; None if its shape is not known
    or it is small."""
    return _encode(snapshot, _StringLists())


def _encode(snapshot: dict[str, Any], lists: _StringLists) -> dict[str, Any] | None:
    strings = snapshot.get("strings")
    documents = snapshot.get("documents")
    if set(snapshot) != {"documents", "strings"} or not isinstance(strings, list):
        return None
    if len(strings) < _MIN_SNAPSHOT_STRINGS:
        return None
    if not isinstance(documents, list):
        return None
    # One table for every document (a snapshot may hold thousands of frames' documents over one
    # string table; building it per document made encoding documents x strings). A mapping, not
    # the list: an index past the table or below -1 (no string) is a KeyError instead of a
    # negative list index reading a string from the end.
    table: dict[int, str | None] = dict(enumerate(strings))
    table[-1] = None
    try:
        return {"documents": [_encode_document(document, table, lists) for document in documents]}
    except (LookupError, TypeError, ValueError):
        return None


class _StringLists:
    """How ``_encode_document`` turns a list of string indexes (or of lists of them) into strings."""

    def flat(self, indexes: list[int], lookup: Callable[[int], str | None]) -> Any:
        return list(map(lookup, indexes))

    def nested(self, lists: list[list[int]], lookup: Callable[[int], str | None]) -> Any:
        """One pass over every index (the 10k page has ~45,000 attribute lists), then cut back."""
        found = list(map(lookup, chain.from_iterable(lists)))
        ends = list(accumulate(map(len, lists)))
        return [found[start:end] for start, end in zip([0, *ends], ends, strict=False)]


class SnapshotChunker(_StringLists):
    """``encode_snapshot`` with its long lists stored as slices through ``store`` (which returns the
    slice's blob id): the value of a ``dom`` blob, whose lists of more than ``CHUNKED_MIN`` items are
    ``{CHUNKS_KEY: [ids]}``.

    A slice of string indexes is recognised by its strings before it is encoded: building the
    ~45,000 per-node lists of an encoded 15,000-node snapshot costs more than the rest of the write,
    and a step mostly repeats the slices of the steps before it. Slices of recent snapshots are
    remembered (by content, with their blob id; at most ``_MEMO_SLICES``), so those are neither
    built nor serialized again. The result joins into the same value as encoding (and the reader
    joins slices of any length): the string lists are cut every ``_LIST_ITEMS`` items, and a
    string over ``_LONG_STRING`` is cut out as a slice of its own, so a multi-MB script text is
    stored once however often the text nodes around it change.
    """

    _MEMO_SLICES = 512
    """Each remembered slice holds up to _LIST_ITEMS references: a few MiB at most."""

    def __init__(self, store: Callable[[list[Any]], str]) -> None:
        self._store = store
        self._memo: dict[tuple[Any, ...], str] = {}
        self._long: frozenset[int] = frozenset()
        """String indexes of the snapshot being chunked whose strings are over ``_LONG_STRING``."""

    def chunk(self, snapshot: dict[str, Any]) -> dict[str, Any] | None:
        """The ``dom`` blob value of ``snapshot``; None if its shape is not known or it is small."""
        self._long = _long_strings(snapshot.get("strings"))
        encoded = _encode(snapshot, self)
        if encoded is None:
            return None
        for document in encoded["documents"]:
            for group in ("nodes", "layout", "textBoxes"):
                if isinstance(document.get(group), dict):
                    document[group] = {
                        key: {CHUNKS_KEY: [self._store(part) for part in split_list(value)]}
                        if isinstance(value, list) and len(value) > CHUNKED_MIN
                        else value
                        for key, value in document[group].items()
                    }
        return encoded

    def flat(self, indexes: list[int], lookup: Callable[[int], str | None]) -> Any:
        if len(indexes) <= CHUNKED_MIN:
            return super().flat(indexes, lookup)
        ids = []
        for start in range(0, len(indexes), _LIST_ITEMS):
            part = indexes[start : start + _LIST_ITEMS]
            pieces = [part] if self._long.isdisjoint(part) else _isolated(part, self._long)
            for piece in pieces:
                key = tuple(map(lookup, piece))
                ids.append(self._memo.get(key) or self._stored(key, list(key)))
        return {CHUNKS_KEY: ids}

    def nested(self, lists: list[list[int]], lookup: Callable[[int], str | None]) -> Any:
        if len(lists) <= CHUNKED_MIN:
            return super().nested(lists, lookup)
        ids = []
        for start in range(0, len(lists), _LIST_ITEMS):
            part = lists[start : start + _LIST_ITEMS]
            strings = tuple(map(lookup, chain.from_iterable(part)))
            lengths = tuple(map(len, part))
            key = (strings, lengths)
            ids.append(self._memo.get(key) or self._stored(key, _cut(strings, lengths)))
        return {CHUNKS_KEY: ids}

    def _stored(self, key: tuple[Any, ...], value: list[Any]) -> str:
        if len(self._memo) >= self._MEMO_SLICES:
            self._memo.clear()
        blob_id = self._memo[key] = self._store(value)
        return blob_id


def _long_strings(strings: Any) -> frozenset[int]:
    """Indexes of the strings over ``_LONG_STRING`` (an inline ``<script>`` of app data)."""
    if not isinstance(strings, list) or not strings:
        return frozenset()
    try:
        lengths = list(map(len, strings))
    except TypeError:  # not a table of strings: encoding refuses it
        return frozenset()
    if max(lengths) <= _LONG_STRING:
        return frozenset()
    return frozenset(index for index, length in enumerate(lengths) if length > _LONG_STRING)


def _isolated(part: list[int], long: frozenset[int]) -> list[list[int]]:
    """``part`` cut so that each index of a long string is a slice of its own."""
    pieces: list[list[int]] = []
    begin = 0
    for position, index in enumerate(part):
        if index in long:
            if begin < position:
                pieces.append(part[begin:position])
            pieces.append(part[position : position + 1])
            begin = position + 1
    if begin < len(part):
        pieces.append(part[begin:])
    return pieces


def _cut(items: tuple[Any, ...], lengths: tuple[int, ...]) -> list[list[Any]]:
    ends = list(accumulate(lengths))
    return [list(items[start:end]) for start, end in zip([0, *ends], ends, strict=False)]


def _encode_document(document: Any, table: dict[int, str | None], lists: _StringLists) -> dict[str, Any]:
    nodes, layout = document.get("nodes", {}), document.get("layout", {})
    if not _known(document, _DOCUMENT_STRINGS, _DOCUMENT_PLAIN, ("nodes", "layout")):
        raise ValueError("unknown document field")
    if not _known(nodes, _NODE_STRING_LISTS, _NODE_STRING_LIST_LISTS, _NODE_RARE_STRINGS, _NODE_PLAIN):
        raise ValueError("unknown node field")
    if not _known(layout, _LAYOUT_STRING_LISTS, _LAYOUT_STRING_LIST_LISTS, _LAYOUT_PLAIN):
        raise ValueError("unknown layout field")

    lookup = table.__getitem__

    def one(index: Any) -> str | None:
        if not isinstance(index, int) or index < -1:
            raise ValueError("bad string index")
        return table[index]

    many = _StringLists().flat  # the rare-string values stay inline, never chunked

    out: dict[str, Any] = {}
    for key, value in document.items():
        if key in _DOCUMENT_STRINGS:
            out[key] = one(value)
        elif key not in ("nodes", "layout"):
            out[key] = value
    out["nodes"] = {}
    for key, value in nodes.items():
        if key in _NODE_STRING_LISTS:
            out["nodes"][key] = lists.flat(value, lookup)
        elif key in _NODE_STRING_LIST_LISTS:
            out["nodes"][key] = lists.nested(value, lookup)
        elif key in _NODE_RARE_STRINGS:
            out["nodes"][key] = {"index": value["index"], "value": many(value["value"], lookup)}
        else:
            out["nodes"][key] = value
    out["layout"] = {}
    for key, value in layout.items():
        if key in _LAYOUT_STRING_LISTS:
            out["layout"][key] = lists.flat(value, lookup)
        elif key in _LAYOUT_STRING_LIST_LISTS:
            out["layout"][key] = lists.nested(value, lookup)
        else:
            out["layout"][key] = value
    if "nodes" not in document:
        del out["nodes"]
    if "layout" not in document:
        del out["layout"]
    return out


def decode_snapshot(encoded: dict[str, Any]) -> dict[str, Any]:
    """``DOMSnapshot.captureSnapshot``'s shape again: strings interned in a table of its own.

    Raises ``ValueError`` on a value ``encode_snapshot`` cannot have produced.
    """
    table: dict[str | None, int] = {None: -1}  # in insertion order: the new string table
    intern = table.setdefault

    def one(value: Any) -> int:
        if value is not None and not isinstance(value, str):
            raise ValueError("encoded snapshot: string expected")
        return intern(value, len(table) - 1)

    def many(values: Any) -> list[int]:
        if not isinstance(values, list):
            raise ValueError("encoded snapshot: list expected")
        return [intern(v, len(table) - 1) for v in values]

    documents = encoded.get("documents")
    if not isinstance(documents, list):
        raise ValueError("encoded snapshot: no documents")
    decoded_documents: list[dict[str, Any]] = []
    for document in documents:
        if not isinstance(document, dict):
            raise ValueError("encoded snapshot: document is not an object")
        out: dict[str, Any] = {}
        for key, value in document.items():
            if key in _DOCUMENT_STRINGS:
                out[key] = one(value)
            elif key == "nodes":
                out[key] = _decode_group(value, _NODE_STRING_LISTS, _NODE_STRING_LIST_LISTS, many)
                for rare in _NODE_RARE_STRINGS:
                    if rare in value:
                        item = value[rare]
                        if not isinstance(item, dict):
                            raise ValueError("encoded snapshot: rare string data is not an object")
                        out[key][rare] = {"index": item.get("index"), "value": many(item.get("value"))}
            elif key == "layout":
                out[key] = _decode_group(value, _LAYOUT_STRING_LISTS, _LAYOUT_STRING_LIST_LISTS, many)
            else:
                out[key] = value
        decoded_documents.append(out)
    strings = [value for value in table if value is not None]
    if not all(isinstance(value, str) for value in strings):
        raise ValueError("encoded snapshot: string expected")
    return {"documents": decoded_documents, "strings": strings}


def _decode_group(
    group: Any, lists: tuple[str, ...], list_lists: tuple[str, ...], many: Any
) -> dict[str, Any]:
    if not isinstance(group, dict):
        raise ValueError("encoded snapshot: nodes/layout is not an object")
    out: dict[str, Any] = {}
    for key, value in group.items():
        if key in lists:
            out[key] = many(value)
        elif key in list_lists:
            if not isinstance(value, list):
                raise ValueError("encoded snapshot: list expected")
            out[key] = [many(item) for item in value]
        else:
            out[key] = value
    return out
