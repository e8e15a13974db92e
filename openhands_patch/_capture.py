"""What the hooks do in a process with capture on: set-up, one logger per BrowserGym env, demo ids.

Imported only once BrowserGym loads in a process where ``WEBARENA_CDP_LOGGING`` is true.

Session life cycle, per ``browsergym.core.env.BrowserEnv`` instance (in OpenHands: the env its
browser process makes with ``gym.make``):

1. ``__init__`` attaches a ``CDPSessionLogger`` (``attach_to_browsergym_env``), which wraps this
   instance's ``reset`` and ``step`` and the task's ``validate``.
2. ``reset``: the instance id is fixed (``$WEBARENA_CDP_INSTANCE_ID``, else the env id plus a
   timestamp and the process id), then the reset snapshot is captured with the task's WebArena
   config and site URLs.
3. Every ``step``: BrowserGym runs the action, then ``validate()`` (the official evaluator for
   WebArena tasks, recorded call by call), then the logger captures the snapshot with that reward.
4. ``close`` (OpenHands' ``SHUTDOWN``) saves the session before BrowserGym closes the browser. If the
   final state was never validated (no step after reset), ``save_session`` first runs the logger's
   end-of-episode probe: the official evaluator on the live final state, every call recorded.
   If the process ends without ``close`` (OpenHands' browser loop stopped by a signal), a
   multiprocessing finalizer saves it on the way out.

OpenHands V0's agent thinks in its own process; its thought travels with the action: the runtime's
``browse`` keeps a ``BrowseInteractiveAction``'s ``thought`` on its ``BrowserEnv``, whose ``step``
sends it as a first comment line of the action string (``THOUGHT_MARK`` and the thought as JSON);
in the browser process the env's ``step`` takes that line off before BrowserGym sees the action and
notes the thought for the step the action makes. (Without capture in the browser process BrowserGym's
action parser ignores the comment.)

In an experiment loop (AgentLab's ``agentlab.experiments.loop``, BrowserGym's older
``browsergym.experiments.loop``) the agent's ``agent_info`` of each action (its ``think``, its chat
messages, its extra info) is noted for the step that action makes: ``StepInfo.from_action`` is wrapped
to hand it to the open env's logger (``note_agent_info``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

from openhands_patch import enabled
from openhands_patch._hooks import report

__all__ = [
    "THOUGHT_MARK",
    "instance_id_for",
    "note_agent_info",
    "patch_browser_env",
    "patch_experiment_loop",
    "patch_openhands_browse",
    "patch_openhands_browser_env",
    "prepare_environment",
    "register_demo_tasks",
    "split_thought",
    "with_thought",
]

_CAPTURE_ATTRIBUTE = "_webarena_cdp_capture"
_THOUGHT_ATTRIBUTE = "_webarena_cdp_thought"
THOUGHT_MARK = "# webarena-cdp thought: "
"""The first line of an action string that carries the agent's thought to the browser process."""
_MAX_THOUGHT = 16_000
"""Characters of a thought sent along (the logger keeps at most 4,000 of them)."""
_PATCHED_MARK = "_webarena_cdp_patched"
_WRAPPED = ("reset", "step")
_EVALUATORS_MODULE = "webarena.evaluation_harness.evaluators"
_DEMO_NAME_PREFIX = "webarena_demo."
"""As ``cdp_integration.demo.tasks.DEMO_ENV_PREFIX`` without ``browsergym/`` (not imported here: see
``register_demo_tasks``)."""


def prepare_environment() -> None:
    """System Chromium, punkt_tab and WebArena site placeholders for this process and its children.

    A machine without them still runs (Playwright may have its own browser): the problem is reported.
    """
    from cdp_integration import environment
    from cdp_integration.errors import CDPIntegrationError

    try:
        environment.prepare()
    except CDPIntegrationError as exc:
        report("environment.prepare() failed; BrowserGym may not find a browser", exc)
        return
    nltk_data = sys.modules.get("nltk.data")  # nltk read NLTK_DATA at import: tell it too
    if nltk_data is not None:
        for path in reversed(os.environ["NLTK_DATA"].split(os.pathsep)):
            if path and path not in nltk_data.path:
                nltk_data.path.insert(0, path)


def register_demo_tasks() -> None:
    """``browsergym/webarena_demo.<task_id>`` for every bundled demo task not registered yet.

    The task class is imported when an env is made, not now: ``cdp_integration.demo.tasks`` imports
    ``browsergym.webarena`` itself, so it may be what is importing it at this moment (a script's
    top-level import, which a spawned child runs again).
    """
    import gymnasium as gym
    from browsergym.core.registration import register_task

    tasks = json.loads(resources.files("cdp_integration.demo").joinpath("tasks.json").read_text())
    for entry in tasks:
        task_id = int(entry["config"]["task_id"])
        name = f"{_DEMO_NAME_PREFIX}{task_id}"
        if f"browsergym/{name}" not in gym.registry:
            register_task(name, functools.partial(_demo_task, task_id))


