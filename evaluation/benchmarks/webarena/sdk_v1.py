"""``run_infer.py --sdk v1``: an OpenHands V1 agent (openhands-sdk + openhands-tools' browser tool).

The V1 driver of ``task_runner.run_tasks`` (which resets, resumes, schedules ``--num-workers`` and
writes the lines): ``driver`` plays one ``task_runner.TaskRun`` per call, in the V1 environment
(``.venv-v1``: current openhands-sdk / openhands-tools and the browser-use they use; see
``v1env/pyproject.toml``), on the demo tasks or on WebArena's real task ids (``--dataset
webarena``). Each worker has its own scripted LLM, and each task its own Chromium and agent.

OpenHands V1 has no BrowserGym and no Playwright: its browser tool drives Chromium through
browser-use over raw CDP. So this driver owns the browser: per task it starts a Chromium with a
DevTools port (``ChromiumProcess``), signs in and opens the task's start page over a Playwright
connection of its own, hands the endpoint to the browser tool (``cdp_url`` reaches browser-use's
profile), and attaches a ``CDPSessionLogger`` to the same browser (``attach_to_cdp``). The
conversation's callback captures a step after every browser tool observation; the answer is the
agent's ``finish`` message; the official evaluator runs once on the final live state
(``run_evaluation_probe``, WebArena's own definition of the score) and the session is saved for
``eval_infer.py``.

Unless ``--llm-base-url`` names a real model, the LLM is ``ScriptedToolLLM``: a local
OpenAI-compatible endpoint answering with native tool calls of the V1 browser tools that play the
task's scripted trajectory. The tool set (``v1_tools``) adds ``browser_select_option`` and
``browser_press_key`` to the stock tools, so a real model has them too. browser-use numbers
elements by their DOM backend node id, so a scripted step's CSS selector is resolved to that id on
the live page when the call is due, after a ``browser_get_state`` that makes browser-use index the
page, as a real agent would read it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdp_integration.capture.cdp_attach import BrowserThread, ChromiumProcess
from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.errors import DemoTaskError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from task_runner import (  # this directory's own module
    SCRIPTED_MODEL,
    Episode,
    PlayEpisode,
    ScriptedEndpoint,
    Steps,
    TaskRun,
)

__all__ = ["ScriptedToolLLM", "driver", "environment", "metadata", "plan_calls", "run_v1_task"]

_QUIET_ENVIRONMENT = {
    "ANONYMIZED_TELEMETRY": "false",
    "BROWSER_USE_CLOUD_SYNC": "false",
    "OPENHANDS_SUPPRESS_BANNER": "1",
}
"""browser-use and the SDK phone home or print banners unless told not to (no network here)."""
SET_UP_STALL_S = 240.0
"""Sign-in and start page take 3-12 s at load 30; past this a Playwright call without a timeout is
stuck (seen once in 164 episodes: task 12's sign-in never returned, its tab's renderer gone)."""
SET_UP_ATTEMPTS = 3


class _SetUpStalled(Exception):
    """The task's sign-in/start page did not return within ``SET_UP_STALL_S`` (its browser was stopped)."""


# -- the scripted plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedCall:
    """One tool call; ``selector``/``answer_selector`` are resolved on the live page when it is due."""

    tool: str
    arguments: dict[str, Any]
    selector: str | None = None
    answer_selector: str | None = None


