"""Generated trajectories through a real ``browser_use.Agent``: random behaviour played with browser-use's
own actions, captured by the logger that follows browser-use's focused tab.

:class:`RandomPolicy` stands in for the agent's model: at each step it looks at what browser-use shows
(its selector map of indexed elements, its tabs) and picks a random behaviour, answered as the model's
structured output: a same-origin link, a ``target=_blank`` link, the bundled site's ``window.open`` and
``history.pushState`` buttons (``click``), text typed and left unsaved or submitted with Enter
(``input``, ``send_keys``), a URL already seen in this tab or a new one (``navigate``, ``new_tab``),
``go_back``, ``switch`` and ``close`` of tabs, ``scroll``. After its last behaviour it says ``done``.

The agent's current tab is browser-use's own: ``BrowserSession.agent_focus_target_id`` when the agent
stops. The live questions are asked of that tab over a Playwright connection opened only then, and the
episode is judged like every other generated one (:func:`tests.trajectories.judge_episode`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests import trajectories

__all__ = ["RandomPolicy", "browser_use_environment", "play_browser_use_episode"]

_TEXTUAL = ("", "text", "search", "email", "url", "tel", "number")


class RandomPolicy:
    """browser-use's model, replaced by seeded random behaviour over the state browser-use holds.

    ``behaviours``: what was chosen, in order (``done`` not counted); ``log``: each step's action as sent.
    """

    model = "random-policy"
    _verified_api_keys = True

    def __init__(self, site: trajectories.Site, rng: random.Random, actions: int, first: str | None) -> None:
        self.site = site
        self.rng = rng
        self.actions = actions
        self.first = first
        self.session: Any = None
        """The agent's ``BrowserSession`` (set before the run)."""
        self.behaviours: list[str] = []
        self.log: list[str] = []
        self.seen: list[str] = []
        self._origin = urlsplit(site.url).netloc

    @property
    def provider(self) -> str:
        return "test"

    @property
    def name(self) -> str:
        return self.model

    @property
    def model_name(self) -> str:
        return self.model

    async def _state(self) -> tuple[list[tuple[int, Any]], list[Any], str | None]:
        selector = await self.session.get_selector_map()
        tabs = await self.session.get_tabs()
        for tab in tabs:
            if tab.url.startswith(("http://", "https://")) and tab.url not in self.seen:
                self.seen.append(tab.url)
        return sorted(selector.items()), tabs, self.session.agent_focus_target_id

    def _same_origin(self, href: str) -> bool:
        parts = urlsplit(href)
        return parts.scheme in ("http", "https") and parts.netloc == self._origin

    async def choose(self) -> tuple[str, list[dict[str, Any]]]:
        """The next behaviour's name and browser-use actions (``done`` after the last one)."""
        if len(self.behaviours) >= self.actions:
            return "done", [{"done": {"text": "finished the generated behaviours", "success": True}}]
        elements, tabs, focused = await self._state()
        current = next((t for t in tabs if t.target_id == focused), None)
        base = current.url if current is not None else self.site.url

        def attributes(node: Any) -> dict[str, str]:
            return dict(getattr(node, "attributes", None) or {})

        def links(blank: bool) -> list[int]:
            found = []
            for index, node in elements:
                attrs = attributes(node)
                href = attrs.get("href")
                if node.tag_name != "a" or not href or href.startswith(("javascript:", "mailto:")):
                    continue
                absolute = _join(base, href)
                if not self._same_origin(absolute) or trajectories._RISKY.search(absolute):
                    continue
                if "download" in attrs or (attrs.get("target", "").lower() == "_blank") != blank:
                    continue
                found.append(index)
            return found

        def buttons(accept: Any) -> list[int]:
            return [i for i, node in elements if node.tag_name == "button" and accept(attributes(node))]

        inputs = [
            index
            for index, node in elements
            if (node.tag_name == "textarea" or node.tag_name == "input")
            and attributes(node).get("type", "").lower() in _TEXTUAL
            and "disabled" not in attributes(node)
            and "readonly" not in attributes(node)
        ]
        others = [t for t in tabs if t.target_id != focused]
        seen = [url for url in self.seen if self._same_origin(url) and not trajectories._RISKY.search(url)]
        options: dict[str, list[dict[str, Any]]] = {}
        if links(False):
            options["link"] = [{"click": {"index": self.rng.choice(links(False))}}]
        if links(True):
            options["blank_link"] = [{"click": {"index": self.rng.choice(links(True))}}]
        popup = buttons(lambda a: a.get("id") == "popup")
        if popup:
            options["window_open"] = [{"click": {"index": popup[0]}}]
        push = buttons(lambda a: "push" in a.get("class", "").split())
        if push:
            options["push_route"] = [{"click": {"index": self.rng.choice(push)}}]
        if inputs:
            field, words = self.rng.choice(inputs), self._words()
            options["type"] = [{"input": {"index": field, "text": words}}]
            options["submit"] = [{"input": {"index": field, "text": words}}, {"send_keys": {"keys": "Enter"}}]
        if seen:
            options["goto_seen"] = [{"navigate": {"url": self.rng.choice(seen)}}]
            options["new_tab"] = [{"navigate": {"url": self.rng.choice(seen), "new_tab": True}}]
        options["back"] = [{"go_back": {}}]
        options["scroll"] = [{"scroll": {"down": True, "pages": 1.0}}]
        if others:
            options["switch"] = [{"switch": {"tab_id": self.rng.choice(others).target_id[-4:]}}]
        if len(tabs) > 1:
            closing = self.rng.choice(tabs)
            options["close"] = [{"close": {"tab_id": closing.target_id[-4:]}}]
        name = self.first if self.first in options and not self.behaviours else None
        name = name or self.rng.choice(sorted(options))
        self.behaviours.append(name)
        return name, options[name]

    def _words(self) -> str:
        return " ".join(self.rng.sample(trajectories._WORDS, self.rng.randint(1, 3)))

    async def ainvoke(self, messages: list[Any], output_format: Any = None, **kwargs: Any) -> Any:
        from browser_use.llm.views import ChatInvokeCompletion

        name, actions = await self.choose()
        self.log.append(f"{name} {json.dumps(actions, sort_keys=True)}")
        output = {
            "thinking": f"generated behaviour {len(self.log)}: {name}",
            "evaluation_previous_goal": "",
            "memory": f"behaviour {len(self.log)} of {self.actions + 1}",
            "next_goal": name,
            "action": actions,
        }
        if output_format is None:
            return ChatInvokeCompletion(completion=json.dumps(output), usage=None)
        return ChatInvokeCompletion(completion=output_format.model_validate(output), usage=None)


