"""``CDPSessionLogger``: record the browser state after every agent action into a session file.

Flow: ``attach_to_page`` / ``attach_to_browsergym_env`` open one CDP session per tab (new tabs
included) and start collecting network events; each ``capture_state_snapshot(trigger)`` reads the
tabs, cookies and storage, drains the network events since the previous capture, and appends one
``Step`` to the ``*.partial`` session file; ``save_session(instance_id)`` finalizes it atomically.

Capture never raises into the caller: every failure becomes a ``CaptureFault`` in the step (or in
the session end record) and the episode goes on.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, Literal
from urllib.parse import urldefrag

import orjson
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from cdp_integration.capture import state
from cdp_integration.capture.network import BodyPolicy, NetworkRecorder
from cdp_integration.capture.probes import EvaluationRecorder, build_trajectory, webarena_config_file
from cdp_integration.errors import CaptureError, SessionFormatError
from cdp_integration.session.models import (
    CaptureFault,
    Cookie,
    Evaluation,
    NetworkExchange,
    PageResource,
    RequestInfo,
    ResponseInfo,
    SessionEnd,
    Step,
    TabState,
    TrafficOrigin,
)
from cdp_integration.session.redact import RedactionPolicy, Redactor
from cdp_integration.session.store import (
    PARTIAL_SUFFIX,
    SESSION_SUFFIX,
    SessionWriter,
    load_session,
    new_header,
)
from cdp_integration.webarena import use_site_urls

if TYPE_CHECKING:
    from cdp_integration.capture.cdp_attach import BrowserThread

__all__ = ["CDPSessionLogger", "DomScope"]

DomScope = Literal["all_tabs", "active_tab"]

_NETWORK_BUFFERS = {"maxTotalBufferSize": 100_000_000, "maxResourceBufferSize": 20_000_000}


def _fault(stage: str, exc: BaseException, tab_id: str | None = None) -> CaptureFault:
    return CaptureFault(
        stage=stage, error_type=type(exc).__name__, message=str(exc).strip()[:1000], tab_id=tab_id
    )


def _in_browser_thread[**P, R](
    method: Callable[Concatenate[CDPSessionLogger, P], R],
) -> Callable[Concatenate[CDPSessionLogger, P], R]:
    """Run the method in the thread owning the ``attach_to_cdp`` connection (Playwright's objects
    are bound to it); inline when not attached that way."""

    @functools.wraps(method)
    def run(self: CDPSessionLogger, *args: P.args, **kwargs: P.kwargs) -> R:
        thread = self._browser_thread
        if thread is None or thread.in_thread:
            return method(self, *args, **kwargs)
        return thread.call(method, self, *args, **kwargs)

    return run


class _TimedCDP:
    """A tab's CDP session whose commands give up after ``timeout_ms`` (Playwright's wait forever).

    A hung or crashed renderer never answers: without a limit it would block the capture, and with
    it the agent's episode. After one timeout the tab's renderer is taken as unresponsive until
    ``reset()`` (the next capture): its other commands fail at once instead of each waiting the
    full time. ``Target.*`` and ``Browser.*`` are answered by the browser process and still sent.
    """

    def __init__(self, session: Any, timeout_ms: float) -> None:
        self.session = session
        self.timeout_ms = timeout_ms
        self.timed_out: str | None = None

    def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        if self.timed_out is not None and not method.startswith(("Target.", "Browser.")):
            raise TimeoutError(f"{method} not sent: {self.timed_out} timed out in this capture")
        try:
            return self.session.send(method, params, timeout=self.timeout_ms)
        except PlaywrightTimeoutError:
            self.timed_out = method
            raise

    def reset(self) -> None:
        self.timed_out = None

    def on(self, event: str, handler: Callable[[Any], None]) -> None:
        self.session.on(event, handler)

    def detach(self) -> None:
        self.session.detach()


@dataclass
class _Tab:
    page: Any
    cdp: _TimedCDP
    tab_id: str
    origin: TrafficOrigin
    page_enabled: bool = False
    """``Page.enable`` sent (``Page.getResourceContent`` needs it; enabled on first use only)."""
    frame_tree: dict[str, Any] | None = None
    """This capture's frame tree, read once for the readers that need it."""
    worlds: dict[str, int] = field(default_factory=dict)
    """The isolated world's execution context per document (loader id)."""


@dataclass
class _EarlyRequest:
    """A request seen by Playwright before the tab's CDP session existed (a new tab's first load)."""

    request: Any
    seen: float
    origin: TrafficOrigin
    response: Any = None
    """Kept from Playwright's ``response`` event: still readable after the tab has closed."""


