"""Where the differential checker's episodes come from: the conformance apps, and the demo shop.

A :class:`Source` is an application the tests can start (``running``), the episodes played on it
(``episodes``: labelled action lists) and how one action is done on a live Playwright page (``act``).
The conformance apps reuse ``tasks.json`` and the conformance suite's own ``_act``, so an app added
there (with its start function in ``apps.py``) is one more line in :func:`conformance_sources`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conformance import apps

__all__ = ["Episode", "Source", "all_sources", "conformance_sources", "demo_source"]


@dataclass(frozen=True)
class Episode:
    label: str
    actions: tuple[Any, ...]
    task_id: int | None = None
    config: dict[str, Any] | None = None
    """The task's WebArena config with URL placeholders (resolved by ``Source.site_urls`` at play time)."""


@dataclass(frozen=True)
class Source:
    name: str
    missing: Callable[[], str | None]
    running: Callable[[Path], contextlib.AbstractContextManager[apps.App]]
    episodes: Callable[[], list[Episode]]
    act: Callable[[Any, apps.App, Any], None]
    context_options: Callable[[apps.App], dict[str, Any]]
    site_urls: Callable[[apps.App], dict[str, str]]
    """WebArena site variable -> the running app's URL (the session's ``task.site_urls``)."""
    question_share: float = 1.0
    """This source's questions per step, as a share of the run's setting (the demo shop has 90
    episodes, four times the steps of a conformance app)."""

    def resolve(self, config: dict[str, Any], app: apps.App) -> dict[str, Any]:
        from cdp_integration.webarena import substitute_placeholders

        return dict(substitute_placeholders(config, self.site_urls(app)))


def _conformance(name: str, start: Callable[[Path], apps.App], missing: Callable[[], str | None]) -> Source:
    def episodes() -> list[Episode]:
        from tests.conformance.test_conformance import TASKS

        return [
            Episode(
                f"{task['config']['task_id']}.{trajectory}",
                tuple(map(tuple, played["actions"])),
                task_id=task["config"]["task_id"],
                config=task["config"],
            )
            for task in TASKS
            if task["app"] == name
            for trajectory, played in task["trajectories"].items()
        ]

    agents: dict[int, Any] = {}  # the scripted agent of each episode's first page (it may open tabs)

    def act(page: Any, app: apps.App, action: Any) -> None:
        from tests.conformance.test_conformance import _Agent

        agent = agents.get(id(page))
        if agent is None or agent.first is not page:
            agent = agents[id(page)] = _Agent(page.context, app, page)
        agent.act(list(action))

    return Source(
        name=name,
        missing=missing,
        running=lambda workdir: apps.running(start, workdir),
        episodes=episodes,
        act=act,
        context_options=apps.context_options,
        site_urls=lambda app: {_placeholders()[name][1]: app.url},
    )


def _placeholders() -> dict[str, tuple[str, str]]:
    from tests.conformance.test_conformance import PLACEHOLDERS

    return PLACEHOLDERS


def conformance_sources() -> list[Source]:
    """The conformance suite's real applications (add a line here with each new one in ``apps.py``)."""
    return [
        _conformance("dokuwiki", apps.start_dokuwiki, apps.dokuwiki_missing),
        _conformance("trac", apps.start_trac, apps.trac_missing),
        _conformance("tiddlywiki", apps.start_tiddlywiki, apps.tiddlywiki_missing),
        _conformance("docsify", apps.start_docsify, apps.docsify_missing),
        _conformance("django", apps.start_django, apps.django_missing),
    ]


# -- the bundled demo shop: its WebArena-format tasks' scripted trajectories, with plain Playwright ------


@contextlib.contextmanager
def _demo_running(workdir: Path) -> Iterator[apps.App]:
    from cdp_integration.demo import DemoSite

    with DemoSite() as site:
        yield apps.App("demo", site.base_url, None, workdir)  # type: ignore[arg-type]