def _demo_task(task_id: int, **kwargs: Any) -> Any:
    """The demo task ``task_id`` as BrowserGym makes it (``seed``, ``base_url``, ... in ``kwargs``)."""
    from cdp_integration.demo.tasks import DemoWebArenaTask, load_demo_tasks

    config = next(task.config for task in load_demo_tasks() if task.task_id == task_id)
    return DemoWebArenaTask(config=config, **kwargs)


def instance_id_for(env: Any) -> str:
    """``$WEBARENA_CDP_INSTANCE_ID``, else ``<env id>-<YYYYmmdd-HHMMSS>-<pid>``."""
    configured = os.environ.get("WEBARENA_CDP_INSTANCE_ID")
    if configured:
        return configured
    env_id = getattr(getattr(env, "spec", None), "id", None) or "browsergym"
    name = str(env_id).removeprefix("browsergym/").replace("/", "_")
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


_open_captures: list[_Capture] = []
"""The captures of this process's open envs, the newest last (an experiment loop runs one at a time)."""


def _field(info: Any, name: str) -> Any:
    return info.get(name) if isinstance(info, dict) else getattr(info, name, None)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI-style parts
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def note_agent_info(agent_info: Any) -> None:
    """Note an experiment loop's ``agent_info`` (``think``, ``chat_messages``, ``extra_info``) with the
    newest open env's logger, for the step the action makes. Never raises."""
    try:
        if not _open_captures or agent_info is None:
            return
        messages = []
        chat = _field(agent_info, "chat_messages")
        chat = getattr(chat, "messages", chat)  # AgentLab's Discussion holds its messages
        for message in list(chat or [])[-20:]:
            role = _field(message, "role")
            if role is not None:
                messages.append({"role": str(role), "text": _message_text(_field(message, "content"))})
        # the logger's bounded_reasoning turns values into text (JSON for structures) and cuts them
        _open_captures[-1].logger.note_reasoning(
            {
                "source": "agentlab",
                "thought": _field(agent_info, "think"),
                "messages": messages,
                "notes": dict(_field(agent_info, "extra_info") or {}),
            }
        )
    except Exception as exc:
        report("noting the agent's agent_info failed", exc)


def with_thought(action: str, thought: str) -> str:
    """``action`` with ``thought`` on a first comment line (JSON: one line whatever it holds)."""
    return f"{THOUGHT_MARK}{json.dumps(thought[:_MAX_THOUGHT])}\n{action}"


def split_thought(action: Any) -> tuple[str | None, Any]:
    """(the thought ``with_thought`` put on ``action``, the action without it); (None, ``action``)
    for any other action."""
    if not isinstance(action, str) or not action.startswith(THOUGHT_MARK):
        return None, action
    line, _, rest = action.partition("\n")
    try:
        thought = json.loads(line[len(THOUGHT_MARK) :])
    except ValueError:
        return None, rest
    return (thought if isinstance(thought, str) else None), rest


def patch_openhands_browse(package: Any) -> None:
    """Wrap ``browse`` of ``openhands.runtime.browser`` (the package, whose name the action server
    imports, and its ``utils``) so an action's thought is kept on the ``BrowserEnv`` it runs in."""
    utils = sys.modules.get(f"{package.__name__}.utils")
    original = getattr(package, "browse", None)
    if original is None or getattr(original, _PATCHED_MARK, False):
        return

    @functools.wraps(original)
    async def browse(action: Any, browser: Any, *args: Any, **kwargs: Any) -> Any:
        thought = getattr(action, "thought", None)
        if isinstance(thought, str) and thought.strip() and browser is not None and enabled():
            with contextlib.suppress(Exception):
                browser.__dict__[_THOUGHT_ATTRIBUTE] = thought
        return await original(action, browser, *args, **kwargs)

    setattr(browse, _PATCHED_MARK, True)
    package.browse = browse
    if utils is not None and getattr(utils, "browse", None) is original:
        utils.browse = browse  # type: ignore[attr-defined]


def patch_openhands_browser_env(cls: type) -> None:
    """Wrap OpenHands' ``BrowserEnv.step`` (the agent side of its pipe) so the kept thought goes
    with the action (``with_thought``); idempotent."""
    if cls.__dict__.get(_PATCHED_MARK):
        return
    original: Callable[..., Any] = cls.step  # type: ignore[attr-defined]

    @functools.wraps(original)
    def step(self: Any, action_str: Any, *args: Any, **kwargs: Any) -> Any:
        thought = self.__dict__.pop(_THOUGHT_ATTRIBUTE, None)
        if isinstance(thought, str) and isinstance(action_str, str):
            action_str = with_thought(action_str, thought)
        return original(self, action_str, *args, **kwargs)

    cls.step = step  # type: ignore[attr-defined]
    setattr(cls, _PATCHED_MARK, True)


