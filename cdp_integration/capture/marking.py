"""The page's own ``value``/``checked`` attributes put back into HTML that BrowserGym's marking changed.

BrowserGym writes each element's live ``.value`` into its ``value`` attribute and ``.checked`` into
``checked`` at every observation, in the live DOM. Served as captured, such HTML would answer a fresh
load of the URL with what the agent typed, where a fresh live load has the page's own attributes.
``state.read_form`` reports, per element BrowserGym marked (by its ``bid``), the attributes the page
had; here they are written back into the serialized documents, start tag by start tag, and what the
marking had left in each tag changed is returned: the tab keeps it (``TabState.marked_attributes``)
for the page as the agent left it, which live still has BrowserGym's attributes.

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


def restore_attributes(
    document: str, restored: Iterable[Mapping[str, Any]]
) -> tuple[str, dict[str, dict[str, Any]]]:
    """``document`` with the listed elements' ``value``/``checked`` attributes as the page had them,
    and, by bid, what the marking had left in each tag changed (``tag``, and ``value`` (None: no
    attribute) / ``checked`` for the attributes restored). An element whose bid is not on exactly
    one start tag is left as it is."""
    wanted = {str(item["bid"]): item for item in restored if item.get("bid")}
    if not wanted or f" {_BID}=" not in document:
        return document, {}
    found: dict[str, list[re.Match[str]]] = {}
    for match in _TOKEN.finditer(document):
        attributes = match.group(3)
        if not attributes or f" {_BID}=" not in attributes:
            continue
        bid = next((m.group(3) for m in _ATTRIBUTE.finditer(attributes) if m.group(2) == _BID), None)
        bid = html.unescape(bid) if bid is not None else None
        if bid in wanted:
            found.setdefault(bid, []).append(match)
    edits = {bid: matches[0] for bid, matches in found.items() if len(matches) == 1}
    if not edits:
        return document, {}
    parts: list[str] = []
    at = 0
    for bid, match in sorted(edits.items(), key=lambda edit: edit[1].start()):
        parts += [document[at : match.start()], _start_tag(match, wanted[bid])]
        at = match.end()
    parts.append(document[at:])
    return "".join(parts), {bid: _marked(match, wanted[bid]) for bid, match in edits.items()}


def _marked(match: re.Match[str], item: Mapping[str, Any]) -> dict[str, Any]:
    """The ``value``/``checked`` attributes ``item`` restores, as the start tag had them, and each
    one's place among the tag's attributes (``outerHTML`` lists them in the order they were added:
    BrowserGym adds ``value`` before its ``bid``)."""
    had: dict[str, tuple[int, str]] = {}
    for attribute in _ATTRIBUTE.finditer(match.group(3)):  # a parser keeps a name's first occurrence
        had.setdefault(attribute.group(2).lower(), (len(had), html.unescape(attribute.group(3) or "")))
    marked: dict[str, Any] = {"tag": match.group(2).lower()}
    for name in ("value", "checked"):
        if name in item:
            at, value = had.get(name, (None, None))
            marked[name] = value if name == "value" else at is not None
            if at is not None:
                marked[f"{name}_at"] = at
    return marked


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
