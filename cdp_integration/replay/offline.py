"""The offline DOM engine: a captured page loaded into a headless Chromium that cannot reach anything.

A replayed document is the HTML captured at a step, served to a fresh page at its original URL (so
``location``, relative links and same-origin storage behave), with the step's cookies and storage.
The page's own scripts do not run: the captured HTML already is the DOM those scripts produced, and
running them again would change it. ``page.evaluate`` still runs the caller's JavaScript.

**One fresh document per question.** Every ``open`` is a new page (new window, history, session
storage, globals) in a browser context wiped when its previous page was released (cookies, and every
kind of storage of every origin the sandbox served in it). Reusing a page was cheaper but wrong: a URL
differing only after ``#`` is a same-document navigation, so the previous question's document stayed.

**Nothing leaves the sandbox.** Every request of the page is routed; the document and any resource
whose body the session holds are served from the session, everything else is aborted. Underneath,
Chromium's proxy points at a closed port (loopback included), host names resolve to nothing, and
WebRTC may use no UDP that bypasses the proxy (so no STUN/TURN packet goes anywhere). A later
navigation of the top frame (a stored ``<meta http-equiv=refresh>``, a clicked link, a submitted form)
is answered "204 No Content", so the document stays; the guard refuses a question that navigated.

**Every question under a time limit** (``limit``): JavaScript that loops forever or awaits a promise
that never settles is stopped after ``SessionLimits.max_question_seconds`` by killing the sandbox's
renderer processes (a watchdog thread; CDP's own commands would queue behind the busy call), and the
question is a ``SandboxTimeoutError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html as html_module
import json
import os
import re
import signal
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from cdp_integration import environment
from cdp_integration.errors import ReplayMissError, SandboxTimeoutError
from cdp_integration.session.limits import ENV_VARS, SessionLimits
from cdp_integration.session.markup import iter_tags

__all__ = ["OFFLINE_CHROMIUM_ARGS", "OfflineBrowser", "ReplayDocument", "offline_browser"]

OFFLINE_CHROMIUM_ARGS: tuple[str, ...] = (
    *environment.CHROMIUM_ARGS,
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
"""Port 9 (discard) is closed; ``<-loopback>`` stops Chromium exempting 127.0.0.1 from the proxy;
WebRTC may only use the (dead) proxy, so it gathers no candidate and sends no UDP (measured: 5 STUN
packets reached a loopback listener without the two WebRTC flags, none with them)."""


@dataclass(frozen=True)
class Resource:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class ReplayDocument:
    """What a replayed page is made of."""

    url: str
    html: str
    cookies: tuple[Mapping[str, Any], ...] = ()
    """In Playwright's ``add_cookies`` form."""
    local_storage: Mapping[str, str] = field(default_factory=dict)
    session_storage: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, Resource] = field(default_factory=dict)
    """Bodies the session holds, by URL without fragment (stylesheets, iframes, fetched JSON, ...)."""
    frames: Mapping[str, str] = field(default_factory=dict)
    """Child frames' captured documents, by URL without fragment (served before ``resources``)."""
    cssom_styles: tuple[Mapping[str, Any], ...] = ()
    """Adopted and CSSOM-inserted style rules (``CSSOMStyle`` dumps), applied after load."""
    form_state: tuple[Mapping[str, Any], ...] = ()
    """What the agent typed, checked and selected (``FormControlState`` dumps), applied after load:
    only for the page as the agent left it, never for a fresh load of its URL."""
    marked_attributes: tuple[Mapping[str, Any], ...] = ()
    """The ``value``/``checked`` attributes BrowserGym's marking wrote (``MarkedAttributes`` dumps),
    set after the form state: only for the page as the agent left it, never for a fresh load."""
    pseudo_classes: tuple[Mapping[str, Any], ...] = ()
    """Elements left in ``:hover``/``:focus-within``/... states (``PseudoClassState`` dumps), forced
    after load: only for the page as the agent left it, never for a fresh load."""

    @functools.cached_property
    def scripted(self) -> str | None:
        """Why the live page ran scripts (from the captured HTML and frames), or None if it ran none."""
        from cdp_integration.replay.guard import captured_scripts

        for source in (self.html, *self.frames.values()):
            reason = captured_scripts(source)
            if reason is not None:
                return reason
        return None

    @functools.cached_property
    def dropped(self) -> str | None:
        """Why the captured markup lacks elements the live page had (a trace snapshot), or None."""
        from cdp_integration.session.markup import snapshot_dropped

        return next(filter(None, map(snapshot_dropped, (self.html, *self.frames.values()))), None)

    @functools.cached_property
    def styled_by_pointer(self) -> bool:
        """Whether any of its CSS (inline, stored stylesheets, CSSOM rules, frames) may select on
        ``:hover``, ``:active`` or ``:focus*``: else forcing those states changes nothing it renders."""
        needles = (":hover", ":focus", ":active")
        texts = [self.html, *self.frames.values()]
        texts += [
            css for style in self.cssom_styles for css in style.get("css") or () if isinstance(css, str)
        ]
        if any(needle in text for text in texts for needle in needles):
            return True
        raw = tuple(needle.encode() for needle in needles)
        return any(
            needle in resource.body
            for resource in self.resources.values()
            if "css" in str(resource.headers.get("content-type", "")).lower()
            for needle in raw
        )

    @functools.cached_property
    def refresh_targets(self) -> frozenset[str]:
        """URLs (without fragment) a stored ``<meta http-equiv=refresh>`` would navigate to."""
        return refresh_targets(self.html, self.url)


