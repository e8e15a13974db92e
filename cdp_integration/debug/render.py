"""Plain-text faces of the debug views, shared by ``cdp-session`` commands and the stepper.

Every function returns a string (no printing), so the stepper and the CLI show exactly the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal

import orjson

from cdp_integration.debug.diff import StepDiff, text_lines
from cdp_integration.debug.views import (
    RequestRow,
    end_evaluation,
    form_rows,
    offline_checks,
    step_requests,
    step_summaries,
    step_summary,
)
from cdp_integration.evaluate.explain import answer_words
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.output import BoundedOutput, iter_json
from cdp_integration.session.store import Session

__all__ = ["VIEWS", "View", "format_diff", "format_requests", "format_step", "format_steps", "step_json"]

View = Literal["summary", "html", "text", "form", "cookies", "storage", "network", "tabs", "json"]
VIEWS: tuple[View, ...] = (
    "summary",
    "html",
    "text",
    "form",
    "cookies",
    "storage",
    "network",
    "tabs",
    "json",
)

_BULKY_TAB_FIELDS = ("dom_snapshot", "screenshot_png", "thumbnail_webp", "ax_tree")


def cut(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int | None]) -> str:
    """Left-aligned columns; a ``None`` width is the last column and is never cut."""
    lines = []
    for row in [header, *rows]:
        cells = [
            cell if width is None else cut(cell, width).ljust(width)
            for cell, width in zip(row, widths, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_steps(session: Session) -> str:
    """The step table of ``cdp-session steps``."""
    rows = []
    for s in step_summaries(session):
        rows.append(
            [
                str(s.index),
                s.label,
                s.url,
                s.title,
                s.document_status,
                str(s.requests),
                f"{s.capture_ms:.1f}",
                s.evaluation.label if s.evaluation else "-",
                "; ".join(s.faults) or "-",
            ]
        )
    table = _table(
        ["step", "action", "url", "title", "doc", "reqs", "capture ms", "eval", "faults"],
        rows,
        [4, 30, 44, 22, 7, 4, 10, 8, None],
    )
    lines = [table]
    if session.end is not None:
        answer = session.end.final_answer
        lines.append(f"answer: {answer_words(answer, stopped=answer is not None)}")
    final = end_evaluation(session)
    if final is not None:
        lines.append(f"final evaluation ({final.source}): {final.label}")
    checks = offline_checks(session, len(session.steps) - 1) if session.steps else None
    if checks is not None:
        lines.append(f"final state, {checks}")
    return "\n".join(lines)


def format_requests(rows: Sequence[RequestRow], *, with_step: bool = False) -> str:
    if not rows:
        return "(no requests)"
    body = []
    for r in rows:
        cells = [str(r.step)] if with_step else []
        notes = ("" if r.origin == "agent" else f" [{r.origin}]") + (f" ({r.error})" if r.error else "")
        status = "failed" if r.status is None and r.error else r.status_label
        cells += [r.method, status, r.resource_type, r.time_label, r.url + notes]
        body.append(cells)
    header = (["step"] if with_step else []) + ["method", "status", "type", "time", "url"]
    widths: list[int | None] = [4] if with_step else []
    widths += [6, 8, 10, 9, None]
    return _table(header, body, widths)


def _summary(session: Session, index: int) -> str:
    step = session.steps[index]
    summary = step_summary(session, index)
    lines = [
        f"step      {step.index} of {len(session.steps) - 1}   ({step.trigger})",
        f"action    {step.action or '-'}",
        f"url       {step.url}",
        f"title     {step.title}",
        f"document  {summary.document_status}",
        f"tabs      {len(step.tabs)}   cookies {len(step.cookies)}   requests {summary.requests}"
        f"   capture {step.capture_ms:.1f} ms",
    ]
    if summary.evaluation is not None:
        e = summary.evaluation
        lines.append(f"eval      {e.label}   ({e.source}, answer {e.answer_label})")
    rows = form_rows(step)
    lines += [f"form      {row.text}" for row in rows[:_FORM_SUMMARY_ROWS]]
    if len(rows) > _FORM_SUMMARY_ROWS:
        lines.append(f"form      … and {len(rows) - _FORM_SUMMARY_ROWS} more (--form)")
    lines += [f"fault     {fault}" for fault in summary.faults]
    checks = offline_checks(session, index)
    if checks is not None:
        lines.append(f"evaluation, {checks}")
    return "\n".join(lines)


_FORM_SUMMARY_ROWS = 8


def _form(session: Session, index: int) -> str:
    step = session.steps[index]
    rows = form_rows(step)
    if not rows:
        return "(no form control differs from its default)"
    several = len(step.tabs) > 1
    return "\n".join((f"tab {row.tab_id}  " if several else "") + row.text for row in rows)


def _cookies(session: Session, index: int) -> str:
    cookies = session.steps[index].cookies
    if not cookies:
        return "(no cookies)"
    rows = [
        [
            c.name,
            c.domain,
            c.path,
            " ".join(flag for flag, on in (("httpOnly", c.http_only), ("secure", c.secure)) if on) or "-",
            "session" if c.session else f"expires {c.expires:.0f}",
            c.value,
        ]
        for c in cookies
    ]
    return _table(["name", "domain", "path", "flags", "lifetime", "value"], rows, [20, 24, 10, 15, 18, None])


def _storage(session: Session, index: int) -> str:
    step = session.steps[index]
    lines = []
    for origin, items in sorted(step.local_storage.items()):
        lines.append(f"localStorage {origin}" + ("" if items else "  (empty)"))
        lines += [f"  {key} = {value}" for key, value in sorted(items.items())]
    for tab in step.tabs:
        for origin, items in sorted(tab.session_storage.items()):
            lines.append(f"sessionStorage {origin}  (tab {tab.tab_id})" + ("" if items else "  (empty)"))
            lines += [f"  {key} = {value}" for key, value in sorted(items.items())]
    return "\n".join(lines) or "(no storage captured)"


def _tabs(session: Session, index: int) -> str:
    rows = [
        ["*" if tab.active else "", str(n), tab.tab_id, tab.title, tab.url]
        for n, tab in enumerate(session.steps[index].tabs)
    ]
    return _table(["", "#", "id", "title", "url"], rows, [1, 2, 12, 30, None]) if rows else "(no tabs)"


def step_json(session: Session, index: int) -> Iterator[bytes]:
    """The step record as indented JSON, in pieces (one network exchange at a time): the output of
    ``show --json``, which the caller writes through its output budget."""
    record: dict[str, Any] = session.steps[index].model_dump(mode="json", by_alias=True)
    evaluator_pages = (record.get("evaluation") or {}).get("pages") or []
    for tab in [*record["tabs"], *evaluator_pages]:
        for name in _BULKY_TAB_FIELDS:
            if tab.get(name) is not None:
                size = len(tab[name]) if isinstance(tab[name], str) else len(orjson.dumps(tab[name]))
                tab[name] = f"<{size} bytes, left out>"
    return iter_json(record, stream_depth=3)


def _json(session: Session, index: int) -> str:
    budget = BoundedOutput(None, SessionLimits.from_env().max_output_bytes, "the step as JSON")
    pieces = []
    for piece in step_json(session, index):
        budget.count(len(piece))
        pieces.append(piece)
    return b"".join(pieces).decode()


def format_step(session: Session, step: int, view: View = "summary") -> str:
    """One view of the state captured at ``step`` (negative counts from the end)."""
    index = session.step_index(step)
    if view == "html":
        return session.steps[index].html or "(no HTML captured)"
    if view == "text":
        return "\n".join(text_lines(session.steps[index])) or "(no visible text)"
    if view == "network":
        return format_requests(step_requests(session, index))
    formatters = {
        "summary": _summary,
        "form": _form,
        "cookies": _cookies,
        "storage": _storage,
        "tabs": _tabs,
        "json": _json,
    }
    return formatters[view](session, index)


def _change(kind: str) -> str:
    return {"added": "+", "removed": "-", "changed": "~", "opened": "+", "closed": "-"}[kind]


def _values(kind: str, before: str | None, after: str | None) -> str:
    return str(after if kind == "added" else before if kind == "removed" else f"{before} → {after}")


def format_diff(change: StepDiff) -> str:
    """The text of ``cdp-session diff`` / the stepper's ``d``."""
    lines = [f"step {change.a} → step {change.b}"]
    if change.is_empty:
        return lines[0] + ": no change"
    if change.url_changed:
        lines.append(f"url     {change.url[0]}\n     →  {change.url[1]}")
    if change.title_changed:
        lines.append(f"title   {change.title[0]!r} → {change.title[1]!r}")
    for tab in change.tabs:
        lines.append(f"tab     {_change(tab.kind)} {tab.kind} {tab.tab_id} {tab.url}")
    if change.cookies:
        lines.append("cookies")
        for c in change.cookies:
            lines.append(
                f"  {_change(c.kind)} {c.name} ({c.domain}{c.path}) {c.kind}: {_values(c.kind, c.before, c.after)}"
            )
    if change.storage:
        lines.append("storage")
        for s in change.storage:
            where = f"{s.area}Storage {s.origin}" + (f" tab {s.tab_id}" if s.tab_id else "")
            lines.append(
                f"  {_change(s.kind)} {where} {s.key} {s.kind}: {_values(s.kind, s.before, s.after)}"
            )
    if change.requests:
        lines.append(f"requests ({len(change.requests)})")
        lines += ["  " + line for line in format_requests(change.requests, with_step=True).splitlines()]
    if change.forms:
        lines.append("form")
        several = len({f.tab_id for f in change.forms}) > 1
        lines += [f"  {f'tab {f.tab_id} ' if several else ''}{f.text}" for f in change.forms]
    if change.text_diff:
        lines.append("visible text")
        lines += list(change.text_diff)
    return "\n".join(lines)
