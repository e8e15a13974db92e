"""Start tags found in captured HTML in time linear in the page, however it is crafted.

A regular expression like ``<input\\b(?:[^>"']|"[^"]*"|'[^']*')*>`` scans to the end of the page for
every ``<input`` that is never closed (a quote never closed, no ``>`` after it): ten thousand of them
in a 1 MB page are 10 GB of scanning. ``iter_tags`` finds the same tags, remembering what it learnt
about each ``>`` and quote it passed, so each byte is looked at a bounded number of times.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator

__all__ = ["SNAPSHOT_DROPPED_MARKER", "captured_scripts", "iter_tags", "snapshot_dropped", "sub_tags"]

SNAPSHOT_DROPPED_MARKER = '<script type="application/x-playwright-dropped-scripts"></script>'
"""Appended to a page rebuilt from a Playwright trace snapshot: the snapshot left elements out (every
``<script>``, preload links, some ``<meta>`` and ``<noscript>``), so the page's markup is not what the live
page held. An inert data block (not a script type), so the page still counts as one that ran scripts."""


def snapshot_dropped(html: str | None) -> str | None:
    """Why ``html`` is not the live page's whole markup, or None (it is)."""
    if html is not None and SNAPSHOT_DROPPED_MARKER in html:
        return (
            "it was rebuilt from a Playwright trace snapshot, which leaves out the page's <script> elements "
            "(and preload links, some <meta> and <noscript> elements)"
        )
    return None


_QUOTED = re.compile(r"""[>"']""")
_PLAIN = re.compile(r">")


@functools.cache
def _start(name: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(name)}\b", re.IGNORECASE)


def iter_tags(text: str, name: str, *, quotes: bool = True) -> Iterator[tuple[int, int]]:
    """(start, end) of each ``<name ...>`` start tag of ``text``, left to right, not overlapping.

    ``quotes``: a ``>`` inside a quoted attribute value does not end the tag, and a tag whose quote
    never closes is no tag (``<name\\b(?:[^>"']|"[^"]*"|'[^']*')*>``); without: ``<name\\b[^>]*>``.
    """
    start = _start(name)
    special = _QUOTED if quotes else _PLAIN
    ends: dict[int, int] = {}
    """A special character's position (outside quotes) -> where a tag reaching it ends (-1: never)."""
    scanned_from = scanned_to = -1
    """The last search for a special character: from where, and the first one found (-1: none)."""
    pos = 0
    while True:
        found = start.search(text, pos)
        if found is None:
            return
        after = found.end()
        if not scanned_from <= after <= scanned_to:
            hit = special.search(text, after)
            scanned_from, scanned_to = after, hit.start() if hit else -1
            if hit is None:
                return  # nothing can end this tag, nor any later one
        end = _resolve(text, scanned_to, ends, special)
        if end < 0:
            pos = after
            continue
        yield found.start(), end
        pos = end


def _resolve(text: str, at: int, ends: dict[int, int], special: re.Pattern[str]) -> int:
    """Where a tag that reaches the special character at ``at`` (outside quotes) ends, or -1."""
    chain: list[int] = []
    while True:
        known = ends.get(at)
        if known is not None:
            result = known
            break
        chain.append(at)
        char = text[at]
        if char == ">":
            result = at + 1
            break
        closing = text.find(char, at + 1)
        if closing < 0:
            result = -1
            break
        hit = special.search(text, closing + 1)
        if hit is None:
            result = -1
            break
        at = hit.start()
    for position in chain:
        ends[position] = result
    return result


def sub_tags(text: str, name: str, replace: Callable[[str], str], *, quotes: bool = True) -> str:
    """``text`` with each ``<name ...>`` start tag (as ``iter_tags`` finds them) replaced by ``replace(tag)``."""
    parts: list[str] = []
    last = 0
    for start, end in iter_tags(text, name, quotes=quotes):
        parts += [text[last:start], replace(text[start:end])]
        last = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


_JS_TYPES = frozenset(
    {
        "",
        "module",
        "text/javascript",
        "application/javascript",
        "application/ecmascript",
        "application/x-ecmascript",
        "application/x-javascript",
        "text/ecmascript",
        "text/javascript1.0",
        "text/javascript1.1",
        "text/javascript1.2",
        "text/javascript1.3",
        "text/javascript1.4",
        "text/javascript1.5",
        "text/jscript",
        "text/livescript",
        "text/x-ecmascript",
        "text/x-javascript",
    }
)
"""``<script type>`` values a browser runs (the rest are data blocks: JSON, templates)."""

_TYPE = re.compile(r"""\btype\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
_SCRIPT_URL = re.compile(
    r"""=\s*["']?[\x00-\x20]*j[\t\n\r]*a[\t\n\r]*v[\t\n\r]*a[\t\n\r]*s[\t\n\r]*c[\t\n\r]*r[\t\n\r]*i"""
    r"""[\t\n\r]*p[\t\n\r]*t[\t\n\r]*:""",
    re.IGNORECASE,
)
_ESCAPED_SCRIPT = re.compile(r"&lt;script\b", re.IGNORECASE)


def captured_scripts(html: str) -> str | None:
    """Why the page captured as ``html`` ran scripts live, or None if it carries none.

    Decided from the stored markup, so nothing the page defines can fool it; it errs towards "runs
    scripts" (an ``onx=`` in text counts), which only turns an answer into a loud refusal.
    """
    for start, end in iter_tags(html, "script", quotes=False):  # linear, however many are unclosed
        kind = _TYPE.search(html, start + len("<script"), end - 1)
        value = next((g for g in kind.groups() if g is not None), "") if kind else ""
        if value.strip().lower().split(";")[0].strip() in _JS_TYPES:
            return "a <script> element"
    handler = _HANDLER.search(html)
    if handler is not None:
        return f"an inline {handler.group(0).strip().rstrip('=').strip()} handler"
    if _SCRIPT_URL.search(html):
        return "a javascript: URL"
    if _ESCAPED_SCRIPT.search(html):
        return "a <script> in an iframe's srcdoc"
    return None
