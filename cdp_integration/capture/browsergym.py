"""A ``CDPSessionLogger`` on a BrowserGym env: its active page, its task, a capture per reset and step.

Everything here is read from BrowserGym's objects by attribute (``env.unwrapped.page``, ``.task``,
``.chat``, ``.goal_object``); BrowserGym itself is never imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdp_integration.capture import state
from cdp_integration.capture.faults import as_fault

if TYPE_CHECKING:
    from cdp_integration.capture.logger import CDPSessionLogger

__all__ = ["attach_to_env"]


def attach_to_env(logger: CDPSessionLogger, env: Any, *, auto_capture: bool) -> None:
    """See ``CDPSessionLogger.attach_to_browsergym_env``."""
    core = env.unwrapped
    logger._tracker.active_page = lambda: core.page
    logger._final_answer = lambda: last_assistant_message(core)
    logger.task.setdefault("goal", goal_text(core))
    original_validate = core._task_validate

    def validate_as_evaluator() -> Any:
        with logger.evaluation_phase():
            task: Any = getattr(core, "task", None)
            if getattr(task, "evaluator", None) is None or not logger.options.record_evaluations:
                return original_validate()
            messages = getattr(getattr(core, "chat", None), "messages", None) or []
            chat_role = messages[-1].get("role") if messages else None
            with logger._evaluations.recording_validate(task, chat_role=chat_role):
                return original_validate()

    core._task_validate = validate_as_evaluator
    keep_page_attributes(logger, core)
    if getattr(core, "page", None) is not None:
        logger.attach_to_page(core.page)
    if not auto_capture:
        return
    original_reset, original_step = core.reset, core.step
    reuse = logger.options.reuse_observation_dom
    heard = [len(chat_messages(core))]
    """How many chat messages were there at the last capture: a step holds those since."""

    def reset(*args: Any, **kwargs: Any) -> Any:
        result = original_reset(*args, **kwargs)
        heard[0] = len(chat_messages(core))
        logger.attach_to_page(core.page)
        logger.task.update(
            {"env_id": getattr(env.spec, "id", None) if env.spec else None, "goal": goal_text(core)}
        )
        logger.task.update(webarena_task_facts(getattr(core, "task", None)))
        logger.capture_state_snapshot(
            "reset",
            observed_dom=observed_dom(result) if reuse else None,
            observed_screenshot=observed_screenshot(result) if reuse else None,
        )
        return result

    def step(action: str, *args: Any, **kwargs: Any) -> Any:
        result = original_step(action, *args, **kwargs)
        reward = result[1] if isinstance(result, tuple) and len(result) > 1 else None
        messages = chat_messages(core)
        said, heard[0] = messages[heard[0] :], len(messages)
        logger.capture_state_snapshot(
            "action",
            action=action,
            reward=float(reward) if isinstance(reward, int | float) else None,
            observed_dom=observed_dom(result) if reuse else None,
            observed_screenshot=observed_screenshot(result) if reuse else None,
            reasoning={
                "source": "browsergym",
                "messages": [{"role": m.get("role"), "text": m.get("message")} for m in said],
            }
            if said
            else None,
        )
        return result

    core.reset, core.step = reset, step


def keep_page_attributes(logger: CDPSessionLogger, core: Any) -> None:
    """Wrap the env's observation (on this instance) so the page's own ``value``/``checked``
    attributes are remembered before BrowserGym's marking overwrites them with the live values.

    Each capture then stores the HTML with the page's attributes (a fresh load offline gets what a
    fresh live load gets) and what the agent typed as form state (``state.remember_marked_attributes``).
    A failure is a fault of the next step, never an error in BrowserGym's step.
    """
    if not logger.options.form_state or not callable(getattr(core, "_get_obs", None)):
        return
    original_get_obs = core._get_obs

    def remember(phase: str) -> None:
        tracker = logger._tracker
        with as_fault(tracker.faults, "form_state"), tracker.budget_scope():
            page = getattr(core, "page", None)
            if page is None or page.is_closed():
                return
            if page not in tracker.tabs:
                if tracker.primary_page is not None and not tracker.contexts:
                    return  # the logger was detached: follow nothing again
                logger.attach_to_page(page)  # a reset's first observation comes before its capture
            tab = tracker.tabs.get(page)
            if tab is not None:
                state.remember_marked_attributes(tab.cdp, tab.worlds, phase=phase)

    def get_obs(*args: Any, **kwargs: Any) -> Any:
        remember("before")
        try:
            return original_get_obs(*args, **kwargs)
        finally:
            remember("after")

    core._get_obs = get_obs


def observed_dom(result: Any) -> dict[str, Any] | None:
    """BrowserGym's own DOM snapshot of this step (with DOM rects), from a ``reset``/``step`` result."""
    if not isinstance(result, tuple) or not result:
        return None
    obs = result[0]
    dom = obs.get("dom_object") if isinstance(obs, dict) else None
    return dom if isinstance(dom, dict) and "documents" in dom else None


def observed_screenshot(result: Any) -> Any:
    """BrowserGym's own screenshot of this step (an RGB array of the viewport), from a result."""
    if not isinstance(result, tuple) or not result:
        return None
    obs = result[0]
    pixels = obs.get("screenshot") if isinstance(obs, dict) else None
    shape = getattr(pixels, "shape", None)
    return pixels if isinstance(shape, tuple) and len(shape) == 3 and shape[2] in (3, 4) else None


def webarena_task_facts(task: Any) -> dict[str, Any]:
    """A BrowserGym WebArena task's config and site URLs, which offline scoring needs."""
    facts: dict[str, Any] = {}
    config = getattr(task, "config", None)
    if isinstance(config, dict):
        facts["config"] = config
        facts["task_id"] = config.get("task_id")
    instance: Any = getattr(task, "webarena_instance", None)
    urls = getattr(instance, "urls", None)
    if isinstance(urls, dict):
        facts["site_urls"] = {name.upper(): url for name, url in urls.items()}
        if getattr(instance, "home_url", None):
            facts["site_urls"]["HOMEPAGE"] = instance.home_url
    return facts


def goal_text(core: Any) -> str | None:
    goal = getattr(core, "goal_object", None)
    if isinstance(goal, list):
        return "\n".join(part.get("text", "") for part in goal if isinstance(part, dict)) or None
    return None


def chat_messages(core: Any) -> list[dict[str, Any]]:
    """BrowserGym's chat (the agent's ``send_msg_to_user`` messages and the user's), as it stands."""
    messages = getattr(getattr(core, "chat", None), "messages", None) or []
    return [m for m in messages if isinstance(m, dict)]


def last_assistant_message(core: Any) -> str | None:
    """The agent's answer: the last chat message when the agent wrote it.

    BrowserGym opens every chat with its own assistant greeting; that one is not an answer.
    """
    messages = getattr(getattr(core, "chat", None), "messages", None) or []
    if len(messages) > 1 and messages[-1].get("role") == "assistant":
        return str(messages[-1].get("message"))
    return None
