"""The tabs a logger follows: one CDP session per tab of the browser contexts it attached to.

``TabTracker`` attaches to every tab of a context (and to tabs opened later), tags each tab with the
traffic it carries (``agent``, or ``evaluator`` for tabs opened during an evaluation), remembers
crashed renderers, and at each capture finds the live tabs and the agent's current one: the one its
harness names, else the one the agent last opened, navigated or acted in (``active``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from cdp_integration.capture import state
from cdp_integration.capture.console import ConsoleRecorder
from cdp_integration.capture.deadline import CaptureTimeout, StallBudget, bounded
from cdp_integration.capture.faults import as_fault
from cdp_integration.capture.html import IncrementalHtml
from cdp_integration.capture.network import NetworkRecorder
from cdp_integration.capture.state import AsyncSend
from cdp_integration.session.models import CaptureFault, CurrentTabSource, TrafficOrigin

__all__ = ["Started", "Tab", "TabTracker", "TimedCDP"]

_NETWORK_BUFFERS = {"maxTotalBufferSize": 100_000_000, "maxResourceBufferSize": 20_000_000}


class Started:
    """Commands ``TimedCDP.begin`` started: ``result()`` waits for them, ``cancel()`` gives them up."""

    def __init__(self, cdp: TimedCDP, task: asyncio.Task[Any] | None, wait: Callable[..., Any]) -> None:
        self._cdp, self._task, self._wait = cdp, task, wait
        self._inline = task is None

    def result(self) -> Any:
        cdp, task = self._cdp, self._task
        if self._inline:
            return self._wait()
        if task is None:
            raise RuntimeError("already waited for or cancelled")
        if cdp.timed_out is not None:
            task.cancel()
            raise TimeoutError(f"not waited for: {cdp.timed_out} timed out in this capture")
        # What they wait for may never come (a page whose stylesheet never arrives is never drawn):
        # they get what is left of the capture's stall budget, as Playwright calls that wait on
        # browser events do, and what they wait is spent from it.
        try:
            if cdp.budget is None:
                return self._wait(cdp.timeout_ms)
            return cdp.budget().within(self._wait, "the started commands", cdp.timeout_ms)
        except CaptureTimeout:
            task.cancel()
            raise
        finally:
            self._task = None

    def cancel(self) -> None:
        """Give the commands up if nobody waited for them (their outcome is then never reported)."""
        if self._task is not None:
            self._task.cancel()
            self._task.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._task = None


class TimedCDP:
    """A tab's CDP session whose commands give up at a deadline (Playwright's would wait forever).

    A hung, frozen or crashed renderer never answers: without a limit it would block the capture,
    and with it the agent's episode. Liveness first, then patience: until the renderer has answered
    a command in this capture, a command waits at most what is left of the capture's stall budget
    (``budget()``); once it has answered, it is working, and a command may take ``timeout_ms`` (a
    large page's snapshot on a loaded machine). After one timeout the renderer is taken as
    unresponsive until ``reset()`` (the next capture): its other commands fail at once.
    ``Target.*`` and ``Browser.*`` are answered by the browser process and still sent.
    """

    def __init__(
        self, session: Any, timeout_ms: float, budget: Callable[[], StallBudget] | None = None
    ) -> None:
        self.session = session
        self.timeout_ms = timeout_ms
        self.budget = budget
        self.timed_out: str | None = None
        self.answered = False
        """The renderer answered a command since the last ``reset()``."""
        self._sent_ahead: dict[bytes, asyncio.Task[Any]] = {}
        """Commands ``prefetch`` sent in this capture whose answers no ``send`` has taken yet."""

    def prefetch(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a read now without waiting for its answer: the next ``send`` of the same command (same
        method and params) in this capture takes that answer instead of sending it again.

        Playwright's sync API waits for each answer before the next command goes out, so a capture's
        independent reads would each pay a round trip through Playwright's driver. Sent ahead, they
        travel together; the browser still runs a tab's commands in the order they were sent, so
        only reads whose order does not matter (or that come first anyway) are sent ahead. Only for
        commands that change nothing; a session that is not Playwright's ignores it."""
        if self.timed_out is not None:
            return
        impl, loop = getattr(self.session, "_impl_obj", None), getattr(self.session, "_loop", None)
        if impl is None or loop is None or getattr(self.session, "_sync", None) is None:
            return
        key = _command_key(method, params)
        if key in self._sent_ahead:
            return
        coroutine = (
            impl.send(method, params, None) if _takes_timeout(impl.send) else impl.send(method, params)
        )
        task = self._sent_ahead[key] = loop.create_task(coroutine)
        task.add_done_callback(_ignore_outcome)  # a tab closed before its answer was taken

    def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        browser_side = method.startswith(("Target.", "Browser."))
        if self.timed_out is not None and not browser_side:
            raise TimeoutError(f"{method} not sent: {self.timed_out} timed out in this capture")
        budget = self.budget() if self.budget is not None else None
        patient = self.answered or budget is None
        limit = self.timeout_ms if patient or budget is None else budget.liveness_ms(self.timeout_ms)
        ahead = self._sent_ahead.pop(_command_key(method, params), None) if self._sent_ahead else None
        started = time.monotonic()
        try:
            if ahead is not None:
                result = self._answer(ahead, method, limit)
            else:
                result = self.session.send(method, params, timeout=limit)
        except PlaywrightTimeoutError:
            if not browser_side:
                self.timed_out = method
            if budget is not None and not patient:
                budget.spend((time.monotonic() - started) * 1000)
            raise
        if not browser_side:
            self.answered = True
        return result

    def begin(self, calls: Callable[[AsyncSend], Coroutine[Any, Any, Any]]) -> Started:
        """Start ``calls`` (commands of its own, awaited in turn) now, beside this tab's next
        commands; ``result()`` of what it returns waits for their result.

        Playwright's sync API sends one command at a time; on its own loop a started task goes on
        while the thread waits for the other commands, so what the browser does for it (a
        screenshot waits for the compositor's next frame) overlaps the renderer's reads. The wait
        at the end gets what a command would get, and none once a command of this capture timed
        out; the task is cancelled when the wait gives up. A session that is not Playwright's runs
        the calls when waited for."""
        session = self.session
        impl, loop, run = (getattr(session, name, None) for name in ("_impl_obj", "_loop", "_sync"))
        if impl is None or loop is None or run is None:
            return Started(self, None, lambda: _run_inline(calls(self._inline_send)))
        with_timeout = _takes_timeout(impl.send)

        async def send(method: str, params: dict[str, Any] | None = None) -> Any:
            return await (impl.send(method, params, None) if with_timeout else impl.send(method, params))

        task = loop.create_task(calls(send))
        return Started(self, task, lambda limit: run(asyncio.wait_for(task, limit / 1000)))

    async def _inline_send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.send(method, params)

    def _answer(self, ahead: asyncio.Task[Any], method: str, limit_ms: float) -> Any:
        """The answer of a command sent ahead, waited for as ``send`` waits for its own."""
        try:
            return self.session._sync(asyncio.wait_for(ahead, limit_ms / 1000))
        except TimeoutError:
            raise PlaywrightTimeoutError(f"{method}: no answer within {limit_ms:.0f} ms") from None

    def reset(self) -> None:
        """A new capture: nothing timed out, nothing answered, nothing sent ahead (answers not taken
        are dropped)."""
        self.timed_out = None
        self.answered = False
        ahead, self._sent_ahead = self._sent_ahead, {}
        for task in ahead.values():
            task.cancel()

    def on(self, event: str, handler: Callable[[Any], None]) -> None:
        self.session.on(event, handler)

    def detach(self) -> None:
        """Close the session; a crashed or frozen tab's detach never answers, so it has a deadline too."""
        limit = self.budget().liveness_ms(self.timeout_ms) if self.budget is not None else self.timeout_ms
        bounded(self.session, "detach", timeout_ms=limit)


@dataclass
class Tab:
    page: Any
    cdp: TimedCDP
    tab_id: str
    traffic: TrafficOrigin
    """Whose traffic the tab carries: fixed when it was opened."""
    page_enabled: bool = False
    """``Page.enable`` sent (``Page.getResourceContent`` needs it; enabled on first use only)."""
    frame_tree: dict[str, Any] | None = None
    """This capture's frame tree (with subresources when the logger stores some), read once for the
    readers that need it."""
    frame_tree_error: Exception | None = None
    """Why this capture's one read of the frame tree failed (raised again to each reader)."""
    worlds: dict[str, int] = field(default_factory=dict)
    """The isolated world's execution context per document (loader id)."""
    html: IncrementalHtml = field(default_factory=IncrementalHtml)
    """The tab's HTML reads: large script/style texts already transferred, per document."""


class TabTracker:
    """The followed tabs by Playwright page, and the contexts whose new tabs are followed too.

    A tab that cannot be attached is a fault appended to ``faults`` (the logger's pending faults).
    ``context_events``: further Playwright context events to listen to (event name -> handler).
    """

    def __init__(
        self,
        network: NetworkRecorder,
        faults: list[CaptureFault],
        *,
        cdp_timeout_ms: float,
        stall_budget_ms: float = 2_000,
        frame_tree_resources: bool = False,
        console: ConsoleRecorder | None = None,
    ) -> None:
        self.network = network
        self.console = console
        """Hears what each followed tab's page says (None: the ``console`` option is off)."""
        self.faults = faults
        self.cdp_timeout_ms = cdp_timeout_ms
        self.stall_budget_ms = stall_budget_ms
        self.in_scope = False
        self.budget = self.new_budget()
        """What the current capture (or attach) may still lose to calls that never answer."""
        self.frame_tree_resources = frame_tree_resources
        """Read frame trees with their subresources (``Page.getResourceTree``), for a logger storing some."""
        self.context_events: Mapping[str, Callable[[Any], None]] = {}
        self.tabs: dict[Any, Tab] = {}
        self.contexts: list[Any] = []
        self.crashed: set[Any] = set()
        """Pages whose renderer crashed: their CDP sessions would never answer a command again."""
        self.traffic: TrafficOrigin = "agent"
        """The traffic newly opened tabs carry (``evaluator`` during an evaluation)."""
        self.primary_page: Any = None
        self.active_page: Callable[[], Any] | None = None
        """The agent's current page as its harness knows it (BrowserGym's active page, browser-use's
        focused tab); None from it, or no harness: the browser's own signals decide (``active``)."""
        self.activity: dict[Any, tuple[float, CurrentTabSource]] = {}
        """Per page: when (wall-clock seconds) the agent last opened it, navigated it, or named it
        current, and which of these it was. Trusted input is read from the page itself at capture."""
        self.browser_version: str | None = None
        self.user_agent: str | None = None

    # -- attaching ---------------------------------------------------------------------------

    def attach_context(self, context: Any) -> None:
        if any(known is context for known in self.contexts):
            return
        self.contexts.append(context)
        context.on("page", self._opened)
        for event, handler in self.context_events.items():
            context.on(event, handler)
        for page in list(context.pages):
            self.attach_safely(page)

    def _opened(self, page: Any) -> None:
        """A tab opened in a followed context (by the agent, a link, a script, or an evaluator)."""
        if self.traffic == "agent":
            self.note(page, "opened")
        self.attach_safely(page)

    def note(self, page: Any, how: CurrentTabSource) -> None:
        """``page`` is, from now, the tab the agent was last seen using (``how``: what it did there)."""
        self.activity[page] = (time.time(), how)

    def attach_safely(self, page: Any) -> None:
        with as_fault(self.faults, "attach"):
            self.attach(page)

    def new_budget(self) -> StallBudget:
        """A fresh stall budget; one waiting Playwright call may use half of it."""
        return StallBudget(self.stall_budget_ms, cap_ms=self.stall_budget_ms / 2)

    def attach(self, page: Any) -> None:
        """Follow ``page`` over a CDP session of its own. Runs inside the caller's Playwright call
        when a tab opens (the ``page`` event), so it has a stall budget of its own."""
        if page in self.tabs or page.is_closed():
            return
        if self.in_scope:
            self._attach(page)
            return
        with self.budget_scope():
            self._attach(page)

    @contextlib.contextmanager
    def budget_scope(self) -> Iterator[StallBudget]:
        """A block (one capture, one attach, one marking) whose waiting calls share one fresh stall budget."""
        outer, was_in_scope = self.budget, self.in_scope
        self.budget, self.in_scope = self.new_budget(), True
        try:
            yield self.budget
        finally:
            self.budget, self.in_scope = outer, was_in_scope

    def _attach(self, page: Any) -> None:
        session = self.budget.call(page.context, "new_cdp_session", page, cap_ms=self.stall_budget_ms)
        cdp = TimedCDP(session, self.cdp_timeout_ms, lambda: self.budget)
        page.on("crash", self._on_crash)
        tab_id = state.read_target_info(cdp)["targetId"]
        tab = Tab(page=page, cdp=cdp, tab_id=tab_id, traffic=self.traffic)
        self.network.listen(cdp, tab_id, lambda: tab.traffic)
        cdp.on("Page.frameNavigated", lambda event: self._navigated(tab, event))
        self._follow_bring_to_front(page)
        cdp.send("Network.enable", _NETWORK_BUFFERS)
        self.tabs[page] = tab
        if self.console is not None:
            with as_fault(self.faults, "console", tab_id):
                self.console.listen(cdp, tab_id)
                cdp.send("Runtime.enable")  # reports the messages logged before, then each as it comes
                cdp.send("Log.enable")
        with as_fault(self.faults, "settling", tab_id):
            cdp.send("Page.enable")
            tab.page_enabled = True
            state.watch_settling(cdp)
        if self.browser_version is None:
            version = cdp.send("Browser.getVersion")
            self.browser_version = version.get("product")
            self.user_agent = version.get("userAgent")

    def _follow_bring_to_front(self, page: Any) -> None:
        """An agent that brings a tab to the front has switched to it (headless Chromium fires no focus
        event for it): noted when the agent calls ``bring_to_front`` on the page object it holds."""
        original = getattr(page, "bring_to_front", None)
        if original is None or getattr(original, "_cdp_follows", False):
            return

        def bring_to_front() -> None:
            original()
            if self.traffic == "agent":
                self.note(page, "acted")

        bring_to_front._cdp_follows = True  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):  # a page object that takes no attributes: focus events only
            page.bring_to_front = bring_to_front

    def _navigated(self, tab: Tab, event: Any) -> None:
        """A new document in a tab's main frame. Same-document changes (``navigatedWithinDocument``) do
        not count: a background tab's scripts rewrite its URL by themselves."""
        frame = event.get("frame", {}) if isinstance(event, dict) else {}
        if not frame.get("parentId") and tab.traffic == "agent" and self.tabs.get(tab.page) is tab:
            self.note(tab.page, "navigated")

    def _on_crash(self, page: Any) -> None:
        self.crashed.add(page)

    def is_crashed(self, tab: Tab) -> bool:
        return tab.page in self.crashed

    def drop(self, tab: Tab) -> None:
        """Stop following a tab whose CDP session is unusable: it is attached again at the next capture."""
        self.tabs.pop(tab.page, None)

    # -- at each capture ---------------------------------------------------------------------

    def prepare(self) -> list[Tab]:
        """The agent's live tabs, with every tab of the followed contexts attached and answering again."""
        if self.active_page is not None:
            active_page = self.active_page()
            if active_page is not None and active_page not in self.tabs and not active_page.is_closed():
                self.attach_context(active_page.context)
                self.attach_safely(active_page)
        for tab in self.tabs.values():
            tab.cdp.reset()
            tab.frame_tree, tab.frame_tree_error = None, None
            if tab.page not in self.crashed:  # the reads every capture starts with, sent together
                tab.cdp.prefetch(*state.frame_tree_command(resources=self.frame_tree_resources))
                tab.cdp.prefetch("Target.getTargetInfo")
        self._pump_events()
        self._sync()
        return self._live()

    def _pump_events(self) -> None:
        """One round trip, so Playwright dispatches queued events (new tabs) before we read tabs.

        The round trip reads the first tab's frame tree, which this capture needs anyway (a failure
        is the first reader's fault).
        """
        for tab in list(self.tabs.values()):
            if not tab.page.is_closed() and tab.page not in self.crashed:
                with contextlib.suppress(Exception):
                    self.frame_tree(tab)
                return

    def frame_tree(self, tab: Tab) -> dict[str, Any]:
        """The tab's frame tree in this capture: read once, a failed read fails each reader alike."""
        if tab.frame_tree_error is not None:
            raise tab.frame_tree_error
        if tab.frame_tree is None:
            try:
                tab.frame_tree = state.read_frame_tree(tab.cdp, resources=self.frame_tree_resources)
            except Exception as exc:
                tab.frame_tree_error = exc
                raise
        return tab.frame_tree

    def _sync(self) -> None:
        """Attach to tabs we do not follow yet (missed events, or a session dropped after a failure)."""
        for context in self.contexts:
            with contextlib.suppress(Exception):  # a closed context: its tabs are gone with it
                for page in list(context.pages):
                    if page not in self.tabs:
                        self.attach_safely(page)

    def _live(self) -> list[Tab]:
        for page in list(self.tabs):
            if page.is_closed():
                del self.tabs[page]
        return [tab for tab in self.tabs.values() if tab.traffic == "agent"]

    def active(self, tabs: list[Tab]) -> tuple[Tab | None, CurrentTabSource]:
        """The agent's current tab among ``tabs``, and how that was decided (``CurrentTabSource``).

        The harness's answer first; else the only agent tab; else the tab whose latest signal is the
        newest: opened, navigated (a new main document), acted in (trusted input or window focus, read
        from the page), named by ``note(page, "explicit")``, or the page given to ``attach_to_page``.
        Several tabs and no signal: the newest tab, as ``unknown`` (scoring is then loud where it matters).
        """
        agent = [tab for tab in tabs if tab.traffic == "agent"]
        if self.active_page is not None:
            page = self.active_page()
            tab = self.tabs.get(page) if page is not None else None
            if tab is not None and tab.traffic == "agent" and tab in agent:
                return tab, "harness"
        if not agent:
            return None, "unknown"
        if len(agent) == 1:
            return agent[0], "only_tab"
        chosen: Tab | None = None
        chosen_key: tuple[float, int] | None = None
        source: CurrentTabSource = "unknown"
        for order, tab in enumerate(agent):
            noted = self.activity.get(tab.page)
            at: float | None = noted[0] if noted else None
            how: CurrentTabSource = noted[1] if noted else "unknown"
            acted = self._last_acted(tab)
            if acted is not None and (at is None or acted > at):
                at, how = acted, "acted"
            if at is not None and (chosen_key is None or (at, order) > chosen_key):
                chosen, chosen_key, source = tab, (at, order), how
        if chosen is None:
            return agent[-1], "unknown"
        return chosen, source

    def current_page(self) -> Any:
        """The page ``active`` picks among the live agent tabs now (for the end-of-episode probe)."""
        tab, _ = self.active(self._live())
        return tab.page if tab is not None else self.primary_page

    def _last_acted(self, tab: Tab) -> float | None:
        if tab.page in self.crashed:
            return None
        try:
            return state.read_last_acted(tab.cdp, tab.frame_tree, tab.worlds)
        except Exception:  # a tab that cannot say is judged by the other signals
            return None

    def sessions(self) -> dict[str, TimedCDP]:
        """The CDP session per tab id of every followed tab that can still answer."""
        return {tab.tab_id: tab.cdp for tab in self.tabs.values() if tab.page not in self.crashed}

    def detach_dropped(self, tabs: list[Tab]) -> None:
        """Detach the sessions of ``tabs`` dropped during this capture; a new session follows each from now on."""
        for tab in tabs:
            if self.tabs.get(tab.page) is not tab:
                with contextlib.suppress(Exception):
                    tab.cdp.detach()  # if this one still works, each request would be recorded twice

    # -- detaching ---------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop every tab and context without a word to the browser (its connection is gone)."""
        self.tabs.clear()
        self.contexts.clear()

    def detach(self) -> None:
        """Close the CDP sessions and stop listening to the contexts (the pages stay open)."""
        with self.budget_scope():
            for tab in list(self.tabs.values()):
                if tab.page in self.crashed:
                    continue  # its session ends with the renderer; a detach would never be answered
                with contextlib.suppress(Exception):  # a session that cannot detach is gone already
                    tab.cdp.detach()
        self.tabs.clear()
        for context in self.contexts:
            with contextlib.suppress(Exception):  # a closed context emits nothing more anyway
                context.remove_listener("page", self.attach_safely)
                for event, handler in self.context_events.items():
                    context.remove_listener(event, handler)
        self.contexts.clear()


def _command_key(method: str, params: dict[str, Any] | None) -> bytes:
    return method.encode() + b"\0" + orjson.dumps(params, option=orjson.OPT_SORT_KEYS)


def _ignore_outcome(task: asyncio.Task[Any]) -> None:
    """Retrieve a dropped task's outcome, so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _run_inline(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The result of a coroutine that never suspends (its awaits are plain calls)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a CDP call of a session that is not Playwright's suspended")


_TAKES_TIMEOUT: dict[Any, bool] = {}


def _takes_timeout(send: Any) -> bool:
    """Whether Playwright's own ``CDPSession.send`` takes a timeout (1.5x does; older ones do not)."""
    function = getattr(send, "__func__", send)
    known = _TAKES_TIMEOUT.get(function)
    if known is None:
        known = _TAKES_TIMEOUT[function] = "timeout" in inspect.signature(function).parameters
    return known
