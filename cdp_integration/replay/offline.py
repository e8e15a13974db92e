"""The offline DOM engine: a captured page loaded into a headless Chromium that cannot reach anything.

A replayed document is the HTML captured at a step, served to a fresh page at its original URL (so
``location``, relative links and same-origin storage behave), with the step's cookies and storage.
The page's own scripts do not run: the captured HTML already is the DOM those scripts produced, and
running them again would change it. ``page.evaluate`` still runs the caller's JavaScript.

Nothing leaves the sandbox: every request of the page is routed; the document and any resource
whose body the session holds are served from the session, everything else is aborted. Underneath,
Chromium's proxy points at a closed port (loopback included) and host names resolve to nothing, so
even traffic that escapes routing (WebSockets) fails.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urlsplit

from cdp_integration import environment
from cdp_integration.errors import ReplayMissError

__all__ = ["OFFLINE_CHROMIUM_ARGS", "OfflineBrowser", "ReplayDocument", "offline_browser"]

OFFLINE_CHROMIUM_ARGS: tuple[str, ...] = (
    *environment.CHROMIUM_ARGS,
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
"""Port 9 (discard) is closed; ``<-loopback>`` stops Chromium exempting 127.0.0.1 from the proxy."""


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


class OfflineBrowser:
    """One sandboxed headless Chromium for the process, started on first use."""

    def __init__(self) -> None:
        self._browser: Any = None
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._showing: dict[Any, ReplayDocument] = {}
        self.blocked: list[str] = []
        """URLs the sandbox refused, most recent last (bounded)."""

    def _ensure(self) -> Any:
        with self._lock:
            if self._browser is None or not self._browser.is_connected():
                import browsergym.core

                environment.prepare()
                # One sync Playwright per process: share BrowserGym's (a second one cannot start).
                playwright = browsergym.core._get_global_playwright()
                self._browser = playwright.chromium.launch(
                    executable_path=environment.chromium_executable(),
                    args=list(OFFLINE_CHROMIUM_ARGS),
                    headless=True,
                )
            return self._browser

    def open(self, document: ReplayDocument) -> Any:
        """A page showing ``document``, alone in its browser context; hand it back with ``release``."""
        page = self._idle.pop() if self._idle else None
        if page is None:
            # A context per page keeps cookies and storage apart; opening one costs a renderer
            # process (~0.3 s), so released pages are wiped and reused.
            context = self._ensure().new_context(java_script_enabled=False, service_workers="block")
            page = context.new_page()
            page.route("**/*", self._router(page))
        self._showing[page] = document
        try:
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
                _apply_form_state(page, document)
            if document.local_storage or document.session_storage:
                page.evaluate(
                    """([local, session]) => {
                        for (const [k, v] of Object.entries(local)) localStorage.setItem(k, v);
                        for (const [k, v] of Object.entries(session)) sessionStorage.setItem(k, v);
                    }""",
                    [dict(document.local_storage), dict(document.session_storage)],
                )
            return page
        except Exception:
            self._showing.pop(page, None)
            with contextlib.suppress(Exception):
                page.context.close()
            raise

    def release(self, page: Any) -> None:
        """Wipe ``page``'s context (storage, cookies, routes) and keep it for the next ``open``."""
        try:
            if page.is_closed() or len(self._idle) >= _IDLE_PAGES:
                raise RuntimeError("not reusable")
            with contextlib.suppress(Exception):
                page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
            page.context.clear_cookies()
            self._showing.pop(page, None)  # stray requests of the old document are now refused
            self._idle.append(page)
        except Exception:
            self._showing.pop(page, None)
            with contextlib.suppress(Exception):
                page.context.close()

    def _router(self, page: Any) -> Any:
        return lambda route: self._serve(route, self._showing.get(page))

    def _serve(self, route: Any, document: ReplayDocument | None) -> None:
        request = route.request
        if document is None:  # about:blank between two uses
            route.abort("blockedbyclient")
            return
        url = urldefrag(request.url)[0]
        if (
            request.is_navigation_request()
            and request.frame.parent_frame is None
            and url == urldefrag(document.url)[0]
        ):
            route.fulfill(status=200, content_type="text/html; charset=utf-8", body=document.html)
            return
        frame_html = document.frames.get(url) if request.is_navigation_request() else None
        if frame_html is not None:
            route.fulfill(status=200, content_type="text/html; charset=utf-8", body=frame_html)
            return
        resource = document.resources.get(url)
        if resource is not None and request.method == "GET":
            route.fulfill(status=resource.status, headers=dict(resource.headers), body=resource.body)
            return
        self.blocked.append(request.url)
        del self.blocked[:-100]
        route.abort("blockedbyclient")

    def close(self) -> None:
        with self._lock:
            self._idle.clear()
            self._showing.clear()
            if self._browser is not None:
                with contextlib.suppress(Exception):
                    self._browser.close()
                self._browser = None


_IDLE_PAGES = 4

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


def _control_name(control: Mapping[str, Any]) -> str:
    name = str(control.get("tag", "?"))
    if control.get("id"):
        return f"{name}#{control['id']}"
    return f"{name}[name={control['name']}]" if control.get("name") else name


_shared = OfflineBrowser()


def offline_browser() -> OfflineBrowser:
    """The process-wide sandboxed browser replayed pages use."""
    return _shared