def plan_calls(
    steps: Steps, expand: Callable[[str], str], substitute: Callable[[str], str] = lambda text: text
) -> list[PlannedCall]:
    """The V1 tool calls playing scripted steps; ``DemoTaskError`` for a verb V1 cannot play.

    ``expand`` makes a ``goto`` step's URL (a bare path is on the task's first site); ``substitute``
    fills site placeholders in every other part of a step (a typed URL: ``__GITLAB__/byteblaze``),
    as V0's rehearsal does."""
    calls: list[PlannedCall] = []
    answered = False
    for verb, *raw in steps:
        if verb == "goto":
            calls.append(PlannedCall("browser_navigate", {"url": expand(raw[0])}))
            continue
        args = [substitute(part) for part in raw]
        if verb == "click":
            calls += [
                PlannedCall("browser_get_state", {}),
                PlannedCall("browser_click", {}, selector=args[0]),
            ]
        elif verb == "fill":
            calls += [
                PlannedCall("browser_get_state", {}),
                PlannedCall("browser_type", {"text": args[1]}, selector=args[0]),
            ]
        elif verb == "select":
            calls += [
                PlannedCall("browser_get_state", {}),
                PlannedCall("browser_select_option", {"option": args[1]}, selector=args[0]),
            ]
        elif verb == "press":
            calls += [
                PlannedCall("browser_get_state", {}),
                PlannedCall("browser_press_key", {"keys": args[1]}, selector=args[0]),
            ]
        elif verb == "go_back":
            calls.append(PlannedCall("browser_go_back", {}))
        elif verb == "answer":
            text = args[0]
            selector = text if text.startswith(("#", ".")) else None
            calls.append(PlannedCall("finish", {"message": text}, answer_selector=selector))
            answered = True
        elif verb != "noop":
            raise DemoTaskError(f"the V1 browser tool has no action for the scripted step {verb!r}")
    if not answered:
        calls.append(PlannedCall("finish", {"message": "Done."}))
    return calls


class LivePage:
    """A Playwright connection to the agent's browser, for the scripted LLM and the task's set-up.

    ``focus()`` names browser-use's current target; the page it reads is that one (else the newest).
    """

    def __init__(self, endpoint: str, focus: Callable[[], str | None]) -> None:
        self.thread = BrowserThread(endpoint)
        if self.thread.browser is None:
            raise DemoTaskError(f"cannot connect to Chromium at {endpoint}: {self.thread.error}")
        self.focus = focus

    def _page(self) -> Any:
        pages = [p for c in self.thread.browser.contexts for p in c.pages if not p.is_closed()]
        target = self.focus()
        for page in pages:
            session = page.context.new_cdp_session(page)
            try:
                if session.send("Target.getTargetInfo")["targetInfo"]["targetId"] == target:
                    return page
            finally:
                session.detach()
        return pages[-1]

    def backend_node_id(self, selector: str) -> int:
        def find() -> int:
            page = self._page()
            session = page.context.new_cdp_session(page)
            try:
                document = session.send("DOM.getDocument", {"depth": 0})
                node = session.send(
                    "DOM.querySelector", {"nodeId": document["root"]["nodeId"], "selector": selector}
                )
                if not node.get("nodeId"):
                    raise DemoTaskError(f"no element {selector!r} on {page.url}")
                described = session.send("DOM.describeNode", {"nodeId": node["nodeId"]})
                return int(described["node"]["backendNodeId"])
            finally:
                session.detach()

        return self.thread.call(find)

    def inner_text(self, selector: str) -> str:
        return self.thread.call(lambda: str(self._page().inner_text(selector, timeout=5000)).strip())

    def set_up(self, task: TaskRun) -> None:
        """What BrowserGym's WebArena task does at reset, on the browser's first tab (``TaskRun.set_up``)."""
        self.thread.call(lambda: task.set_up(self.thread.browser.contexts[0].pages[0]))

    def close(self) -> None:
        self.thread.close()


