"""Capture a ``browser_use.Agent`` run as a session that scores offline like a BrowserGym one.

browser-use drives Chromium over raw CDP (``cdp-use``), hands us no Playwright ``Page`` and records
HAR only for HTTPS, one tab, without wire headers. So the browser is one we can reach by its DevTools
endpoint: the agent's ``BrowserSession`` connects to it by ``cdp_url`` and the logger attaches to the
same endpoint (``CDPSessionLogger.attach_to_cdp``), following every tab, the agent's focused tab
being browser-use's ``agent_focus_target_id``. One snapshot after the start state and after every
agent step (``Agent.run``'s ``on_step_start``/``on_step_end`` hooks; the capture is synchronous, so
it runs in a worker thread and the agent's event loop keeps serving its CDP socket); at the end the
official WebArena evaluator runs once on the live final state (``run_evaluation_probe``) and the
session is saved with the agent's final result as its answer. A capture failure never breaks the
agent's run: the hooks swallow it (the logger records faults in the step).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdp_integration.capture.cdp_attach import ChromiumProcess
from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.session.models import Evaluation

__all__ = [
    "BrowserUseCapture",
    "CapturedRun",
    "browser_session_for",
    "import_browser_use",
    "run_captured_agent",
]

_log = logging.getLogger(__name__)


_import_litter_removed = False


def import_browser_use() -> Any:
    """``browser_use``, imported once; the empty directories its import makes in /tmp are removed.

    Its module-level default ``BrowserProfile`` creates a downloads directory under ``/tmp`` and a
    user-data directory under the temp dir, for a browser this process never launches.
    """
    global _import_litter_removed
    import browser_use
    from browser_use.browser import session as session_module

    if not _import_litter_removed:
        _import_litter_removed = True
        default = getattr(session_module, "DEFAULT_BROWSER_PROFILE", None)
        for directory in (getattr(default, "downloads_path", None), getattr(default, "user_data_dir", None)):
            with contextlib.suppress(OSError, TypeError):
                Path(directory).rmdir()  # type: ignore[arg-type]  # only if still empty
    return browser_use


def browser_session_for(cdp_url: str, scratch_dir: str | Path, **profile: Any) -> Any:
    """A browser-use ``BrowserSession`` that connects to the running Chromium at ``cdp_url``.

    ``keep_alive``: browser-use must not close the browser we (or the caller) own when its agent ends.
    ``highlight_elements`` is off: browser-use draws a fading overlay into the page after each
    interaction (gone about 1.3 s later), which a capture right after the step would record as the
    page's own content, and which a live evaluator may or may not see depending on when it runs. Pass
    ``highlight_elements=True`` to have it anyway.
    ``scratch_dir``: where its downloads and (unused with ``cdp_url``) profile directories go; left
    unset, browser-use makes new ones under ``/tmp`` and never removes them. ``profile``: further
    ``BrowserProfile`` fields.
    """
    browser_use = import_browser_use()
    scratch = Path(scratch_dir)
    settings: dict[str, Any] = {
        "cdp_url": cdp_url,
        "keep_alive": True,
        "downloads_path": scratch / "downloads",
        "user_data_dir": scratch / "profile",
        "highlight_elements": False,
    }
    return browser_use.BrowserSession(browser_profile=browser_use.BrowserProfile(**(settings | profile)))


def _action_text(agent: Any) -> str | None:
    """The step's actions as the model chose them (JSON), for the step record; None when unknown."""
    output = getattr(getattr(agent, "state", None), "last_model_output", None)
    actions = getattr(output, "action", None)
    if not actions:
        return None
    try:
        return json.dumps([a.model_dump(exclude_none=True, mode="json") for a in actions], sort_keys=True)
    except Exception:
        return None


def _reasoning(agent: Any) -> dict[str, Any] | None:
    """The step's model output as reasoning: its thinking, its evaluation of the previous goal, memory
    and next goal (notes), and each action it chose with what the action returned; None when unknown."""
    state = getattr(agent, "state", None)
    output = getattr(state, "last_model_output", None)
    if output is None:
        return None
    results = list(getattr(state, "last_result", None) or [])
    calls = []
    for number, action in enumerate(getattr(output, "action", None) or []):
        try:
            chosen = action.model_dump(exclude_none=True, mode="json")
        except Exception:
            continue
        name = next(iter(chosen), "action")
        result = results[number] if number < len(results) else None
        said = getattr(result, "error", None) or getattr(result, "extracted_content", None)
        calls.append(
            {"name": name, "arguments": json.dumps(chosen.get(name), sort_keys=True), "result": said}
        )
    notes = {
        name: str(getattr(output, name, None) or "")
        for name in ("evaluation_previous_goal", "memory", "next_goal")
    }
    return {
        "source": "browser-use",
        "thought": getattr(output, "thinking", None),
        "tool_calls": calls,
        "notes": notes,
    }


