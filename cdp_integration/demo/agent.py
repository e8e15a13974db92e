"""A scripted agent: episodes from ``episodes.json`` played through BrowserGym with the logger on.

A step is ``[verb, target, value?]`` with CSS selectors instead of BrowserGym ids; the agent looks up
the element's ``bid`` on the live page when the step runs, as a real agent would read it off the page.
Verbs: ``goto PATH``, ``click SEL``, ``fill SEL TEXT``, ``select SEL OPTION``, ``press SEL KEY``,
``go_back``, ``tab_focus N``, ``noop``, ``answer TEXT|SEL`` (a selector, i.e. text starting with ``#`` or
``.``, answers with the element's text).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from cdp_integration.errors import ActionFailed, CaptureError

__all__ = [
    "VERBS",
    "ActionFailed",
    "Episode",
    "load_episodes",
    "play_step",
    "run_episode",
    "to_browsergym_action",
]

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


EPISODE_ATTEMPTS = 3
"""How many times `run_episode` plays an episode whose action BrowserGym could not carry out."""

ACTION_TIMEOUT_MS = 15_000
"""How long one scripted action may wait for its element and for the navigation it starts to commit.
BrowserGym's own actions allow 500 ms, which a loaded machine misses; the scripted agent is ours, so
it runs BrowserGym's own action code with this timeout instead (``patient_action_mapping``)."""


def patient_action_mapping(timeout_ms: int = ACTION_TIMEOUT_MS) -> Callable[[str], str]:
    """BrowserGym's default high-level action set (the same code it runs), each element action given
    ``timeout_ms`` instead of 500 ms: for ``gym.make(..., action_mapping=...)``."""
    from browsergym.core.action.highlevel import HighLevelActionSet

    actions = HighLevelActionSet()
    if "timeout=500" not in actions.python_includes:
        raise CaptureError(
            "BrowserGym's action code no longer has its 500 ms element timeout: check the demo agent"
        )

    def to_python_code(action: str) -> str:
        return str(actions.to_python_code(action)).replace("timeout=500", f"timeout={int(timeout_ms)}")

    return to_python_code


def _bid(page: Any, selector: str) -> str:
    # visible first: BrowserGym's 0.5 s action timeout then only covers the action itself
    page.wait_for_selector(selector, state="visible", timeout=ELEMENT_WAIT_MS)
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


def play_step(env: Any, step: tuple[str, ...], base_url: str) -> tuple[Any, ...]:
    """``env.step`` for one scripted step; raises `ActionFailed` if BrowserGym could not carry it out."""
    action = to_browsergym_action(step, env.unwrapped.page, base_url)
    result = tuple(env.step(action))
    error = result[0].get("last_action_error") if isinstance(result[0], dict) else None
    if error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "?"
        raise ActionFailed(f"{action}: {first}")
    return result


def run_episode(
    episode: Episode,
    base_url: str,
    session_dir: Path,
    *,
    headless: bool = True,
    logger_options: dict[str, Any] | None = None,
    reset: Callable[[], None] | None = None,
) -> Path:
    """Play ``episode`` in ``browsergym/openended`` with a ``CDPSessionLogger``; return the session path.

    ``reset`` puts the site back as it was; it is called before the episode. With it, an episode one of
    whose actions BrowserGym could not carry out (`ActionFailed`) is played again from a reset site, up to
    `EPISODE_ATTEMPTS` times in all; without it, `ActionFailed` is raised at once.
    """
    attempts = EPISODE_ATTEMPTS if reset is not None else 1
    for attempt in range(1, attempts + 1):
        if reset is not None:
            reset()
        try:
            return _play(episode, base_url, session_dir, headless=headless, logger_options=logger_options)
        except ActionFailed as exc:
            if attempt == attempts:
                raise
            print(f"demo agent: {episode.id} attempt {attempt}: {exc}; playing it again", file=sys.stderr)
    raise AssertionError("unreachable")


def _play(
    episode: Episode,
    base_url: str,
    session_dir: Path,
    *,
    headless: bool,
    logger_options: dict[str, Any] | None,
) -> Path:
    import browsergym.core  # noqa: F401 - registers browsergym/openended
    import gymnasium as gym

    from cdp_integration.capture.logger import CDPSessionLogger

    env = gym.make(
        "browsergym/openended",
        task_kwargs={"start_url": base_url + episode.start_path},
        headless=headless,
        slow_mo=0,
        wait_for_user_message=False,
        action_mapping=patient_action_mapping(),
    )
    logger = CDPSessionLogger(session_dir, instance_id=episode.id, **(logger_options or {}))
    logger.task["description"] = episode.description
    try:
        logger.attach_to_browsergym_env(env)
        env.reset()
        for step in episode.steps:
            play_step(env, step, base_url)
        return logger.save_session(episode.id)
    except ActionFailed:
        partial = logger.partial_path
        if partial is not None:
            partial.unlink(missing_ok=True)
        raise
    finally:
        env.close()
