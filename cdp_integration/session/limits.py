"""How much of an untrusted file the loaders will read: sizes, records, steps, values, nesting.

A session or HAR file comes from someone else; a few hundred compressed bytes can expand into
gigabytes of text or tens of millions of JSON values. ``SessionLimits`` bounds each dimension, and
the loaders check every bound *before* materializing what would exceed it: the decompressed size
and the number of JSON values while inflating (every value but the first of a record is preceded by
``,`` or opens with ``{``/``[``, so counting those bytes bounds it; characters inside strings only
over-count), records and steps as they are read, the nesting depth right after parsing one record.

Blobs (format 2 stores a value once and refers to it) are bounded by their *expanded* size before
they are built (``max_expanded_bytes``) and by that size times their references
(``max_referenced_bytes``); outputs by ``max_output_bytes`` while they are written (``output.py``).

Defaults fit any real WebArena episode with room to spare and keep every refusal under 1 GB of
peak RSS and 30 s (measured by ``tests/unit/test_hostile_corpus.py``).
Raise them with the ``limits=`` keyword of ``load_session`` / ``load_har`` or, for the CLI and
batch workers, with the environment variables named in ``ENV_VARS``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

from cdp_integration.errors import SessionFormatError

__all__ = ["ENV_VARS", "SessionLimits", "check_depth", "count_values", "limit_hint"]

ENV_VARS = {
    "max_records": "CDP_SESSION_MAX_RECORDS",
    "max_steps": "CDP_SESSION_MAX_STEPS",
    "max_values": "CDP_SESSION_MAX_VALUES",
    "max_depth": "CDP_SESSION_MAX_DEPTH",
    "max_record_bytes": "CDP_SESSION_MAX_RECORD_BYTES",
    "max_expanded_bytes": "CDP_SESSION_MAX_EXPANDED_BYTES",
    "max_referenced_bytes": "CDP_SESSION_MAX_REFERENCED_BYTES",
    "max_output_bytes": "CDP_SESSION_MAX_OUTPUT_BYTES",
    "max_question_seconds": "CDP_SESSION_MAX_QUESTION_SECONDS",
    "max_cookies_per_step": "CDP_SESSION_MAX_COOKIES_PER_STEP",
    "max_pickle_ops": "CDP_SESSION_MAX_PICKLE_OPS",
    "max_pickle_memo": "CDP_SESSION_MAX_PICKLE_MEMO",
    "max_input_bytes": "CDP_SESSION_MAX_INPUT_BYTES",
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
    max_record_bytes: int = 64 * 1024**2
    """One decompressed record (line)."""
    max_expanded_bytes: int = 256 * 1024**2
    """What the reader builds from blobs, each blob once: plain blobs, HTML joined from its chunks,
    DOM snapshots joined and decoded (a pointer per list item counted on top of the JSON text)."""
    max_referenced_bytes: int = 2 * 1024**3
    """Every blob's expanded size once per step or end record that refers to it: what a consumer
    expanding every step would see (shared values themselves are never copied)."""
    max_output_bytes: int = 512 * 1024**2
    """One file a command writes (``view``, ``har``, ``export-wabe``, ``export-verified``,
    ``redact``) or prints (``show --json``), counted while it is written."""
    max_question_seconds: int = 10
    """One JavaScript question the offline sandbox answers (locators, prep actions, ``eval-at``)."""
    max_cookies_per_step: int = 3_000
    """Cookies one step holds (a browser keeps ~180 per domain; an importer's jar is copied per step)."""
    max_pickle_ops: int = 8_000_000
    """Opcodes of one pickle (an AgentLab step), counted before it is unpickled."""
    max_pickle_memo: int = 2_000_000
    """The largest memo index a pickle may name (the unpickler allocates up to it at once)."""
    max_input_bytes: int = 256 * 1024**2
    """One JSON, HAR or pickle file read whole, as inflated: with its parsed values (``max_values``)
    it stays well under 1 GiB of memory."""

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


def limit_hint(name: str) -> str:
    """How the user raises limit ``name`` (a ``SessionLimits`` field), for an error message."""
    return f"limit {ENV_VARS[name]}; raise it to allow more"


def count_values(data: bytes | bytearray) -> int:
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
