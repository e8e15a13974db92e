"""Run OpenHands on WebArena tasks with capture, shaped like OpenHands' own WebArena ``run_infer``.

    WEBARENA_CDP_LOGGING=true .venv/bin/python evaluation/benchmarks/webarena/run_infer.py \\
        --output-dir D [--dataset demo|webarena] [--mode agent|direct] [--eval-n-limit N] [--task-ids ...]
    .venv/bin/python evaluation/benchmarks/webarena/eval_infer.py D

``--sdk v1`` runs an openhands-sdk agent with openhands-tools' browser tool instead (``sdk_v1.py``, in
the V1 environment ``.venv-v1``), on the demo tasks or ``--dataset webarena``. ``--num-workers N`` runs
tasks side by side (``scheduler.py``).
``--dataset webarena`` runs WebArena's real task ids on your deployment (``webarena_dataset.py``:
site URLs, preflight, resets); the default ``demo`` runs the bundled demo tasks as described next.

Each demo task is the BrowserGym eval env ``browsergym/webarena_demo.<task_id>`` on the demo shop,
which this script serves in-process. ``--mode agent`` (default) runs OpenHands' real agent loop:
``run_controller`` with ``runtime="local"``, whose action-execution server owns the ``BrowserEnv``
that runs the task and validates every step with the official evaluator; ``openhands_patch``
captures that env into ``D/sessions/<instance_id>.session.jsonl.gz``. ``D/output.jsonl`` gets one
line per task (``instance_id``, ``instruction``, ``history``, ``metrics``, ``error``,
``test_result``, ``metadata``), ``D/metadata.json`` the run's settings; tasks already in
``output.jsonl`` are skipped. ``--mode direct`` skips the agent loop and steps OpenHands'
``BrowserEnv`` here.

No LLM is reachable here, so unless ``--llm-base-url`` names one, the LLM is ``ScriptedLLM``: a local
OpenAI-compatible endpoint (litellm reaches it through ``base_url``) whose every reply is the task's
next scripted BrowserGym action. The workarounds openhands-ai 1.6.0 needs (an agent that asks for
the accessibility tree, rewards from the session, a private ``HOME``/``TMPDIR``/tmux for
LocalRuntime) are explained in this directory's README.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

# litellm downloads its model price list at import unless told to use the bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cdp_integration.demo import DemoSite
from cdp_integration.demo.tasks import (
    DemoTask,
    configure_demo_environment,
    load_demo_tasks,
    run_demo_task,
)
from cdp_integration.errors import CDPIntegrationError
from cdp_integration.session.store import SESSION_SUFFIX, load_session
from openhands_patch import ENABLE_VARIABLE, INSTANCE_VARIABLE, SESSION_DIR_VARIABLE, enabled

sys.path.insert(0, str(Path(__file__).resolve().parent))
import webarena_dataset  # this directory's own module

__all__ = ["ScriptedLLM", "main", "resolve_plan", "run"]

AGENT_NAME = "WebArenaBrowsingAgent"
SCRIPTED_MODEL = "openai/scripted-demo-agent"
FINAL_ACTION = 'send_msg_to_user("Done.")'
"""The scripted LLM's reply once the plan is played: BrowsingAgent can only stop after a message."""
_SHORT_TMP = 24
"""Longest temp dir the private one is made in; beyond, ``/tmp``: Chromium's singleton socket and
tmux's socket under the private one must fit in 107 bytes."""
SERVER_URL_FILE = Path("/tmp/oh-server-url")
"""Written by OpenHands' action-execution server whatever ``$TMPDIR`` says."""


# -- the scripted LLM -------------------------------------------------------------------------------


