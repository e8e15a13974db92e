"""``run_infer.py`` (``--sdk v0``, the default): OpenHands V0, openhands-ai 1.6.0's ``BrowserEnv``.

The V0 driver of ``task_runner.run_tasks``: one episode of a ``TaskRun`` in BrowserGym's eval env
``task.env_id`` inside OpenHands' own ``BrowserEnv``, captured by ``openhands_patch`` into
``<output-dir>/sessions/<instance_id>.session.jsonl.gz``. ``--mode agent`` (default) runs OpenHands'
agent loop: ``run_controller`` with ``runtime="local"``, whose action-execution server owns the
``BrowserEnv`` that runs the task and validates every step with the official evaluator. ``--mode
direct`` skips the agent loop and steps a ``BrowserEnv`` here.

No LLM is reachable here, so unless ``--llm-base-url`` names one, the LLM is ``ScriptedLLM``: a local
OpenAI-compatible endpoint (litellm reaches it through ``base_url``) whose every reply is the task's
next scripted BrowserGym action, from the task's rehearsal (``TaskRun.rehearse``). The workarounds
openhands-ai 1.6.0 needs (an agent that asks for the accessibility tree, rewards from the session,
the private ``HOME``/``TMPDIR``/tmux of ``task_runner.private_home``) are explained in this
directory's README.

OpenHands' runtime, its ``BrowserEnv`` and the capture's variables are per process, so with
``--num-workers N`` (``child_driver``) each task's episode runs in a child ``run_infer.py`` (the
hidden ``--v0-episode``). In agent mode only one child starts up at a time: the next child starts
once the previous one's browser is up (``StartGate``), since two OpenHands runtimes booting at once
on 2 cores can miss ``BrowserEnv``'s fixed 200 s start limit inside the action server. Direct mode
builds ``BrowserEnv`` in the child itself, with a longer limit (``_browser_env_waits_longer``): its
children start as soon as the scheduler allows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdp_integration.errors import DemoTaskError
from cdp_integration.session.store import SESSION_SUFFIX, load_session
from openhands_patch import ENABLE_VARIABLE, INSTANCE_VARIABLE, SESSION_DIR_VARIABLE, enabled

sys.path.insert(0, str(Path(__file__).resolve().parent))
from task_runner import (  # this directory's own module
    SCRIPTED_MODEL,
    Episode,
    PlayEpisode,
    ScriptedEndpoint,
    TaskRun,
    TaskSource,
    private_home,
)

__all__ = [
    "AGENT_NAME",
    "RUNTIME_START_S",
    "ScriptedLLM",
    "StartGate",
    "child_driver",
    "driver",
    "metadata",
    "play_child",
]

AGENT_NAME = "WebArenaBrowsingAgent"
"""V0's default agent: OpenHands' BrowsingAgent with one fix (``_register_agent``)."""
FINAL_ACTION = 'send_msg_to_user("Done.")'
"""The scripted LLM's reply once the plan is played: BrowsingAgent can only stop after a message."""


# -- the scripted LLM -------------------------------------------------------------------------------


class ScriptedLLM(ScriptedEndpoint):
    """A local OpenAI-compatible ``/v1/chat/completions`` whose replies are scripted BrowserGym actions.

    The reply to a BrowsingAgent prompt is ``plan[n]``, ``n`` being the number of actions listed under
    the prompt's ``# Previous Actions``; past the plan it is ``FINAL_ACTION``. The answer depends on the
    prompt only, so a retried request gets the same one. Stop sequences are applied as an OpenAI
    server applies them (BrowsingAgent's parser restores the cut ``)```").
    """

    def __init__(self) -> None:
        super().__init__()
        self.plan: list[str] = []

    def reply(self, prompt: str) -> str:
        marker = prompt.rfind("# Previous Actions")
        done = 0
        if marker >= 0:
            section = prompt[marker:].split("\n", 1)[-1].split("\n\n", 1)[0]
            done = sum(1 for line in section.splitlines() if line.strip())
        action = self.plan[done] if done < len(self.plan) else FINAL_ACTION
        return f"Step {done + 1} of the scripted plan.\n```{action}```"

    def answer(self, request: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, int]]:
        prompt = "\n".join(_text(message.get("content")) for message in request["messages"])
        content = self.reply(prompt)
        stops = request.get("stop") or []
        for stop in [stops] if isinstance(stops, str) else stops:
            if stop and stop in content:
                content = content[: content.index(stop)]
        usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": 16, "total_tokens": 16}
        return {"role": "assistant", "content": content}, "stop", usage


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


# -- the scripted plan ------------------------------------------------------------------------------


@contextlib.contextmanager
def _capture_paused() -> Iterator[None]:
    """BrowserGym envs created inside are not captured (``openhands_patch`` reads the variable per env)."""
    saved = os.environ.get(ENABLE_VARIABLE)
    os.environ[ENABLE_VARIABLE] = "false"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ENABLE_VARIABLE, None)
        else:
            os.environ[ENABLE_VARIABLE] = saved


