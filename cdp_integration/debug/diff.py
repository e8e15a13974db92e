"""What changed between two captured steps: ``diff(session, a, b)``, one implementation for every face.

The CLI (``cdp-session diff``), the stepper (``d``) and the HTML viewer (changes since the previous
step) all format the same ``StepDiff``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Literal
from urllib.parse import urldefrag

from cdp_integration.debug.views import FormRow, RequestRow, control_label, form_row, step_requests
from cdp_integration.replay.text import visible_text

if TYPE_CHECKING:
    from cdp_integration.session.models import Cookie, FormControlState, Step
    from cdp_integration.session.store import Session

__all__ = [
    "TEXT_DIFF_LINES",
    "ChangeKind",
    "CookieChange",
    "FormChange",
    "StepDiff",
    "StorageChange",
    "TabChange",
    "diff",
    "text_diff",
]

ChangeKind = Literal["added", "changed", "removed"]


@dataclass(frozen=True)
class CookieChange:
    kind: ChangeKind
    name: str
    domain: str
    path: str
    before: str | None
    """The value at step A (``None``: the cookie did not exist)."""
    after: str | None


@dataclass(frozen=True)
class StorageChange:
    kind: ChangeKind
    area: Literal["local", "session"]
    origin: str
    key: str
    before: str | None
    after: str | None
    tab_id: str | None = None
    """``session`` storage belongs to one tab; ``local`` storage to the browser context."""


@dataclass(frozen=True)
class TabChange:
    kind: Literal["opened", "closed"]
    tab_id: str
    url: str
    title: str


@dataclass(frozen=True)
class FormChange:
    """A form control whose state changed between the steps: typed into, (un)checked, selected, or
    back to its default (``after`` is ``None``)."""

    tab_id: str
    control: str
    before: FormRow | None
    """The state at step A (``None``: the control held its default, or was not on the page)."""
    after: FormRow | None

    @property
    def text(self) -> str:
        """``typed 'abc' into input#title``; ``(was 'ab')`` when it held something else before."""
        if self.after is None:
            return f"{self.control} back to its default (was {self.before.state if self.before else '?'})"
        was = f" (was {self.before.state})" if self.before is not None and self.after.kind == "typed" else ""
        return self.after.text + was


@dataclass(frozen=True)
class StepDiff:
    """The change from step ``a`` to step ``b`` (indices as stored, not negative)."""

    a: int
    b: int
    url: tuple[str, str]
    title: tuple[str, str]
    tabs: tuple[TabChange, ...]
    cookies: tuple[CookieChange, ...]
    storage: tuple[StorageChange, ...]
    requests: tuple[RequestRow, ...]
    """Traffic captured in steps ``min(a, b) + 1 .. max(a, b)``: what happened in between."""
    text_diff: tuple[str, ...]
    """A unified diff of the active tab's visible text, one line per item (empty: same text)."""
    forms: tuple[FormChange, ...] = ()
    """What was typed, checked or selected in between (form state is not in the visible text)."""

    @property
    def url_changed(self) -> bool:
        return self.url[0] != self.url[1]

    @property
    def title_changed(self) -> bool:
        return self.title[0] != self.title[1]

    @property
    def is_empty(self) -> bool:
        return not (
            self.url_changed
            or self.title_changed
            or self.tabs
            or self.cookies
            or self.storage
            or self.requests
            or self.text_diff
            or self.forms
        )


def _kind(before: str | None, after: str | None) -> ChangeKind:
    return "added" if before is None else "removed" if after is None else "changed"


def _cookie_state(cookie: Cookie) -> tuple[object, ...]:
    # ``expires`` is left out: servers that refresh a cookie's lifetime on every response would make
    # every step show a change that is not one.
    return (cookie.value, cookie.http_only, cookie.secure, cookie.same_site)


def _cookie_changes(before: Step, after: Step) -> tuple[CookieChange, ...]:
    old = {(c.name, c.domain, c.path): c for c in before.cookies}
    new = {(c.name, c.domain, c.path): c for c in after.cookies}
    changes = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a is not None and b is not None and _cookie_state(a) == _cookie_state(b):
            continue
        value_a, value_b = (a.value if a else None), (b.value if b else None)
        changes.append(CookieChange(_kind(value_a, value_b), *key, before=value_a, after=value_b))
    return tuple(changes)


