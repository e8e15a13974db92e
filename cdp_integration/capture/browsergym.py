"""A ``CDPSessionLogger`` on a BrowserGym env: its active page, its task, a capture per reset and step.

Everything here is read from BrowserGym's objects by attribute (``env.unwrapped.page``, ``.task``,
``.chat``, ``.goal_object``); BrowserGym itself is never imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    if getattr(core, "page", None) is not None:
        logger.attach_to_page(core.page)
    if not auto_capture:
        return
    original_reset, original_step = core.reset, core.step
    reuse = logger.options.reuse_observation_dom

    def reset(*args: Any, **kwargs: Any) -> Any:
        result = original_reset(*args, **kwargs)
        logger.attach_to_page(core.page)
        logger.task.update(
            {"env_id": getattr(env.spec, "id", None) if env.spec else None, "goal": goal_text(core)}
        )
        logger.task.update(webarena_task_facts(getattr(core, "task", None)))
        logger.capture_state_snapshot("reset", observed_dom=observed_dom(result) if reuse else None)
        return result

    def step(action: str, *args: Any, **kwargs: Any) -> Any:
        result = original_step(action, *args, **kwargs)
        reward = result[1] if isinstance(result, tuple) and len(result) > 1 else None
        logger.capture_state_snapshot(
            "action",
            action=action,
            reward=float(reward) if isinstance(reward, int | float) else None,
            observed_dom=observed_dom(result) if reuse else None,
        )
        return result

    core.reset, core.step = reset, step


def observed_dom(result: Any) -> dict[str, Any] | None:
    """BrowserGym's own DOM snapshot of this step (with DOM rects), from a ``reset``/``step`` result."""
    if not isinstance(result, tuple) or not result:
        return None
    obs = result[0]
    dom = obs.get("dom_object") if isinstance(obs, dict) else None
    return dom if isinstance(dom, dict) and "documents" in dom else None


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


def last_assistant_message(core: Any) -> str | None:
    """The agent's answer: the last chat message when the agent wrote it.

    BrowserGym opens every chat with its own assistant greeting; that one is not an answer.
    """
    messages = getattr(getattr(core, "chat", None), "messages", None) or []
    if len(messages) > 1 and messages[-1].get("role") == "assistant":
        return str(messages[-1].get("message"))
    return None