def _demo_episodes() -> list[Episode]:
    from cdp_integration.demo.tasks import load_demo_tasks

    episodes = []
    for task in load_demo_tasks():
        setup = (
            "setup",
            task.config.get("start_url", "__SHOPPING__"),
            bool(task.config.get("require_login")),
            tuple(task.config.get("sites", ())),
        )
        for trajectory in ("success", "failure"):
            steps = task.success if trajectory == "success" else task.failure
            played = tuple(step for step in steps if step[0] != "answer")
            episodes.append(
                Episode(
                    f"{task.task_id}.{trajectory}", (setup, *played), task_id=task.task_id, config=task.config
                )
            )
    return episodes


def _demo_act(page: Any, app: apps.App, action: Any) -> None:
    """The demo agent's verbs on a plain Playwright page (CSS selectors, as in ``demo/tasks.json``)."""
    from cdp_integration.demo.tasks import instantiate_config

    verb, *args = action
    if verb == "setup":
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(app.url + "/init", method="POST"), timeout=10).read()
        start_url, login, sites = args
        if login:
            from webarena.browser_env.env_config import ACCOUNTS

            if "shopping" in sites:
                account = ACCOUNTS["shopping"]
                page.goto(f"{app.url}/customer/account/login/")
                page.get_by_label("Email", exact=True).fill(account["username"])
                page.get_by_label("Password", exact=True).fill(account["password"])
                with page.expect_navigation():
                    page.get_by_role("button", name="Sign In").click()
            if "shopping_admin" in sites:
                account = ACCOUNTS["shopping_admin"]
                page.goto(f"{app.url}/admin")
                page.get_by_label("Username").fill(account["username"])
                page.get_by_label("Password").fill(account["password"])
                with page.expect_navigation():
                    page.get_by_role("button", name="Sign in").click()
        page.goto(instantiate_config({"start_url": start_url}, app.url)["start_url"])
    elif verb == "goto":
        page.goto(app.url + args[0])
    elif verb == "click":
        page.click(args[0])
        page.wait_for_load_state("load")
    elif verb == "fill":
        page.fill(args[0], args[1])
    elif verb == "select":
        page.select_option(args[0], args[1])
    elif verb == "press":
        page.press(args[0], args[1])
        page.wait_for_load_state("load")
    elif verb == "go_back":
        page.go_back()
    elif verb != "noop":
        raise ValueError(f"the differential checker does not play the demo verb {verb!r}")


def demo_source() -> Source:
    return Source(
        name="demo",
        missing=lambda: None,
        running=_demo_running,
        episodes=_demo_episodes,
        act=_demo_act,
        context_options=lambda app: {},
        site_urls=_demo_site_urls,
        question_share=0.25,
    )


def _demo_site_urls(app: apps.App) -> dict[str, str]:
    from cdp_integration.demo.tasks import site_urls

    return site_urls(app.url)


def all_sources() -> list[Source]:
    return [*conformance_sources(), demo_source()]


# -- playing a source's episodes with the checker ------------------------------------------------------


_QUIET = """(quiet) => new Promise((resolve) => {
  let timer;
  const done = () => { observer.disconnect(); clearTimeout(timer); clearTimeout(cap); resolve(true); };
  const observer = new MutationObserver(() => { clearTimeout(timer); timer = setTimeout(done, quiet); });
  observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  timer = setTimeout(done, quiet);
  const cap = setTimeout(() => { observer.disconnect(); clearTimeout(timer); resolve(false); }, 5000);
})"""
"""Resolves once the document went ``quiet`` ms without a DOM mutation (at most 5 s): an animation a
click started (DokuWiki's table-of-contents slide) has ended."""


def settle(page: Any, quiet_ms: int = 300) -> None:
    """Wait until ``page``'s DOM stopped changing before the capture, as an agent looks at a page
    once it settled (BrowserGym waits after each action too). Without it the capture can hold an
    animation half-way, and every question on that tab is ``moved`` (not judged) instead of compared."""
    with contextlib.suppress(Exception):  # a navigation replaced the document: nothing to wait for
        page.evaluate(_QUIET, quiet_ms)


