"""Real AgentLab experiment folders of demo episodes, written by AgentLab's own ``ExpArgs.run``.

Run as ``python -m tests.integration.agentlab_study OUT TASK_ID...`` with AgentLab importable
(``make agentlab``: AgentLab 0.4.2 without its heavy dependencies in ``.cache/agentlab``, on top of
the project's environment). Each demo task's success and failure trajectories are played by a
scripted AgentLab agent (``agentlab.agents.agent_args.AgentArgs`` / ``browsergym`` ``Agent``)
through BrowserGym with the official evaluator live; AgentLab saves ``step_N.pkl.gz`` and
``summary_info.json`` as it does for any study. ``OUT/live.json`` lists each experiment folder with
its live reward (AgentLab's ``cum_reward``) and the task's config.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlab.agents.agent_args import AgentArgs
from agentlab.experiments.loop import EnvArgs, ExpArgs
from browsergym.core.action.highlevel import HighLevelActionSet
from browsergym.experiments.agent import Agent

from cdp_integration import environment
from cdp_integration.demo import DemoSite
from cdp_integration.demo.agent import to_browsergym_action
from cdp_integration.demo.tasks import DemoWebArenaTask, configure_demo_environment, load_demo_tasks

_PAGES: list[Any] = []
"""The live page of the running episode (the scripted agent resolves its CSS selectors on it, as
the demo's own scripted agent does)."""


def _remember_page() -> None:
    setup = DemoWebArenaTask.setup

    def remembering(self: Any, page: Any) -> Any:
        _PAGES.append(page)
        return setup(self, page)

    DemoWebArenaTask.setup = remembering  # type: ignore[method-assign]


class ScriptedAgent(Agent):
    def __init__(self, steps: list[list[str]], base_url: str) -> None:
        self.steps = [tuple(step) for step in steps]
        self.base_url = base_url
        self.action_set = HighLevelActionSet(
            subsets=["chat", "tab", "nav", "bid"], strict=False, multiaction=False
        )

    def get_action(self, obs: Any) -> tuple[str | None, dict[str, Any]]:
        """The next scripted action; the agent info as AgentLab 0.4.2 handles it (item assignment:
        a dict, since BrowserGym 0.13's ``AgentInfo`` has none)."""
        if not self.steps:
            return None, {"think": "done", "stats": {}}
        step = self.steps.pop(0)
        return to_browsergym_action(step, _PAGES[-1], self.base_url), {"think": " ".join(step), "stats": {}}


@dataclass
class ScriptedAgentArgs(AgentArgs):
    steps: list[list[str]] = field(default_factory=list)
    base_url: str = ""

    def make_agent(self) -> Agent:
        return ScriptedAgent(self.steps, self.base_url)


def _alias(env_id: str) -> str:
    """AgentLab imports ``browsergym.webarena`` + ``webarenalite`` for task names starting with
    ``webarena``; the demo task gets a second gym id without that prefix. AgentLab 0.4.2 passes
    ``use_raw_page_output``, which BrowserGym 0.14 added and the project's 0.13.3 lacks (it only adds
    raw page output to the observation, off here): the alias drops it."""
    import gymnasium as gym

    alias = env_id.replace("browsergym/webarena_demo.", "browsergym/cdpdemo.")
    spec = gym.registry[env_id]
    create = spec.entry_point
    assert callable(create)

    def make(*args: Any, use_raw_page_output: bool = False, **kwargs: Any) -> Any:
        return create(*args, **kwargs)

    gym.registry.pop(alias, None)
    gym.register(id=alias, entry_point=make, kwargs=dict(spec.kwargs), nondeterministic=True)
    return alias.removeprefix("browsergym/")


def _offline_token_counts() -> None:
    """AgentLab's step statistics count tokens with tiktoken, which downloads its encoding at first
    use: a word count instead (the statistics are not what these recordings are for)."""
    import agentlab.experiments.loop as loop

    loop.count_tokens = lambda text: len(str(text).split())  # type: ignore[attr-defined]


def main(out: Path, task_ids: list[int]) -> None:
    environment.prepare()
    _offline_token_counts()
    _remember_page()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with DemoSite() as site:
        base = site.base_url.rstrip("/")
        configure_demo_environment(base)
        for task in load_demo_tasks():
            if task.task_id not in task_ids:
                continue
            from cdp_integration.demo.tasks import _register, instantiate_config

            task_name = _alias(_register(task))
            for trajectory in ("success", "failure"):
                site.reset()
                steps = [list(s) for s in (task.success if trajectory == "success" else task.failure)]
                exp = ExpArgs(
                    agent_args=ScriptedAgentArgs(
                        agent_name=f"scripted-{trajectory}", steps=steps, base_url=base
                    ),
                    env_args=EnvArgs(task_name=task_name, task_kwargs={"base_url": base}, max_steps=20),
                )
                exp.prepare(out / "study")
                exp.run()
                summary = json.loads((Path(exp.exp_dir) / "summary_info.json").read_text())
                rows.append(
                    {
                        "task_id": task.task_id,
                        "trajectory": trajectory,
                        "exp_dir": str(exp.exp_dir),
                        "live": summary.get("cum_reward"),
                        "error": summary.get("err_msg"),
                        "eval_types": task.config["eval"]["eval_types"],
                        "config": instantiate_config(task.config, base),
                    }
                )
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "config"}), flush=True)
    (out / "live.json").write_text(json.dumps(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1]), [int(arg) for arg in sys.argv[2:]])