def _without_capture(rehearse: Callable[[str], list[str]], trajectory: str) -> list[str]:
    with _capture_paused():
        return rehearse(trajectory)


# -- one episode ------------------------------------------------------------------------------------


def _register_agent() -> None:
    from openhands.agenthub.browsing_agent.browsing_agent import BrowsingAgent
    from openhands.controller.agent import Agent
    from openhands.events.action import BrowseInteractiveAction

    class WebArenaBrowsingAgent(BrowsingAgent):
        """OpenHands' BrowsingAgent, asking the runtime for the accessibility tree its prompt is built from."""

        def step(self, state: Any) -> Any:
            action = super().step(state)
            if isinstance(action, BrowseInteractiveAction):
                action.return_axtree = True
            return action

    with contextlib.suppress(Exception):  # AgentAlreadyRegisteredError on a second call
        Agent.register(AGENT_NAME, WebArenaBrowsingAgent)


def _llm_config(args: argparse.Namespace, scripted_url: str | None) -> Any:
    from openhands.core.config import LLMConfig
    from pydantic import SecretStr

    return LLMConfig(
        model=args.llm_model or SCRIPTED_MODEL,
        base_url=args.llm_base_url or scripted_url,
        api_key=SecretStr(args.llm_api_key or os.environ.get("LLM_API_KEY") or "scripted"),
        num_retries=2,
        retry_min_wait=1,
        retry_max_wait=4,
        timeout=120,
    )


def _user_reply(state: Any, encapsulate_solution: bool = False, try_parse: Any = None) -> str:
    """The user's answer whenever the agent waits for one: BrowsingAgent then finishes."""
    return "Thank you, that is all."