def _map_changes(
    area: Literal["local", "session"],
    before: dict[str, dict[str, str]],
    after: dict[str, dict[str, str]],
    tab_id: str | None = None,
) -> list[StorageChange]:
    changes = []
    for origin in sorted(before.keys() | after.keys()):
        old, new = before.get(origin, {}), after.get(origin, {})
        for key in sorted(old.keys() | new.keys()):
            a, b = old.get(key), new.get(key)
            if a != b:
                changes.append(StorageChange(_kind(a, b), area, origin, key, a, b, tab_id))
    return changes


def _storage_changes(before: Step, after: Step) -> tuple[StorageChange, ...]:
    changes = _map_changes("local", before.local_storage, after.local_storage)
    old_tabs = {tab.tab_id: tab for tab in before.tabs}
    for tab in after.tabs:
        previous = old_tabs.get(tab.tab_id)
        changes += _map_changes(
            "session", previous.session_storage if previous else {}, tab.session_storage, tab.tab_id
        )
    return tuple(changes)


def _tab_changes(before: Step, after: Step) -> tuple[TabChange, ...]:
    old = {tab.tab_id for tab in before.tabs}
    new = {tab.tab_id for tab in after.tabs}
    opened = [TabChange("opened", t.tab_id, t.url, t.title) for t in after.tabs if t.tab_id not in old]
    closed = [TabChange("closed", t.tab_id, t.url, t.title) for t in before.tabs if t.tab_id not in new]
    return tuple(opened + closed)


def _control_key(control: FormControlState) -> tuple[object, ...]:
    return (control.frame, tuple(control.path), control.tag, control.name, control.id)


def _form_changes(before: Step, after: Step) -> tuple[FormChange, ...]:
    """Per tab: controls newly changed or changed again; on the same page (same URL) also the ones
    back to their default. A tab that moved to another page shows only what its new page holds."""
    old_tabs = {tab.tab_id: tab for tab in before.tabs}
    changes = []
    for tab in after.tabs:
        previous = old_tabs.get(tab.tab_id)
        same_page = previous is not None and urldefrag(previous.url).url == urldefrag(tab.url).url
        old = {_control_key(c): c for c in previous.form_state} if previous is not None and same_page else {}
        new = {_control_key(c): c for c in tab.form_state}
        for key, control in new.items():
            was = old.get(key)
            if was is None or was != control:
                row = form_row(tab.tab_id, control)
                changes.append(
                    FormChange(tab.tab_id, row.control, form_row(tab.tab_id, was) if was else None, row)
                )
        for key, control in old.items():
            if key not in new:
                changes.append(
                    FormChange(tab.tab_id, control_label(control), form_row(tab.tab_id, control), None)
                )
    return tuple(changes)


class _InputAttributes(HTMLParser):
    """The ``value`` and ``checked`` attributes of a page's inputs, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inputs: list[tuple[tuple[str, str, str, int], str, str | None, bool]] = []
        self._seen: dict[tuple[str, str, str], int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "input":
            return
        values = {name.lower(): value or "" for name, value in attrs}
        kind = values.get("type", "text").lower()
        if kind in ("hidden", "submit", "button", "reset", "image", "file"):
            return
        identity = (values.get("id", ""), values.get("name", ""), kind)
        count = self._seen[identity] = self._seen.get(identity, -1) + 1
        self.inputs.append(((*identity, count), kind, values.get("value"), "checked" in values))


def _inputs(markup: str | None) -> dict[tuple[str, str, str, int], tuple[str, str | None, bool]]:
    parser = _InputAttributes()
    parser.feed(markup or "")
    return {key: (kind, value, checked) for key, kind, value, checked in parser.inputs}


def _attribute_changes(before: Step, after: Step, known: set[str]) -> list[FormChange]:
    """Inputs whose ``value``/``checked`` attribute changed on the same page: BrowserGym writes every
    control's live value into its attributes when it observes the page, so there what was typed is in
    the HTML rather than in the form state."""
    old_tabs = {tab.tab_id: tab for tab in before.tabs}
    changes = []
    for tab in after.tabs:
        previous = old_tabs.get(tab.tab_id)
        if previous is None or urldefrag(previous.url).url != urldefrag(tab.url).url:
            continue
        old, new = _inputs(previous.html), _inputs(tab.html)
        for key, (kind, value, checked) in new.items():
            if key not in old:
                continue
            element_id, name, _, _ = key
            label = "input" + (f"#{element_id}" if element_id else f"[name={name}]" if name else "")
            if label in known:
                continue
            was_value, was_checked = old[key][1], old[key][2]
            if kind in ("checkbox", "radio"):
                if checked != was_checked:
                    row = FormRow(tab.tab_id, label, "checked" if checked else "unchecked", "")
                    changes.append(FormChange(tab.tab_id, label, None, row))
            elif value != was_value:

                def shown(text: str | None, kind: str = kind) -> str:
                    return repr("•" * len(text or "") if kind == "password" else text or "")

                before_row = FormRow(tab.tab_id, label, "typed", shown(was_value))
                row = FormRow(tab.tab_id, label, "typed", shown(value))
                changes.append(FormChange(tab.tab_id, label, before_row if was_value else None, row))
    return changes


def text_lines(step: Step) -> list[str]:
    """The active tab's visible text, line by line (what ``show --text`` prints), with what was typed,
    checked and selected in its forms."""
    tab = step.active_tab
    return visible_text(step.html, tab.form_state if tab else ()).splitlines()


TEXT_DIFF_LINES = 2000
"""Changed lines (after the common head and tail) compared line by line, per side; beyond this the
diff is cut and says so: difflib's matching is quadratic (2 x 40,000 lines took over 30 s)."""
_CONTEXT = 2


