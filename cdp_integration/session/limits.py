"""How much of an untrusted file the loaders will read: sizes, records, steps, values, nesting.

A session or HAR file comes from someone else; a few hundred compressed bytes can expand into
gigabytes of text or tens of millions of JSON values. ``SessionLimits`` bounds each dimension, and
the loaders check every bound *before* materializing what would exceed it: the decompressed size
and the number of JSON values while inflating (every value but the first of a record is preceded by
``,`` or opens with ``{``/``[``, so counting those bytes bounds it; characters inside strings only
over-count), records and steps as they are read, the nesting depth right after parsing one record.

Defaults fit any real WebArena episode with room to spare and keep a refusal under ~1 GB of memory.
Raise them with the ``limits=`` keyword of ``load_session`` / ``load_har`` or, for the CLI and
batch workers, with the environment variables named in ``ENV_VARS``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, fields, replace
from typing import Any

from cdp_integration.errors import SessionFormatError

__all__ = ["ENV_VARS", "SessionLimits", "check_depth", "count_values", "open_regular_file"]

ENV_VARS = {
    "max_records": "CDP_SESSION_MAX_RECORDS",
    "max_steps": "CDP_SESSION_MAX_STEPS",
    "max_values": "CDP_SESSION_MAX_VALUES",
    "max_depth": "CDP_SESSION_MAX_DEPTH",
    "max_record_bytes": "CDP_SESSION_MAX_RECORD_BYTES",
    "max_question_seconds": "CDP_SESSION_MAX_QUESTION_SECONDS",
}
"""``SessionLimits`` field -> the environment variable that overrides its default (a positive integer)."""


@dataclass(frozen=True)
class SessionLimits:
    """Upper bounds for one loaded file (the decompressed-size bound is ``store.MAX_SESSION_BYTES``)."""

    max_records: int = 200_000
    """JSON-lines records (header, blobs, steps, end)."""
    max_steps: int = 20_000
    max_values: int = 8_000_000
    """JSON values in the whole file (objects, arrays, strings, numbers, ...), counted per record."""
    max_depth: int = 128
    """Nesting of objects and arrays within one record."""
    max_record_bytes: int = 256 * 1024**2
    """One decompressed record (line)."""
    max_question_seconds: int = 10
    """One JavaScript question the offline sandbox answers (locators, prep actions, ``eval-at``)."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SessionLimits:
        """Defaults, overridden by the ``ENV_VARS`` set in ``environ`` (``os.environ``)."""
        env = os.environ if environ is None else environ
        changes: dict[str, int] = {}
        for item in fields(cls):
            text = env.get(ENV_VARS[item.name])
            if text is None or not text.strip():
                continue
            try:
                value = int(text)
            except ValueError:
                value = 0
            if value < 1:
                raise SessionFormatError(f"{ENV_VARS[item.name]}={text!r}: expected a positive integer")
            changes[item.name] = value
        return replace(cls(), **changes)


def count_values(data: bytes) -> int:
    """An upper bound of the JSON values in ``data``, computed without parsing it."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def check_depth(value: Any, limit: int, where: str) -> None:
    """Refuse ``value`` if objects/arrays nest deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise SessionFormatError(
                f"{where}: nested deeper than {limit} levels (limit CDP_SESSION_MAX_DEPTH)"
            )
        if type(item) is dict:
            children: Any = item.values()
        elif type(item) is list:
            children = item
        else:
            continue
        for child in children:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))


def open_regular_file(path: str | os.PathLike[str], source: str, what: str = "session file") -> int:
    """A read-only descriptor of ``path`` if it is a regular file (after symlinks); never blocks.

    A FIFO, device or socket (or a symlink to one, like ``/dev/zero``) is refused before it is read;
    ``O_NONBLOCK`` keeps even a FIFO swapped in after the check from blocking the open.
    """
    try:
        before = os.stat(path)
    except OSError as exc:
        raise SessionFormatError(f"{source}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # a path with a NUL byte
        raise SessionFormatError(f"{source!r}: not a usable path ({exc})") from None
    if stat.S_ISDIR(before.st_mode):
        raise SessionFormatError(f"{source}: is a directory, not a {what}")
    if not stat.S_ISREG(before.st_mode):
        raise SessionFormatError(f"{source}: not a regular file (a FIFO, device or socket); refused")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise SessionFormatError(f"{source}: cannot read ({exc.strerror or exc})") from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode):
        os.close(fd)
        raise SessionFormatError(f"{source}: not a regular file (a FIFO, device or socket); refused")
    return fd
