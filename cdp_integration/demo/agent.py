"""A scripted agent: episodes from ``episodes.json`` played through BrowserGym with the logger on.

A step is ``[verb, target, value?]`` with CSS selectors instead of BrowserGym ids; the agent looks up
the element's ``bid`` on the live page when the step runs, as a real agent would read it off the page.
Verbs: ``goto PATH``, ``click SEL``, ``fill SEL TEXT``, ``select SEL OPTION``, ``press SEL KEY``,
``go_back``, ``tab_focus N``, ``noop``, ``answer TEXT|SEL`` (a selector, i.e. text starting with ``#`` or
``.``, answers with the element's text).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from cdp_integration.errors import CaptureError

__all__ = ["VERBS", "Episode", "load_episodes", "run_episode", "to_browsergym_action"]

VERBS = frozenset({"goto", "click", "fill", "select", "press", "go_back", "tab_focus", "noop", "answer"})
"""The scripted step verbs `to_browsergym_action` understands."""


@dataclass(frozen=True)
class Episode:
    id: str
    description: str
    steps: tuple[tuple[str, ...], ...]
    start_path: str = "/"


def load_episodes(path: Path | None = None) -> list[Episode]:
    """The bundled episodes (or those in ``path``, same format)."""
    text = path.read_text() if path else resources.files(__package__).joinpath("episodes.json").read_text()
    return [
        Episode(
            id=e["id"],
            description=e.get("description", ""),
            steps=tuple(tuple(s) for s in e["steps"]),
            start_path=e.get("start_path", "/"),
        )
        for e in json.loads(text)
    ]


ELEMENT_WAIT_MS = 30_000
"""How long the scripted agent waits for an element of its next step: the demo pages have each one,
so only a slow machine (a loaded CI host) ever waits."""


def _bid(page: Any, selector: str) -> str:
    bid = page.get_attribute(selector, "bid", timeout=ELEMENT_WAIT_MS)
    if bid is None:
        raise CaptureError(f"element {selector!r} has no BrowserGym id on {page.url}")
    return str(bid)


def to_browsergym_action(step: tuple[str, ...], page: Any, base_url: str) -> str:
    """The BrowserGym action string for one scripted step, resolved against the live page."""
    verb, *args = step
    if verb == "goto":
        return f"goto({base_url + args[0]!r})"
    if verb == "click":
        return f"click({_bid(page, args[0])!r})"
    if verb == "fill":
        return f"fill({_bid(page, args[0])!r}, {args[1]!r})"
    if verb == "select":
        return f"select_option({_bid(page, args[0])!r}, {args[1]!r})"
    if verb == "press":
        return f"press({_bid(page, args[0])!r}, {args[1]!r})"
    if verb == "go_back":
        return "go_back()"
    if verb == "tab_focus":
        return f"tab_focus({int(args[0])})"
    if verb == "noop":
        return "noop(0)"
    if verb == "answer":
        text = args[0]
        if text.startswith(("#", ".")):
            text = page.inner_text(text, timeout=ELEMENT_WAIT_MS).strip()
        return f"send_msg_to_user({text!r})"
    raise ValueError(f"unknown scripted verb {verb!r}")


def run_episode(
    episode: Episode,
    base_url: str,
    session_dir: Path,
    *,
    headless: bool = True,
    logger_options: dict[str, Any] | None = None,
) -> Path:
    """Play ``episode`` in ``browsergym/openended`` with a ``CDPSessionLogger``; return the session path."""
    import browsergym.core  # noqa: F401 - registers browsergym/openended
    import gymnasium as gym

    from cdp_integration.capture.logger import CDPSessionLogger

    env = gym.make(
        "browsergym/openended",
        task_kwargs={"start_url": base_url + episode.start_path},
        headless=headless,
        slow_mo=0,
        wait_for_user_message=False,
    )
    logger = CDPSessionLogger(session_dir, instance_id=episode.id, **(logger_options or {}))
    logger.task["description"] = episode.description
    try:
        logger.attach_to_browsergym_env(env)
        env.reset()
        for step in episode.steps:
            env.step(to_browsergym_action(step, env.unwrapped.page, base_url))  # type: ignore[attr-defined]
        return logger.save_session(episode.id)
    finally:
        env.close()
