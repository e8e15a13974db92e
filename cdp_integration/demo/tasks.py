"""WebArena-format tasks on the demo shop, run live in BrowserGym and scored by the official evaluator.

``tasks.json`` holds entries ``{"config": <task config in libwebarena's test.raw.json schema, with
__SHOPPING__ / __SHOPPING_ADMIN__ placeholders>, "success": [steps], "failure": [steps], "note": str}``;
steps are `agent` steps. Each task is registered as the gym id ``browsergym/webarena_demo.<task_id>``
("webarena" in the id: OpenHands' BrowserEnv only runs such ids in eval mode), whose task class is
BrowserGym's own ``GenericWebArenaTask`` with three differences: the config comes from the demo file
instead of ``test.raw.json``, the site URLs are the demo site's, and the shop is reset at set-up. Its
``validate()`` (and so the official evaluator) runs unmodified.

The demo site's base URL reaches the task either from ``gym.make(..., task_kwargs={"base_url": ...})``
or, in a process that only inherited the environment (OpenHands' browser child), from ``WA_SHOPPING``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast

from cdp_integration import environment
from cdp_integration.errors import DemoTaskError

environment.make_punkt_tab_findable()  # import browsergym.webarena downloads it unless found

import playwright.sync_api  # noqa: E402
import requests  # noqa: E402
from browsergym.core.task import AbstractBrowserTask  # noqa: E402
from browsergym.webarena.instance import WebArenaInstance  # noqa: E402
from browsergym.webarena.task import GenericWebArenaTask  # noqa: E402

from cdp_integration.demo.agent import VERBS, patient_action_mapping, play_step  # noqa: E402
from cdp_integration.webarena import point_evaluator_globals, substitute_placeholders  # noqa: E402

__all__ = [
    "ADMIN_PATH",
    "DEMO_ENV_PREFIX",
    "DemoRun",
    "DemoTask",
    "DemoTaskError",
    "DemoWebArenaInstance",
    "DemoWebArenaTask",
    "configure_demo_environment",
    "instantiate_config",
    "load_demo_tasks",
    "register_demo_tasks",
    "run_demo_task",
    "site_urls",
]

DEMO_ENV_PREFIX = "browsergym/webarena_demo."
"""Gym ids are ``browsergym/webarena_demo.<task_id>``."""

ADMIN_PATH = "/admin"
"""Where the demo shop's admin lives: ``SHOPPING_ADMIN`` is the base URL plus this."""

_BROWSERGYM_SITES = ("GITLAB", "REDDIT", "SHOPPING", "SHOPPING_ADMIN", "WIKIPEDIA", "MAP")
"""The sites BrowserGym's ``WebArenaInstance.urls`` holds (every WebArena site but the homepage)."""

CONFIG_KEYS = (
    "sites",
    "task_id",
    "require_login",
    "storage_state",
    "start_url",
    "geolocation",
    "intent_template",
    "instantiation_dict",
    "intent",
    "require_reset",
    "eval",
    "intent_template_id",
)
EVAL_KEYS = ("eval_types", "reference_answers", "reference_url", "program_html")
EVAL_TYPES = frozenset({"string_match", "url_match", "program_html"})


@dataclass(frozen=True)
class DemoTask:
    """One WebArena-format task with a scripted successful and a scripted failing trajectory."""

    task_id: int
    config: dict[str, Any]
    success: tuple[tuple[str, ...], ...]
    failure: tuple[tuple[str, ...], ...]
    note: str = ""

    @property
    def env_id(self) -> str:
        return f"{DEMO_ENV_PREFIX}{self.task_id}"

    @property
    def intent_template_id(self) -> int:
        return int(self.config["intent_template_id"])


