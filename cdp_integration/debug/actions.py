"""Reading an agent's action string: BrowserGym calls such as ``click('28')`` or ``fill('25', 'emma')``.

An action names its element by BrowserGym id (``bid``); the element is looked up in the HTML of the
state the agent acted on, i.e. the *previous* step, to say what was clicked in words.
"""

from __future__ import annotations

from cdp_integration.replay.actions import parse_action
from cdp_integration.replay.text import Element, find_element
from cdp_integration.session.store import Session

__all__ = ["action_target", "describe_element", "mind2web_action"]

_INPUT_ROLES = {
    "checkbox": "checkbox",
    "radio": "radio",
    "submit": "button",
    "button": "button",
    "reset": "button",
}
_TAG_ROLES = {"a": "link", "button": "button", "select": "combobox", "textarea": "textbox", "img": "img"}


def action_target(session: Session, step: int) -> Element | None:
    """The element step ``step``'s action acted on, found in the previous step's HTML (any tab)."""
    index = session.step_index(step)
    parsed = parse_action(session.steps[index].action)
    if index == 0 or parsed is None or parsed.bid is None:
        return None
    before = session.steps[index - 1]
    tabs = sorted(before.tabs, key=lambda tab: not tab.active)  # the active tab first
    for tab in tabs:
        element = find_element(tab.html, "bid", parsed.bid)
        if element is not None:
            return element
    return None


def _role(element: Element) -> str:
    if element.tag == "input":
        return _INPUT_ROLES.get(element.attrs.get("type", "").lower(), "textbox")
    return _TAG_ROLES.get(element.tag, element.tag)


def describe_element(element: Element) -> str:
    """``[role] name``: its text, else its label-like attributes (Mind2Web's element notation)."""
    attrs = element.attrs
    name = element.text or next(
        (
            attrs[key].strip()
            for key in ("aria-label", "placeholder", "alt", "title", "value", "name", "id")
            if attrs.get(key, "").strip()
        ),
        "",
    )
    return f"[{_role(element)}] {name}".rstrip()


def mind2web_action(session: Session, step: int) -> str | None:
    """The step's action as Mind2Web writes one (``[button] Sign In -> CLICK``), or ``None`` (reset).

    Actions without an element (``goto``, ``go_back``, an answer) keep their own words.
    """
    index = session.step_index(step)
    action = session.steps[index].action
    if action is None:
        return None
    parsed = parse_action(action)
    if parsed is None:
        return action
    args = parsed.args
    if parsed.name == "send_msg_to_user" and args:
        return f"ANSWER: {args[0]}"
    if parsed.name == "goto" and args:
        return f"GOTO: {args[0]}"
    if parsed.bid is None:
        return action
    target = action_target(session, index)
    element = describe_element(target) if target else f"[bid {parsed.bid}]"
    operations = {
        "fill": lambda: f"TYPE: {args[1]}" if len(args) > 1 else "TYPE",
        "select_option": lambda: f"SELECT: {args[1]}" if len(args) > 1 else "SELECT",
        "press": lambda: f"PRESS: {args[1]}" if len(args) > 1 else "PRESS",
    }
    operation = operations.get(parsed.name, lambda: parsed.name.upper())()
    return f"{element} -> {operation}"