_HTTP_EQUIV_REFRESH = re.compile(r"\bhttp-equiv\s*=\s*[\"']?\s*refresh\b", re.IGNORECASE)
_CONTENT = re.compile(r"\bcontent\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.IGNORECASE)
_REFRESH_URL = re.compile(
    r"^\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?([\"']?)(.*?)\1\s*$", re.IGNORECASE | re.DOTALL
)


def refresh_targets(html: str, url: str) -> frozenset[str]:
    """Where ``html``'s ``<meta http-equiv=refresh>`` elements point (the page itself when they name
    no URL), resolved against ``url`` and without fragment."""
    targets = set()
    for start, end in iter_tags(html, "meta", quotes=False):  # linear, however many are unclosed
        tag = html[start:end]
        if not _HTTP_EQUIV_REFRESH.search(tag):
            continue
        content = _CONTENT.search(tag)
        raw = content.group(1) if content else ""
        value = html_module.unescape(raw[1:-1] if raw[:1] in ("'", '"') else raw)
        match = _REFRESH_URL.match(value)
        target = match.group(2).strip().strip("\"'") if match else ""
        targets.add(urldefrag(urljoin(url, target))[0])
    return frozenset(targets)


@dataclass
class _Shown:
    """What one sandbox page shows and what happened to it since it was opened."""

    document: ReplayDocument
    loaded: bool = False
    """The document's own navigation has been served: any later top-frame navigation is answered 204."""
    navigations: list[str] = field(default_factory=list)
    """Later top-frame navigations other than a stored meta refresh (a question clicked a link, ...)."""
    origins: set[str] = field(default_factory=set)
    """Origins of the documents served to it (what the wipe at ``release`` clears)."""
    pseudo_cdp: Any = None
    """The CDP session whose CSS agent holds the forced pseudo-classes (they last as long as it does)."""


def question_seconds() -> int:
    """``SessionLimits.max_question_seconds``, as the environment sets it."""
    return SessionLimits.from_env().max_question_seconds


class OfflineBrowser:
    """One sandboxed headless Chromium for the process, started on first use."""

    def __init__(self) -> None:
        self._browser: Any = None
        self._browser_pid: int | None = None
        self._token = f"--cdp-integration-sandbox={os.getpid()}-{uuid.uuid4().hex}"
        """An inert switch that finds this browser's process among the machine's (for the watchdog)."""
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        """Wiped browser contexts with no page of a question, ready for the next ``open``."""
        self._spares: dict[Any, str] = {}
        """Idle context -> the URL (``about:blank#<random>``) of the blank page created in it after its
        wipe, for the next question (its renderer starts while the scorer does other work)."""
        self._context_ids: dict[Any, str] = {}
        """Pooled context -> its CDP ``browserContextId`` (where its spare page is created)."""
        self._browser_cdp: Any = None
        self._shown: dict[Any, _Shown] = {}
        self._local = threading.local()
        self._fired = threading.Event()
        self._pending: set[Any] = set()
        """Playwright calls started and not waited for (``_background``), kept until they finish."""
        self.timeouts = 0
        """Questions stopped by the time limit in this process."""
        self.blocked: list[str] = []
        """URLs the sandbox refused, most recent last (bounded)."""

    def _ensure(self) -> Any:
        with self._lock:
            if self._browser is None or not self._browser.is_connected():
                import browsergym.core

                environment.prepare()
                # One sync Playwright per process: share BrowserGym's (a second one cannot start).
                playwright = browsergym.core._get_global_playwright()
                self._idle.clear()
                self._spares.clear()
                self._context_ids.clear()
                self._browser = playwright.chromium.launch(
                    executable_path=environment.headless_executable(),
                    args=[*OFFLINE_CHROMIUM_ARGS, self._token],
                    headless=True,
                )
                self._browser_pid = _find_process(self._token)
                self._browser_cdp = self._browser.new_browser_cdp_session()
            return self._browser

    def _new_context(self) -> Any:
        context = self._ensure().new_context(java_script_enabled=False, service_workers="block")
        # On the context, not the page: a popup a question opens is routed (and refused) too.
        context.route("**/*", self._serve)
        return context

    def open(self, document: ReplayDocument) -> Any:
        """A fresh page showing ``document``, alone in its browser context; hand it back with ``release``.

        A new page in a wiped context costs about what a cross-document reload of a kept page costs
        (one renderer start); a new context per question would cost ~2.5 times that. Loading runs
        none of the session's JavaScript (scripts are off, every request is answered locally), so it
        is bounded by Playwright's navigation timeout, not by the question's limit.
        """
        self._ensure()
        context = self._idle.pop() if self._idle else self._new_context()
        try:
            # The spare's URL carries its marker fragment: a document shown by URL replaces it, one set
            # as content (about:blank, a tab that never navigated) would keep it in `location.href`.
            by_url = urlsplit(document.url).scheme in ("http", "https")
            page = (self._spare(context) if by_url else None) or context.new_page()
        except Exception:
            with contextlib.suppress(Exception):
                context.close()
            raise
        self._shown[page] = _Shown(document)
        try:
            self._load(page, document)
            return page
        except BaseException:
            self._shown.pop(page, None)
            with contextlib.suppress(Exception):
                context.close()
            raise

    def _spare(self, context: Any) -> Any:
        """The blank page ``release`` created in the wiped ``context`` (found by its random URL, so
        never a late popup of the previous question), or None."""
        marker = self._spares.pop(context, None)
        if marker is None:
            return None
        for page in context.pages:
            if page.url == marker and not page.is_closed():
                return page
        try:
            return context.wait_for_event(
                "page", predicate=lambda page: page.url == marker, timeout=_SPARE_WAIT_MS
            )
        except Exception:  # not there in time: a page of its own (the late spare is closed at release)
            return None

    def _prepare_spare(self, context: Any, cdp: Any) -> None:
        """Create the next question's blank page in the wiped ``context`` without waiting for it:
        Chromium starts its renderer and Playwright sets it up (routing included) meanwhile."""
        context_id = self._context_ids.get(context)
        if context_id is None:
            context_id = self._context_ids[context] = cdp.send("Target.getTargetInfo")["targetInfo"][
                "browserContextId"
            ]
        marker = f"about:blank#cdp-integration-{uuid.uuid4().hex}"
        params = {"url": marker, "browserContextId": context_id}
        self._background(
            self._browser_cdp,
            lambda impl: impl.send("Target.createTarget", params, None),
            lambda: self._browser_cdp.send("Target.createTarget", params),
        )
        self._spares[context] = marker

    def _background(self, owner: Any, call: Any, fallback: Any) -> None:
        """Start the Playwright call ``call(owner's implementation)`` without waiting for it: it goes out
        with the next run of Playwright's event loop (``_send_now``) and completes while the scorer
        works. Only for calls whose outcome nothing waits on (an error is dropped: a spare that never
        comes is replaced by a page of its own, a page that does not close goes with its context).
        Where this Playwright has no such internals, ``fallback()`` makes the call and waits."""
        try:
            loop, impl = owner._loop, owner._impl_obj
            if loop.is_closed():
                raise RuntimeError("closed")
            task = loop.create_task(call(impl))
        except Exception:
            with contextlib.suppress(Exception):
                fallback()
            return
        task._log_destroy_pending = False  # a process may end before the call went out
        self._pending.add(task)
        task.add_done_callback(self._finished)

    @staticmethod
    def _send_now(owner: Any) -> None:
        """Run Playwright's event loop once, so the calls ``_background`` started go out now (not with
        the next question's first call) and Chromium works on them while the scorer does not."""
        with contextlib.suppress(Exception):
            owner._sync(asyncio.sleep(0))

    def _finished(self, task: Any) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an error here is expected and of no use

    def _load(self, page: Any, document: ReplayDocument) -> None:
        """Load ``document`` into the fresh ``page``, then re-create what its HTML cannot carry."""
        cookies = [dict(cookie) for cookie in document.cookies]
        if cookies:
            with contextlib.suppress(Exception):
                page.context.add_cookies(cookies)
        if urlsplit(document.url).scheme in ("http", "https"):
            page.goto(document.url, wait_until="domcontentloaded")
        else:
            page.set_content(document.html, wait_until="domcontentloaded")
        if document.cssom_styles:
            page.evaluate(_APPLY_CSSOM_STYLES, [dict(style) for style in document.cssom_styles])
        if document.form_state:
            with self.limit(f"restoring the form state of {document.url}"):  # its size is the session's
                _apply_form_state(page, document)
        if document.marked_attributes:
            with self.limit(f"restoring BrowserGym's marked attributes of {document.url}"):
                _apply_marked_attributes(page, document)
        if document.pseudo_classes:
            with self.limit(f"restoring where the pointer and the focus were on {document.url}"):
                shown = self._shown.get(page)
                cdp = _apply_pseudo_classes(page, document)
                if shown is not None:
                    shown.pseudo_cdp = cdp
        if document.local_storage or document.session_storage:
            page.evaluate(
                """([local, session]) => {
                    for (const [k, v] of Object.entries(local)) localStorage.setItem(k, v);
                    for (const [k, v] of Object.entries(session)) sessionStorage.setItem(k, v);
                }""",
                [dict(document.local_storage), dict(document.session_storage)],
            )

    def navigations(self, page: Any) -> list[str]:
        """Top-frame navigations ``page`` attempted after its document loaded (answered 204, not
        followed), meta refreshes of the stored document aside."""
        shown = self._shown.get(page)
        return list(shown.navigations) if shown is not None else []

    def release(self, page: Any) -> None:
        """Close ``page`` and wipe its context (every page, cookies, storage) for the next ``open``."""
        shown = self._shown.pop(page, None)
        context = None
        try:
            context = page.context
            if page.is_closed() or len(self._idle) >= _IDLE_CONTEXTS:
                raise RuntimeError("not reusable")
            with self.limit("wiping a sandbox page"):
                origins = sorted(shown.origins) if shown is not None else []
                cdp = context.new_cdp_session(page)
                try:
                    for origin in origins:
                        cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
                    for other in list(context.pages):  # popups a question opened, then the page itself
                        self._shown.pop(other, None)
                        if other is not page:
                            other.close()
                    context.clear_cookies()
                    self._prepare_spare(context, cdp)  # after the wipe: it starts from nothing
                except BaseException:
                    with contextlib.suppress(Exception):
                        cdp.detach()
                    raise
                # Closing the page ends its CDP session too. Neither is waited for: the question is
                # answered, and the next one's page is the spare.
                self._background(page, lambda impl: impl.close(None, None), page.close)
                self._send_now(page)
            self._idle.append(context)
        except Exception:
            if context is not None:
                self._spares.pop(context, None)
                self._context_ids.pop(context, None)
                with contextlib.suppress(Exception):
                    context.close()

    # -- the time limit ----------------------------------------------------------------------

    @contextlib.contextmanager
    def limit(self, what: str, seconds: float | None = None) -> Iterator[None]:
        """Run the block (one question's sandbox work) within ``seconds`` (default
        ``SessionLimits.max_question_seconds``); past it, the sandbox's renderers are killed, which
        ends a busy loop or a never-settling promise, and ``SandboxTimeoutError`` is raised.

        Nested blocks run under the outermost one: a question's limit covers its page load, the
        expressions replayed before it and its own JavaScript.
        """
        if getattr(self._local, "depth", 0):
            self._local.depth += 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        limit = question_seconds() if seconds is None else seconds
        self._ensure()  # starting Chromium is not the question's time (and the watchdog needs its pid)
        fired = self._fired = threading.Event()
        timer = threading.Timer(limit, self._stop_renderers, args=(fired,))
        timer.daemon = True
        self._local.depth = 1
        timer.start()
        try:
            yield
        except Exception:
            if fired.is_set():
                raise self._timed_out(what, limit) from None
            raise
        finally:
            timer.cancel()
            self._local.depth = 0
        if fired.is_set():
            raise self._timed_out(what, limit)

    def stopped(self) -> bool:
        """Whether the current question's time limit has fired (its pages were stopped)."""
        return self._fired.is_set()

    def _timed_out(self, what: str, limit: float) -> SandboxTimeoutError:
        self.timeouts += 1
        for page in list(self._shown):  # their renderer is gone; ``release`` closes their context
            with contextlib.suppress(Exception):
                page.context.close()
            self._shown.pop(page, None)
        for context in self._idle:  # their spare pages' renderers are gone too
            with contextlib.suppress(Exception):
                context.close()
        self._idle.clear()
        self._spares.clear()
        self._context_ids.clear()
        return SandboxTimeoutError(
            f"{what}: did not finish within {limit:g} s in the offline sandbox (a loop or a promise that "
            f"never settles?), so it was stopped (limit {ENV_VARS['max_question_seconds']}; raise it to "
            "allow more)"
        )

    def _stop_renderers(self, fired: threading.Event) -> None:
        """The watchdog: kill every renderer process of this sandbox browser (its pages crash, and
        the Playwright call waiting on one of them returns with an error)."""
        fired.set()
        if self._browser_pid is None:
            return
        for pid in _renderers(self._browser_pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    # -- routing -----------------------------------------------------------------------------

    def _serve(self, route: Any, request: Any) -> None:
        try:
            shown = self._shown.get(request.frame.page)
        except Exception:  # a request without a frame (a worker's)
            shown = None
        if shown is None:  # a popup, or about:blank between two uses
            self._refuse(route, request)
            return
        document = shown.document
        url = urldefrag(request.url)[0]
        navigation = request.is_navigation_request()
        if navigation and request.frame.parent_frame is None:
            if not shown.loaded and url == urldefrag(document.url)[0]:
                shown.loaded = True
                shown.origins.add(_origin(url))
                route.fulfill(status=200, content_type="text/html; charset=utf-8", body=document.html)
                return
            if shown.loaded:
                # "No Content": the navigation ends and the stored document stays (an abort would
                # replace it with an error page, and answers would silently read that).
                if url not in document.refresh_targets or request.method != "GET":
                    shown.navigations.append(f"{request.method} {request.url}")
                    del shown.navigations[:-20]
                route.fulfill(status=204, body=b"")
                return
        frame_html = document.frames.get(url) if navigation else None
        if frame_html is not None:
            shown.origins.add(_origin(url))
            route.fulfill(status=200, content_type="text/html; charset=utf-8", body=frame_html)
            return
        resource = document.resources.get(url)
        if resource is not None and request.method == "GET":
            route.fulfill(status=resource.status, headers=dict(resource.headers), body=resource.body)
            return
        self._refuse(route, request)

    def _refuse(self, route: Any, request: Any) -> None:
        self.blocked.append(request.url)
        del self.blocked[:-100]
        route.abort("blockedbyclient")

    def close(self) -> None:
        with self._lock:
            self._idle.clear()
            self._spares.clear()
            self._context_ids.clear()
            self._shown.clear()
            self._browser_cdp = None
            if self._browser is not None:
                with contextlib.suppress(Exception):
                    self._browser.close()
                self._browser = None
                self._browser_pid = None


_IDLE_CONTEXTS = 4
_SPARE_WAIT_MS = 10_000
"""How long ``open`` waits for the spare page Chromium is starting before opening one of its own."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _processes() -> dict[int, tuple[int, bytes]]:
    """Every process of the machine: pid -> (parent pid, command line)."""
    found: dict[int, tuple[int, bytes]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
                with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    command = cmdline.read(4096)
            except (OSError, IndexError, ValueError):
                continue
            found[int(name)] = (parent, command)
    return found


def _find_process(token: str) -> int | None:
    """The process whose command line carries ``token`` (our sandbox browser)."""
    wanted = token.encode()
    return next((pid for pid, (_parent, command) in _processes().items() if wanted in command), None)


def _renderers(root: int) -> list[int]:
    """Renderer processes under ``root`` (Chromium's own WebUI renderer aside)."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _command) in processes.items():
        children.setdefault(parent, []).append(pid)
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            stack.append(child)
            command = processes[child][1]
            if b"--type=renderer" in command and b"--top-chrome-webui" not in command:
                found.append(child)
    return found


_APPLY_CSSOM_STYLES = """(styles) => {
  const find = (path) => {
    let root = document, element = null;
    for (let depth = 0; depth < path.length; depth++) {
      if (depth > 0) { root = element && element.shadowRoot; if (!root) return null; }
      element = root.querySelectorAll("*")[path[depth]] || null;
    }
    return element;
  };
  const sheet = (css) => { const s = new CSSStyleSheet(); s.replaceSync(css); return s; };
  for (const style of styles) {
    if (style.target === "adopted") {
      const root = style.path.length ? (find(style.path) || {}).shadowRoot : document;
      if (root) root.adoptedStyleSheets = style.css.map(sheet);
    } else {
      const element = find(style.path);
      if (element && element.sheet) {
        for (const rule of sheet(style.css.join("\\n")).cssRules) {
          element.sheet.insertRule(rule.cssText, element.sheet.cssRules.length);
        }
      }
    }
  }
}"""
"""Re-creates what ``capture.state.read_cssom_styles`` read, on the replayed document."""

_APPLY_FORM_STATE = """(controls) => {
  const bare = (url) => url.split("#")[0];
  const same = (el, c) => el && el.localName === c.tag && (el.getAttribute("name") || "") === c.name && (el.id || "") === c.id;
  const locate = (c) => {
    let root = document, el = null;
    for (let depth = 0; depth < c.path.length; depth++) {
      if (depth > 0) {
        const framed = el && (el.localName === "iframe" || el.localName === "frame");
        root = el && (framed ? el.contentDocument : el.shadowRoot);
        if (!root) return null;
      }
      el = root.querySelectorAll("*")[c.path[depth]] || null;
    }
    const doc = root.ownerDocument || root;
    if (c.frame && bare(doc.URL) !== bare(c.frame)) return null;
    if (same(el, c)) return el;
    const alike = Array.from(root.querySelectorAll(c.tag)).filter((e) => same(e, c));
    return alike.length === 1 ? alike[0] : null;
  };
  const failed = [];
  for (const c of controls) {
    const el = locate(c);
    if (el === null) { failed.push(c.path); continue; }
    if (c.value !== null && c.value !== undefined) el.value = c.value;
    if (c.checked !== null && c.checked !== undefined) el.checked = c.checked;
    if (c.selected !== null && c.selected !== undefined) {
      if (el.multiple) Array.from(el.options).forEach((o, i) => { o.selected = c.selected.includes(i); });
      else el.selectedIndex = c.selected.length ? c.selected[0] : -1;
    }
    const applied = (c.value == null || el.value === c.value) && (c.checked == null || el.checked === c.checked)
      && (c.selected == null || Array.from(el.options).every((o, i) => o.selected === c.selected.includes(i)));
    if (!applied) failed.push(c.path);
  }
  return failed;
}"""
"""Sets what ``capture.state.read_form_state`` read on the replayed document, the way script sets it
(``.value`` sets the dirty value flag as typing does, so ``defaultValue`` stays the attribute);
returns the paths of the controls it could not find or set."""


def _apply_form_state(page: Any, document: ReplayDocument) -> None:
    """Type, check and select as the agent left the page; a control that cannot be restored makes the
    page a loud miss (a question about it would otherwise read the default, silently)."""
    if any(control.get("frame") for control in document.form_state):
        page.wait_for_load_state("load")  # the frames' documents are in place
    failed = page.evaluate(_APPLY_FORM_STATE, [dict(control) for control in document.form_state])
    if failed:
        controls = {tuple(c["path"]): c for c in document.form_state}
        names = [_control_name(controls.get(tuple(path), {})) for path in failed[:3]]
        raise ReplayMissError(
            f"{document.url}: the form state captured for {', '.join(names)} cannot be restored in the "
            "sandbox (the re-parsed page has no such control at its place), so values typed there could "
            "not be answered as live"
        )


_APPLY_MARKED_ATTRIBUTES = """(marks) => {
  // Attributes re-added to move one: BrowserGym's own and the two it writes, never one whose removal
  // would change the control's state (type, min, max, ...).
  const movable = (name) => /^(bid|value|checked|browsergym_[\\w-]*|aria-[\\w-]*|data-[\\w.-]*)$/.test(name);
  const place = (el, name, at) => {
    const names = Array.from(el.attributes, (a) => a.name);
    if (!Number.isInteger(at) || at < 0 || at >= names.length || !names.includes(name)) return;
    const order = names.filter((n) => n !== name);
    order.splice(at, 0, name);
    const first = order.findIndex((n, i) => n !== names[i]);
    if (first < 0 || !order.slice(first).every(movable)) return;
    for (const n of order.slice(first)) {
      const value = el.getAttribute(n);
      el.removeAttribute(n);
      el.setAttribute(n, value);
    }
  };
  const wanted = new Map(marks.map((m) => [m.bid, []]));
  const visit = (root) => {
    for (const el of root.querySelectorAll("*")) {
      const bid = el.getAttribute("bid");
      if (bid !== null && wanted.has(bid)) wanted.get(bid).push(el);
      if (el.localName === "iframe" || el.localName === "frame") {
        let inner = null;
        try { inner = el.contentDocument; } catch (e) { inner = null; }
        if (inner && inner.documentElement) visit(inner);
      } else if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(document);
  const bare = (url) => url.split("#")[0];
  let skipped = 0;
  for (const m of marks) {
    const found = wanted.get(m.bid);
    const el = found.length === 1 ? found[0] : null;
    if (el === null || el.localName !== m.tag || (m.frame && bare(el.ownerDocument.URL) !== bare(m.frame))) {
      skipped++;
      continue;
    }
    if (typeof m.value === "string") el.setAttribute("value", m.value);
    if (m.checked === true) el.setAttribute("checked", "");
    else if (m.checked === false) el.removeAttribute("checked");
    const places = [["value", m.value_at], ["checked", m.checked_at]].filter(([, at]) => at !== null);
    for (const [name, at] of places.sort((a, b) => a[1] - b[1])) place(el, name, at);
  }
  return skipped;
}"""
"""Writes the ``value``/``checked`` attributes BrowserGym's marking left, by ``bid`` (in the document,
its open shadow roots and same-origin frames), each at its place among the element's attributes; an
element whose bid is on none or several elements, or that is not of the recorded tag, is skipped.
Returns how many were skipped."""


def _apply_marked_attributes(page: Any, document: ReplayDocument) -> None:
    """The attributes BrowserGym's marking wrote, as the live agent's page has them after the
    observation (``getAttribute('value')``, ``[value=...]``, ``outerHTML``, ``content()``).

    After the form state: a control the agent typed into has its dirty value (and checkedness) flag
    set, so the attribute changes ``defaultValue`` only, as the marking did live. The records are
    untrusted data passed as the argument, never built into the script; a record that matches no
    single element of its tag is skipped (a capture only stores bids it found on exactly one tag).
    """
    if any(mark.get("frame") for mark in document.marked_attributes) and not any(
        control.get("frame") for control in document.form_state
    ):
        page.wait_for_load_state("load")  # the frames' documents are in place
    marks = [_mark_argument(mark) for mark in document.marked_attributes]
    page.evaluate(_APPLY_MARKED_ATTRIBUTES, [mark for mark in marks if mark["bid"]])


def _mark_argument(mark: Mapping[str, Any]) -> dict[str, Any]:
    """The fields the apply script reads, with their JSON types enforced."""
    value, checked = mark.get("value"), mark.get("checked")
    places = {name: mark.get(name) for name in ("value_at", "checked_at")}
    return {
        "bid": str(mark.get("bid", "")),
        "tag": str(mark.get("tag", "")),
        "frame": str(mark.get("frame", "")),
        "value": value if isinstance(value, str) else None,
        "checked": checked if isinstance(checked, bool) else None,
        **{name: at if type(at) is int and 0 <= at < 1_000_000 else None for name, at in places.items()},
    }


_LOCATE_ELEMENTS = """(items) => {
  const bare = (url) => url.split("#")[0];
  return items.map((c) => {
    let root = document, el = null;
    for (let depth = 0; depth < c.path.length; depth++) {
      if (depth > 0) {
        const framed = el && (el.localName === "iframe" || el.localName === "frame");
        let next = null;
        try { next = el && (framed ? el.contentDocument : el.shadowRoot); } catch (e) { next = null; }
        if (!next) return null;
        root = next;
      }
      el = root.querySelectorAll("*")[c.path[depth]] || null;
    }
    const doc = root.ownerDocument || root;
    if (!el || el.localName !== c.tag || (c.frame && bare(doc.URL) !== bare(c.frame))) return null;
    return el;
  });
}"""
"""The elements at the given paths (``FormControlState.path`` addressing), null where the re-parsed
page has no element of the recorded tag there."""

_PSEUDO_CLASSES = frozenset({"hover", "active", "focus", "focus-within", "focus-visible"})


def _apply_pseudo_classes(page: Any, document: ReplayDocument) -> Any:
    """Force the user-action pseudo-classes the live page had (the chain under the pointer, the focused
    element's) on the same elements, through the CSS agent of a CDP session that stays attached as long
    as the page: CSS that shows a menu on ``:hover`` shows it here too. An element not found makes the
    page a loud miss, as for the form state. Returns the CDP session."""
    items = []
    for entry in document.pseudo_classes:
        path = entry.get("path")
        classes = entry.get("classes")
        if not isinstance(path, list) or not all(type(i) is int and 0 <= i < 10_000_000 for i in path):
            continue
        if not path or len(path) > 64 or not isinstance(classes, list):
            continue
        items.append(
            {
                "path": path,
                "tag": str(entry.get("tag", "")),
                "frame": str(entry.get("frame", "")),
                "classes": sorted({c for c in classes if c in _PSEUDO_CLASSES}),
            }
        )
    items = [item for item in items if item["classes"]][:256]
    if any(item["frame"] for item in items):
        page.wait_for_load_state("load")  # the frames' documents are in place
    cdp = page.context.new_cdp_session(page)
    # The records are data: JSON is a JavaScript literal, and the script never evaluates their text.
    found = cdp.send(
        "Runtime.evaluate",
        {"expression": f"({_LOCATE_ELEMENTS})({json.dumps(items)})", "returnByValue": False},
    )
    if "exceptionDetails" in found or "objectId" not in found.get("result", {}):
        raise ReplayMissError(f"{document.url}: where the pointer and the focus were cannot be restored")
    listed = cdp.send(
        "Runtime.getProperties", {"objectId": found["result"]["objectId"], "ownProperties": True}
    )
    objects: dict[int, str] = {}
    for prop in listed.get("result", []):
        value = prop.get("value") or {}
        if prop.get("name", "").isdigit() and value.get("subtype") == "node" and "objectId" in value:
            objects[int(prop["name"])] = value["objectId"]
    missing = [item for index, item in enumerate(items) if index not in objects]
    if missing:
        raise ReplayMissError(
            f"{document.url}: the page was captured with <{missing[0]['tag']}> elements under the pointer or "
            "focused that the re-parsed page does not have at their place, so what CSS shows on :hover or "
            ":focus cannot be answered as live"
        )
    if document.styled_by_pointer:  # else no rule selects on them: only the focus is put back
        cdp.send("DOM.enable")
        cdp.send("DOM.getDocument", {"depth": 0})
        cdp.send("CSS.enable")
        for index, item in enumerate(items):
            node = cdp.send("DOM.requestNode", {"objectId": objects[index]})["nodeId"]
            cdp.send("CSS.forcePseudoState", {"nodeId": node, "forcedPseudoClasses": item["classes"]})
    for index, item in enumerate(items):  # outer documents first: an iframe, then what it holds
        if "focus" in item["classes"]:  # document.activeElement too, not only what CSS sees
            cdp.send(
                "Runtime.callFunctionOn",
                {
                    "objectId": objects[index],
                    "functionDeclaration": "function () { this.focus({preventScroll: true}); }",
                },
            )
    return cdp


def _control_name(control: Mapping[str, Any]) -> str:
    name = str(control.get("tag", "?"))
    if control.get("id"):
        return f"{name}#{control['id']}"
    return f"{name}[name={control['name']}]" if control.get("name") else name


_shared = OfflineBrowser()


def offline_browser() -> OfflineBrowser:
    """The process-wide sandboxed browser replayed pages use."""
    return _shared
