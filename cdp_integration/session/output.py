"""Bounded outputs: what a command writes from an untrusted session is counted while it is written.

A few kilobytes of session can name one 10 MiB body from 400 exchanges, or one stylesheet from
3,000 ``<link>`` elements; written out in full, that is gigabytes on disk and in memory (one
``orjson.dumps`` of a multi-GB document crashed the process). So outputs are written piece by piece
through ``BoundedOutput``, which refuses the piece that would take the output past
``SessionLimits.max_output_bytes`` (``OutputLimitError``, one line naming the variable to raise),
and ``output_file`` removes what was written of a refused file. ``iter_json`` yields a document's
JSON in pieces, byte for byte what ``orjson.dumps`` would write, so no piece is larger than the
largest single value.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from cdp_integration.errors import OutputLimitError
from cdp_integration.session.limits import ENV_VARS, SessionLimits
from cdp_integration.session.untrusted import open_output

__all__ = ["BoundedOutput", "iter_json", "output_file"]


class BoundedOutput:
    """A writer that counts bytes and refuses the write that would exceed ``limit``."""

    def __init__(self, stream: BinaryIO | None, limit: int, what: str) -> None:
        self.stream = stream
        self.limit = limit
        self.what = what
        self.written = 0

    def count(self, size: int) -> None:
        """Count ``size`` bytes about to be written (or built) towards the limit."""
        self.written += size
        if self.written > self.limit:
            raise OutputLimitError(
                f"{self.what} would be larger than {self.limit} bytes "
                f"(limit {ENV_VARS['max_output_bytes']}; raise it to write more)"
            )

    def write(self, data: bytes) -> None:
        self.count(len(data))
        if self.stream is not None:
            self.stream.write(data)


@contextlib.contextmanager
def output_file(
    path: str | os.PathLike[str], *, limits: SessionLimits | None = None, what: str | None = None
) -> Iterator[BoundedOutput]:
    """``path`` opened for writing through a ``BoundedOutput``; removed again if the block raises.
    Never written through a symlink (``untrusted.open_output``)."""
    path = Path(path)
    limit = (limits or SessionLimits.from_env()).max_output_bytes
    with open_output(path) as stream:
        output = BoundedOutput(stream, limit, what or str(path))
        try:
            yield output
        except BaseException:
            stream.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise


_INDENT = orjson.OPT_INDENT_2


def iter_json(value: Any, *, indent: bool = True, stream_depth: int = 3, _level: int = 0) -> Iterator[bytes]:
    """``orjson.dumps(value)`` (``OPT_INDENT_2`` when ``indent``) in pieces: objects and arrays up to
    ``stream_depth`` levels deep are written member by member, deeper values whole."""
    if _level >= stream_depth or not isinstance(value, (dict, list)) or not value:
        data = orjson.dumps(value, option=_INDENT if indent else 0)
        yield data.replace(b"\n", b"\n" + b"  " * _level) if indent and _level else data
        return
    is_dict = isinstance(value, dict)
    yield b"{" if is_dict else b"["
    pad = b"\n" + b"  " * (_level + 1) if indent else b""
    items: Any = value.items() if isinstance(value, dict) else ((None, item) for item in value)
    for number, (key, item) in enumerate(items):
        yield (b"," if number else b"") + pad
        if is_dict:
            yield orjson.dumps(key) + (b": " if indent else b":")
        yield from iter_json(item, indent=indent, stream_depth=stream_depth, _level=_level + 1)
    yield (b"\n" + b"  " * _level if indent else b"") + (b"}" if is_dict else b"]")