class ScriptedLLM:
    """A local OpenAI-compatible ``/v1/chat/completions`` whose replies are scripted BrowserGym actions.

    The reply to a BrowsingAgent prompt is ``plan[n]``, ``n`` being the number of actions listed under
    the prompt's ``# Previous Actions``; past the plan it is ``FINAL_ACTION``. The answer depends on the
    prompt only, so a retried request gets the same one. Stop sequences are applied as an OpenAI
    server applies them (BrowsingAgent's parser restores the cut ``)```").
    """

    def __init__(self) -> None:
        self.plan: list[str] = []
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ScriptedLLM:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                    body = owner.completion(request)
                    status = 200
                except (ValueError, TypeError, KeyError) as exc:
                    body, status = {"error": {"message": f"scripted LLM: {exc}"}}, 400
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reply(self, prompt: str) -> str:
        marker = prompt.rfind("# Previous Actions")
        done = 0
        if marker >= 0:
            section = prompt[marker:].split("\n", 1)[-1].split("\n\n", 1)[0]
            done = sum(1 for line in section.splitlines() if line.strip())
        action = self.plan[done] if done < len(self.plan) else FINAL_ACTION
        return f"Step {done + 1} of the scripted plan.\n```{action}```"

    def completion(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests += 1
        prompt = "\n".join(_text(message.get("content")) for message in request["messages"])
        content = self.reply(prompt)
        stops = request.get("stop") or []
        for stop in [stops] if isinstance(stops, str) else stops:
            if stop and stop in content:
                content = content[: content.index(stop)]
        return {
            "id": f"scripted-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", SCRIPTED_MODEL),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 16, "total_tokens": 16},
        }


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


def _without_capture(resolve: Callable[[Any], list[str]], task: Any) -> list[str]:
    with _capture_paused():
        return resolve(task)


def resolve_plan(task: DemoTask, trajectory: str, base_url: str) -> list[str]:
    """The trajectory's BrowserGym action strings, element ids (bids) included.

    Scripted steps name elements by CSS selector; an action names them by the id BrowserGym marks on
    the live page. The trajectory is played once in plain BrowserGym, marking elements as OpenHands'
    ``BrowserEnv`` does (``tags_to_mark="all"``), from the same reset shop, so the ids are those the
    OpenHands run will see.
    """
    actions: list[str] = []

    def record(env: Any) -> None:
        env.unwrapped.tags_to_mark = "all"
        step = env.step

        def recording_step(action: str, *args: Any, **kwargs: Any) -> Any:
            actions.append(action)
            return step(action, *args, **kwargs)

        env.step = recording_step

    with _capture_paused():
        run_demo_task(task, trajectory, base_url, on_env=record)  # type: ignore[arg-type]
    return actions


# -- one episode ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _private_home() -> Iterator[Path]:
    """A private ``HOME``, ``TMUX_TMPDIR`` and ``TMPDIR`` for the run, removed afterwards (see the module
    docstring); ``USER`` names the current account and ``SU_TO_USER=false``; ``/tmp/oh-server-url``
    restored. Entered before OpenHands is imported: some of its modules read ``HOME`` at import."""
    base = tempfile.gettempdir()
    if len(base) > _SHORT_TMP and Path("/tmp").is_dir():  # sockets below it must fit in 107 bytes
        base = "/tmp"
    root = Path(tempfile.mkdtemp(prefix="oh-run-", dir=base))
    saved = {key: os.environ.get(key) for key in ("HOME", "TMUX_TMPDIR", "TMPDIR", "USER", "SU_TO_USER")}
    url_file = SERVER_URL_FILE.read_bytes() if SERVER_URL_FILE.is_file() else None
    for name in ("home", "tmux", "tmp"):
        (root / name).mkdir()
    os.environ.update(
        HOME=str(root / "home"),
        TMUX_TMPDIR=str(root / "tmux"),
        TMPDIR=str(root / "tmp"),
        USER=pwd.getpwuid(os.getuid()).pw_name,
        SU_TO_USER="false",
    )
    tempfile.tempdir = None  # re-read TMPDIR
    try:
        yield root
    finally:
        tmux = shutil.which("tmux")
        if tmux is not None:  # the bash session's tmux server, if it outlived its session
            subprocess.run(
                [tmux, "-S", str(root / "tmux" / f"tmux-{os.getuid()}" / "default"), "kill-server"],
                capture_output=True,
                check=False,
            )
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tempfile.tempdir = None
        if url_file is None:
            SERVER_URL_FILE.unlink(missing_ok=True)
        else:
            SERVER_URL_FILE.write_bytes(url_file)
        shutil.rmtree(root, ignore_errors=True)


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
    args: argparse.Namespace, env_id: str, goal: str, llm: Any, workspace: Path
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """OpenHands' agent loop on one eval env; returns (history, metrics, error)."""
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
    env_id: str, plan: Sequence[str]
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


# -- the run ----------------------------------------------------------------------------------------