class ScriptedToolLLM(ScriptedEndpoint):
    """A local OpenAI-compatible ``/v1/chat/completions`` answering with the plan's tool calls.

    The reply to a request is ``plan[n]``, ``n`` being the number of tool results in its messages
    (so a retried request gets the same call); past the plan it is ``finish``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.plan: list[PlannedCall] = []
        self.page: LivePage | None = None

    def _arguments(self, call: PlannedCall) -> dict[str, Any]:
        arguments = dict(call.arguments)
        if call.selector is not None or call.answer_selector is not None:
            if self.page is None:
                raise DemoTaskError("the scripted LLM has no page to read")
            if call.selector is not None:
                arguments["index"] = self.page.backend_node_id(call.selector)
            if call.answer_selector is not None:
                arguments["message"] = self.page.inner_text(call.answer_selector)
        return arguments

    def answer(self, request: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, int]]:
        done = sum(1 for message in request.get("messages", []) if message.get("role") == "tool")
        call = self.plan[done] if done < len(self.plan) else PlannedCall("finish", {"message": "Done."})
        tool_call = {
            "id": f"call_{done}",
            "type": "function",
            "function": {"name": call.tool, "arguments": json.dumps(self._arguments(call))},
        }
        # A thought beside the call, as a model writes one (the session keeps it with the step).
        thought = f"Step {done + 1} of the plan: {call.tool}."
        message = {"role": "assistant", "content": thought, "tool_calls": [tool_call]}
        return message, "tool_calls", {"prompt_tokens": 100, "completion_tokens": 16, "total_tokens": 116}


# -- one episode ------------------------------------------------------------------------------------


def _reasoning_of(event: Any) -> dict[str, Any]:
    """A V1 ``ActionEvent``'s reasoning: the model's thought (and reasoning content) and its tool call."""
    from cdp_integration.capture.reasoning import text_of

    thought = "\n\n".join(
        filter(
            None, [text_of(getattr(event, "thought", None)), getattr(event, "reasoning_content", None) or ""]
        )
    )
    call = getattr(event, "tool_call", None)
    arguments = getattr(call, "arguments", None) if call is not None else None
    return {
        "source": "openhands-v1",
        "thought": thought or None,
        "tool_calls": [{"name": event.tool_name, "arguments": arguments or "", "result": None}],
    }


def _observation_text(event: Any) -> str | None:
    """What a tool gave back to the model (its text content)."""
    try:
        return str(event.observation.text)
    except Exception:
        return None


def _focus(executor_holder: list[Any]) -> Callable[[], str | None]:
    def focus() -> str | None:
        for executor in executor_holder:
            session = getattr(getattr(executor, "_server", None), "browser_session", None)
            if session is not None:
                return getattr(session, "agent_focus_target_id", None)
        return None

    return focus


@contextlib.contextmanager
def _quiet_environment() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in _QUIET_ENVIRONMENT}
    os.environ.update(_QUIET_ENVIRONMENT)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_v1_task(
    args: argparse.Namespace,
    task: TaskRun,
    llm_server: ScriptedToolLLM,
    sessions_dir: Path,
    workspace: Path,
) -> dict[str, Any]:
    """One task with an openhands-sdk agent; returns the fields of its ``output.jsonl`` line."""
    import v1_tools  # this directory's own module (imports openhands-tools)
    from openhands.sdk import LLM, Agent, Conversation, Tool
    from openhands.sdk.event import ActionEvent, MessageEvent, ObservationEvent
    from openhands.sdk.tool.builtins import FinishAction
    from pydantic import SecretStr

    v1_tools.register()
    registry = v1_tools.WebArenaBrowserToolSet.executors
    history: list[dict[str, Any]] = []
    answer: str | None = None
    error: str | None = None
    plan: list[PlannedCall] = []
    streamed = {"chunks": 0}
    if args.llm_base_url is None:
        plan = plan_calls(task.plans[args.trajectory], task.expand, task.substitute)
    logger = CDPSessionLogger(sessions_dir, instance_id=task.instance_id)
    logger.task.update(
        {
            "config": task.config,
            "task_id": task.task_id,
            "goal": task.intent,
            "site_urls": task.site_urls,
            "sdk": "v1",
        }
    )
    workspace.mkdir(parents=True, exist_ok=True)
    phases: dict[str, float] = {}
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(now - clock[0], 2)
        clock[0] = now

    def trace(what: str) -> None:
        """``CDP_V1_TRACE=1``: the agent loop's timeline on stderr (seconds since the agent started)."""
        if os.environ.get("CDP_V1_TRACE"):
            print(f"  {time.perf_counter() - clock[0]:7.2f} {what}", file=sys.stderr, flush=True)

    with ChromiumProcess() as chromium:
        lap("browser_s")
        executors = registry.setdefault(chromium.endpoint, [])  # this browser's, made by the tool set
        page = LivePage(chromium.endpoint, _focus(executors))
        try:
            stalled = threading.Event()
            watchdog = threading.Timer(SET_UP_STALL_S, lambda: (stalled.set(), chromium.stop()))
            watchdog.daemon = True
            watchdog.start()  # a stopped browser makes the pending Playwright call raise
            try:
                page.set_up(task)
            except Exception as exc:
                if stalled.is_set():
                    raise _SetUpStalled(
                        f"sign-in/start page still running after {SET_UP_STALL_S:.0f} s"
                    ) from exc
                raise
            finally:
                watchdog.cancel()
            lap("set_up_s")
            logger.attach_to_cdp(chromium.endpoint, active_target=_focus(executors))
            logger.capture_state_snapshot("reset")
            lap("attach_s")
            llm_server.plan = plan
            llm_server.page = page

            calls: dict[str, str] = {}
            reasons: dict[str, dict[str, Any]] = {}

            def on_event(event: Any) -> None:
                nonlocal answer
                if isinstance(event, ActionEvent):
                    if isinstance(event.action, FinishAction):
                        answer = event.action.message
                    arguments = event.action.model_dump(mode="json", exclude={"kind"}) if event.action else {}
                    history.append({"tool": event.tool_name, "arguments": arguments})
                    trace(f"action {event.tool_name}")
                    calls[event.tool_call_id] = f"{event.tool_name}({json.dumps(arguments, sort_keys=True)})"
                    reasons[event.tool_call_id] = _reasoning_of(event)
                elif isinstance(event, MessageEvent) and event.source in ("agent", "user"):
                    from cdp_integration.capture.reasoning import text_of

                    role = "assistant" if event.source == "agent" else "user"
                    text = text_of(getattr(event.llm_message, "content", None))
                    if text:  # the task, or what the model wrote instead of calling a tool
                        logger.note_reasoning(
                            {"source": "openhands-v1", "messages": [{"role": role, "text": text}]}
                        )
                elif isinstance(event, ObservationEvent):
                    reason = reasons.pop(event.tool_call_id, None)
                    if reason is not None:  # what the tool gave back, beside the call
                        reason["tool_calls"][0]["result"] = _observation_text(event)
                    if event.tool_name not in v1_tools.BROWSER_TOOLS:
                        if reason is not None:  # another tool's call: told with the next browser step
                            logger.note_reasoning(reason)
                        return
                    action = calls.get(event.tool_call_id, event.tool_name)
                    trace(f"observed {event.tool_name}")
                    logger.capture_state_snapshot("action", action=action, reasoning=reason)  # never raises
                    trace("captured")

            def on_token(chunk: Any) -> None:
                streamed["chunks"] += 1

            llm = LLM(
                model=args.llm_model or SCRIPTED_MODEL,
                base_url=args.llm_base_url or llm_server.base_url,
                api_key=SecretStr(args.llm_api_key or os.environ.get("LLM_API_KEY") or "scripted"),
                num_retries=2,
                retry_min_wait=1,
                retry_max_wait=4,
                timeout=120,
                usage_id="agent",
                stream=bool(getattr(args, "llm_stream", False)),
            )
            tool_config = {"cdp_url": chromium.endpoint, "headless": True}
            agent = Agent(llm=llm, tools=[Tool(name=v1_tools.TOOL_SET, params=tool_config)])
            conversation: Any = Conversation(
                agent=agent,
                workspace=str(workspace),
                callbacks=[on_event],
                token_callbacks=[on_token] if llm.stream else None,
                max_iteration_per_run=args.max_iterations,
                visualizer=None,
            )
            try:
                conversation.send_message(task.intent)
                conversation.run()
            except Exception as exc:  # the episode ends; it is still scored and saved
                error = f"{type(exc).__name__}: {exc}"
            lap("agent_s")
            probe = logger.run_evaluation_probe(task.config, answer=answer)
            lap("probe_s")
            path = logger.save_session(task.instance_id, final_answer=answer)
            lap("save_s")
            with contextlib.suppress(Exception):
                conversation.close()
        finally:
            for executor in registry.pop(chromium.endpoint, []):
                with contextlib.suppress(Exception):
                    executor.close()
            logger.detach()
            page.close()
            llm_server.page = None
    reward = probe.score if probe is not None else None
    return {
        "history": history,
        "answer": answer,
        "error": error,
        "reward": reward,
        "session": path,
        "plan": [call.tool for call in plan],
        "phases": phases,
        "metrics": {"streamed_chunks": streamed["chunks"]} if getattr(args, "llm_stream", False) else {},
    }


