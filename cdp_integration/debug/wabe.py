"""``cdp-session export-wabe``: a captured episode in WABE's result layout, for its LLM judge.

WABE (Web Agent Browser Evaluation, Online-Mind2Web's judge run as a green agent) reads one directory
per task::

    DIR/result.json              task_id, task, final_result_response, action_history, thoughts,
                                 screenshots, steps_taken, error, metadata
    DIR/trajectory/step_NNN.png  the browser after step NNN (000: before the first action)

Actions are written the way Mind2Web writes them (``[button] Sign In -> CLICK``), the element found in
the page the agent acted on; screenshots come from sessions captured with ``screenshot=True``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.debug.actions import mind2web_action
from cdp_integration.debug.views import task_text
from cdp_integration.errors import SessionFormatError
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import Step
from cdp_integration.session.output import BoundedOutput
from cdp_integration.session.store import Session
from cdp_integration.session.untrusted import open_output

__all__ = ["WabeExport", "export_wabe", "wabe_result"]


@dataclass(frozen=True)
class WabeExport:
    result: Path
    screenshots: tuple[Path, ...]
    steps_taken: int


def _iso(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        raise SessionFormatError(f"timestamp {seconds!r} is out of range (not a date)") from None


def _thought(step: Step) -> str:
    """A step's reasoning as one text (WABE's ``thoughts`` go beside ``action_history``): the thought,
    else what the agent wrote, else its harness's notes; empty when the harness recorded none."""
    reasoning = step.reasoning
    if reasoning is None:
        return ""
    if reasoning.thought:
        return reasoning.thought
    said = [m.text for m in reasoning.messages if m.role == "assistant"]
    if said:
        return "\n".join(said)
    return "\n".join(f"{name}: {value}" for name, value in reasoning.notes.items())


def wabe_result(session: Session, screenshots: list[str]) -> dict[str, Any]:
    """The ``result.json`` document for ``session`` (``screenshots``: paths relative to the task dir)."""
    action_steps = [i for i, step in enumerate(session.steps) if step.action is not None]
    actions = [mind2web_action(session, i) or "" for i in action_steps]
    last = session.steps[-1] if session.steps else None
    ended = session.end.ended if session.end else (last.timestamp if last else session.header.created)
    result: dict[str, Any] = {
        "task_id": session.instance_id or (session.path.name.split(".")[0] if session.path else "session"),
        "task": task_text(session),
        "final_result_response": session.final_answer or "",
        "action_history": actions,
        "thoughts": [_thought(session.steps[i]) for i in action_steps],
        "screenshots": screenshots,
        "steps_taken": len(action_steps),
        "error": None if session.complete else "the episode did not finish saving (partial session file)",
        "metadata": {
            "timestamp": _iso(ended),
            "total_steps": len(action_steps),
            "final_url": last.url if last else None,
            "screenshot_count": len(screenshots),
            "agent_actions": [session.steps[i].action for i in action_steps],
            "source": f"cdp-integration session {session.path.name if session.path else ''}".strip(),
        },
    }
    for field in ("level", "max_steps"):
        if field in session.task:
            result[field] = session.task[field]
    return result


def export_wabe(session: Session, output: Path) -> WabeExport:
    """Write ``output/result.json`` and ``output/trajectory/step_NNN.png``; old ``step_*.png`` go first."""
    trajectory = output / "trajectory"
    trajectory.mkdir(parents=True, exist_ok=True)
    for stale in trajectory.glob("step_*.png"):
        stale.unlink()
    written: list[Path] = []
    budget = BoundedOutput(None, SessionLimits.from_env().max_output_bytes, f"the export to {output}")
    for step in session.steps:  # counted before anything is written: a screenshot shared by every step
        tab = step.active_tab
        if tab is not None and tab.screenshot_png:
            budget.count(len(tab.screenshot_png) * 3 // 4)
    for step in session.steps:
        tab = step.active_tab
        if tab is None or not tab.screenshot_png:
            continue
        try:
            png = base64.b64decode(tab.screenshot_png, validate=True)
        except binascii.Error:
            raise SessionFormatError(f"step {step.index}: screenshot is not base64") from None
        path = trajectory / f"step_{step.index:03d}.png"
        with open_output(path, root=output) as out:
            out.write(png)
        written.append(path)
    document = wabe_result(session, [p.relative_to(output).as_posix() for p in written])
    result = output / "result.json"
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    budget.count(len(data))
    with open_output(result, root=output) as out:
        out.write(data)
    return WabeExport(result=result, screenshots=tuple(written), steps_taken=document["steps_taken"])