def _done_instances(output: Path) -> set[str]:
    if not output.exists():
        return set()
    done = set()
    for line in output.read_text().splitlines():
        with contextlib.suppress(ValueError):
            done.add(json.loads(line)["instance_id"])
    return done


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


def _selected_tasks(args: argparse.Namespace) -> list[DemoTask]:
    tasks = load_demo_tasks()
    if args.task_ids:
        wanted = set(args.task_ids)
        tasks = [task for task in tasks if task.task_id in wanted]
    return tasks[: args.eval_n_limit] if args.eval_n_limit else tasks


def _metadata(args: argparse.Namespace, output_dir: Path) -> dict[str, Any]:
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
        "dataset": "webarena" if args.dataset == "webarena" else "webarena_demo",
        "details": {"mode": args.mode, "trajectory": args.trajectory, "capture": enabled()},
    }


def run(args: argparse.Namespace, webarena: webarena_dataset.WebArenaRun | None = None) -> Path:
    """Every selected task once (those already in ``output.jsonl`` skipped); returns its path.

    ``webarena``: run its (prepared) WebArena tasks on the user's deployment instead of the demo."""
    output_dir: Path = args.output_dir.resolve()
    sessions_dir = output_dir / "sessions"
    output_dir.mkdir(parents=True, exist_ok=True)
    output = output_dir / "output.jsonl"
    if enabled():
        os.environ[SESSION_DIR_VARIABLE] = str(sessions_dir)
    done = _done_instances(output)
    tasks: Sequence[Any] = (
        webarena.select(done)
        if webarena
        else [t for t in _selected_tasks(args) if _instance_id(t) not in done]
    )
    metadata = _metadata(args, output_dir) | (webarena.metadata() if webarena else {})
    (output_dir / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    # Playwright's sync API leaves its event loop marked running in the thread that started it, where
    # run_controller's asyncio.run() would then refuse to start: plans are resolved in a thread of their own.
    planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scripted-plan")
    sites = contextlib.nullcontext() if webarena else DemoSite()
    with _private_home() as home, sites as site, ScriptedLLM() as llm, planner:
        demo_url = "" if site is None else site.base_url
        if webarena:
            webarena.configure()
        else:
            configure_demo_environment(demo_url)
        if args.mode == "agent":
            _register_agent()
        for number, task in enumerate(tasks):
            started = time.perf_counter()
            instance_id = _instance_id(task)
            session = sessions_dir / f"{instance_id}{SESSION_SUFFIX}"
            session.unlink(missing_ok=True)
            os.environ[INSTANCE_VARIABLE] = instance_id
            plan: list[str] = []
            reset_s = webarena.before_task(task) if webarena else None
            if webarena and args.llm_base_url is None:
                plan = planner.submit(_without_capture, webarena.plan, task).result()
                reset_s = webarena.before_task(task)  # the rehearsal changed the sites as the run will
            elif args.llm_base_url is None:
                plan = planner.submit(resolve_plan, task, args.trajectory, demo_url).result()
            goal: str | None = task.config["intent"]
            metrics: dict[str, Any] = {}
            rewards: list[float] | None
            if args.mode == "agent":
                llm.plan = plan
                llm_config = _llm_config(args, llm.base_url)
                workspace = home / f"workspace-{number}"
                history, metrics, error = run_agent_episode(
                    args, task.env_id, str(goal), llm_config, workspace
                )
                rewards = _session_rewards(session)
            else:
                history, rewards, goal, error = run_direct_episode(task.env_id, plan)
            reward = max(rewards) if rewards else None
            duration = round(time.perf_counter() - started, 1)
            line = {
                "instance_id": instance_id,
                "instruction": goal,
                "instance": {"task_id": task.task_id, "env_id": task.env_id, "plan": plan},
                "history": history,
                "metrics": metrics,
                "error": error,
                "test_result": {
                    "reward": reward,
                    "rewards": rewards,
                    "session": session.relative_to(output_dir).as_posix() if session.exists() else None,
                },
                "metadata": metadata | {"duration_s": duration, "reset_s": reset_s},
            }
            with open(output, "a") as out:
                out.write(json.dumps(line, default=str) + "\n")
            saved = f", session {session}" if session.exists() else ", no session"
            print(f"{instance_id}: reward {reward} in {duration} s{saved}", file=sys.stderr)
    os.environ.pop(INSTANCE_VARIABLE, None)
    return output


_PER_RUN_OPTIONS = {"--output-dir": 1, "--eval-output-dir": 1, "--num-workers": 1, "--eval-n-limit": 1}


def _child_argv(argv: list[str]) -> list[str]:
    """``argv`` less the options a one-task child gets its own values for (and ``--task-ids``)."""
    kept: list[str] = []
    number = 0
    while number < len(argv):
        token = argv[number]
        name = token.split("=", 1)[0]
        number += 1
        if name == "--task-ids":
            while "=" not in token and number < len(argv) and not argv[number].startswith("-"):
                number += 1  # its values
        elif name in _PER_RUN_OPTIONS:
            number += 0 if "=" in token else _PER_RUN_OPTIONS[name]
        else:
            kept.append(token)
    return kept


def run_v0_in_parallel(
    args: argparse.Namespace, argv: list[str], webarena: webarena_dataset.WebArenaRun | None
) -> Path:
    """V0 with ``--num-workers N``: one child ``run_infer.py`` per task (its own OpenHands, BrowserEnv
    and Chromium), at most N at a time, scheduled by ``SiteScheduler`` (a task that changes a site
    never beside another on it); each child's line and session join this run's output."""
    from scheduler import SiteScheduler  # this directory's own module

    output_dir: Path = args.output_dir.resolve()
    (output_dir / "sessions").mkdir(parents=True, exist_ok=True)
    output = output_dir / "output.jsonl"
    done = _done_instances(output)
    tasks: list[Any] = (
        webarena.select(done)
        if webarena
        else [t for t in _selected_tasks(args) if _instance_id(t) not in done]
    )

    def changes_sites(task: Any) -> bool:
        return webarena.changes_sites(task) if webarena else True  # the demo: one shop reset per task

    scheduler = SiteScheduler(
        tasks, sites=lambda t: tuple(t.config.get("sites") or ()), exclusive=changes_sites
    )
    child_argv = _child_argv(argv)
    write = threading.Lock()
    failures: list[str] = []
    parts = Path(tempfile.mkdtemp(prefix="run-infer-parts-", dir=output_dir))

    def worker() -> None:
        while not failures and (task := scheduler.next()) is not None:
            part = parts / str(task.task_id)
            try:
                completed = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), *child_argv, "--output-dir", str(part),
                     "--task-ids", str(task.task_id)],
                    capture_output=True,
                    text=True,
                    check=False,
                )  # fmt: skip
            finally:
                scheduler.done(task)
            sys.stderr.write(completed.stderr[-2000:] if completed.returncode else "")
            if completed.returncode != 0:
                failures.append(f"task {task.task_id}: exit {completed.returncode}")
                return
            with write:
                if not (output_dir / "metadata.json").exists():
                    (part / "metadata.json").replace(output_dir / "metadata.json")
            for text in (part / "output.jsonl").read_text().splitlines():
                line = json.loads(text)
                session = line["test_result"].get("session")
                if session:
                    (part / session).replace(output_dir / session)
                with write, open(output, "a") as out:
                    out.write(json.dumps(line, default=str) + "\n")
                print(f"{line['instance_id']}: reward {line['test_result']['reward']}", file=sys.stderr)

    threads = [threading.Thread(target=worker, name=f"v0-worker-{n}") for n in range(args.num_workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    shutil.rmtree(parts, ignore_errors=True)
    if failures:
        print(f"run_infer.py: error: {'; '.join(failures)}", file=sys.stderr)
        sys.exit(2)
    return output


def _instance_id(task: DemoTask) -> str:
    return task.env_id.removeprefix("browsergym/")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run_infer.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", "--eval-output-dir", type=Path, required=True)
    parser.add_argument(
        "--dataset",
        choices=("demo", "webarena"),
        default="demo",
        help="demo: the bundled demo tasks on the demo shop; webarena: WebArena's tasks on your deployment.",
    )
    parser.add_argument("--mode", choices=("agent", "direct"), default="agent")
    parser.add_argument(
        "--sdk",
        choices=("v0", "v1"),
        default="v0",
        help="v0: openhands-ai's BrowserEnv; v1: an openhands-sdk agent with openhands-tools' browser tool.",
    )
    parser.add_argument("--agent-cls", default=AGENT_NAME)
    parser.add_argument("--max-iterations", type=int, default=15)
    parser.add_argument(
        "--num-workers",
        type=int,
        default=1,
        help="--sdk v1: tasks run side by side, one Chromium and one agent each; a task that changes a "
        "site (WebArena-Verified 'mutate', or reset before) never runs beside another on that site.",
    )
    parser.add_argument("--eval-n-limit", type=int, default=0, help="At most this many tasks (0: all).")
    parser.add_argument("--task-ids", type=int, nargs="*", default=[], help="Only these task ids.")
    parser.add_argument(
        "--trajectory",
        choices=("success", "failure"),
        default="success",
        help="Which scripted trajectory the scripted LLM (and --mode direct) plays.",
    )
    parser.add_argument("--llm-model", default=None, help=f"litellm model name [default: {SCRIPTED_MODEL}].")
    parser.add_argument("--llm-base-url", default=None, help="A real OpenAI-compatible endpoint.")
    parser.add_argument("--llm-api-key", default=None, help="[default: $LLM_API_KEY]")
    parser.add_argument(
        "--llm-stream",
        action="store_true",
        help="--sdk v1: stream the model's replies (openhands-sdk's stream=True with a token callback).",
    )
    webarena_dataset.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.sdk == "v1" and args.mode != "agent":
        parser.error("--sdk v1 runs the agent (--mode agent); --mode direct is V0's BrowserEnv")
    if args.num_workers < 1:
        parser.error("--num-workers must be at least 1")
    if args.llm_base_url is not None and args.mode == "direct":
        parser.error("--mode direct plays the scripted actions; it takes no LLM")
    webarena_dataset.check_arguments(parser, args)
    return args


def _main_v1(args: argparse.Namespace) -> None:
    """``--sdk v1``: the same tasks (``task_runner.TaskRun``) driven by an openhands-sdk agent."""
    import sdk_v1  # this directory's own modules
    from task_runner import TaskRun, demo_task_run, webarena_task_run

    if args.dataset == "webarena":
        webarena = webarena_dataset.WebArenaRun(args)
        try:
            webarena.prepare()
        except CDPIntegrationError as exc:
            print(f"run_infer.py: error: {exc}", file=sys.stderr)
            sys.exit(2)

        @contextlib.contextmanager
        def webarena_tasks() -> Iterator[list[TaskRun]]:
            webarena.configure()
            yield [
                webarena_task_run(
                    spec,
                    webarena.urls,
                    webarena.plans.get(spec.task_id, {}),
                    functools.partial(webarena.before_task, spec),
                    changes_sites=webarena.changes_sites(spec),
                )
                for spec in webarena.tasks
            ]

        sdk_v1.main(
            args,
            webarena_tasks,
            private_home=_private_home,
            dataset="webarena",
            extra_metadata=webarena.metadata(),
        )
        return

    @contextlib.contextmanager
    def demo_tasks() -> Iterator[list[TaskRun]]:
        with DemoSite() as site:
            configure_demo_environment(site.base_url)
            yield [demo_task_run(task, site.base_url) for task in _selected_tasks(args)]

    sdk_v1.main(args, demo_tasks, private_home=_private_home)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.sdk == "v1":
        _main_v1(args)
        return
    if not enabled():
        # Without the hook, OpenHands' browser process knows no demo task: it would die at gym.make and
        # BrowserEnv would wait 200 s per start attempt before giving up.
        sys.exit(
            f"run_infer.py: error: set {ENABLE_VARIABLE}=true; the demo task ids exist in OpenHands' "
            "browser process only through openhands_patch, which that variable switches on (and so "
            "does capture, and the browser set-up that process needs)"
        )
    webarena = webarena_dataset.WebArenaRun(args) if args.dataset == "webarena" else None
    if webarena is not None:
        try:
            webarena.prepare()  # before OpenHands starts: every problem is one line, exit 2
        except CDPIntegrationError as exc:
            print(f"run_infer.py: error: {exc}", file=sys.stderr)
            sys.exit(2)
    if args.num_workers > 1:
        output = run_v0_in_parallel(args, list(sys.argv[1:] if argv is None else argv), webarena)
        print(f"wrote {output}")
        return
    try:
        output = run(args, webarena)
    except CDPIntegrationError as exc:  # a failed reset: the tasks before it are in output.jsonl
        print(f"run_infer.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
