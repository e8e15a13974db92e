"""The page's own ``value``/``checked`` attributes put back into HTML that BrowserGym's marking changed.

BrowserGym writes each element's live ``.value`` into its ``value`` attribute and ``.checked`` into
``checked`` at every observation, in the live DOM. Served as captured, such HTML would answer a fresh
load of the URL with what the agent typed, where a fresh live load has the page's own attributes.
``state.read_form`` reports, per element BrowserGym marked (by its ``bid``), the attributes the page
had; here they are written back into the serialized documents, start tag by start tag.

The HTML is Chromium's serialization (``DOM.getOuterHTML``): every attribute is ``name="value"``
with ``"`` escaped, and ``<`` in text is escaped except inside raw-text elements, so start tags are
found exactly by a scan that steps over comments and raw text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["restore_attributes"]

_TOKEN = re.compile(
    r"<!--.*?-->"
    r"|<(script|style|xmp|iframe|noembed|noframes|noscript|plaintext)\b[^>]*>.*?</\1\s*>"
    r"|<([a-zA-Z][^\s/>]*)((?:\s+[^\s\"'>/=]+(?:=\"[^\"]*\")?)*)(\s*/?)>",
    re.S | re.I,
)
_ATTRIBUTE = re.compile(r"(\s+)([^\s\"'>/=]+)(?:=\"([^\"]*)\")?")
_BID = "bid"
"""BrowserGym's element id attribute (``browsergym.core.constants.BROWSERGYM_ID_ATTRIBUTE``)."""


def restore_attributes(document: str, restored: Iterable[Mapping[str, Any]]) -> tuple[str, set[str]]:
    """``document`` with the listed elements' ``value``/``checked`` attributes as the page had them,
    and the bids put back. An element whose bid is not on exactly one start tag is left as it is."""
    wanted = {str(item["bid"]): item for item in restored if item.get("bid")}
    if not wanted or f" {_BID}=" not in document:
        return document, set()
    found: dict[str, list[re.Match[str]]] = {}
    for match in _TOKEN.finditer(document):
        attributes = match.group(3)
        if not attributes or f" {_BID}=" not in attributes:
            continue
        bid = next((m.group(3) for m in _ATTRIBUTE.finditer(attributes) if m.group(2) == _BID), None)
        bid = html.unescape(bid) if bid is not None else None
        if bid in wanted:
            found.setdefault(bid, []).append(match)
    edits = [(matches[0], wanted[bid]) for bid, matches in found.items() if len(matches) == 1]
    if not edits:
        return document, set()
    parts: list[str] = []
    at = 0
    for match, item in sorted(edits, key=lambda edit: edit[0].start()):
        parts += [document[at : match.start()], _start_tag(match, item)]
        at = match.end()
    parts.append(document[at:])
    return "".join(parts), {bid for bid, matches in found.items() if len(matches) == 1}


def _start_tag(match: re.Match[str], item: Mapping[str, Any]) -> str:
    """The start tag with ``value``/``checked`` as ``item`` has them, each kept in its place."""
    wanted: dict[str, str | None] = {}
    if "value" in item:
        wanted["value"] = None if item["value"] is None else html.escape(str(item["value"]), quote=True)
    if "checked" in item:
        wanted["checked"] = "" if item["checked"] else None
    rendered: list[str] = []
    for attribute in _ATTRIBUTE.finditer(match.group(3)):
        space, name, value = attribute.groups()
        if name.lower() in wanted:
            value = wanted.pop(name.lower())
            if value is None:
                continue
        rendered.append(space + name + ("" if value is None else f'="{value}"'))
    rendered += [f' {name}="{value}"' for name, value in wanted.items() if value is not None]
    return f"<{match.group(2)}{''.join(rendered)}{match.group(4)}>"