@contextlib.contextmanager
def _import_time_downloads_dir() -> Iterator[None]:
    """browser-use makes ``/tmp/browser-use-downloads-<id>`` for its default profile at import,
    whatever ``$TMPDIR`` says: this process's own is removed afterwards if nothing was downloaded."""
    from browser_use.browser.session import DEFAULT_BROWSER_PROFILE

    try:
        yield
    finally:
        if DEFAULT_BROWSER_PROFILE.downloads_path is not None:
            with contextlib.suppress(OSError):
                Path(DEFAULT_BROWSER_PROFILE.downloads_path).rmdir()


def metadata(args: argparse.Namespace, output_dir: Path, dataset: str) -> dict[str, Any]:
    """The run's settings (no API key), with the SDK versions this environment runs."""
    return {
        "agent_class": "openhands.sdk.Agent",
        "sdk": "v1",
        "sdk_versions": _versions(),
        "llm_config": {
            "model": args.llm_model or SCRIPTED_MODEL,
            "base_url": args.llm_base_url or "scripted",
            "stream": bool(getattr(args, "llm_stream", False)),
        },
        "max_iterations": args.max_iterations,
        "eval_output_dir": str(output_dir),
        "dataset": dataset,
        "details": {
            "trajectory": args.trajectory,
            "capture": True,
            "num_workers": int(getattr(args, "num_workers", 1) or 1),
        },
    }