def patch_experiment_loop(module: Any) -> None:
    """Wrap ``module.StepInfo.from_action`` (an experiment loop's) so each action's ``agent_info`` is
    noted for its step; idempotent."""
    cls = getattr(module, "StepInfo", None)
    if cls is None or cls.__dict__.get(_PATCHED_MARK):
        return
    original: Callable[..., Any] = cls.from_action

    @functools.wraps(original)
    def from_action(self: Any, agent: Any, *args: Any, **kwargs: Any) -> Any:
        action = original(self, agent, *args, **kwargs)
        note_agent_info(getattr(self, "agent_info", None))
        return action

    cls.from_action = from_action
    setattr(cls, _PATCHED_MARK, True)


class _Capture:
    """One env's logger; ``save`` runs once, whether from ``close`` or at process exit.

    The logger wraps the env's ``reset`` and ``step``; around its wrappers sits a guard: an error of
    the env itself propagates as before, an error of the capture after it is reported and the env's
    result returned, so a capture bug can never end the browser process (OpenHands' parent would then
    wait 200 s per start attempt).
    """

    def __init__(self, env: Any) -> None:
        from cdp_integration.capture.logger import CDPSessionLogger

        self.logger = CDPSessionLogger()
        self._env = env
        self._results: dict[str, Any] = {}
        for name in _WRAPPED:
            setattr(env, name, self._remembering(name, getattr(env, name)))
        self.logger.attach_to_browsergym_env(env)
        for name in _WRAPPED:
            setattr(env, name, self._guarded(name, getattr(env, name)))
        env.step = self._thinking(env.step)
        self._open = True
        _open_captures.append(self)
        multiprocessing.util.Finalize(self, self.save, exitpriority=100)

    def _thinking(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """Take the agent's thought (``with_thought``) off the action and note it for its step."""

        def call(action: Any, *args: Any, **kwargs: Any) -> Any:
            thought, action = split_thought(action)
            if thought:
                self.logger.note_reasoning({"source": "openhands", "thought": thought})
            return step(action, *args, **kwargs)

        return call

    def _remembering(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self._results[name] = result = method(*args, **kwargs)
            return result

        return call

    def _guarded(self, name: str, capturing: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "reset" and self.logger.instance_id is None:
                self.logger.instance_id = instance_id_for(self._env)
            self._results.pop(name, None)
            try:
                return capturing(*args, **kwargs)
            except Exception as exc:
                if name not in self._results:
                    raise  # the env's own error
                report(f"capture after {name} failed, the episode goes on", exc)
                return self._results.pop(name)

        return call

    def save(self) -> None:
        if not self._open:
            return
        self._open = False
        with contextlib.suppress(ValueError):
            _open_captures.remove(self)
        try:
            if self.logger.steps_captured:
                with _probe_without_fixed_waits():
                    path = self.logger.save_session()
                print(f"openhands_patch: session saved to {path}", file=sys.stderr)
        except Exception as exc:
            report("saving the session failed", exc)
        finally:
            self.logger.detach()


@contextlib.contextmanager
def _probe_without_fixed_waits() -> Iterator[None]:
    """The end probe (when it runs) without the evaluator's 3 s sleeps: OpenHands gives the browser
    process 5 s to exit after ``SHUTDOWN`` before terminating it. Live ``validate()`` calls keep them."""
    if _EVALUATORS_MODULE not in sys.modules:
        yield
        return
    from cdp_integration.webarena import skip_evaluator_sleep

    with skip_evaluator_sleep():
        yield


def patch_browser_env(cls: type) -> None:
    """Capture in every instance of BrowserGym's ``BrowserEnv`` (``cls``) created while
    ``WEBARENA_CDP_LOGGING`` is true; idempotent."""
    if cls.__dict__.get(_PATCHED_MARK):
        return
    original_init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    original_close: Callable[[Any], None] = cls.close  # type: ignore[attr-defined]

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if _CAPTURE_ATTRIBUTE in self.__dict__ or not enabled():  # read per env: a process may pause it
            return
        try:
            self.__dict__[_CAPTURE_ATTRIBUTE] = _Capture(self)
        except Exception as exc:
            report("attaching the logger failed, no capture for this env", exc)

    @functools.wraps(original_close)
    def close(self: Any) -> None:
        capture = self.__dict__.get(_CAPTURE_ATTRIBUTE)
        if capture is not None:
            capture.save()
        original_close(self)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.close = close  # type: ignore[attr-defined]
    setattr(cls, _PATCHED_MARK, True)
