"""What a person would read on a captured page: visible text from the serialized HTML, no browser.

The rules follow ``innerText`` closely enough for reading and diffing steps: ``<head>``, scripts,
styles, templates and hidden elements (``hidden``, inline ``display:none`` / ``visibility:hidden``,
closed dialogs, the body of a closed ``<details>``) give no text; block elements start a new line and
table cells are separated by a tab; ``<pre>`` keeps its whitespace. Form controls show what they
display: a filled text field as ``[value]``, a password as ``[••••]``, a select as ``[chosen option]``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from cdp_integration.session.models import FormControlState

__all__ = ["ControlWalk", "Element", "StateAt", "find_element", "visible_text"]


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``: tag and attribute name lists stay readable."""
    return frozenset(text.split())


VOID_ELEMENTS = word_set("area base br col embed hr img input link meta param source track wbr")
_NEVER_RENDERED = word_set("head script style template noscript title iframe object svg canvas")
_BLOCKS = word_set(
    """address article aside blockquote body caption center dd details dialog dir div dl dt fieldset
    figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu nav ol p
    pre section summary table tbody tfoot thead tr ul"""
)
_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\b", re.I)
_TEXT_INPUTS = word_set("text search email url tel number date time month week datetime-local")
_WHITESPACE = re.compile(r"[ \t\n\r\f]+")


def _attrs(pairs: list[tuple[str, str | None]]) -> dict[str, str]:
    return {name: value or "" for name, value in pairs}


def _hidden(tag: str, attrs: dict[str, str]) -> bool:
    return (
        "hidden" in attrs
        or (tag in _NEVER_RENDERED and not (tag == "template" and "shadowrootmode" in attrs))
        or (tag == "dialog" and "open" not in attrs)
        or (tag == "input" and attrs.get("type", "").lower() == "hidden")
        or bool(_HIDDEN_STYLE.search(attrs.get("style", "")))
    )


@dataclass
class _Open:
    """An element whose end tag has not been seen yet."""

    tag: str
    silent: bool
    """Its content gives no text of its own (hidden, or a form control shown by its value)."""
    attrs: dict[str, str] = field(default_factory=dict)
    shows_value: bool = False
    """A visible ``<select>`` or ``<textarea>``: its value is written when it closes."""
    chosen: bool = False
    """The ``<option>`` its ``<select>`` shows."""
    collected: list[str] = field(default_factory=list)
    """Text of a ``<textarea>``, or of the chosen ``<option>`` of a ``<select>``."""


def _replaced_text(tag: str, attrs: dict[str, str]) -> str:
    """What an ``<input>`` or ``<img>`` shows, as text."""
    if tag == "img":
        return f" {attrs['alt'].strip()} " if attrs.get("alt", "").strip() else ""
    kind = attrs.get("type", "text").lower() or "text"
    value = attrs.get("value", "")
    if kind in ("submit", "button", "reset"):
        return f" {value} " if value else ""
    if kind in ("checkbox", "radio"):
        return " [x] " if "checked" in attrs else " [ ] "
    if kind == "password":
        return " [••••] " if value else ""
    if kind in _TEXT_INPUTS and value:
        return f" [{value}] "
    return ""


# -- where captured form state applies --------------------------------------------------------------
# ``FormControlState.path`` addresses a control the way the capture found it in the live DOM: its
# index in ``querySelectorAll("*")`` of its root (the document, or an open shadow root, whose
# controls' paths start with their host's path). The step text here and the viewer both walk the
# captured HTML with ``html.parser`` and must count elements exactly as the live DOM does, or a typed
# value would be shown on the wrong element: one counter, shared, so the two cannot drift apart.
# Where the HTML and the control's identity (tag, id, name) disagree, the element gets no state: the
# page is then shown as captured rather than with a guess.

_TEXT_ONLY = word_set("noscript noembed noframes xmp iframe")
"""Elements whose content a live DOM (scripting on) holds as text: tags inside are not elements."""


@dataclass(frozen=True)
class StateAt:
    """The captured state of the element just opened."""

    control: FormControlState | None = None
    """The control's state, if this element is a control the capture found changed."""
    option_selected: bool | None = None
    """Inside a changed ``<select>``: whether this ``<option>`` is selected (``None`` elsewhere)."""


_NONE = StateAt()