def _range(start: int, length: int) -> str:
    # The "@@ -l,s +l,s @@" numbers, as difflib.unified_diff writes them.
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def text_diff(a: list[str], b: list[str], from_name: str, to_name: str) -> list[str]:
    """A unified diff of ``a`` and ``b`` (2 lines of context) in time linear in their length plus
    ``TEXT_DIFF_LINES`` squared: the common head and tail are skipped first, and at most
    ``TEXT_DIFF_LINES`` changed lines of each side are matched; a last line says what was cut."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    start = max(0, head - _CONTEXT)
    a_end, b_end = len(a) - max(0, tail - _CONTEXT), len(b) - max(0, tail - _CONTEXT)
    a_mid, b_mid = a[start:a_end], b[start:b_end]
    cut = max(len(a_mid), len(b_mid)) > TEXT_DIFF_LINES + 2 * _CONTEXT
    if cut:
        a_mid, b_mid = a_mid[: TEXT_DIFF_LINES + _CONTEXT], b_mid[: TEXT_DIFF_LINES + _CONTEXT]
    lines: list[str] = []
    matcher = difflib.SequenceMatcher(None, a_mid, b_mid)
    for group in matcher.get_grouped_opcodes(_CONTEXT):
        if not lines:
            lines += [f"--- {from_name}", f"+++ {to_name}"]
        first, last = group[0], group[-1]
        lines.append(
            f"@@ -{_range(start + first[1], last[2] - first[1])} "
            f"+{_range(start + first[3], last[4] - first[3])} @@"
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in a_mid[i1:i2]]
                continue
            lines += ["-" + line for line in a_mid[i1:i2]]
            lines += ["+" + line for line in b_mid[j1:j2]]
    if cut:
        if not lines:
            lines += [f"--- {from_name}", f"+++ {to_name}"]
        lines.append(
            f"… text diff cut: {a_end - start} and {b_end - start} lines differ, "
            f"the first {TEXT_DIFF_LINES + _CONTEXT} of each compared"
        )
    return lines


def diff(session: Session, a: int, b: int) -> StepDiff:
    """What changed from step ``a`` to step ``b`` of ``session`` (negative indices count from the end)."""
    ia, ib = session.step_index(a), session.step_index(b)
    before, after = session.steps[ia], session.steps[ib]
    low, high = sorted((ia, ib))
    requests = tuple(row for i in range(low + 1, high + 1) for row in step_requests(session, i))
    text = text_diff(text_lines(before), text_lines(after), f"step {before.index}", f"step {after.index}")
    forms = _form_changes(before, after)
    return StepDiff(
        a=before.index,
        b=after.index,
        url=(before.url, after.url),
        title=(before.title, after.title),
        tabs=_tab_changes(before, after),
        cookies=_cookie_changes(before, after),
        storage=_storage_changes(before, after),
        requests=requests,
        text_diff=tuple(text),
        forms=forms + tuple(_attribute_changes(before, after, {f.control for f in forms})),
    )