class CDPSessionLogger:
    """Records DOM, HTML, cookies, storage, tabs and network traffic after each step.

    ``session_dir`` defaults to ``$WEBARENA_CDP_SESSION_DIR`` (else ``./cdp_sessions``). Options:
    ``dom`` (which tabs get DOMSnapshot + HTML), ``reuse_observation_dom`` (store BrowserGym's own
    per-step snapshot of the active tab instead of taking a second), ``own_dom_snapshot`` (take
    Chromium's DOMSnapshot for tabs with no observation snapshot; off by default: ~0.5 s on a
    15,000-node page, and replay answers ``DOMSnapshot.captureSnapshot`` from the captured page
    without it; on when ``redact`` is set, since typed passwords are found in it), ``page_resources`` (CDP resource types whose bodies are stored once per URL so
    pages render offline: stylesheets by default), ``frames`` (same-origin iframes' documents) and
    ``cssom_styles`` (adopted and CSSOM-inserted style rules), ``screenshot``, ``accessibility_tree``,
    ``response_bodies`` (``documents``, ``all`` or ``none``), ``max_html_bytes``, ``compresslevel``,
    ``redact`` (``True`` or a ``RedactionPolicy``: secrets are replaced before anything is written),
    ``cdp_timeout_ms`` (a CDP command not answered in this time is a fault: a hung or crashed tab).
    """

    def __init__(
        self,
        session_dir: str | os.PathLike[str] | None = None,
        *,
        instance_id: str | None = None,
        dom: DomScope = "all_tabs",
        screenshot: bool = False,
        accessibility_tree: bool = False,
        response_bodies: BodyPolicy = "documents",
        max_html_bytes: int = 20_000_000,
        reuse_observation_dom: bool = True,
        own_dom_snapshot: bool = False,
        page_resources: Collection[str] = ("Stylesheet",),
        frames: bool = True,
        cssom_styles: bool = True,
        compresslevel: int = 3,
        record_evaluations: bool = True,
        task: dict[str, Any] | None = None,
        redact: bool | RedactionPolicy = False,
        cdp_timeout_ms: float = 30_000,
    ) -> None:
        configured = session_dir or os.environ.get("WEBARENA_CDP_SESSION_DIR") or "cdp_sessions"
        self.session_dir = Path(configured)
        self.instance_id = instance_id or os.environ.get("WEBARENA_CDP_INSTANCE_ID") or None
        self.options: dict[str, Any] = {
            "dom": dom,
            "screenshot": screenshot,
            "accessibility_tree": accessibility_tree,
            "response_bodies": response_bodies,
            "max_html_bytes": max_html_bytes,
            "reuse_observation_dom": reuse_observation_dom,
            "own_dom_snapshot": own_dom_snapshot,
            "page_resources": list(page_resources),
            "frames": frames,
            "cssom_styles": cssom_styles,
            "compresslevel": compresslevel,
            "record_evaluations": record_evaluations,
            "cdp_timeout_ms": cdp_timeout_ms,
        }
        self.task: dict[str, Any] = dict(task or {})
        self._redactor = Redactor(redact if isinstance(redact, RedactionPolicy) else None) if redact else None
        if redact:
            self.options["redacted"] = True
        self._network = NetworkRecorder(bodies=response_bodies)
        self._tabs: dict[Any, _Tab] = {}
        self._contexts: list[Any] = []
        self._early: dict[Any, _EarlyRequest] = {}
        self._resource_urls: set[str] = set()
        """Subresources already stored in this session (by URL)."""
        self._crashed: set[Any] = set()
        """Pages whose renderer crashed: their CDP sessions would never answer a command again."""
        self._primary_page: Any = None
        self._browser_thread: BrowserThread | None = None
        self._active_page: Callable[[], Any] | None = None
        self._final_answer: Callable[[], str | None] | None = None
        self._origin: TrafficOrigin = "agent"
        self._writer: SessionWriter | None = None
        self._unwritten: list[Step] = []
        self._unsaved_network: list[NetworkExchange] = []
        self._pending_faults: list[CaptureFault] = []
        self._rewards: list[float] = []
        self._browser_version: str | None = None
        self._user_agent: str | None = None
        self._pending_evaluation: Evaluation | None = None
        self._probe: Evaluation | None = None
        self.steps_captured = 0
        self.last_step: Step | None = None
        self.saved_path: Path | None = None
        self._default_stem = f"session-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """The file name without an instance id; unique, since loggers of one process may write at once."""

    # -- attaching ---------------------------------------------------------------------------

    def attach_to_page(self, page: Any) -> None:
        """Follow ``page``, every tab of its browser context, and tabs opened later."""
        self._primary_page = page
        self._attach_context(page.context)
        self._attach_tab(page)

    def attach_to_cdp(
        self,
        endpoint: str,
        *,
        active_target: Callable[[], str | None] | None = None,
        timeout_ms: float = 30_000,
    ) -> None:
        """Follow every tab of every context of the running Chromium at ``endpoint``, new tabs too.

        ``endpoint``: ``http://host:port`` or a ``ws://`` DevTools URL (else ``CaptureError``). The
        connection lives in its own thread (``capture.cdp_attach``), so this logger may then be used
        from any thread or asyncio loop. ``active_target()``: the target id of the agent's current tab
        (default: the newest tab). A failed connection is a fault of the next step; ``detach()``
        leaves the browser running.
        """
        from cdp_integration.capture.cdp_attach import BrowserThread, check_endpoint

        thread = BrowserThread(check_endpoint(endpoint), timeout_ms=timeout_ms)
        if thread.browser is None:
            thread.close()
            self._pending_faults.append(_fault("attach", thread.error or CaptureError("no browser")))
            return
        browser = thread.browser

        def follow_contexts() -> None:
            for context in list(browser.contexts):
                self._attach_context(context)

        def active_page() -> Any:
            target = active_target() if active_target is not None else None
            live = [t for t in self._tabs.values() if t.origin == "agent" and not t.page.is_closed()]
            chosen = next((t for t in live if t.tab_id == target), live[-1] if live else None)
            return chosen.page if chosen is not None else None

        self._browser_thread = thread
        self._active_page = active_page
        thread.call(follow_contexts)
        thread.on_idle = follow_contexts

    def attach_to_browsergym_env(self, env: Any, *, auto_capture: bool = True) -> None:
        """Attach to a BrowserGym env (``env.unwrapped.page``); follow its active-page switches.

        With ``auto_capture``, the env's ``reset`` and ``step`` are wrapped on this instance so a
        snapshot is captured after reset and after every action (with the live reward); the
        task's ``validate()`` runs are marked so the evaluator's own tabs count as evaluator traffic.
        """
        core = env.unwrapped
        self._active_page = lambda: core.page
        self._final_answer = lambda: _last_assistant_message(core)
        self.task.setdefault("goal", _goal_text(core))
        original_validate = core._task_validate

        def validate_as_evaluator() -> Any:
            with self.evaluation_phase():
                task: Any = getattr(core, "task", None)
                evaluator = getattr(task, "evaluator", None)
                if evaluator is None or not self.options["record_evaluations"]:
                    return original_validate()
                messages = getattr(getattr(core, "chat", None), "messages", None) or []
                recorder = EvaluationRecorder(
                    "validate", chat_role=messages[-1].get("role") if messages else None
                )
                task.evaluator = recorder.wrap(evaluator)
                try:
                    return original_validate()
                finally:
                    task.evaluator = evaluator
                    with contextlib.suppress(Exception):
                        self._pending_evaluation = recorder.result()

        core._task_validate = validate_as_evaluator
        if getattr(core, "page", None) is not None:
            self.attach_to_page(core.page)
        if not auto_capture:
            return
        original_reset, original_step = core.reset, core.step

        def reset(*args: Any, **kwargs: Any) -> Any:
            result = original_reset(*args, **kwargs)
            self.attach_to_page(core.page)
            self.task.update(
                {"env_id": getattr(env.spec, "id", None) if env.spec else None, "goal": _goal_text(core)}
            )
            self.task.update(_webarena_task_facts(getattr(core, "task", None)))
            self.capture_state_snapshot("reset", observed_dom=self._observed_dom(result))
            return result

        def step(action: str, *args: Any, **kwargs: Any) -> Any:
            result = original_step(action, *args, **kwargs)
            reward = result[1] if isinstance(result, tuple) and len(result) > 1 else None
            self.capture_state_snapshot(
                "action",
                action=action,
                reward=float(reward) if isinstance(reward, int | float) else None,
                observed_dom=self._observed_dom(result),
            )
            return result

        core.reset, core.step = reset, step

    def _observed_dom(self, result: Any) -> dict[str, Any] | None:
        """BrowserGym's own DOM snapshot of this step (with DOM rects), when reuse is on."""
        if not self.options["reuse_observation_dom"] or not isinstance(result, tuple) or not result:
            return None
        obs = result[0]
        dom = obs.get("dom_object") if isinstance(obs, dict) else None
        return dom if isinstance(dom, dict) and "documents" in dom else None

    @contextlib.contextmanager
    def evaluation_phase(self) -> Iterator[None]:
        """Within this block, newly opened tabs and their traffic are tagged ``evaluator``."""
        previous, self._origin = self._origin, "evaluator"
        try:
            yield
        finally:
            self._origin = previous

    def _attach_context(self, context: Any) -> None:
        if any(known is context for known in self._contexts):
            return
        self._contexts.append(context)
        context.on("page", self._attach_tab_safely)
        context.on("request", self._on_request)
        context.on("response", self._on_response)
        for page in list(context.pages):
            self._attach_tab_safely(page)

    def _attach_tab_safely(self, page: Any) -> None:
        try:
            self._attach_tab(page)
        except Exception as exc:
            self._pending_faults.append(_fault("attach", exc))

    def _attach_tab(self, page: Any) -> None:
        if page in self._tabs or page.is_closed():
            return
        cdp = _TimedCDP(page.context.new_cdp_session(page), self.options["cdp_timeout_ms"])
        page.on("crash", self._on_crash)
        tab_id = state.read_target_info(cdp)["targetId"]
        tab = _Tab(page=page, cdp=cdp, tab_id=tab_id, origin=self._origin)
        self._network.listen(cdp, tab_id, lambda: tab.origin)
        cdp.send("Network.enable", _NETWORK_BUFFERS)
        self._tabs[page] = tab
        if self._browser_version is None:
            version = cdp.send("Browser.getVersion")
            self._browser_version = version.get("product")
            self._user_agent = version.get("userAgent")

    def _on_crash(self, page: Any) -> None:
        self._crashed.add(page)

    def _on_request(self, request: Any) -> None:
        try:
            page = request.frame.page
        except Exception:
            page = None
        if page is None or page not in self._tabs:
            self._early[request] = _EarlyRequest(request, time.time(), self._origin)

    def _on_response(self, response: Any) -> None:
        item = self._early.get(response.request)
        if item is not None:
            item.response = response

    # -- capturing ---------------------------------------------------------------------------

    @_in_browser_thread
    def capture_state_snapshot(
        self,
        trigger: str,
        *,
        action: str | None = None,
        reward: float | None = None,
        observed_dom: dict[str, Any] | None = None,
    ) -> Step | None:
        """Capture and append one step. Never raises; failures are recorded in the step.

        ``observed_dom``: a ``DOMSnapshot.captureSnapshot`` of the active tab the caller took for
        this same state (BrowserGym's ``obs["dom_object"]``); stored instead of taking another, which
        on large pages is most of the capture's cost.
        """
        started = time.perf_counter()
        faults: list[CaptureFault] = self._pending_faults
        self._pending_faults = []
        try:
            step = self._capture(trigger, action, reward, faults, started, observed_dom)
        except Exception as exc:
            faults.append(_fault("capture", exc))
            step = Step(
                index=self.steps_captured,
                trigger=trigger,
                action=action,
                timestamp=time.time(),
                url="",
                title="",
                tabs=[],
                reward=reward,
                faults=faults,
                capture_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        evaluation, self._pending_evaluation = self._pending_evaluation, None
        if evaluation is not None:
            step = step.model_copy(update={"evaluation": evaluation})
        if reward is not None:
            self._rewards.append(reward)
        self._append(step)
        return step

    def _pump_events(self) -> None:
        """One round trip, so Playwright dispatches queued events (new tabs) before we read tabs."""
        for tab in list(self._tabs.values()):
            if not tab.page.is_closed() and tab.page not in self._crashed:
                with contextlib.suppress(Exception):
                    tab.cdp.send("Runtime.evaluate", {"expression": "0", "returnByValue": True})
                return

    def _sync_tabs(self) -> None:
        """Attach to tabs we do not follow yet (missed events, or a session dropped after a failure)."""
        for context in self._contexts:
            with contextlib.suppress(Exception):
                for page in list(context.pages):
                    if page not in self._tabs:
                        self._attach_tab_safely(page)

    def _live_tabs(self) -> list[_Tab]:
        for page in list(self._tabs):
            if page.is_closed():
                del self._tabs[page]
        return [tab for tab in self._tabs.values() if tab.origin == "agent"]

    def _current_active(self, tabs: list[_Tab]) -> _Tab | None:
        candidates = [self._active_page() if self._active_page else None, self._primary_page]
        for page in candidates:
            tab = self._tabs.get(page) if page is not None else None
            if tab is not None and tab.origin == "agent":
                return tab
        return tabs[-1] if tabs else None

    def _capture(
        self,
        trigger: str,
        action: str | None,
        reward: float | None,
        faults: list[CaptureFault],
        started: float,
        observed_dom: dict[str, Any] | None = None,
    ) -> Step:
        if self._active_page is not None:
            active_page = self._active_page()
            if active_page is not None and active_page not in self._tabs and not active_page.is_closed():
                self._attach_context(active_page.context)
                self._attach_tab_safely(active_page)
        for tab in self._tabs.values():
            tab.cdp.reset()
        self._pump_events()
        self._sync_tabs()
        tabs = self._live_tabs()
        active = self._current_active(tabs)
        origins = {
            tab.tab_id: [] if tab.page in self._crashed else self._origins(tab, faults) for tab in tabs
        }
        tab_states = [
            self._capture_tab(
                tab, tab is active, origins[tab.tab_id], faults, observed_dom if tab is active else None
            )
            for tab in tabs
        ]
        cookies: list[Cookie] = []
        local_storage: dict[str, dict[str, str]] = {}
        if active is not None:
            try:
                cookies = state.read_cookies(active.cdp)
            except Exception as exc:
                faults.append(_fault("cookies", exc, active.tab_id))
            local_storage = self._local_storage(tabs, origins, faults)
        resources = self._new_resources(tabs, faults)
        network = self._drain_network(faults, final=False)
        for tab in tabs:
            if self._tabs.get(tab.page) is not tab:  # dropped above; a new session follows it from now on
                with contextlib.suppress(Exception):
                    tab.cdp.detach()  # if this one still works, each request would be recorded twice
        current = next((t for t in tab_states if t.active), None)
        return Step(
            index=self.steps_captured,
            trigger=trigger,
            action=action,
            timestamp=time.time(),
            url=current.url if current else "",
            title=current.title if current else "",
            tabs=tab_states,
            cookies=cookies,
            local_storage=local_storage,
            network=network,
            resources=resources,
            reward=reward,
            capture_ms=round((time.perf_counter() - started) * 1000, 3),
            faults=faults,
        )

    def _new_resources(self, tabs: list[_Tab], faults: list[CaptureFault]) -> list[PageResource]:
        """Bodies of the tabs' subresources (``page_resources`` types) this session has not stored yet.

        Read from the renderer's own copy, so a stylesheet served from cache or loaded before the
        logger attached is there too. A URL is read once per session.
        """
        found: list[PageResource] = []
        types = self.options["page_resources"]
        for tab in tabs if types else ():
            if tab.page in self._crashed:
                continue
            try:
                for frame_id, url, kind, mime in state.read_page_resources(tab.cdp, types):
                    if url in self._resource_urls or not url.startswith(("http://", "https://")):
                        continue
                    if not tab.page_enabled:
                        tab.cdp.send("Page.enable")
                        tab.page_enabled = True
                    body, base64_encoded = state.read_resource_content(tab.cdp, frame_id, url)
                    self._resource_urls.add(url)
                    found.append(
                        PageResource(
                            url=url, type=kind, mime_type=mime, body=body, body_base64=base64_encoded
                        )
                    )
            except Exception as exc:
                faults.append(_fault("resources", exc, tab.tab_id))
        return found

    def _origins(self, tab: _Tab, faults: list[CaptureFault]) -> list[str]:
        tab.frame_tree = None
        try:
            tab.frame_tree = state.read_frame_tree(tab.cdp, resources=False)
            return state.read_origins(tab.cdp, tab.frame_tree)
        except Exception as exc:
            faults.append(_fault("origins", exc, tab.tab_id))
            return []

    def _capture_tab(
        self,
        tab: _Tab,
        active: bool,
        origins: list[str],
        faults: list[CaptureFault],
        observed_dom: dict[str, Any] | None = None,
    ) -> TabState:
        if tab.page in self._crashed:
            faults.append(
                CaptureFault(
                    stage="tab",
                    error_type="TargetCrashed",
                    message="the tab's renderer crashed",
                    tab_id=tab.tab_id,
                )
            )
            return TabState(tab_id=tab.tab_id, url=tab.page.url, title="", active=active)
        url, title = "", ""
        try:
            info = state.read_target_info(tab.cdp)
            url, title = info.get("url", ""), info.get("title", "")
        except Exception as exc:
            faults.append(_fault("tab", exc, tab.tab_id))
            self._tabs.pop(tab.page, None)  # its CDP session is unusable: re-attach at the next capture
            with contextlib.suppress(Exception):
                url, title = tab.page.url, tab.page.title()
            return TabState(tab_id=tab.tab_id, url=url, title=title, active=active)
        fields: dict[str, Any] = {"dom_snapshot_source": "observation" if observed_dom is not None else "cdp"}
        if active or self.options["dom"] == "all_tabs":
            # Redaction learns typed passwords from the snapshot's input values (the HTML lacks them),
            # so a redacting logger takes one even when ``own_dom_snapshot`` is off.
            own = self.options["own_dom_snapshot"] or self._redactor is not None
            for name, read in (
                ("dom_snapshot", lambda: observed_dom or (state.read_dom_snapshot(tab.cdp) if own else None)),
                ("html", lambda: state.read_html(tab.cdp, max_bytes=self.options["max_html_bytes"])),
            ):
                try:
                    fields[name] = read()
                except Exception as exc:
                    faults.append(_fault(name, exc, tab.tab_id))
            extras: list[tuple[str, Callable[[], Any]]] = []
            if self.options["frames"]:
                extras.append(
                    (
                        "frames",
                        lambda: state.read_frames(
                            tab.cdp, max_bytes=self.options["max_html_bytes"], tree=tab.frame_tree
                        ),
                    )
                )
            if self.options["cssom_styles"]:
                extras.append(
                    ("cssom_styles", lambda: state.read_cssom_styles(tab.cdp, tab.frame_tree, tab.worlds))
                )
            for name, read in extras:
                try:
                    fields[name] = read()
                except Exception as exc:
                    faults.append(_fault(name, exc, tab.tab_id))
        if active and self.options["screenshot"]:
            try:
                fields["screenshot_png"] = state.read_screenshot(tab.cdp)
            except Exception as exc:
                faults.append(_fault("screenshot", exc, tab.tab_id))
        if active and self.options["accessibility_tree"]:
            try:
                fields["ax_tree"] = state.read_accessibility_tree(tab.cdp)
            except Exception as exc:
                faults.append(_fault("accessibility_tree", exc, tab.tab_id))
        session_storage: dict[str, dict[str, str]] = {}
        try:
            for origin in origins:
                session_storage[origin] = state.read_storage(tab.cdp, origin, local=False)
        except Exception as exc:
            faults.append(_fault("session_storage", exc, tab.tab_id))
        return TabState(
            tab_id=tab.tab_id, url=url, title=title, active=active, session_storage=session_storage, **fields
        )

    @staticmethod
    def _local_storage(
        tabs: list[_Tab], origins: dict[str, list[str]], faults: list[CaptureFault]
    ) -> dict[str, dict[str, str]]:
        """localStorage is shared by a context's tabs: read each origin once, from the first tab having it."""
        result: dict[str, dict[str, str]] = {}
        for tab in tabs:
            try:
                for origin in origins[tab.tab_id]:
                    if origin not in result:
                        result[origin] = state.read_storage(tab.cdp, origin, local=True)
            except Exception as exc:
                faults.append(_fault("local_storage", exc, tab.tab_id))
        return result

    def _drain_network(self, faults: list[CaptureFault], *, final: bool) -> list[NetworkExchange]:
        sessions = {tab.tab_id: tab.cdp for tab in self._tabs.values() if tab.page not in self._crashed}
        try:
            exchanges, body_faults = self._network.drain(sessions, final=final)
            faults.extend(body_faults)
        except Exception as exc:
            faults.append(_fault("network", exc))
            exchanges = []
        early, self._early = list(self._early.values()), {}
        seen = {(e.request.method, urldefrag(e.request.url).url) for e in exchanges}
        for item in early:
            try:
                exchange = self._exchange_from_playwright(item)
            except Exception as exc:
                faults.append(_fault("network.early", exc))
                continue
            if (exchange.request.method, urldefrag(exchange.request.url).url) not in seen:
                exchanges.append(exchange)
        exchanges.sort(key=lambda e: e.started)
        return exchanges

    def _exchange_from_playwright(self, item: _EarlyRequest) -> NetworkExchange:
        request = item.request
        try:
            tab = self._tabs.get(request.frame.page)
        except Exception:
            tab = next((t for t in reversed(self._tabs.values()) if t.page.url == request.url), None)
        origin: TrafficOrigin = (
            "evaluator" if item.origin == "evaluator" or (tab and tab.origin == "evaluator") else "agent"
        )
        response = item.response
        response_info = None
        if response is not None:
            response_headers = _wire_or_provisional(response)
            redirect = request.redirected_to
            body: tuple[str | None, bool] = (None, False)
            if redirect is None and (
                self.options["response_bodies"] == "all"
                or (self.options["response_bodies"] == "documents" and request.resource_type == "document")
            ):
                with contextlib.suppress(Exception):
                    raw = response.body()
                    try:
                        body = (raw.decode(), False)
                    except UnicodeDecodeError:
                        body = (base64.b64encode(raw).decode(), True)
            response_info = ResponseInfo(
                body=body[0],
                body_base64=body[1],
                status=response.status,
                status_text=response.status_text,
                headers=response_headers,
                redirect_url=redirect.url if redirect is not None else None,
                mime_type=response_headers.get("content-type", "").split(";")[0],
            )
        headers = _wire_or_provisional(request)
        return NetworkExchange(
            request_id=f"pw-{uuid.uuid4().hex[:12]}",
            tab_id=tab.tab_id if tab else None,
            origin=origin,
            source="playwright",
            started=item.seen,
            request=RequestInfo(
                method=request.method,
                url=request.url,
                headers=headers,
                headers_source="wire" if "sec-fetch-mode" in headers else "devtools",
                post_data=request.post_data,
                resource_type=request.resource_type.capitalize() if request.resource_type != "xhr" else "XHR",
            ),
            response=response_info,
            error=request.failure,
        )

    # -- writing -----------------------------------------------------------------------------

    def _file_stem(self, instance_id: str | None) -> str:
        return instance_id or self.instance_id or self._default_stem

    def _ensure_writer(self) -> SessionWriter:
        if self._writer is None:
            partial = self.session_dir / f"{self._file_stem(None)}{SESSION_SUFFIX}{PARTIAL_SUFFIX}"
            header = new_header(
                instance_id=self.instance_id,
                browser_version=self._browser_version,
                user_agent=self._user_agent,
                options=self.options,
                task=self.task,
            )
            self._writer = SessionWriter(partial, header, compresslevel=self.options["compresslevel"])
        return self._writer

    def _append(self, step: Step) -> None:
        """Write the step; after a write failure, keep steps in memory until ``save_session``."""
        if self._redactor is not None:
            step = self._redactor.capture_step(step)
        self.steps_captured += 1
        self.last_step = step
        if self._unwritten:
            self._unwritten.append(step)
            return
        try:
            self._ensure_writer().write_step(step)
        except Exception as exc:
            if self._writer is not None:
                with contextlib.suppress(Exception):  # closing flushes the buffer: fails the same way
                    self._writer.abort()
            self._unwritten.append(step)
            self._pending_faults.append(_fault("write", exc))

    @property
    def partial_path(self) -> Path | None:
        return self._writer.partial_path if self._writer else None

    @_in_browser_thread
    def save_session(self, instance_id: str | None = None, *, final_answer: str | None = None) -> Path:
        """Finalize the session file as ``<session_dir>/<instance_id>.session.jsonl.gz`` and return it.

        Raises ``CaptureError`` only if the file cannot be written at all (the steps stay in memory).
        """
        instance_id = instance_id or self.instance_id
        if final_answer is None and self._final_answer is not None:
            with contextlib.suppress(Exception):
                final_answer = self._final_answer()
        if (
            self._probe is None
            and self.task.get("config")
            and (self.last_step is None or self.last_step.evaluation is None)
        ):
            self.run_evaluation_probe(answer=final_answer)
        faults = self._pending_faults
        self._pending_faults = []
        leftover = self._unsaved_network + (self._drain_network(faults, final=True) if self._tabs else [])
        end = SessionEnd(
            task=_json_safe(self.task),
            probe=self._probe,
            network=leftover,
            ended=time.time(),
            instance_id=instance_id,
            final_answer=final_answer,
            rewards=self._rewards,
            faults=faults,
        )
        if self._redactor is not None:
            end = self._redactor.capture_end(end)
        final_path = self.session_dir / f"{self._file_stem(instance_id)}{SESSION_SUFFIX}"
        try:
            if self._unwritten:
                self._recover_writer()
            self.saved_path = self._ensure_writer().finish(end, final_path)
        except Exception as exc:  # a later save_session still records what this end record held
            self._pending_faults[:0] = [*faults, _fault("write", exc)]
            self._unsaved_network = leftover
            raise CaptureError(f"cannot write session {final_path}: {exc}") from exc
        return self.saved_path

    @_in_browser_thread
    def run_evaluation_probe(
        self, config: dict[str, Any] | None = None, *, answer: str | None = None
    ) -> Evaluation | None:
        """Run the official evaluator now, on the live final state, and record everything it asked.

        ``config``: the task's WebArena config (default: the one learned from the env). The
        trajectory is built as BrowserGym builds it: ``STOP`` with ``answer`` when there is one.
        Stored in the session's end record; the outcome never raises (a failure is a fault).
        """
        config = config or self.task.get("config")
        page = self._active_page() if self._active_page else self._primary_page
        if not config or page is None:
            return None
        self.task["config"] = config
        recorder = EvaluationRecorder("probe", chat_role="assistant" if answer is not None else None)
        try:
            from webarena.evaluation_harness.evaluators import evaluator_router

            with contextlib.ExitStack() as stack:
                stack.enter_context(self.evaluation_phase())
                if self.task.get("site_urls"):
                    stack.enter_context(use_site_urls(self.task["site_urls"]))
                config_file = stack.enter_context(webarena_config_file(config))
                evaluator = evaluator_router(config_file)
                trajectory = build_trajectory(answer, stopped=answer is not None)
                with contextlib.suppress(Exception):  # the evaluator's own error is in the record
                    recorder.run(evaluator, trajectory, config_file, page, None)
        except Exception as exc:
            self._pending_faults.append(_fault("probe", exc))
        self._probe = recorder.result()
        return self._probe

    def _recover_writer(self) -> None:
        """After a failed write: rewrite what the broken partial file holds, plus the held-back steps.

        If this fails too, every step is back in memory and the half-written file is gone, so a
        later ``save_session`` starts over without losing or repeating a step.
        """
        broken, self._writer = self._writer, None
        if broken is not None and broken.partial_path.exists():
            with contextlib.suppress(SessionFormatError):
                self._unwritten[:0] = load_session(broken.partial_path).steps
            broken.partial_path.unlink(missing_ok=True)
        try:
            writer = self._ensure_writer()
            for step in self._unwritten:
                writer.write_step(step)
        except Exception:
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    self._writer.abort()
                self._writer.partial_path.unlink(missing_ok=True)
                self._writer = None
            raise
        self._unwritten = []

    def detach(self) -> None:
        """Close the CDP sessions this logger opened (the pages, and an attached browser, stay open)."""
        thread, self._browser_thread = self._browser_thread, None
        if thread is not None:  # stopping our driver drops its sessions at once (a hung tab's detach hangs)
            thread.close()
            self._tabs.clear()
            self._contexts.clear()
            return
        for tab in list(self._tabs.values()):
            with contextlib.suppress(Exception):
                tab.cdp.detach()
        self._tabs.clear()
        for context in self._contexts:
            with contextlib.suppress(Exception):
                context.remove_listener("page", self._attach_tab_safely)
                context.remove_listener("request", self._on_request)
                context.remove_listener("response", self._on_response)
        self._contexts.clear()


def _wire_or_provisional(message: Any) -> dict[str, str]:
    """A Playwright request's or response's wire headers; they need a round trip that fails once the
    tab is closed, so fall back to the headers already at hand."""
    try:
        headers: dict[str, str] = message.all_headers()
    except Exception:
        headers = message.headers
    return headers


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    safe: dict[str, Any] = orjson.loads(orjson.dumps(value, default=str))
    return safe


def _webarena_task_facts(task: Any) -> dict[str, Any]:
    """A BrowserGym WebArena task's config and site URLs, which offline scoring needs."""
    facts: dict[str, Any] = {}
    config = getattr(task, "config", None)
    if isinstance(config, dict):
        facts["config"] = config
        facts["task_id"] = config.get("task_id")
    instance: Any = getattr(task, "webarena_instance", None)
    urls = getattr(instance, "urls", None)
    if isinstance(urls, dict):
        facts["site_urls"] = {name.upper(): url for name, url in urls.items()}
        if getattr(instance, "home_url", None):
            facts["site_urls"]["HOMEPAGE"] = instance.home_url
    return facts


def _goal_text(core: Any) -> str | None:
    goal = getattr(core, "goal_object", None)
    if isinstance(goal, list):
        return "\n".join(part.get("text", "") for part in goal if isinstance(part, dict)) or None
    return None


def _last_assistant_message(core: Any) -> str | None:
    """The agent's answer: the last chat message when the agent wrote it.

    BrowserGym opens every chat with its own assistant greeting; that one is not an answer.
    """
    messages = getattr(getattr(core, "chat", None), "messages", None) or []
    if len(messages) > 1 and messages[-1].get("role") == "assistant":
        return str(messages[-1].get("message"))
    return None