class ControlWalk:
    """Feed it every start and end tag in document order; it says which state applies where."""

    def __init__(self, controls: Sequence[FormControlState]) -> None:
        self._controls = {tuple(c.path): c for c in controls if not c.frame}
        """Frames are separate documents with their own HTML: not in this walk."""
        self._roots: list[tuple[tuple[int, ...], list[int]]] = [((), [0])]
        """The element counter of each root open (the document, shadow roots), with its host's path."""
        self._open: list[tuple[str, tuple[int, ...] | None, str | None]] = []
        """Open elements: tag, path (``None``: not an element of the live DOM), what it opened."""
        self._open_tags: Counter[str] = Counter()
        """How many elements of each tag are open (what an end tag closes, without a search)."""
        self._uncounted = 0
        self._options: tuple[frozenset[int], list[int]] | None = None
        """Inside a changed ``<select>``: its selected option indexes, and the next option's index."""

    def __bool__(self) -> bool:
        return bool(self._controls)

    def _count(self, tag: str, attrs: Sequence[tuple[str, str | None]]) -> tuple[int, ...] | None:
        path: tuple[int, ...] | None = None
        opened: str | None = None
        if not self._uncounted:
            prefix, counter = self._roots[-1]
            path = (*prefix, counter[0])
            counter[0] += 1
        if tag == "template":
            mode = next((v for n, v in attrs if n.lower() == "shadowrootmode"), None)
            host = next((p for _, p, _ in reversed(self._open) if p is not None), None)
            if path is not None and mode == "open" and host is not None:
                self._roots[-1][1][0] -= 1  # a declarative shadow root is no element of the DOM
                path, opened = None, "root"
                self._roots.append((host, [0]))
            else:
                opened = "uncounted"  # a template's content (or a closed root) is not in the tree
        elif tag in _TEXT_ONLY:
            opened = "uncounted"
        if opened == "uncounted":
            self._uncounted += 1
        if tag not in VOID_ELEMENTS:
            self._open.append((tag, path, opened))
            self._open_tags[tag] += 1
        return path

    def start(self, tag: str, attrs: Sequence[tuple[str, str | None]]) -> StateAt:
        """Count the element ``<tag attrs>`` and return the state captured for it."""
        path = self._count(tag, attrs)
        if tag == "option" and self._options is not None:
            selected, counter = self._options
            counter[0] += 1
            return StateAt(option_selected=counter[0] - 1 in selected)
        control = self._controls.get(path) if path is not None else None
        if control is None:
            return _NONE
        values = {name.lower(): value or "" for name, value in attrs}
        if (tag, values.get("id", ""), values.get("name", "")) != (control.tag, control.id, control.name):
            return _NONE  # the HTML differs from the live DOM here: show the page as captured
        if tag == "select" and control.selected is not None:
            self._options = (frozenset(control.selected), [0])
        return StateAt(control=control)

    def end(self, tag: str) -> None:
        """Close ``</tag>`` and every element left open inside it (a stray end tag changes nothing)."""
        if tag == "select":
            self._options = None
        if not self._open_tags[tag]:  # counted, not searched: a stray end tag costs nothing
            return
        while self._open:
            name, _, opened = self._open.pop()
            self._open_tags[name] -= 1
            if opened == "root":
                self._roots.pop()
            elif opened == "uncounted":
                self._uncounted -= 1
            if name == tag:
                break


