"""``CDPSessionLogger``: record the browser state after every agent action into a session file.

Flow: ``attach_to_page`` / ``attach_to_browsergym_env`` open one CDP session per tab (new tabs
included) and start collecting network events; each ``capture_state_snapshot(trigger)`` reads the
tabs, cookies and storage, drains the network events since the previous capture, and appends one
``Step`` to the ``*.partial`` session file; ``save_session(instance_id)`` finalizes it atomically.

Capture never raises into the caller: every failure becomes a ``CaptureFault`` in the step (or in
the session end record) and the episode goes on.

The logger wires parts with one job each and runs the capture sequence: ``tabs`` (the followed
tabs and their CDP sessions), ``reader`` (each tab's state), ``traffic`` (network exchanges, CDP's
and Playwright's), ``writer`` (the session file, recovered after a failed write), ``probes`` (the
evaluator's runs) and ``browsergym`` (the BrowserGym env adapter).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate

import orjson

from cdp_integration import storage
from cdp_integration.capture import state
from cdp_integration.capture.console import ConsoleRecorder
from cdp_integration.capture.faults import as_fault, fault
from cdp_integration.capture.network import BodyPolicy, NetworkRecorder
from cdp_integration.capture.options import CaptureOptions, DomScope
from cdp_integration.capture.probes import EpisodeEvaluations
from cdp_integration.capture.reader import StateReader
from cdp_integration.capture.reasoning import bounded_reasoning
from cdp_integration.capture.tabs import Tab, TabTracker
from cdp_integration.capture.traffic import TrafficRecorder
from cdp_integration.capture.writer import RecoveringWriter
from cdp_integration.errors import CaptureError
from cdp_integration.session.models import (
    EVALUATOR_WAIT_MS,
    AgentReasoning,
    CaptureFault,
    Cookie,
    Evaluation,
    NetworkExchange,
    SessionEnd,
    Settling,
    Step,
    TabState,
)
from cdp_integration.session.redact import RedactionPolicy, Redactor
from cdp_integration.session.store import new_header

if TYPE_CHECKING:
    from cdp_integration.capture.cdp_attach import BrowserThread
    from cdp_integration.session.models import SessionHeader

__all__ = ["CDPSessionLogger", "DomScope"]


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


class CDPSessionLogger:
    """Records DOM, HTML, cookies, storage, tabs and network traffic after each step.

    ``session_dir`` defaults to ``$WEBARENA_CDP_SESSION_DIR`` (else ``./cdp_sessions``). Options:
    ``dom`` (which tabs get DOMSnapshot + HTML), ``reuse_observation_dom`` (store BrowserGym's own
    per-step snapshot of the active tab instead of taking a second), ``own_dom_snapshot`` (take
    Chromium's DOMSnapshot for tabs with no observation snapshot; off by default: ~0.5 s on a
    15,000-node page, and replay answers ``DOMSnapshot.captureSnapshot`` from the captured page
    without it; on when ``redact`` is set without ``form_state``, since typed passwords are found in
    one or the other), ``page_resources`` (CDP resource types whose bodies are stored once per URL so
    pages render offline: stylesheets by default), ``frames`` (same-origin iframes' documents),
    ``cssom_styles`` (adopted and CSSOM-inserted style rules), ``form_state`` (what was typed, checked
    and selected in form controls, which the HTML lacks), ``console`` (the pages' console messages,
    uncaught errors and browser log entries, per step, bounded), ``thumbnail`` (a small WebP of the
    current tab's viewport per step, taken while the other reads run), ``screenshot`` (a full-size PNG
    instead), ``accessibility_tree``,
    ``response_bodies`` (``documents``, ``all`` or ``none``), ``max_html_bytes``, ``compresslevel``,
    ``redact`` (``True`` or a ``RedactionPolicy``: secrets are replaced before anything is written),
    ``cdp_timeout_ms`` (a CDP command to a renderer that already answered in this capture, not
    answered in this time, is a fault), ``stall_budget_ms`` (what one capture may lose, in total, to
    calls that never answer: a frozen renderer's first command, Playwright calls that wait on
    browser events such as ``Response.all_headers()``; each then falls back and is a fault, so a
    stall makes the step at most this much longer; see ``capture.deadline``).
    They are kept as ``options`` (a frozen ``CaptureOptions``).
    """

    def __init__(
        self,
        session_dir: str | os.PathLike[str] | None = None,
        *,
        instance_id: str | None = None,
        dom: DomScope = "all_tabs",
        screenshot: bool = False,
        thumbnail: bool = True,
        accessibility_tree: bool = False,
        response_bodies: BodyPolicy = "documents",
        max_html_bytes: int = 20_000_000,
        reuse_observation_dom: bool = True,
        own_dom_snapshot: bool = False,
        page_resources: Collection[str] = ("Stylesheet",),
        frames: bool = True,
        cssom_styles: bool = True,
        form_state: bool = True,
        console: bool = True,
        compresslevel: int = 3,
        record_evaluations: bool = True,
        task: dict[str, Any] | None = None,
        redact: bool | RedactionPolicy = False,
        cdp_timeout_ms: float = 30_000,
        stall_budget_ms: float = 2_000,
    ) -> None:
        self.options = CaptureOptions(
            dom=dom,
            screenshot=screenshot,
            thumbnail=thumbnail,
            accessibility_tree=accessibility_tree,
            response_bodies=response_bodies,
            max_html_bytes=max_html_bytes,
            reuse_observation_dom=reuse_observation_dom,
            own_dom_snapshot=own_dom_snapshot,
            page_resources=tuple(page_resources),
            frames=frames,
            cssom_styles=cssom_styles,
            form_state=form_state,
            console=console,
            compresslevel=compresslevel,
            record_evaluations=record_evaluations,
            redact=redact,
            cdp_timeout_ms=cdp_timeout_ms,
            stall_budget_ms=stall_budget_ms,
        )
        self.task: dict[str, Any] = dict(task or {})
        self._redactor = Redactor(redact if isinstance(redact, RedactionPolicy) else None) if redact else None
        self._pending_faults: list[CaptureFault] = []
        """Faults of the next step (or of the end record): shared with the parts, never replaced."""
        network = NetworkRecorder(bodies=response_bodies, resource_types=self.options.page_resources)
        self._tracker = TabTracker(
            network,
            self._pending_faults,
            cdp_timeout_ms=cdp_timeout_ms,
            stall_budget_ms=stall_budget_ms,
            frame_tree_resources=bool(self.options.page_resources),
            console=ConsoleRecorder() if console else None,
        )
        self._traffic = TrafficRecorder(network, self._tracker, bodies=response_bodies)
        # Redaction learns typed passwords from the form state, or else from the snapshot's input
        # values (the HTML lacks them): without form state a redacting logger takes a snapshot.
        self._reader = StateReader(
            self.options,
            self._tracker,
            own_dom_snapshot=own_dom_snapshot or (self._redactor is not None and not form_state),
        )
        network.stored_urls = self._reader.resource_urls
        configured = str(session_dir or os.environ.get("WEBARENA_CDP_SESSION_DIR") or "cdp_sessions")
        local_dir = storage.local_path(configured)
        self.remote_dir: str | None = None if local_dir is not None else configured
        """A storage URL: the session is written under ``storage.staging_dir`` and uploaded when saved."""
        self._writer = RecoveringWriter(
            local_dir if local_dir is not None else storage.staging_dir(configured),
            instance_id or os.environ.get("WEBARENA_CDP_INSTANCE_ID") or None,
            self._header,
            self._pending_faults,
            compresslevel=compresslevel,
        )
        self._evaluations = EpisodeEvaluations()
        self._reasoning: list[AgentReasoning] = []
        self._reasoning_lock = threading.Lock()
        self._browser_thread: BrowserThread | None = None
        self._final_answer: Callable[[], str | None] | None = None
        self._unsaved_network: list[NetworkExchange] = []
        self._rewards: list[float] = []
        self.steps_captured = 0
        self.last_step: Step | None = None
        """The step captured last, as written, except DOM snapshots taken from the observation (see
        ``_without_observed_snapshots``)."""
        self.saved_path: Path | None = None

    @property
    def session_dir(self) -> Path:
        return self._writer.session_dir

    @session_dir.setter
    def session_dir(self, value: Path) -> None:
        self._writer.session_dir = value

    @property
    def instance_id(self) -> str | None:
        return self._writer.instance_id

    @instance_id.setter
    def instance_id(self, value: str | None) -> None:
        self._writer.instance_id = value

    @property
    def partial_path(self) -> Path | None:
        return self._writer.partial_path

    def _header(self) -> SessionHeader:
        return new_header(
            instance_id=self.instance_id,
            browser_version=self._tracker.browser_version,
            user_agent=self._tracker.user_agent,
            options=self.options.header(),
            task=self.task,
        )

    # -- attaching ---------------------------------------------------------------------------

    def attach_to_page(self, page: Any, *, current_page: Callable[[], Any] | None = None) -> None:
        """Follow ``page``, every tab of its browser context, and tabs opened later.

        The current tab of each step (the one the end-of-episode evaluator asks, and the ``active`` one
        offline) is ``current_page()`` when given (the agent's harness knows it: return its page, or None
        when it cannot say); otherwise the tab the agent last opened, navigated or acted in, starting
        with ``page``. ``mark_current_page`` says it explicitly.
        """
        tracker = self._tracker
        tracker.primary_page = page
        if current_page is not None:
            tracker.active_page = current_page
        if page not in tracker.activity:
            tracker.note(page, "attached")
        tracker.attach_context(page.context)
        tracker.attach(page)

    def mark_current_page(self, page: Any) -> None:
        """From now on ``page`` is the agent's current tab, until it opens, navigates or acts in another."""
        self._tracker.note(page, "explicit")

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
        (its harness's focused tab; None when it cannot say); without it, the tab the agent last opened,
        navigated or acted in. A failed connection is a fault of the next step; ``detach()`` leaves the
        browser running.
        """
        from cdp_integration.capture.cdp_attach import BrowserThread, check_endpoint

        thread = BrowserThread(check_endpoint(endpoint), timeout_ms=timeout_ms)
        if thread.browser is None:
            thread.close()
            self._pending_faults.append(fault("attach", thread.error or CaptureError("no browser")))
            return
        browser = thread.browser
        tracker = self._tracker

        def follow_contexts() -> None:
            for context in list(browser.contexts):
                tracker.attach_context(context)

        def active_page() -> Any:
            target = active_target() if active_target is not None else None
            live = [t for t in tracker.tabs.values() if t.traffic == "agent" and not t.page.is_closed()]
            chosen = next((t for t in live if t.tab_id == target), None)
            return chosen.page if chosen is not None else None

        self._browser_thread = thread
        if active_target is not None:
            tracker.active_page = active_page
        thread.call(follow_contexts)
        thread.on_idle = follow_contexts

    def attach_to_browsergym_env(self, env: Any, *, auto_capture: bool = True) -> None:
        """Attach to a BrowserGym env (``env.unwrapped.page``); follow its active-page switches.

        With ``auto_capture``, the env's ``reset`` and ``step`` are wrapped on this instance so a
        snapshot is captured after reset and after every action (with the live reward); the
        task's ``validate()`` runs are marked so the evaluator's own tabs count as evaluator traffic.
        """
        from cdp_integration.capture.browsergym import attach_to_env

        attach_to_env(self, env, auto_capture=auto_capture)

    @contextlib.contextmanager
    def evaluation_phase(self) -> Iterator[None]:
        """Within this block, newly opened tabs and their traffic are tagged ``evaluator``."""
        previous, self._tracker.traffic = self._tracker.traffic, "evaluator"
        try:
            yield
        finally:
            self._tracker.traffic = previous

    # -- capturing ---------------------------------------------------------------------------

    @_in_browser_thread
    def capture_state_snapshot(
        self,
        trigger: str,
        *,
        action: str | None = None,
        reward: float | None = None,
        observed_dom: dict[str, Any] | None = None,
        observed_screenshot: Any = None,
        reasoning: AgentReasoning | Mapping[str, Any] | None = None,
    ) -> Step | None:
        """Capture and append one step. Never raises; failures are recorded in the step.

        ``reasoning``: why the agent took ``action`` (an ``AgentReasoning``, or a mapping with its
        fields: ``source``, ``thought``, ``messages`` of ``{role, text}``, ``tool_calls`` of ``{name,
        arguments, result}``, ``notes``), bounded and stored with the step; with what
        ``note_reasoning`` gathered since the last step.

        ``observed_dom``: a ``DOMSnapshot.captureSnapshot`` of the active tab the caller took for
        this same state (BrowserGym's ``obs["dom_object"]``); stored instead of taking another, which
        on large pages is most of the capture's cost. ``observed_screenshot``: the caller's own
        screenshot of the active tab in this state (BrowserGym's ``obs["screenshot"]``, an RGB array):
        the thumbnail is made from it instead of asking Chromium to draw another.
        """
        started = time.perf_counter()
        faults = self._take_pending_faults()
        step: Step | None = None
        with as_fault(faults, "capture"), self._tracker.budget_scope():
            step = self._capture(trigger, action, reward, faults, started, observed_dom, observed_screenshot)
        if step is None:
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
        evaluation = self._evaluations.take_pending()
        if evaluation is not None:
            step = step.model_copy(update={"evaluation": evaluation})
        noted = self._take_reasoning(reasoning)
        if noted is not None:
            step = step.model_copy(update={"reasoning": noted})
        if reward is not None:
            self._rewards.append(reward)
        self._append(step)
        return step

    def note_reasoning(self, reasoning: AgentReasoning | Mapping[str, Any]) -> None:
        """Keep what the agent thought, said or called for the next captured step (a harness that learns
        it before the action runs calls this; several calls add up). Never raises."""
        noted = bounded_reasoning(reasoning)
        if noted is None:
            return
        with self._reasoning_lock:
            self._reasoning.append(noted)

    def _take_reasoning(self, given: AgentReasoning | Mapping[str, Any] | None) -> AgentReasoning | None:
        with self._reasoning_lock:
            parts, self._reasoning = self._reasoning, []
        last = bounded_reasoning(given) if given is not None else None
        parts += [last] if last is not None else []
        if len(parts) <= 1:
            return parts[0] if parts else None
        return bounded_reasoning(
            {
                "source": parts[-1].source,
                "thought": "\n\n".join(p.thought for p in parts if p.thought),
                "messages": [m.model_dump() for p in parts for m in p.messages],
                "tool_calls": [c.model_dump() for p in parts for c in p.tool_calls],
                "notes": {k: v for p in parts for k, v in p.notes.items()},
            }
        )

    def _take_pending_faults(self) -> list[CaptureFault]:
        faults = list(self._pending_faults)
        self._pending_faults.clear()
        return faults

    def _capture(
        self,
        trigger: str,
        action: str | None,
        reward: float | None,
        faults: list[CaptureFault],
        started: float,
        observed_dom: dict[str, Any] | None = None,
        observed_screenshot: Any = None,
    ) -> Step:
        reader = self._reader
        tabs = self._tracker.prepare()
        active, current_tab_source = self._tracker.active(tabs)
        origins = {tab.tab_id: reader.origins(tab, faults) for tab in tabs}
        if active is not None:  # read after the tabs, sent with their first reads
            reader.prefetch_shared(active, tabs, origins)
        self._traffic.prefetch_bodies()
        tab_states = [
            reader.tab(
                tab,
                tab is active,
                origins[tab.tab_id],
                faults,
                observed_dom if tab is active else None,
                observed_screenshot if tab is active else None,
            )
            for tab in tabs
        ]
        cookies: list[Cookie] = []
        local_storage: dict[str, dict[str, str]] = {}
        if active is not None:
            cookies = reader.cookies(active, faults)
            local_storage = reader.local_storage(tabs, origins, faults)
        network = self._traffic.drain(faults, final=False)
        resources, network = reader.new_resources(tabs, faults, network)
        console, console_dropped = self._tracker.console.take() if self._tracker.console else ([], 0)
        tab_states = [self._with_pending(tab) for tab in tab_states]
        self._tracker.detach_dropped(tabs)
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
            current_tab_source=current_tab_source if active is not None else None,
            capture_ms=round((time.perf_counter() - started) * 1000, 3),
            faults=faults,
            console=console,
            console_dropped=console_dropped,
        )

    def _with_pending(self, tab: TabState) -> TabState:
        """``tab`` with the requests and websockets its document had open at this capture."""
        if tab.settling is None:
            return tab
        requests, sockets = self._tracker.network.pending(tab.tab_id)
        settling = tab.settling.model_copy(update={"pending_requests": requests, "open_websockets": sockets})
        return tab.model_copy(update={"settling": settling})

    def _append(self, step: Step) -> None:
        if self._redactor is not None:
            step = self._redactor.capture_step(step)
        self.steps_captured += 1
        self._writer.append(step)
        self.last_step = _without_observed_snapshots(step)

    # -- ending ------------------------------------------------------------------------------

    @_in_browser_thread
    def save_session(self, instance_id: str | None = None, *, final_answer: str | None = None) -> Path:
        """Finalize the session file as ``<session_dir>/<instance_id>.session.jsonl.gz`` and return it.

        Raises ``CaptureError`` only if the file cannot be written at all (the steps stay in memory).
        """
        instance_id = instance_id or self.instance_id
        if final_answer is None and self._final_answer is not None:
            with contextlib.suppress(Exception):  # the agent's own answer source: whatever it raises
                final_answer = self._final_answer()
        if (
            self._evaluations.probe is None
            and self.task.get("config")
            and (self.last_step is None or self.last_step.evaluation is None)
        ):
            self.run_evaluation_probe(answer=final_answer)
        faults = self._take_pending_faults()
        with self._tracker.budget_scope():
            settling = self._settle(faults)
        with self._tracker.budget_scope():
            leftover = self._unsaved_network + (
                self._traffic.drain(faults, final=True) if self._tracker.tabs else []
            )
        end = SessionEnd(
            task=_json_safe(self.task),
            probe=self._evaluations.probe,
            network=leftover,
            ended=time.time(),
            instance_id=instance_id,
            final_answer=final_answer,
            rewards=self._rewards,
            settling=settling,
            faults=faults,
        )
        if self._redactor is not None:
            end = self._redactor.capture_end(end)
        final_path = self._writer.final_path(instance_id)
        try:
            self.saved_path = self._writer.finish(end, final_path)
        except Exception as exc:  # a later save_session still records what this end record held
            self._pending_faults[:0] = [*faults, fault("write", exc)]
            self._unsaved_network = leftover
            raise CaptureError(f"cannot write session {final_path}: {exc}") from exc
        if self.remote_dir is not None:  # the finished file as one object; the local copy stays
            target = storage.join(self.remote_dir, final_path.name)
            try:
                storage.upload(self.saved_path, target)
            except Exception as exc:
                raise CaptureError(
                    f"session saved to {self.saved_path}, not uploaded to {target}: {exc}"
                ) from exc
        return self.saved_path

    def _settle(self, faults: list[CaptureFault]) -> dict[str, Settling]:
        """The last step's scripted documents read again once the evaluator's wait after their load
        has passed (waiting for that, at most ``EVALUATOR_WAIT_MS``, once per session): whether a
        fresh load of them shows what the last step captured (``SessionEnd.settling``)."""
        last = self.last_step
        if last is None:
            return {}
        waiting: list[tuple[Tab, Settling]] = []
        for tab in list(self._tracker.tabs.values()):
            captured = next((t.settling for t in last.tabs if t.tab_id == tab.tab_id), None)
            if captured is None or captured.load_ms is None or self._tracker.is_crashed(tab):
                continue
            if tab.traffic == "agent" and not tab.page.is_closed():
                waiting.append((tab, captured))
        if not waiting:
            return {}
        wait = max(c.load_ms + EVALUATOR_WAIT_MS - c.age_ms for _, c in waiting if c.load_ms is not None)
        wait = wait - (time.time() - last.timestamp) * 1000 + 50
        if wait > 0:
            time.sleep(min(wait, EVALUATOR_WAIT_MS + 50) / 1000)
        found: dict[str, Settling] = {}
        for tab, captured in waiting:
            with as_fault(faults, "settling", tab.tab_id):
                now = state.read_settling(tab.cdp, None, tab.worlds)
                if now.time_origin == captured.time_origin:
                    found[tab.tab_id] = now
        return found

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
        tracker = self._tracker
        page = tracker.current_page()
        if not config or page is None:
            return None
        self.task["config"] = config
        with self.evaluation_phase():
            return self._evaluations.run_probe(
                config, page, answer=answer, site_urls=self.task.get("site_urls"), faults=self._pending_faults
            )

    def detach(self) -> None:
        """Close the CDP sessions this logger opened (the pages, and an attached browser, stay open)."""
        thread, self._browser_thread = self._browser_thread, None
        if thread is not None:  # stopping our driver drops its sessions at once (a hung tab's detach hangs)
            thread.close()
            self._tracker.forget()
            return
        self._tracker.detach()


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    safe: dict[str, Any] = orjson.loads(orjson.dumps(value, default=str))
    return safe


def _without_observed_snapshots(step: Step) -> Step:
    """``step`` without the DOM snapshots that are BrowserGym's observation objects.

    Written already; kept, they would outlive the observation they belong to, and freeing a
    15,000-node snapshot (~20 ms) would land in the next capture instead of in BrowserGym's step.
    """
    if not any(tab.dom_snapshot_source == "observation" and tab.dom_snapshot for tab in step.tabs):
        return step
    tabs = [
        tab.model_copy(update={"dom_snapshot": None}) if tab.dom_snapshot_source == "observation" else tab
        for tab in step.tabs
    ]
    return step.model_copy(update={"tabs": tabs})
