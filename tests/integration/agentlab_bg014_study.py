"""A real AgentLab 0.4.2 study on BrowserGym 0.14.3 against the WebArena stand-ins, captured by the switch.

Run as ``.venv-bg014/bin/python -m tests.integration.agentlab_bg014_study OUT`` with
``WEBARENA_CDP_LOGGING=true`` and ``WEBARENA_CDP_SESSION_DIR`` set (``scripts/setup_bg014.sh`` builds
the environment). Nothing here starts a logger: the project's ``.pth`` switch does, in this process,
for every BrowserGym env AgentLab makes.

The study is AgentLab's own: ``make_study`` over a ``Benchmark`` of stand-in tasks of the ``webarena``
and ``webarena_verified`` families, ``Study.run`` with the sequential backend (WebArena tasks share
one instance; AgentLab runs them one after another). A scripted agent (``bg014_agent``) plays the
curated trajectories through BrowserGym 0.14's raw page output.

For the test, BrowserGym's own Verified trace is kept: its evaluator stops Playwright tracing into a
temporary directory, reads it and deletes it; the ``NetworkTrace`` it reads with is wrapped here (in
this process, at run time) so that a copy of each trace survives as ``OUT/traces/<task_id>.zip``.
An episode that stalls (``_stop_stalled_episodes``) is played again by ``Study.run``'s relaunch.
Two things AgentLab would fetch from the network are kept local: tiktoken's encoding (a word count
instead; the step statistics are not what these recordings are for) and ``full_reset`` (the
benchmark declares no backend: the tasks chosen only read, so the stand-ins need no reset).

``OUT/live.json`` lists each experiment: task name and family, task id, AgentLab's ``cum_reward``,
its error, the agent's last message and the kept trace.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.standins.tasks import expand_step, load_curated_tasks

WEBARENA = ((27, "success"), (377, "failure"), (269, "success"))
"""(task id, trajectory) in the ``webarena`` family: a string_match, a url_match that fails, a url_match."""
VERIFIED = ((377, "success"), (269, "success"), (45, "success"))
"""In the ``webarena_verified`` family: navigate tasks (Verified reads the last navigation from the trace);
the stand-in's sort link for 45 is not the URL Verified expects, so that one earns half (BrowserGym's
reward is the mean of Verified's evaluators)."""
NAVIGATED = json.dumps({"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None})


def _keep_verified_traces(out: Path) -> None:
    """Copy every trace BrowserGym's Verified evaluator reads before its temporary directory goes."""
    import browsergym.webarena_verified.evaluators as evaluators

    real = evaluators.NetworkTrace

    class KeptTrace:
        @staticmethod
        def from_content(path: Any, *args: Any, **kwargs: Any) -> Any:
            task = sys._getframe(1).f_locals.get("task")
            name = f"{getattr(task, 'task_id', 'unknown')}.zip"
            out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out / name)
            return real.from_content(path, *args, **kwargs)

    evaluators.NetworkTrace = KeptTrace


def _stop_stalled_episodes(seconds: float = 150) -> None:
    """An episode still running after ``seconds`` has its browser stopped (``StallWatchdog``): BrowserGym's
    ``ui_login`` now and then leaves a Playwright call without a timeout waiting forever. The episode then
    ends with an error, and ``Study.run``'s own relaunch plays it again."""
    import agentlab.experiments.loop as loop

    from cdp_integration.environment import StallWatchdog

    run = loop.ExpArgs.run

    def guarded(self: Any) -> None:
        with StallWatchdog(seconds, f"agentlab study: {self.env_args.task_name}"):
            run(self)

    loop.ExpArgs.run = guarded


def _offline_token_counts() -> None:
    import agentlab.experiments.loop as loop

    loop.count_tokens = lambda text: len(str(text).split())


def _scripts(urls: dict[str, str]) -> tuple[dict[str, list[list[str]]], list[dict[str, Any]]]:
    from browsergym.experiments.benchmark.utils import get_webarena_verified_task_name

    from cdp_integration.evaluate.verified import verified_task

    curated = {task.task_id: task for task in load_curated_tasks()}
    scripts: dict[str, list[list[str]]] = {}
    plan: list[dict[str, Any]] = []
    for family, entries in (("webarena", WEBARENA), ("webarena_verified", VERIFIED)):
        for task_id, trajectory in entries:
            task = curated[task_id]
            steps = [list(expand_step(step, urls)) for step in getattr(task, trajectory)]
            if family == "webarena":
                name = f"webarena.{task_id}"
            else:
                name = get_webarena_verified_task_name(verified_task(task_id).intent_template_id, task_id)
                steps = [step for step in steps if step[0] != "answer"] + [["answer", NAVIGATED]]
            scripts[name] = steps
            plan.append({"task_name": name, "family": family, "task_id": task_id, "trajectory": trajectory})
    return scripts, plan


def main(out: Path) -> None:
    from cdp_integration import environment
    from tests.standins import StandIns

    out.mkdir(parents=True, exist_ok=True)
    with StandIns() as sites:
        env = sites.environ()
        os.environ.update(env)
        environment.prepare(webarena_urls={k: v for k, v in env.items() if k in environment.WEBARENA_SITES})
        from agentlab.experiments.loop import EnvArgs
        from agentlab.experiments.study import make_study
        from browsergym.experiments.benchmark.base import Benchmark, HighLevelActionSetArgs

        from tests.integration.bg014_agent import ScriptedPageAgentArgs

        _keep_verified_traces(out / "traces")
        _offline_token_counts()
        _stop_stalled_episodes()
        scripts, plan = _scripts(sites.urls)
        benchmark = Benchmark(
            name="webarena_standins",
            high_level_action_set_args=HighLevelActionSetArgs(subsets=("chat",)),
            is_multi_tab=False,
            supports_parallel_seeds=False,
            env_args_list=[
                EnvArgs(task_name=row["task_name"], task_seed=0, max_steps=15, headless=True, slow_mo=0)
                for row in plan
            ],
            backends=[],
        )
        agent = ScriptedPageAgentArgs(agent_name="scripted-page", scripts=json.dumps(scripts))
        study = make_study(agent, benchmark, ignore_dependencies=True)
        sites.reset()
        study.run(n_jobs=1, parallel_backend="sequential", n_relaunch=3, exp_root=out / "results")
        rows = []
        for exp_dir in sorted(p.parent for p in Path(study.dir).rglob("summary_info.json")):
            summary = json.loads((exp_dir / "summary_info.json").read_text())
            exp_args = (
                json.loads((exp_dir / "exp_args.json").read_text())
                if (exp_dir / "exp_args.json").exists()
                else {}
            )
            task_name = _task_name(exp_dir, exp_args, scripts)
            row = next(r for r in plan if r["task_name"] == task_name)
            trace = out / "traces" / f"{row['task_id']}.zip"
            rows.append(
                {
                    **row,
                    "exp_dir": str(exp_dir),
                    "live": summary.get("cum_reward"),
                    "error": summary.get("err_msg"),
                    "answer": _last_message(exp_dir),
                    "trace": str(trace) if row["family"] == "webarena_verified" and trace.exists() else None,
                    "site_urls": sites.urls,
                }
            )
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "site_urls"}), flush=True)
    (out / "live.json").write_text(json.dumps(rows))


def _task_name(exp_dir: Path, exp_args: dict[str, Any], scripts: dict[str, Any]) -> str:
    name = (exp_args.get("env_args") or {}).get("task_name")
    if name in scripts:
        return str(name)
    # AgentLab names the folder <date>_<agent>_on_<task_name>_<seed>
    return next(task for task in sorted(scripts, key=len, reverse=True) if f"_on_{task}_" in exp_dir.name)


def _last_message(exp_dir: Path) -> str | None:
    """The agent's last ``send_message_to_user`` text, from the scripted actions AgentLab logged."""
    import ast
    import gzip
    import pickle

    answer = None
    for path in sorted(exp_dir.glob("step_*.pkl.gz"), key=lambda p: int(p.name.split("_")[1].split(".")[0])):
        with gzip.open(path) as handle:
            step = pickle.load(handle)
        action = getattr(step, "action", None) or ""
        if action.startswith("send_message_to_user("):
            answer = ast.literal_eval(action[len("send_message_to_user(") : -1])
    return answer


if __name__ == "__main__":
    main(Path(sys.argv[1]))
