"""The agent's reasoning for a step, as its harness gives it, bounded before it reaches the session.

Harnesses hand it over in their own shapes; ``bounded_reasoning`` takes an ``AgentReasoning`` or a
mapping with its fields, cuts each text to ``MAX_TEXT`` characters and keeps at most ``MAX_ITEMS``
messages, tool calls and notes. Anything it cannot read becomes None: reasoning never costs a step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cdp_integration.session.models import AgentReasoning

__all__ = ["MAX_ITEMS", "MAX_TEXT", "bounded_reasoning", "text_of"]

MAX_TEXT = 4_000
MAX_ITEMS = 20


def text_of(value: Any) -> str:
    """A harness value as text: strings as they are, lists of content parts joined, others as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return "\n".join(filter(None, (text_of(getattr(part, "text", part)) for part in value)))
    try:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    except Exception:
        return str(value)


def _cut(value: Any) -> str:
    text = text_of(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def bounded_reasoning(value: AgentReasoning | Mapping[str, Any] | None) -> AgentReasoning | None:
    """``value`` as a bounded ``AgentReasoning`` (None when empty or unreadable)."""
    if value is None:
        return None
    try:
        raw = value.model_dump() if isinstance(value, AgentReasoning) else dict(value)
        thought = _cut(raw.get("thought")) or None
        messages = [
            {"role": _cut(m.get("role"))[:40] or "assistant", "text": _cut(m.get("text"))}
            for m in list(raw.get("messages") or [])[:MAX_ITEMS]
            if isinstance(m, Mapping)
        ]
        calls = [
            {
                "name": _cut(c.get("name"))[:200],
                "arguments": _cut(c.get("arguments")),
                "result": None if c.get("result") is None else _cut(c.get("result")),
            }
            for c in list(raw.get("tool_calls") or [])[:MAX_ITEMS]
            if isinstance(c, Mapping)
        ]
        notes = {
            _cut(k)[:200]: _cut(v) for k, v in list(dict(raw.get("notes") or {}).items())[:MAX_ITEMS] if v
        }
        if not (thought or messages or calls or notes):
            return None
        return AgentReasoning(
            source=_cut(raw.get("source") or "agent")[:100],
            thought=thought,
            messages=messages,  # type: ignore[arg-type]
            tool_calls=calls,  # type: ignore[arg-type]
            notes=notes,
        )
    except Exception:
        return None