@contextlib.contextmanager
def browser_use_environment() -> Iterator[Path]:
    """browser-use writes under ``~/.config/browseruse``, phones home and logs each step at INFO: a
    temporary HOME, telemetry and cloud sync off, warnings only (set before browser-use is imported)."""
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="browser-use-home-") as home:
        os.environ.update(
            HOME=home,
            XDG_CONFIG_HOME=f"{home}/.config",
            XDG_CACHE_HOME=f"{home}/.cache",
            BROWSER_USE_CONFIG_DIR=f"{home}/.config/browseruse",
            ANONYMIZED_TELEMETRY="false",
            BROWSER_USE_CLOUD_SYNC="false",
            BROWSER_USE_VERSION_CHECK="false",
            BROWSER_USE_LOGGING_LEVEL=os.environ.get("BROWSER_USE_LOGGING_LEVEL", "warning"),
        )
        try:
            yield Path(home)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _join(base: str, href: str) -> str:
    from urllib.parse import urljoin

    return urljoin(base, href)


def play_browser_use_episode(
    playwright: Any,
    site: trajectories.Site,
    out: Path,
    *,
    seed: str,
    actions: int | None = None,
    questions_per_episode: int = 40,
    first: str | None = None,
) -> trajectories.LiveEnd:
    """One generated episode played by a ``browser_use.Agent`` in a Chromium of its own, captured by
    :class:`~cdp_integration.integrations.browser_use.BrowserUseCapture`; the live questions are asked of
    browser-use's focused tab once the agent is done. ``playwright``: a started sync Playwright (this
    thread's); the agent runs its own event loop in a worker thread."""
    from cdp_integration import CDPSessionLogger
    from cdp_integration.capture.cdp_attach import ChromiumProcess
    from cdp_integration.integrations.browser_use import (
        BrowserUseCapture,
        browser_session_for,
        import_browser_use,
    )

    if site.context_options:
        raise ValueError(
            f"{site.name}: browser-use's default context cannot take {sorted(site.context_options)}"
        )
    rng = random.Random(seed)
    label = f"browser_use.{re.sub(r'[^A-Za-z0-9]+', '-', seed)}"
    policy = RandomPolicy(site, rng, actions if actions is not None else rng.randint(4, 8), first)
    browser_use = import_browser_use()
    with ChromiumProcess() as chromium, tempfile.TemporaryDirectory(prefix="browser-use-gen-") as scratch:
        if site.sign_in is not None:  # in the browser's default context, which the agent then uses
            signing = playwright.chromium.connect_over_cdp(chromium.endpoint)
            try:
                context = signing.contexts[0]
                site.sign_in(context.pages[0] if context.pages else context.new_page())
            finally:
                signing.close()
        logger = CDPSessionLogger(out, instance_id=label, task={"site_urls": {"shopping": site.url}})
        focused: dict[str, str | None] = {}

        async def run() -> None:
            session = browser_session_for(chromium.endpoint, scratch)
            policy.session = session
            capture = BrowserUseCapture(logger, session, chromium.endpoint)
            agent = browser_use.Agent(
                task="Play the generated behaviours",
                llm=policy,
                browser_session=session,
                use_judge=False,
                use_vision=False,
                directly_open_url=False,
                file_system_path=str(Path(scratch) / "files"),
                initial_actions=[{"navigate": {"url": site.url + site.start}}],
            )
            capture.attach()
            try:
                await agent.run(
                    max_steps=policy.actions + 2,
                    on_step_start=capture.on_step_start,
                    on_step_end=capture.on_step_end,
                )
                focused["target"] = session.agent_focus_target_id  # the harness's own, not the capture's
            finally:
                with contextlib.suppress(Exception):
                    await session.kill()
                shutil.rmtree(agent.agent_directory, ignore_errors=True)

        try:
            # Its own thread: this one drives Playwright's sync API, whose loop counts as running here.
            with ThreadPoolExecutor(1) as pool:
                pool.submit(asyncio.run, run()).result()
            truth_target = focused.get("target")
            if not truth_target:
                raise RuntimeError(f"{label}: browser-use ended with no focused tab")
            browser = playwright.chromium.connect_over_cdp(chromium.endpoint)
            try:
                pages = [p for c in browser.contexts for p in c.pages]
                truth = next((p for p in pages if trajectories._target_id(p) == truth_target), None)
                if truth is None:
                    raise RuntimeError(f"{label}: browser-use's focused tab {truth_target} is not open")
                return trajectories._finish(
                    logger,
                    truth,
                    app=site.name if site.name.startswith("browser_use") else f"browser_use:{site.name}",
                    label=label,
                    seed=seed,
                    site_url=site.url,
                    behaviours=policy.behaviours,
                    log=policy.log,
                    rng=rng,
                    questions_per_episode=questions_per_episode,
                )
            finally:
                browser.close()
        finally:
            logger.detach()
