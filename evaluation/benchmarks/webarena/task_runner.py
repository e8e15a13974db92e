"""One task contract and one run loop for every agent driver: what a WebArena task is, whoever drives it.

A driver (``sdk_v0.py``: OpenHands V0's BrowserEnv; ``sdk_v1.py``: OpenHands V1's SDK) gets a
``TaskRun`` and needs nothing else from the dataset: the config with the site URLs filled in (what
the official evaluator reads), the site URLs the session records for offline scoring, the reset
before the task, ``set_up(page)``: what BrowserGym's ``WebArenaTask.setup`` does on a page of the
driver's browser (sign in to every site of the task with the same forms ``ui_login`` drives, the
geolocation, the start page(s)), the scripted trajectories, and ``rehearse``: a trajectory as
BrowserGym action strings (V0's agent and direct mode play those). Demo tasks and WebArena's real
task ids are the two kinds (``demo_task_run``, ``webarena_task_run``).

``run_tasks`` is the one loop both SDKs run: tasks already in ``output.jsonl`` skipped, per task the
reset, the driver's episode (``PlayEpisode``) and one ``output.jsonl`` line, ``metadata.json``, and
``--num-workers N`` through ``SiteScheduler`` (one driver per worker). ``private_home`` is the run's
own ``HOME``/``TMPDIR``/tmux, which OpenHands' LocalRuntime and the V1 SDK write into.
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import requests

from cdp_integration.demo.tasks import (
    DemoTask,
    DemoWebArenaInstance,
    instantiate_config,
    run_demo_task,
    site_urls,
)
from cdp_integration.deployment import WebArenaTaskSpec
from cdp_integration.errors import redact_credentials
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.store import SESSION_SUFFIX
from cdp_integration.session.untrusted import iter_file_lines, open_input, open_output
from cdp_integration.webarena import substitute_placeholders

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scheduler import SiteScheduler  # this directory's own module

__all__ = [
    "SCRIPTED_MODEL",
    "Episode",
    "PlayEpisode",
    "ScriptedEndpoint",
    "Steps",
    "TaskRun",
    "TaskSource",
    "demo_task_run",
    "private_home",
    "run_tasks",
    "webarena_task_run",
]

Steps = tuple[tuple[str, ...], ...]
SCRIPTED_MODEL = "openai/scripted-demo-agent"
"""The model name both SDKs' scripted LLMs answer to when no ``--llm-model`` is given."""


@dataclass
class TaskRun:
    """One task as a driver runs it; see the module docstring."""

    task_id: int
    instance_id: str
    env_id: str
    config: dict[str, Any]
    """The task's config with URL placeholders replaced (as BrowserGym instantiates test.raw.json)."""
    site_urls: dict[str, str]
    """``{"SHOPPING": url, ..., "HOMEPAGE": url}``: the session records them for offline scoring."""
    plans: dict[str, Steps]
    """Scripted trajectories by name (``success``/``failure``), when the dataset has them."""
    sign_in: Callable[[str, Any], None]
    """``sign_in(site, page)``: sign in to one site from a Playwright page (a tab of its own)."""
    reset: Callable[[], float | None] = field(default=lambda: None)
    """Reset what the task changes; the seconds it took, or None when nothing ran."""
    changes_sites: bool = True
    """Whether the task changes its sites (or is reset before): it then runs alone on them."""
    rehearse: Callable[[str], list[str]] | None = None
    """``rehearse(trajectory)``: the scripted trajectory as BrowserGym action strings, element ids
    (bids) included, from one play in plain BrowserGym marking elements as OpenHands' ``BrowserEnv``
    does (``tags_to_mark="all"``). It changes the sites as the run will: reset again before the run."""

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(self.config.get("sites") or ())

    @property
    def servers(self) -> tuple[str, ...]:
        """The servers behind the task's sites (scheme, host and port of each site's URL; the site's
        name where its URL is unknown): what ``--num-workers`` keeps apart. Two site names can be one
        server: the demo's shopping and shopping_admin are one shop, and one task's reset would wipe
        what another is doing there."""
        found = []
        for site in self.sites:
            url = self.site_urls.get(str(site).upper())
            parts = urlsplit(url) if url else None
            key = f"{parts.scheme}://{parts.netloc}" if parts and parts.netloc else str(site)
            if key not in found:
                found.append(key)
        return tuple(found)

    @property
    def intent(self) -> str:
        return str(self.config["intent"])

    def expand(self, text: str) -> str:
        """A scripted step's URL with ``__SITE__`` placeholders (or a bare path: the first site) filled in."""
        if text.startswith("/"):
            return self.site_urls[str(self.config["sites"][0]).upper()] + text
        return self.substitute(text)

    def substitute(self, text: str) -> str:
        """A scripted step's text with ``__SITE__`` placeholders filled in (a typed URL, an answer)."""
        return str(substitute_placeholders(text, self.site_urls, where="the scripted step"))

    def set_up(self, page: Any) -> None:
        """BrowserGym's ``WebArenaTask.setup`` on ``page``: sign-in per site, geolocation, start page(s)."""
        for site in self.config.get("sites") or ():
            self.sign_in(site, page)
        if self.config.get("geolocation"):
            page.context.set_geolocation(self.config["geolocation"])
        if self.config.get("start_url"):
            urls = str(self.config["start_url"]).split(" |AND| ")
            for number, url in enumerate(urls):
                page.goto(url)
                if number < len(urls) - 1:
                    page = page.context.new_page()