class BrowserUseCapture:
    """The hooks that capture one browser-use agent run into ``logger``.

    ``attach()`` connects the logger to ``cdp_url``; pass ``on_step_start``/``on_step_end`` to
    ``agent.run``; ``finish(config, final_answer)`` probes and saves. The focused tab is read from
    ``browser_session.agent_focus_target_id`` at each capture.
    """

    def __init__(self, logger: CDPSessionLogger, browser_session: Any, cdp_url: str) -> None:
        self.logger = logger
        self.browser_session = browser_session
        self.cdp_url = cdp_url
        self.steps = 0

    def focused_target(self) -> str | None:
        target = getattr(self.browser_session, "agent_focus_target_id", None)
        return str(target) if target else None

    def attach(self) -> None:
        self.logger.attach_to_cdp(self.cdp_url, active_target=self.focused_target)

    async def _capture(
        self, trigger: str, action: str | None = None, reasoning: dict[str, Any] | None = None
    ) -> None:
        try:
            await asyncio.to_thread(
                functools.partial(
                    self.logger.capture_state_snapshot, trigger, action=action, reasoning=reasoning
                )
            )
        except Exception as exc:  # the episode goes on without this snapshot
            _log.warning("browser-use capture %s failed: %s", trigger, exc)

    async def on_step_start(self, agent: Any) -> None:
        """Before the first step: the start state (after the agent's ``initial_actions``)."""
        if self.steps == 0 and self.logger.last_step is None:
            await self._capture("start")

    async def on_step_end(self, agent: Any) -> None:
        self.steps += 1
        await self._capture(f"step {self.steps}", _action_text(agent), _reasoning(agent))

    async def finish(
        self, config: dict[str, Any] | None, final_answer: str | None
    ) -> tuple[Path, Evaluation | None]:
        """Run the official evaluator on the live final state, save; the session path and the probe."""
        evaluation = None
        if config is not None:
            evaluation = await asyncio.to_thread(
                self.logger.run_evaluation_probe, config, answer=final_answer
            )
        path = await asyncio.to_thread(self.logger.save_session, final_answer=final_answer)
        return path, evaluation

    def detach(self) -> None:
        self.logger.detach()


@dataclass(frozen=True)
class CapturedRun:
    """What one captured agent run produced."""

    session_path: Path
    final_answer: str | None
    live_score: float | None
    """The official evaluator's score on the live final state (None without a config)."""
    history: Any
    """browser-use's ``AgentHistoryList``."""


async def run_captured_agent(
    task: str,
    llm: Any,
    session_dir: str | Path,
    *,
    instance_id: str,
    config: dict[str, Any] | None = None,
    start_url: str | None = None,
    cdp_url: str | None = None,
    max_steps: int = 20,
    logger_options: dict[str, Any] | None = None,
    agent_options: dict[str, Any] | None = None,
    screenshots_dir: str | Path | None = None,
) -> CapturedRun:
    """Run a ``browser_use.Agent`` on ``task`` with ``llm`` and capture it as ``<instance_id>``.

    ``cdp_url``: a running Chromium to use (left running); None starts a private headless one and
    stops it by its PID afterwards. ``config``: the task's WebArena config (placeholders resolved),
    evaluated on the final state and stored in the session. ``start_url``: opened as the agent's
    ``initial_actions`` (WebArena's start page). ``agent_options``: more ``Agent`` arguments
    (the defaults turn off browser-use's judge and vision, which need a real model). ``screenshots_dir``:
    where to keep the screenshots browser-use took (its agent directory is removed at the end); save
    the history as ``<dir>/<name>.json`` and pass ``<dir>/<name>/screenshots`` so that
    ``cdp-session import browser-use`` finds them.
    """
    browser_use = import_browser_use()
    with contextlib.ExitStack() as stack:
        if cdp_url is None:
            cdp_url = stack.enter_context(ChromiumProcess()).endpoint
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="browser-use-run-")))
        task_facts: dict[str, Any] = {"goal": task, "agent": "browser-use"}
        if config is not None:
            task_facts |= {"config": config, "task_id": config.get("task_id")}
        options = dict(logger_options or {})
        options["task"] = {**task_facts, **options.get("task", {})}
        logger = CDPSessionLogger(session_dir, instance_id=instance_id, **options)
        browser_session = browser_session_for(cdp_url, scratch)
        capture = BrowserUseCapture(logger, browser_session, cdp_url)
        arguments: dict[str, Any] = {
            "use_judge": False,
            "use_vision": False,
            "directly_open_url": False,
            "file_system_path": str(scratch / "files"),
        }
        if start_url:
            arguments["initial_actions"] = [{"navigate": {"url": start_url}}]
        arguments |= agent_options or {}
        agent = browser_use.Agent(task=task, llm=llm, browser_session=browser_session, **arguments)
        # The agent always makes a directory of its own under the temp dir (for screenshots).
        stack.callback(shutil.rmtree, agent.agent_directory, True)
        capture.attach()
        try:
            history = await agent.run(
                max_steps=max_steps, on_step_start=capture.on_step_start, on_step_end=capture.on_step_end
            )
            answer = history.final_result()
            path, evaluation = await capture.finish(config, answer)
        finally:
            capture.detach()
            with contextlib.suppress(Exception):
                await browser_session.kill()
            shots = Path(agent.agent_directory) / "screenshots"
            if screenshots_dir is not None and shots.is_dir():
                shutil.copytree(shots, screenshots_dir, dirs_exist_ok=True, symlinks=True)
        score = evaluation.score if evaluation is not None else None
        return CapturedRun(path, answer, score, history)
