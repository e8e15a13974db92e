"""An agent's action string parsed without running it: BrowserGym calls such as ``click('28')`` or
``fill('25', 'emma')`` (an element by BrowserGym id, ``bid``, and literal arguments)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from cdp_integration.replay.text import word_set

__all__ = ["TYPING_ACTIONS", "ParsedAction", "parse_action"]

_ELEMENT_ACTIONS = word_set(
    "click dblclick hover fill select_option press focus clear check uncheck upload_file drag_and_drop"
)
TYPING_ACTIONS = word_set("fill select_option type")
"""Actions whose second argument is what the agent put into the element (typed or chosen)."""

_MAX_ACTION_CHARS = 10_000
"""Longer action text is shown as text, never parsed (a BrowserGym action call is far shorter)."""


@dataclass(frozen=True)
class ParsedAction:
    name: str
    args: tuple[Any, ...]

    @property
    def bid(self) -> str | None:
        """The BrowserGym id of the element the action targets, if it targets one."""
        if self.name in _ELEMENT_ACTIONS and self.args and isinstance(self.args[0], str | int):
            return str(self.args[0])
        return None


def parse_action(action: str | None) -> ParsedAction | None:
    """``name(literal, ...)`` parsed without running it; ``None`` for anything else (free text, code)."""
    if not action or len(action) > _MAX_ACTION_CHARS:
        return None
    try:
        node = ast.parse(action.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
            return None
        return ParsedAction(node.func.id, tuple(ast.literal_eval(arg) for arg in node.args))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None  # a session's action text is untrusted: deep nesting must not escape as an error
