"""One task contract for every agent driver: what a WebArena task is, whoever drives the browser.

A driver (``sdk_v1.py`` for OpenHands V1; V0 runs the same tasks inside BrowserGym's own env) gets a
``TaskRun`` and needs nothing else from the dataset: the config with the site URLs filled in (what
the official evaluator reads), the site URLs the session records for offline scoring, the reset
before the task, and ``set_up(page)``: what BrowserGym's ``WebArenaTask.setup`` does on a page of
the driver's browser (sign in to every site of the task with the same forms ``ui_login`` drives,
the geolocation, the start page(s)). Demo tasks and WebArena's real task ids are the two kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from cdp_integration.demo.tasks import DemoTask, DemoWebArenaInstance, instantiate_config, site_urls
from cdp_integration.deployment import WebArenaTaskSpec
from cdp_integration.webarena import substitute_placeholders

__all__ = ["Steps", "TaskRun", "demo_task_run", "webarena_task_run"]

Steps = tuple[tuple[str, ...], ...]


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

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(self.config.get("sites") or ())

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
    )


def webarena_task_run(
    task: WebArenaTaskSpec,
    urls: dict[str, str],
    plans: dict[str, Steps],
    reset: Callable[[], float | None],
    changes_sites: bool,
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
    )