def _rehearse_demo(task: DemoTask, base_url: str, trajectory: str) -> list[str]:
    """``TaskRun.rehearse`` of a demo task: played in BrowserGym's ``browsergym/webarena_demo.<id>``,
    which resets the shop first, so the ids are those the run will see."""
    actions: list[str] = []

    def record(env: Any) -> None:
        env.unwrapped.tags_to_mark = "all"
        step = env.step

        def recording_step(action: str, *args: Any, **kwargs: Any) -> Any:
            actions.append(action)
            return step(action, *args, **kwargs)

        env.step = recording_step

    run_demo_task(task, trajectory, base_url, on_env=record)  # type: ignore[arg-type]
    return actions


def demo_task_run(task: DemoTask, base_url: str) -> TaskRun:
    """A bundled demo task on the demo shop at ``base_url``; its reset is the shop's ``/init``."""
    instance = DemoWebArenaInstance(base_url)

    def reset() -> float | None:
        requests.post(f"{base_url}/init", timeout=10).raise_for_status()
        return None

    config = instantiate_config(task.config, base_url)
    return TaskRun(
        task_id=task.task_id,
        instance_id=task.env_id.removeprefix("browsergym/"),
        env_id=task.env_id,
        config=config,
        site_urls=site_urls(base_url),
        plans={"success": task.success, "failure": task.failure},
        # the demo signs in only where the config asks (its other sites are aliases of the shop)
        sign_in=lambda site, page: instance.ui_login(site, page) if config.get("require_login") else None,
        reset=reset,
        changes_sites=True,  # one shop, reset before every task
        rehearse=functools.partial(_rehearse_demo, task, base_url),
    )


def webarena_task_run(
    task: WebArenaTaskSpec,
    urls: dict[str, str],
    plans: dict[str, Steps],
    reset: Callable[[], float | None],
    changes_sites: bool,
    rehearse: Callable[[str], list[str]] | None = None,
) -> TaskRun:
    """One of WebArena's 812 tasks on the deployment at ``urls`` (``{"SHOPPING": url, ...}``).

    Sign-in is BrowserGym's own ``WebArenaInstance.ui_login`` (the sites' real login forms, WebArena's
    accounts), made when first needed: its URLs are read from the ``WA_*`` variables.
    """
    instances: list[Any] = []

    def sign_in(site: str, page: Any) -> None:
        if not instances:
            from browsergym.webarena.instance import WebArenaInstance

            instances.append(WebArenaInstance())
        instances[0].ui_login(site=site, page=page)

    return TaskRun(
        task_id=task.task_id,
        instance_id=task.env_id.removeprefix("browsergym/"),
        env_id=task.env_id,
        config=substitute_placeholders(task.config, urls),
        site_urls=dict(urls),
        plans=plans,
        sign_in=sign_in,
        reset=reset,
        changes_sites=changes_sites,
        rehearse=rehearse,
    )


# -- the scripted LLM -------------------------------------------------------------------------------