@contextlib.contextmanager
def environment() -> Iterator[None]:
    """Around the whole run: browser-use and the SDK quiet and offline, browser-use's import-time
    downloads directory removed."""
    with _quiet_environment(), _import_time_downloads_dir():
        yield


@contextlib.contextmanager
def driver(args: argparse.Namespace, output_dir: Path, home: Path) -> Iterator[PlayEpisode]:
    """One worker's V1 episodes (``task_runner.Driver``): its own scripted LLM, a Chromium per task."""
    sessions_dir = output_dir / "sessions"
    with ScriptedToolLLM() as llm_server:

        def play(task: TaskRun, number: int) -> Episode:
            workspace = home / f"workspace-{number}"
            for attempt in range(1, SET_UP_ATTEMPTS + 1):
                try:
                    result = run_v1_task(args, task, llm_server, sessions_dir, workspace)
                    break
                except _SetUpStalled as exc:
                    if attempt == SET_UP_ATTEMPTS:
                        raise DemoTaskError(f"{task.instance_id}: {exc}, {attempt} times") from None
                    print(f"{task.instance_id}: {exc}; again with a new browser", file=sys.stderr)
            reward = result["reward"]
            return Episode(
                instruction=task.intent,
                plan=result["plan"],
                history=result["history"],
                metrics=result["metrics"],
                error=result["error"],
                rewards=[reward] if reward is not None else None,
                session=result["session"],
                result={"answer": result["answer"]},
                timing={"phases": result["phases"]},
            )

        yield play


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("openhands-sdk", "openhands-tools", "browser-use"):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found