def play(
    source: Source,
    app: apps.App,
    browser: Any,
    episode: Episode,
    out: Path,
    probe: Any,
    *,
    fresh_every_step: bool = True,
) -> Any:
    """Play ``episode`` live with a task-less logger (every answer must be reconstructed), asking
    ``probe``'s questions after each captured step; return the saved session."""
    from cdp_integration import CDPSessionLogger, load_session

    context = browser.new_context(**source.context_options(app))
    try:
        page = context.new_page()
        task: dict[str, Any] = {"site_urls": source.site_urls(app), "differential": episode.label}
        if episode.task_id is not None:
            task["task_id"] = episode.task_id
        logger = CDPSessionLogger(out, task=task)
        logger.attach_to_page(page)
        try:
            for step, action in enumerate(episode.actions):
                source.act(page, app, action)
                settle(page)
                logger.capture_state_snapshot(" ".join(map(str, action[:2])))
                probe.ask_live(
                    page,
                    step,
                    captured=logger.last_step,
                    phases=[logger.evaluation_phase],
                    fresh=fresh_every_step or step == len(episode.actions) - 1,
                )
            path = logger.save_session(f"{source.name}.{episode.label}")
        finally:
            logger.detach()
    finally:
        context.close()
    return load_session(path)


@dataclass
class SourceRun:
    """What ``check_source`` found: ``(episode label, Outcome)`` pairs, and the sessions it saved with
    their tasks' configs (resolved for the app as it ran), for scoring them again."""

    outcomes: list[tuple[str, Any]]
    sessions: list[Path]
    configs: list[dict[str, Any]]


def check_source(
    source: Source,
    workdir: Path,
    out: Path,
    *,
    seed: int,
    per_step: int,
    fresh_per_url: int,
    max_episodes: int | None = None,
    matching: str = "",
    log: Callable[[str], None] = lambda line: None,
) -> SourceRun:
    """Every episode of ``source`` live, then (the app stopped) offline: ``(label, Outcome)`` pairs."""
    import time

    import browsergym.core

    from cdp_integration import environment
    from tests.conformance.differential import EpisodeProbe, format_silent

    episodes = [episode for episode in source.episodes() if re.search(matching, episode.label)][
        : max_episodes or None
    ]
    played: list[tuple[Episode, EpisodeProbe, Any]] = []
    configs: dict[int, dict[str, Any]] = {}
    started = time.perf_counter()
    browser = browsergym.core._get_global_playwright().chromium.launch(
        executable_path=environment.headless_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    try:
        with source.running(workdir) as app:
            for episode in episodes:
                probe = EpisodeProbe(
                    source.name,
                    episode.label,
                    seed=seed,
                    per_step=max(1, round(per_step * source.question_share)),
                    fresh_per_url=fresh_per_url,
                )
                session = play(source, app, browser, episode, out, probe)
                played.append((episode, probe, session))
                if episode.task_id is not None and episode.config is not None:
                    configs[episode.task_id] = source.resolve(episode.config, app)
                log(
                    f"{source.name} {episode.label}: {len(probe.asked)} questions asked live "
                    f"({time.perf_counter() - started:.0f} s)"
                )
    finally:
        browser.close()
    results: list[tuple[str, Any]] = []
    for episode, probe, session in played:  # the app is stopped: nothing offline can reach it
        outcomes = probe.answer_offline(session)
        results += [(f"{source.name} {episode.label}", outcome) for outcome in outcomes]
        counts = {
            v: sum(o.verdict == v for o in outcomes) for v in ("equal", "miss", "unstable", "moved", "silent")
        }
        log(f"{source.name} {episode.label}: offline {counts} ({time.perf_counter() - started:.0f} s)")
        for outcome in outcomes:  # as found: a long run cut short still shows them
            if outcome.verdict == "silent":
                log("  SILENT " + format_silent(f"{source.name} {episode.label}", outcome))
    return SourceRun(results, [session.path for _, _, session in played], list(configs.values()))