class ScriptedEndpoint:
    """A local OpenAI-compatible ``/v1/chat/completions`` for a driver's scripted LLM (the agent's
    client reaches it through ``base_url``); a subclass's ``answer(request)`` makes the reply.

    An error while answering is an API error the agent sees (status 400); the run goes on to its end.
    """

    def __init__(self) -> None:
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def answer(self, request: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, int]]:
        """(the assistant message, its ``finish_reason``, its ``usage``) for ``request``."""
        raise NotImplementedError

    def completion(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests += 1
        message, finish_reason, usage = self.answer(request)
        return {
            "id": f"scripted-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", SCRIPTED_MODEL),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": usage,
        }

    def __enter__(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body, status = owner.completion(json.loads(self.rfile.read(length) or b"{}")), 200
                except Exception as exc:  # the agent sees an API error, the run goes on to its end
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
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=type(self).__name__, daemon=True
        )
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
            raise RuntimeError(f"{type(self).__name__} is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"


# -- the run loop -----------------------------------------------------------------------------------


@dataclass
class Episode:
    """What a driver's episode gives the task's ``output.jsonl`` line."""

    instruction: str | None
    plan: list[Any]
    """What the scripted LLM played (V0: BrowserGym action strings; V1: tool names); empty with a model."""
    history: list[dict[str, Any]]
    metrics: dict[str, Any]
    error: str | None
    rewards: list[float] | None
    """The live scores (V0: per step, as BrowserGym validated; V1: the final probe's); ``reward`` is
    their maximum, as OpenHands' own run_infer reports it."""
    session: Path | None
    result: dict[str, Any] = field(default_factory=dict)
    """More ``test_result`` fields of this driver (V1: the agent's ``answer``)."""
    timing: dict[str, Any] = field(default_factory=dict)
    """More ``metadata`` fields of this line (``phases``: where the episode's time went)."""
    reset_s: float | None = None
    """Seconds of a reset the episode ran itself (V0 resets again after its rehearsal)."""

    def to_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Episode:
        session = data.get("session")
        return cls(**(data | {"session": Path(session) if session else None}))


PlayEpisode = Callable[[TaskRun, int], Episode]
"""``play(task, number)``: one episode of ``task``, its sites already reset; ``number`` is the task's
place in the run (its workspace's name)."""

TaskSource = Callable[[], contextlib.AbstractContextManager[list[TaskRun]]]
"""Enters the dataset's sites (the demo shop, or nothing for a deployment) and yields its tasks."""

Driver = Callable[[Path], contextlib.AbstractContextManager[PlayEpisode]]
"""``driver(home)``: one worker's episode player (its scripted LLM, its browser...), ``home`` the run's
private directory (``private_home``)."""


def _hidden(value: Any) -> Any:
    """``value`` with every string's URL credentials hidden (``errors.redact_credentials``)."""
    if isinstance(value, str):
        return redact_credentials(value)
    if isinstance(value, dict):
        return {key: _hidden(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_hidden(item) for item in value]
    return value


def write_metadata(output_dir: Path, metadata: dict[str, Any]) -> None:
    """``metadata.json``, never through a symlink planted there, URL credentials hidden (it is shared
    with the run)."""
    with open_output(output_dir / "metadata.json") as out:
        out.write((json.dumps(_hidden(metadata), indent=2, default=str) + "\n").encode())


def append_line(output: Path, line: dict[str, Any]) -> None:
    """One ``output.jsonl`` line, appended without following a symlink, URL credentials hidden."""
    with open_output(output, append=True) as out:
        out.write((json.dumps(_hidden(line), default=str) + "\n").encode())


def done_instances(output: Path) -> set[str]:
    """The instance ids ``output.jsonl`` has a line for (a resumed run skips them): read through the
    hardened reader (a symlink planted there is refused, never followed; a line longer than a session
    record is refused before it is held; a line that is not a JSON object with a string id is skipped)."""
    done: set[str] = set()
    if not output.exists() and not output.is_symlink():
        return done
    fd = open_input(output, root=output.parent, what="output.jsonl")
    with os.fdopen(fd, "rb") as file:
        limit = SessionLimits.from_env().max_record_bytes
        for line in iter_file_lines(file, max_line=limit, source=str(output)):
            with contextlib.suppress(ValueError, KeyError, TypeError, RecursionError):
                instance = json.loads(line)["instance_id"]
                if isinstance(instance, str):
                    done.add(instance)
    return done


def run_tasks(
    output_dir: Path,
    tasks: TaskSource,
    driver: Driver,
    *,
    metadata: dict[str, Any],
    workers: int = 1,
    environment: contextlib.AbstractContextManager[Any] | None = None,
    after_line: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """Every task not yet in ``<output_dir>/output.jsonl``, one line each; returns its path.

    ``metadata`` is written to ``metadata.json`` and into every line; ``environment`` is entered
    around the run (after ``private_home``, before the tasks' sites). With ``workers`` > 1 the tasks
    are handed out by ``SiteScheduler`` to that many threads, each with a driver of its own; with one,
    the episodes run in the calling thread. The first error stops handing out tasks and is raised
    once the running ones end (a failed reset: the tasks before it have their lines). ``after_line(line)``
    runs after each line is written (uploads it where the output is a storage URL)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    output = output_dir / "output.jsonl"
    done = done_instances(output)
    write_metadata(output_dir, metadata)
    with (
        private_home() as home,
        environment if environment is not None else contextlib.nullcontext(),
        tasks() as task_runs,
    ):
        numbers = {task.instance_id: number for number, task in enumerate(task_runs)}
        pending = [task for task in task_runs if task.instance_id not in done]
        scheduler = SiteScheduler(pending, sites=lambda t: t.servers, exclusive=lambda t: t.changes_sites)
        write = threading.Lock()
        failures: list[BaseException] = []

        def worker() -> None:
            with driver(home) as play:
                while not failures and (task := scheduler.next()) is not None:
                    try:
                        line = _run_one(task, play, numbers[task.instance_id], metadata, output_dir)
                    except BaseException as exc:  # re-raised below, once the other workers end
                        failures.append(exc)
                        return
                    finally:
                        scheduler.done(task)
                    with write:
                        append_line(output, line)
                        if after_line is not None:
                            after_line(line)

        if workers == 1:
            worker()
        else:
            threads = [threading.Thread(target=worker, name=f"worker-{n}") for n in range(workers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if failures:
            raise failures[0]
    return output


def _run_one(
    task: TaskRun, play: PlayEpisode, number: int, metadata: dict[str, Any], output_dir: Path
) -> dict[str, Any]:
    """Reset, play and score one task; its ``output.jsonl`` line."""
    started = time.perf_counter()
    reset_s = task.reset()
    (output_dir / "sessions" / f"{task.instance_id}{SESSION_SUFFIX}").unlink(missing_ok=True)
    episode = play(task, number)
    if episode.reset_s is not None:
        reset_s = round((reset_s or 0.0) + episode.reset_s, 1)
    duration = round(time.perf_counter() - started, 1)
    reward = max(episode.rewards) if episode.rewards else None
    session = episode.session if episode.session is not None and episode.session.exists() else None
    phases = f" {episode.timing['phases']}" if episode.timing.get("phases") else ""
    saved = f", session {session}" if session is not None else ", no session"
    print(f"{task.instance_id}: reward {reward} in {duration} s{phases}{saved}", file=sys.stderr)
    return {
        "instance_id": task.instance_id,
        "instruction": episode.instruction,
        "instance": {"task_id": task.task_id, "env_id": task.env_id, "plan": episode.plan},
        "history": episode.history,
        "metrics": episode.metrics,
        "error": episode.error,
        "test_result": {"reward": reward, "rewards": episode.rewards}
        | episode.result
        | {"session": session.relative_to(output_dir).as_posix() if session is not None else None},
        "metadata": metadata | {"duration_s": duration, "reset_s": reset_s} | episode.timing,
    }


_SHORT_TMP = 24
"""Longest temp dir the private one is made in; beyond, ``/tmp``: Chromium's singleton socket and
tmux's socket under the private one must fit in 107 bytes."""
SERVER_URL_FILE = Path("/tmp/oh-server-url")
"""Written by OpenHands' action-execution server whatever ``$TMPDIR`` says."""


@contextlib.contextmanager
def private_home() -> Iterator[Path]:
    """A private ``HOME``, ``TMUX_TMPDIR`` and ``TMPDIR`` for the run, removed afterwards; ``USER``
    names the current account and ``SU_TO_USER=false``; ``/tmp/oh-server-url`` restored.

    OpenHands' LocalRuntime writes into ``HOME`` and ``TMPDIR``, runs ``su`` and ``useradd`` without
    ``USER``, and uses the user's tmux server (this directory's README); the V1 SDK and browser-use
    write below ``HOME``. Entered before OpenHands is imported: some of its modules read ``HOME`` at
    import."""
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
