"""A scripted AgentLab 0.4.2 agent for BrowserGym 0.14's raw page output (``use_raw_page_output``).

BrowserGym 0.14 can hand the agent the live Playwright page instead of its DOM/AX-tree observation; the
agent then acts with Playwright code (the env executes the action string with ``page`` and
``send_message_to_user`` in scope). This agent plays the curated stand-in trajectories that way: its
``obs_preprocessor`` takes the page out of the observation (AgentLab pickles every observation) and
puts a screenshot in its place, which AgentLab saves as ``screenshot_step_N.png``.

Kept in a module of its own: AgentLab pickles the agent's arguments with the study, and a class of
``__main__`` could not be loaded back.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from agentlab.agents.agent_args import AgentArgs
from browsergym.experiments.agent import Agent

WAIT_MS = 30_000
"""How long a scripted step waits for its element (the stand-ins are slow on a loaded machine)."""


class CodeActions:
    """An action set whose actions already are the Python code BrowserGym executes."""

    def to_python_code(self, action: str) -> str:
        return action


def playwright_action(step: list[str], page: Any) -> str:
    """The Playwright code for one scripted step of ``tests/standins/tasks.json`` (URLs expanded)."""
    verb, *args = step
    if verb == "goto":
        return f"page.goto({args[0]!r})"
    if verb == "click":
        return f"page.click({args[0]!r}, timeout={WAIT_MS})"
    if verb == "fill":
        return f"page.fill({args[0]!r}, {args[1]!r}, timeout={WAIT_MS})"
    if verb == "select":
        return f"page.select_option({args[0]!r}, {args[1]!r}, timeout={WAIT_MS})"
    if verb == "press":
        return f"page.press({args[0]!r}, {args[1]!r}, timeout={WAIT_MS})"
    if verb == "answer":
        text = args[0]
        if text.startswith(("#", ".")):
            text = page.inner_text(text, timeout=WAIT_MS).strip()
        return f"send_message_to_user({text!r})"
    raise ValueError(f"unknown scripted verb {verb!r}")


class ScriptedPageAgent(Agent):
    def __init__(self, scripts: dict[str, list[list[str]]]) -> None:
        self.scripts = scripts
        self.steps: list[list[str]] = []
        self.page: Any = None
        self.action_set = CodeActions()  # type: ignore[assignment]

    def set_task_name(self, task_name: str) -> None:
        self.steps = [list(step) for step in self.scripts[task_name]]

    def obs_preprocessor(self, obs: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        from PIL import Image

        self.page = obs.pop("page", None) or self.page
        if self.page is not None:
            image = Image.open(io.BytesIO(self.page.screenshot())).convert("RGB")
            obs["screenshot"] = np.asarray(image, dtype=np.uint8)
        return obs

    def get_action(self, obs: Any) -> tuple[str | None, dict[str, Any]]:
        if not self.steps:
            return None, {"think": "done", "stats": {}}
        step = self.steps.pop(0)
        return playwright_action(step, self.page), {"think": json.dumps(step), "stats": {}}


@dataclass
class ScriptedPageAgentArgs(AgentArgs):
    scripts: str = "{}"
    """JSON ``{task name: [steps]}`` (a string: AgentLab tabulates agent arguments with pandas)."""
    use_raw_page_output: bool = True

    def make_agent(self) -> Agent:
        return ScriptedPageAgent(json.loads(self.scripts))