class _TextParser(HTMLParser):
    def __init__(self, form_state: Sequence[FormControlState] = ()) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._line: list[str] = []
        self._stack: list[_Open] = []
        self._stack_tags: Counter[str] = Counter()
        self._pre = 0
        self._controls = ControlWalk(form_state)
        """What was typed, checked and selected (``FormControlState``), found as the parser walks."""

    def _with_state(
        self, tag: str, attrs_list: list[tuple[str, str | None]], attrs: dict[str, str]
    ) -> dict[str, str]:
        """``attrs`` as the control's captured state shows it (the live value, checkedness, choice)."""
        state = self._controls.start(tag, attrs_list)
        if state.option_selected is not None:
            kept = {k: v for k, v in attrs.items() if k != "selected"}
            return {**kept, "selected": ""} if state.option_selected else kept
        control = state.control
        if control is None:
            return attrs
        changed = dict(attrs)
        if control.value is not None:
            changed["value"] = control.value
        if control.checked is not None:
            changed.pop("checked", None)
            if control.checked:
                changed["checked"] = ""
        return changed

    def _silent(self) -> bool:
        return bool(self._stack) and self._stack[-1].silent

    def _break(self) -> None:
        text = "".join(self._line)
        if not self._pre:
            text = re.sub(r" {2,}", " ", text).strip(" ")
        if text.strip():
            self.lines.append(text.rstrip())
        self._line = []

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = _attrs(attrs_list)
        if self._controls:
            attrs = self._with_state(tag, attrs_list, attrs)
        parent = self._stack[-1] if self._stack else None
        if parent is not None and parent.tag == "select":
            chosen = tag == "option" and ("selected" in attrs or not parent.collected)
            if chosen:
                parent.collected[:] = [""]
            self._push(_Open(tag, True, chosen=chosen))
            return
        in_closed_details = parent is not None and parent.tag == "details" and "open" not in parent.attrs
        silent = self._silent() or _hidden(tag, attrs) or (in_closed_details and tag != "summary")
        if not silent:
            if tag in _BLOCKS or tag == "br":
                self._break()
            if tag in ("td", "th") and "".join(self._line).strip():
                self._line.append("\t")
            elif tag == "pre":
                self._pre += 1
            elif tag in ("input", "img"):
                self._line.append(_replaced_text(tag, attrs))
        if tag not in VOID_ELEMENTS:
            control = tag in ("select", "textarea")
            self._push(_Open(tag, silent or control, attrs, shows_value=control and not silent))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_ELEMENTS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._controls:
            self._controls.end(tag)
        if not self._stack_tags[tag]:
            return  # a stray end tag (counted, not searched: linear in the page)
        while self._stack:
            entry = self._stack.pop()
            self._stack_tags[entry.tag] -= 1
            self._close(entry)
            if entry.tag == tag:
                break

    def _push(self, entry: _Open) -> None:
        self._stack.append(entry)
        self._stack_tags[entry.tag] += 1

    def _close(self, entry: _Open) -> None:
        if entry.shows_value:
            if entry.tag == "textarea":
                value = entry.attrs.get("value") or "".join(entry.collected)
                self._line.append(f" [{value.strip()}] " if value.strip() else "")
            else:
                chosen = _WHITESPACE.sub(" ", "".join(entry.collected)).strip()
                self._line.append(f" [{chosen}] " if chosen else " [ ] ")
        if entry.silent:
            return
        if entry.tag in _BLOCKS:
            self._break()
        if entry.tag == "pre":
            self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        if self._stack:
            top = self._stack[-1]
            if top.tag == "textarea":
                top.collected.append(data)
            elif top.chosen and len(self._stack) > 1:
                self._stack[-2].collected.append(data)
        if self._silent():
            return
        if not self._pre:
            self._line.append(_WHITESPACE.sub(" ", data))
            return
        first, *rest = data.split("\n")
        self._line.append(first)
        for part in rest:
            self._break()
            self._line.append(part)

    def close(self) -> None:
        super().close()
        self._break()


def visible_text(html: str | None, form_state: Sequence[Any] = ()) -> str:
    """The text a reader sees on the page ``html`` renders, one block per line; ``form_state``
    (``FormControlState`` records): what was typed, checked and selected, shown in place."""
    if not html:
        return ""
    parser = _TextParser(form_state)
    parser.feed(html)
    parser.close()
    return "\n".join(parser.lines)


@dataclass(frozen=True)
class Element:
    """One element found in captured HTML: its tag, attributes and visible text (on one line)."""

    tag: str
    attrs: dict[str, str]
    text: str


class _FindParser(HTMLParser):
    def __init__(self, attr: str, value: str) -> None:
        super().__init__(convert_charrefs=False)
        self._attr, self._value = attr, value
        self.found: tuple[str, dict[str, str]] | None = None
        self.inner: list[str] = []
        self._depth = 0
        self.done = False

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if self.found is None:
            attrs = _attrs(attrs_list)
            if attrs.get(self._attr) != self._value:
                return
            self.found = (tag, attrs)
            self.done = tag in VOID_ELEMENTS
        self.inner.append(self.get_starttag_text() or "")
        if tag not in VOID_ELEMENTS:
            self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self.found is not None and not self.done:
            self.inner.append(f"</{tag}>")
            self._depth -= 1
            self.done = self._depth <= 0

    def handle_data(self, data: str) -> None:
        if self.found is not None and not self.done:
            self.inner.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")


def find_element(html: str | None, attr: str, value: str) -> Element | None:
    """The first element of ``html`` whose ``attr`` equals ``value`` (e.g. BrowserGym's ``bid``)."""
    if not html:
        return None
    parser = _FindParser(attr, value)
    parser.feed(html)
    parser.close()
    if parser.found is None:
        return None
    tag, attrs = parser.found
    text = visible_text("<div>" + "".join(parser.inner) + "</div>")
    return Element(tag=tag, attrs=attrs, text=" ".join(text.split()))