def _steps(raw: object, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(raw, list) or not raw:
        raise DemoTaskError(f"{where}: expected a non-empty list of steps")
    steps = []
    for i, step in enumerate(raw):
        if not (isinstance(step, list) and step and all(isinstance(part, str) for part in step)):
            raise DemoTaskError(f"{where}[{i}]: a step is a list of strings, got {step!r}")
        if step[0] not in VERBS:
            raise DemoTaskError(f"{where}[{i}]: unknown verb {step[0]!r} (known: {', '.join(sorted(VERBS))})")
        steps.append(tuple(step))
    return tuple(steps)


def _task(entry: object, index: int) -> DemoTask:
    where = f"task #{index}"
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        raise DemoTaskError(f"{where}: expected an object with a 'config' object")
    config = entry["config"]
    if isinstance(config.get("task_id"), int):
        where = f"task {config['task_id']}"
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise DemoTaskError(f"{where}: config lacks {', '.join(missing)}")
    if not isinstance(config["task_id"], int) or not isinstance(config["intent_template_id"], int):
        raise DemoTaskError(f"{where}: task_id and intent_template_id must be integers")
    evaluation = config["eval"]
    if not isinstance(evaluation, dict) or any(key not in evaluation for key in EVAL_KEYS):
        raise DemoTaskError(f"{where}: eval must be an object with {', '.join(EVAL_KEYS)}")
    types = evaluation["eval_types"]
    if not isinstance(types, list) or not types or not set(types) <= EVAL_TYPES:
        raise DemoTaskError(
            f"{where}: eval_types must be a non-empty list of {', '.join(sorted(EVAL_TYPES))}"
        )
    if not isinstance(config["sites"], list) or not all(
        s in ("shopping", "shopping_admin") for s in config["sites"]
    ):
        raise DemoTaskError(f"{where}: the demo site serves only the sites 'shopping' and 'shopping_admin'")
    note = entry.get("note", "")
    if not isinstance(note, str):
        raise DemoTaskError(f"{where}: note must be a string")
    return DemoTask(
        task_id=config["task_id"],
        config=config,
        success=_steps(entry.get("success"), f"{where} success"),
        failure=_steps(entry.get("failure"), f"{where} failure"),
        note=note,
    )


def load_demo_tasks(path: Path | None = None) -> list[DemoTask]:
    """The bundled demo tasks, or those of a file in the same format; DemoTaskError when malformed."""
    try:
        text = path.read_text() if path else resources.files(__package__).joinpath("tasks.json").read_text()
    except OSError as exc:
        raise DemoTaskError(f"cannot read demo tasks from {path}: {exc}") from exc
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise DemoTaskError(f"{path or 'tasks.json'} is not JSON: {exc}") from exc
    if not isinstance(entries, list):
        raise DemoTaskError(f"{path or 'tasks.json'}: expected a list of tasks")
    tasks = [_task(entry, i) for i, entry in enumerate(entries)]
    seen: set[int] = set()
    for task in tasks:
        if task.task_id in seen:
            raise DemoTaskError(f"task {task.task_id} appears twice")
        seen.add(task.task_id)
    return tasks


def site_urls(base_url: str) -> dict[str, str]:
    """Every WebArena site name -> a demo URL.

    Sites the demo does not have point at the shop too, so BrowserGym's check that every open tab stays
    on a WebArena host accepts demo pages.
    """
    base = base_url.rstrip("/")
    return {site: base for site in environment.WEBARENA_SITES} | {"SHOPPING_ADMIN": base + ADMIN_PATH}


def instantiate_config(config: Mapping[str, Any], base_url: str) -> dict[str, Any]:
    """A copy of ``config`` with the URL placeholders replaced, as BrowserGym does for test.raw.json."""
    return cast(dict[str, Any], substitute_placeholders(config, site_urls(base_url)))


_JUDGE_CLIENT_MODULE = "webarena.llms.providers.openai_utils"


def _point_at_demo(base_url: str) -> None:
    """Site variables, already-imported evaluator globals and the LLM judge -> the demo site.

    Unlike ``webarena.use_site_urls`` this lasts: a live task evaluates at every step.
    """
    urls = site_urls(base_url)
    environment.set_webarena_urls(urls)
    point_evaluator_globals(urls)
    judge = urls["SHOPPING"] + "/v1"
    os.environ["OPENAI_BASE_URL"] = judge
    os.environ.setdefault("OPENAI_API_KEY", "demo-judge")
    # openai_utils caches one client per process; a client made for another base URL would miss the judge.
    clients = sys.modules.get(_JUDGE_CLIENT_MODULE)
    for name in ("_client", "_aclient"):
        client = getattr(clients, name, None) if clients is not None else None
        if client is not None and str(client.base_url).rstrip("/") != judge:
            setattr(clients, name, None)


def configure_demo_environment(base_url: str) -> None:
    """Everything a live demo task needs in this process (and its children): Chromium layout, punkt_tab,
    WebArena site variables and evaluator globals pointing at the demo site, the judge at ``<base>/v1``."""
    environment.prepare(webarena_urls=site_urls(base_url))
    _point_at_demo(base_url)


class DemoWebArenaInstance(WebArenaInstance):
    """BrowserGym's WebArena instance, on the demo site's URLs.

    The parent's ``__init__`` reads URLs the webarena module fixed at its first import; this one takes
    them from ``base_url``. ``ui_login`` drives the same Magento sign-in forms with WebArena's accounts
    (the demo shop serves them), but lets the signed-in page finish loading before closing its tab:
    closing a tab mid-navigation sometimes never returns with this Chromium.
    """

    def __init__(self, base_url: str) -> None:
        urls = site_urls(base_url)
        self.urls = {site.lower(): urls[site] for site in _BROWSERGYM_SITES}
        self.home_url = urls["HOMEPAGE"]
        from webarena.browser_env.env_config import ACCOUNTS

        self.credentials = ACCOUNTS

    def ui_login(self, site: str, page: playwright.sync_api.Page) -> None:
        if site not in ("shopping", "shopping_admin"):
            raise DemoTaskError(f"the demo site has no {site!r} to sign in to")
        account = self.credentials[site]
        login_page = page.context.new_page()
        try:
            if site == "shopping":
                login_page.goto(f"{self.urls[site]}/customer/account/login/")
                login_page.get_by_label("Email", exact=True).fill(account["username"])
                login_page.get_by_label("Password", exact=True).fill(account["password"])
                login_page.get_by_role("button", name="Sign In").click()
            else:
                login_page.goto(self.urls[site])
                login_page.get_by_label("Username").fill(account["username"])
                login_page.get_by_label("Password").fill(account["password"])
                login_page.get_by_role("button", name="Sign in").click()
            login_page.wait_for_load_state("load")
        finally:
            login_page.close()


class DemoWebArenaTask(GenericWebArenaTask):
    """BrowserGym's WebArena task on one demo config; ``setup`` resets the shop first (task isolation)."""

    def __init__(
        self,
        seed: int,
        config: Mapping[str, Any],
        base_url: str | None = None,
        with_na_hint: bool = False,
        with_homepage_hint: bool = False,
    ) -> None:
        AbstractBrowserTask.__init__(
            self, seed
        )  # the parent's __init__ would look the id up in test.raw.json
        base = (base_url or os.environ.get("WA_SHOPPING", "")).rstrip("/")
        if not base:
            raise DemoTaskError(
                "no demo site URL: pass task_kwargs={'base_url': ...} or call configure_demo_environment()"
            )
        _point_at_demo(base)
        self.base_url = base
        self.viewport = {"width": 1280, "height": 720}
        self.slow_mo = 0
        self.timeout = 10000
        self.webarena_instance = DemoWebArenaInstance(base)
        self.config_file = None
        self.with_na_hint = with_na_hint
        self.with_homepage_hint = with_homepage_hint
        self.task_configs = [instantiate_config(config, base)]

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict[str, Any]]:
        requests.post(f"{self.base_url}/init", timeout=10).raise_for_status()
        goal, info = super().setup(page)
        return goal, info

    def teardown(self) -> None:
        """Remove the temporary config file the parent's ``setup`` wrote (it never does)."""
        if self.config_file:
            with contextlib.suppress(OSError):
                os.unlink(self.config_file)
            self.config_file = None


