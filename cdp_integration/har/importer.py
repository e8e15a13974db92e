"""HAR 1.1/1.2 -> typed, validated entries: the way back from ``har.export`` and other tools' HARs.

``load_har`` reads a HAR document (a path, or the bytes; plain or gzip) and returns one frozen
``HarEntry`` per entry, with lower-cased headers and this toolkit's ``_step`` / ``_tabId`` /
``_origin`` extensions when present. Input is untrusted: anything that is not a HAR it can read,
including oversized or decompression-bomb input, raises ``SessionFormatError`` with a one-line
message naming the file and the offending place (``entries[3].request.url: expected a string``).
Unknown fields are ignored, as the HAR spec asks of readers; an unknown ``log.version`` is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cdp_integration.errors import SessionFormatError
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.untrusted import clean_text, inflate_gzip, parse_json, read_input

__all__ = ["HAR_VERSIONS", "MAX_HAR_BYTES", "HarEntry", "inflate_bounded", "load_har"]

MAX_HAR_BYTES = 256 * 1024**2
"""Size beyond which a HAR is refused: the file, and its content once decompressed (with the values
parsed from it, well under the 1 GiB memory budget)."""

HAR_VERSIONS = ("1.1", "1.2")

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class HarEntry:
    """One request/response of a HAR, validated; headers lower-cased, repeated ones joined by newlines."""

    url: str
    method: str
    status: int
    """0 when no response arrived."""
    request_headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: Mapping[str, str] = field(default_factory=dict)
    post_data: str | None = None
    post_mime_type: str | None = None
    mime_type: str = ""
    body: str | None = None
    body_base64: bool = False
    started: str | None = None
    """``startedDateTime`` as written (ISO 8601)."""
    step: int | None = None
    """``_step``: the session step the entry was captured in."""
    tab_id: str | None = None
    """``_tabId``, else ``pageref``."""
    origin: str | None = None
    """``_origin``: ``agent`` or ``evaluator``."""
    resource_type: str | None = None
    """``_resourceType`` (CDP's, e.g. ``Document``)."""

    @property
    def query(self) -> list[tuple[str, str]]:
        return parse_qsl(urlsplit(self.url).query, keep_blank_values=True)

    @property
    def is_navigation(self) -> bool:
        """A top-level document load (what WebArena-Verified scores as a navigation)."""
        return (self.resource_type or "").lower() == "document"


def inflate_bounded(raw: bytes, limit: int, source: str) -> bytes | bytearray:
    """Inflate gzip ``raw`` to at most ``limit`` bytes, counted as it inflates (``untrusted``'s reader)."""
    return inflate_gzip(raw, limit, source)


def _read(
    source: str | os.PathLike[str] | bytes, max_bytes: int, root: str | os.PathLike[str] | None
) -> tuple[bytes | bytearray, str]:
    if isinstance(source, bytes | bytearray | memoryview):
        raw, name = bytes(source), "<HAR bytes>"
        if len(raw) > max_bytes:
            raise SessionFormatError(f"{name}: larger than {max_bytes} bytes")
        if raw[:2] == _GZIP_MAGIC:
            return inflate_gzip(raw, max_bytes, name), name
        return raw, name
    return read_input(source, max_bytes=max_bytes, root=root, what="HAR file"), clean_text(str(source))


class _Reader:
    """Typed access to parsed JSON, raising ``SessionFormatError`` naming the place on a wrong type."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> SessionFormatError:
        return SessionFormatError(f"{self.source}: {where}: {problem}")

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        return value

    def array(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {_kind(value)}")
        return value

    def text(self, parent: dict[str, Any], key: str, where: str) -> str:
        value = parent.get(key)
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", f"expected a string, got {_kind(value)}")
        return value

    def optional_text(self, parent: dict[str, Any], key: str, where: str) -> str | None:
        return None if parent.get(key) is None else self.text(parent, key, where)

    def integer(self, parent: dict[str, Any], key: str, where: str) -> int:
        value = parent.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{where}.{key}", f"expected an integer, got {_kind(value)}")
        return value

    def optional_integer(self, parent: dict[str, Any], key: str, where: str) -> int | None:
        return None if parent.get(key) is None else self.integer(parent, key, where)

    def headers(self, parent: dict[str, Any], where: str) -> dict[str, str]:
        if parent.get("headers") is None:
            return {}
        headers: dict[str, str] = {}
        for i, item in enumerate(self.array(parent["headers"], f"{where}.headers")):
            at = f"{where}.headers[{i}]"
            header = self.obj(item, at)
            name, value = self.text(header, "name", at).lower(), self.text(header, "value", at)
            headers[name] = f"{headers[name]}\n{value}" if name in headers else value
        return headers


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), "an object")


def _entry(reader: _Reader, raw: Any, where: str) -> HarEntry:
    entry = reader.obj(raw, where)
    at_request, at_response = f"{where}.request", f"{where}.response"
    request = reader.obj(entry.get("request"), at_request)
    response = reader.obj(entry.get("response"), at_response)
    post: dict[str, Any] = {}
    if request.get("postData") is not None:
        post = reader.obj(request["postData"], f"{at_request}.postData")
    content: dict[str, Any] = {}
    if response.get("content") is not None:
        content = reader.obj(response["content"], f"{at_response}.content")
    at_post, at_content = f"{at_request}.postData", f"{at_response}.content"
    tab_id = reader.optional_text(entry, "_tabId", where)
    return HarEntry(
        url=reader.text(request, "url", at_request),
        method=reader.text(request, "method", at_request),
        status=reader.integer(response, "status", at_response),
        request_headers=reader.headers(request, at_request),
        response_headers=reader.headers(response, at_response),
        post_data=reader.optional_text(post, "text", at_post),
        post_mime_type=reader.optional_text(post, "mimeType", at_post),
        mime_type=reader.optional_text(content, "mimeType", at_content) or "",
        body=reader.optional_text(content, "text", at_content),
        body_base64=reader.optional_text(content, "encoding", at_content) == "base64",
        started=reader.optional_text(entry, "startedDateTime", where),
        step=reader.optional_integer(entry, "_step", where),
        tab_id=tab_id if tab_id is not None else reader.optional_text(entry, "pageref", where),
        origin=reader.optional_text(entry, "_origin", where),
        resource_type=reader.optional_text(entry, "_resourceType", where),
    )


def load_har(
    source: str | os.PathLike[str] | bytes,
    *,
    max_bytes: int = MAX_HAR_BYTES,
    limits: SessionLimits | None = None,
    root: str | os.PathLike[str] | None = None,
) -> list[HarEntry]:
    """The entries of the HAR at ``source`` (a path to a regular file, or the document's bytes; plain or gzip).

    Raises ``SessionFormatError`` (one line, naming the place) for anything that is not a readable
    HAR 1.1/1.2 of at most ``max_bytes`` bytes, compressed and decompressed, within ``limits``
    (JSON values and nesting; default ``SessionLimits.from_env()``). ``root``: the folder the HAR was
    found in (a run folder): no symlink below it is followed.
    """
    limits = limits or SessionLimits.from_env()
    raw, name = _read(source, max_bytes, root)
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if not raw.strip():
        raise SessionFormatError(f"{name}: empty, not a HAR document")
    document = parse_json(raw, name, limits)
    reader = _Reader(name)
    log = reader.obj(reader.obj(document, "document").get("log"), "log")
    version = log.get("version")
    if version is not None and version not in HAR_VERSIONS:
        shown = repr(version) if isinstance(version, str) else _kind(version)
        raise SessionFormatError(
            f"{name}: HAR version {shown[:40]} is not supported (this release reads {', '.join(HAR_VERSIONS)})"
        )
    entries = reader.array(log.get("entries"), "log.entries")
    return [_entry(reader, raw_entry, f"entries[{i}]") for i, raw_entry in enumerate(entries)]