def run_agent_episode(
    args: argparse.Namespace,
    env_id: str,
    goal: str,
    llm: Any,
    workspace: Path,
    browser_up: Callable[[], None] = lambda: None,
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """OpenHands' agent loop on one eval env; returns (history, metrics, error).

    ``browser_up()`` runs once the runtime answers: its server's ``BrowserEnv`` is up by then (the
    server starts it in the background, but synchronously in its event loop, before ``/alive``)."""
    from openhands.core.config import AgentConfig, OpenHandsConfig, SandboxConfig
    from openhands.core.main import run_controller
    from openhands.core.setup import create_runtime
    from openhands.events.action import MessageAction
    from openhands.events.serialization.event import event_to_trajectory
    from openhands.utils.async_utils import call_async_from_sync

    workspace.mkdir(parents=True)
    config = OpenHandsConfig(
        default_agent=args.agent_cls,
        runtime="local",
        run_as_openhands=False,
        max_iterations=args.max_iterations,
        file_store="memory",
        workspace_base=str(workspace),
        sandbox=SandboxConfig(browsergym_eval_env=env_id),
    )
    config.set_llm_config(llm)
    config.set_agent_config(AgentConfig(enable_mcp=False, enable_prompt_extensions=False))
    runtime = create_runtime(config, headless_mode=True)
    _wait_longer_for_start(runtime)
    try:
        call_async_from_sync(runtime.connect)
        browser_up()
        state = asyncio.run(
            run_controller(
                config=config,
                initial_user_action=MessageAction(content=goal),
                runtime=runtime,
                fake_user_response_fn=_user_reply,
            )
        )
    finally:
        runtime.close()  # the server's shutdown closes BrowserEnv: the session is saved then
    if state is None:
        return [], {}, "the agent controller returned no state"
    history = [event_to_trajectory(event) for event in state.history]
    metrics = state.metrics.get() if state.metrics else {}
    return history, metrics, state.last_error or None


RUNTIME_START_S = 600
"""How long the agent mode waits for OpenHands' action-execution server to answer."""


def _wait_longer_for_start(runtime: Any) -> None:
    """Give ``runtime`` ``RUNTIME_START_S`` instead of LocalRuntime's fixed 120 s to come up.

    The server answers only once ``BrowserEnv`` has reset its eval env, and for a WebArena task that
    reset signs in on every site the task needs, with BrowserGym's 1 s ``slow_mo`` after each action:
    on a loaded machine that alone has taken over 120 s. LocalRuntime's wait is a tenacity retry on the
    class (nothing in its config sets it), so this instance gets the same retry with a longer stop.
    """
    import tenacity

    wait = getattr(type(runtime), "_wait_until_alive", None)
    retry_with = getattr(wait, "retry_with", None)
    if retry_with is None:  # another runtime class, or OpenHands changed: keep its own wait
        return
    try:
        from openhands.utils.tenacity_stop import stop_if_should_exit
    except ImportError:  # pragma: no cover - present in the locked openhands-ai
        stop: Any = tenacity.stop_after_delay(RUNTIME_START_S)
    else:
        stop = tenacity.stop_after_delay(RUNTIME_START_S) | stop_if_should_exit()
    runtime._wait_until_alive = types.MethodType(retry_with(stop=stop), runtime)


@contextlib.contextmanager
def _browser_env_waits_longer(browser_env: type) -> Iterator[None]:
    """While in it, ``BrowserEnv`` waits ``RUNTIME_START_S`` instead of its fixed 200 s for its
    BrowserGym process to come up.

    That process answers only after the eval env's reset (sign-in on every site of the task with
    BrowserGym's 1 s ``slow_mo`` per action). With ``--num-workers 2`` on a loaded machine (load 30-48
    on 2 cores) two of them took over 200 s; BrowserEnv then closes its pipe and retries, and the retry
    fails with "handle is closed" (OpenHands 1.6.0): both read-only tasks exited 1. The wait is read in
    this process only (``check_alive``), so the spawned BrowserGym process is unchanged."""
    original = browser_env.check_alive  # type: ignore[attr-defined]

    def check_alive(self: Any, timeout: float = 60) -> bool:
        return bool(original(self, timeout=max(timeout, RUNTIME_START_S)))

    browser_env.check_alive = check_alive  # type: ignore[attr-defined]
    try:
        yield
    finally:
        browser_env.check_alive = original  # type: ignore[attr-defined]


def run_direct_episode(
    env_id: str, plan: Sequence[str], browser_up: Callable[[], None] = lambda: None
) -> tuple[list[dict[str, Any]], list[float], str | None, str | None]:
    """OpenHands' ``BrowserEnv`` stepped here; returns (history, rewards, goal, error)."""
    from openhands.runtime.browser.browser_env import (
        BROWSER_EVAL_GET_GOAL_ACTION,
        BROWSER_EVAL_GET_REWARDS_ACTION,
        BrowserEnv,
    )

    with _browser_env_waits_longer(BrowserEnv):
        env = BrowserEnv(env_id)
    history: list[dict[str, Any]] = []
    try:
        browser_up()
        goal = env.step(BROWSER_EVAL_GET_GOAL_ACTION)["text_content"]
        for action in plan:
            obs = env.step(action)
            history.append(
                {"action": action, "url": obs.get("url"), "error": obs.get("last_action_error") or None}
            )
        rewards = [float(r) for r in json.loads(env.step(BROWSER_EVAL_GET_REWARDS_ACTION)["text_content"])]
    finally:
        env.close()
    error = next((h["error"] for h in history if h["error"]), None)
    return history, rewards, goal, error


def _git_commit() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return result.stdout.strip()


def _session_rewards(path: Path) -> list[float] | None:
    """The live per-step rewards the session recorded; in agent mode there is no other source (the
    runtime returns ``GET_EVAL_REWARDS`` as page text without them)."""
    if not path.exists():
        return None
    end = load_session(path).end
    return [float(r) for r in end.rewards] if end is not None else None


# -- the driver -------------------------------------------------------------------------------------


def metadata(args: argparse.Namespace, output_dir: Path, dataset: str) -> dict[str, Any]:
    """The run's settings, as upstream's ``EvalMetadata`` (no API key)."""
    return {
        "agent_class": args.agent_cls if args.mode == "agent" else None,
        "llm_config": {
            "model": args.llm_model or SCRIPTED_MODEL,
            "base_url": args.llm_base_url or "scripted",
        },
        "max_iterations": args.max_iterations,
        "eval_output_dir": str(output_dir),
        "start_time": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "dataset": dataset,
        "details": {"mode": args.mode, "trajectory": args.trajectory, "capture": enabled()},
    }


@contextlib.contextmanager
def driver(
    args: argparse.Namespace, output_dir: Path, home: Path, browser_up: Callable[[], None] = lambda: None
) -> Iterator[PlayEpisode]:
    """V0 episodes in this process, one at a time (``task_runner.Driver``); ``browser_up()`` runs
    once per episode when its ``BrowserEnv`` is up."""
    sessions_dir = output_dir / "sessions"
    if enabled():
        os.environ[SESSION_DIR_VARIABLE] = str(sessions_dir)
    # Playwright's sync API leaves its event loop marked running in the thread that started it, where
    # run_controller's asyncio.run() would then refuse to start: rehearsals run in a thread of their own.
    planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rehearsal")
    with ScriptedLLM() as llm, planner:
        if args.mode == "agent":
            _register_agent()

        def play(task: TaskRun, number: int) -> Episode:
            session = sessions_dir / f"{task.instance_id}{SESSION_SUFFIX}"
            os.environ[INSTANCE_VARIABLE] = task.instance_id
            plan: list[str] = []
            reset_s = None
            if args.llm_base_url is None:
                if task.rehearse is None:
                    raise DemoTaskError(f"{task.instance_id}: no rehearsal to resolve its scripted plan")
                plan = planner.submit(_without_capture, task.rehearse, args.trajectory).result()
                reset_s = task.reset()  # the rehearsal changed the sites as the run will
            goal: str | None = task.intent
            metrics: dict[str, Any] = {}
            if args.mode == "agent":
                llm.plan = plan
                history, metrics, error = run_agent_episode(
                    args,
                    task.env_id,
                    task.intent,
                    _llm_config(args, llm.base_url),
                    home / f"workspace-{number}",
                    browser_up,
                )
                rewards = _session_rewards(session)
            else:
                history, rewards, goal, error = run_direct_episode(task.env_id, plan, browser_up)
            return Episode(goal, plan, history, metrics, error, rewards, session, reset_s=reset_s)

        try:
            yield play
        finally:
            os.environ.pop(INSTANCE_VARIABLE, None)


class StartGate:
    """One V0 start-up at a time across workers: a child is started only once the previous one's
    browser is up (or the child has ended).

    A start-up (the rehearsal's browser, OpenHands' runtime and action-execution server, ``BrowserEnv``'s
    BrowserGym process signing in with its 1 s ``slow_mo`` per action) is CPU-bound; two at once on 2
    cores have taken longer than ``BrowserEnv``'s fixed 200 s limit, which lives in OpenHands' action
    server where run_infer cannot lengthen it. One episode's agent loop beside the next one's start-up
    is what the gate allows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def start(self, command: Sequence[str], log: Any) -> tuple[subprocess.Popen[bytes], float, float]:
        """Start ``command`` (with ``--v0-ready-fd``) when the gate is free; returns the process, the
        seconds waited for the gate, and those from its start to its browser being up (or its end)."""
        queued = time.perf_counter()
        with self._lock:
            started = time.perf_counter()
            read, write = os.pipe()
            with open(read, "rb") as ready:
                try:
                    command = [*command, "--v0-ready-fd", str(write)]
                    process = subprocess.Popen(
                        command, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write,)
                    )
                finally:
                    os.close(write)
                ready.read(1)  # one byte once its browser is up; nothing when it ended before
            return process, round(started - queued, 1), round(time.perf_counter() - started, 1)


@contextlib.contextmanager
def child_driver(
    output_dir: Path, command: Sequence[str], gate: StartGate | None, home: Path
) -> Iterator[PlayEpisode]:
    """V0 episodes each in a child ``run_infer.py`` (``command`` + the task's options and
    ``--v0-episode FILE``), which writes its ``Episode`` to FILE and its session into ``output_dir``;
    with a ``gate`` (shared by the run's workers) children start one at a time. A child's failure is
    one ``DemoTaskError`` naming the task, after the end of its log on stderr."""
    scratch = home / "v0-episodes"
    scratch.mkdir(exist_ok=True)

    def play(task: TaskRun, number: int) -> Episode:
        result, log_path = scratch / f"{task.task_id}.json", scratch / f"{task.task_id}.log"
        options = ["--output-dir", str(output_dir), "--task-ids", str(task.task_id)]
        child = [*command, *options, "--v0-episode", str(result)]
        with open(log_path, "wb") as log:
            if gate is None:
                process = subprocess.Popen(child, stdout=log, stderr=subprocess.STDOUT)
            else:
                process, waited, up = gate.start(child, log)
            code = process.wait()
        if code != 0:
            sys.stderr.write(log_path.read_text(errors="replace")[-2000:])
            raise DemoTaskError(f"task {task.task_id}: exit {code}")
        episode = Episode.from_json(json.loads(result.read_text()))
        if gate is not None:
            episode.timing = {"phases": {"start_wait_s": waited, "start_s": up}}
        return episode

    yield play


def play_child(args: argparse.Namespace, tasks: TaskSource) -> None:
    """The child of ``child_driver``: the one task of ``--task-ids`` as a V0 episode (its sites were
    reset by the parent), its ``Episode`` written to ``--v0-episode``; one byte on ``--v0-ready-fd``
    once its browser is up."""
    ready = os.fdopen(args.v0_ready_fd, "wb", buffering=0) if args.v0_ready_fd is not None else None

    def browser_up() -> None:
        if ready is not None and not ready.closed:
            with contextlib.suppress(OSError):  # the parent is gone: its own failure says so
                ready.write(b"1")
            ready.close()

    output_dir: Path = args.output_dir.resolve()
    try:
        with private_home() as home, tasks() as task_runs, driver(args, output_dir, home, browser_up) as play:
            (task,) = task_runs
            episode = play(task, 0)
        Path(args.v0_episode).write_text(json.dumps(episode.to_json(), default=str))
    finally:
        if ready is not None and not ready.closed:
            ready.close()