def _register(task: DemoTask) -> str:
    import gymnasium as gym
    from browsergym.core.registration import register_task

    gym.registry.pop(task.env_id, None)  # registering again replaces, silently (a user file may reuse ids)
    register_task(
        task.env_id.removeprefix("browsergym/"), DemoWebArenaTask, task_kwargs={"config": task.config}
    )
    return task.env_id


def register_demo_tasks(path: Path | None = None) -> list[str]:
    """Register every task of the bundled file (or ``path``) as a gym id; return the ids."""
    return [_register(task) for task in load_demo_tasks(path)]


@dataclass
class DemoRun:
    """What one live episode scored: ``rewards`` per step as BrowserGym returned them."""

    task_id: int
    trajectory: str
    rewards: list[float]
    final_reward: float
    final_answer: str | None
    steps: int


@contextlib.contextmanager
def _maybe_skip_sleep(skip: bool) -> Iterator[None]:
    if not skip:
        yield
        return
    from cdp_integration.webarena import skip_evaluator_sleep

    with skip_evaluator_sleep():
        yield


def run_demo_task(
    task: DemoTask,
    trajectory: Literal["success", "failure"],
    base_url: str,
    *,
    on_env: Callable[[Any], None] | None = None,
    before_close: Callable[[Any], None] | None = None,
    headless: bool = True,
    skip_sleep: bool = True,
) -> DemoRun:
    """Play one scripted trajectory of ``task`` live in BrowserGym against the demo site at ``base_url``.

    ``on_env(env)`` runs right after ``gym.make`` (before reset), ``before_close(env)`` after the last
    step; the env is closed in any case. ``final_reward`` is the reward of the last step, which BrowserGym
    computed with the official evaluator. With ``skip_sleep`` the evaluator's fixed 3 s waits are skipped
    (the in-process demo site has served a page when ``goto`` returns).
    Raises `ActionFailed` when BrowserGym could not carry out a step (it would otherwise go on from a
    state the trajectory did not mean, and score that).
    """
    import gymnasium as gym

    if trajectory not in ("success", "failure"):
        raise ValueError(f"trajectory must be 'success' or 'failure', not {trajectory!r}")
    steps = task.success if trajectory == "success" else task.failure
    base = base_url.rstrip("/")
    configure_demo_environment(base)
    _register(task)
    # slow_mo is 0 already: the task sets it (passing it here only makes BrowserGym log an override)
    env = gym.make(
        task.env_id,
        task_kwargs={"base_url": base},
        headless=headless,
        action_mapping=patient_action_mapping(),
    )
    try:
        if on_env is not None:
            on_env(env)
        rewards: list[float] = []
        with _maybe_skip_sleep(skip_sleep):
            env.reset()
            browser_env = env.unwrapped
            chat = browser_env.chat  # type: ignore[attr-defined]
            first_message = len(chat.messages)
            for step in steps:
                _, reward, *_ = play_step(env, step, base)
                rewards.append(float(reward))
            answers = [m["message"] for m in chat.messages[first_message:] if m["role"] == "assistant"]
            if before_close is not None:
                before_close(env)
    finally:
        env.close()
    return DemoRun(
        task_id=task.task_id,
        trajectory=trajectory,
        rewards=rewards,
        final_reward=rewards[-1] if rewards else 0.0,
        final_answer=answers[-1] if answers else None,
        steps=len(steps),
    )
