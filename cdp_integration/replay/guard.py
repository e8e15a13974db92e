"""Refuse, loudly, JavaScript whose offline answer would silently differ from the live one.

The sandbox shows the captured DOM with the page's own scripts off (``replay.offline``). Two kinds
of expression can therefore read something other than what the live page would have answered:

- **events and page functions**: ``el.click()``, ``dispatchEvent``, ``form.submit()``, ``focus()``
  on a page that has scripts (``<script>`` elements or inline ``on*`` handlers) did whatever the
  page's listeners do live; offline no listener exists. A call of a function or global the page's
  scripts define (``jQuery(...)``, ``window.dw_toggle()``) fails offline with a ``ReferenceError``
  or "is not a function". On a page with no scripts at all an event only has Chromium's default
  action, which the sandbox performs too, so it is allowed there.
- **layout without stylesheets**: ``innerText``, ``getComputedStyle``, ``checkVisibility``,
  offsets and client rects depend on the page's CSS; when a stylesheet the page links was not
  served in the sandbox (the session holds no body for it), they may differ from live (text the
  app's CSS hides is in ``innerText`` offline).

``guarded_evaluate`` runs an expression with the DOM prototypes instrumented (only in the
sandbox's page, never in a live one) and raises ``ReplayMissError`` naming the expression and the
reason instead of returning a possibly wrong value.
"""

from __future__ import annotations

import contextlib
from typing import Any

from playwright.sync_api import Error

from cdp_integration.errors import ReplayMissError

__all__ = ["guarded_evaluate", "unstyled_stylesheets"]

_INSTRUMENT = r"""() => {
  let g = window.__cdpiGuard;
  if (!g) {
    g = { events: [], layout: [] };
    Object.defineProperty(window, '__cdpiGuard', { value: g, enumerable: false });
    const describe = (node) => {
      if (!node || !node.tagName) return node === window ? 'window' : node === document ? 'document' : '';
      const id = node.id ? '#' + node.id : '';
      const cls = typeof node.className === 'string' && node.className.trim()
        ? '.' + node.className.trim().split(/\s+/).join('.') : '';
      return node.tagName.toLowerCase() + id + cls;
    };
    const method = (proto, name, kind) => {
      const original = proto && proto[name];
      if (typeof original !== 'function') return;
      Object.defineProperty(proto, name, {
        configurable: true, writable: true,
        value: function (...args) {
          const what = kind === 'events' && name === 'dispatchEvent' && args[0] ? 'dispatchEvent(' + args[0].type + ')' : name + '()';
          g[kind].push(what + ' on ' + describe(this));
          return original.apply(this, args);
        },
      });
    };
    const getter = (proto, name) => {
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (!d || !d.get) return;
      Object.defineProperty(proto, name, { ...d, get: function () { g.layout.push(name); return d.get.call(this); } });
    };
    method(EventTarget.prototype, 'dispatchEvent', 'events');
    for (const name of ['click', 'focus', 'blur']) method(HTMLElement.prototype, name, 'events');
    for (const name of ['submit', 'requestSubmit', 'reset']) method(HTMLFormElement.prototype, name, 'events');
    for (const name of ['innerText', 'outerText', 'offsetWidth', 'offsetHeight', 'offsetTop', 'offsetLeft', 'offsetParent'])
      getter(HTMLElement.prototype, name);
    for (const name of ['clientWidth', 'clientHeight']) getter(Element.prototype, name);
    for (const name of ['getBoundingClientRect', 'getClientRects', 'checkVisibility']) method(Element.prototype, name, 'layout');
    method(window, 'getComputedStyle', 'layout');
  }
  g.events.length = 0;
  g.layout.length = 0;
  const handlers = document.evaluate("count(//@*[starts-with(local-name(), 'on')])", document, null,
    XPathResult.NUMBER_TYPE, null).numberValue;
  // A stylesheet the sandbox refused still gets an empty sheet: "loaded" means it has rules (or, when
  // cross-origin rules cannot be read, that the browser timed a response for it).
  const loaded = (l) => {
    if (!l.sheet) return false;
    try { return l.sheet.cssRules.length > 0; }
    catch (e) { return performance.getEntriesByName(l.href).some((t) => t.responseEnd > 0 && t.transferSize + t.decodedBodySize > 0); }
  };
  const unstyled = [...document.querySelectorAll('link[rel~="stylesheet" i]')]
    .filter((l) => !l.disabled && (!l.media || matchMedia(l.media).matches) && !loaded(l)).map((l) => l.href);
  return [document.scripts.length + handlers > 0, unstyled];
}"""

_READ = "() => window.__cdpiGuard ? [window.__cdpiGuard.events.slice(0, 5), window.__cdpiGuard.layout.slice(0, 5)] : [[], []]"

_LOAD_TIMEOUT_MS = 10_000

_PAGE_FUNCTION_ERRORS = (
    "ReferenceError",
    "is not a function",
)


def _short(expression: str) -> str:
    text = " ".join(expression.split())
    return text if len(text) <= 160 else text[:157] + "..."


def guarded_evaluate(page: Any, expression: str, arg: Any = None, *, url: str) -> Any:
    """``page.evaluate(expression, arg)`` in the sandbox, or ``ReplayMissError`` if its answer
    would depend on the page's scripts or on stylesheets the sandbox could not apply."""
    _settle(page)
    scripted, unstyled = page.evaluate(_INSTRUMENT)
    try:
        value = page.evaluate(expression, arg)
    except Error as exc:
        message = (exc.message or str(exc)).splitlines()[0]
        if scripted and any(marker in message for marker in _PAGE_FUNCTION_ERRORS):
            raise ReplayMissError(
                f"evaluate({_short(expression)!r}) on {url}: failed offline with {message!r}; the page's own "
                "scripts do not run in the offline sandbox, so the functions and globals they define do not "
                "exist there (capture with the task's config to record the live answer)"
            ) from None
        raise
    events, layout = page.evaluate(_READ)
    if scripted and events:
        raise ReplayMissError(
            f"evaluate({_short(expression)!r}) on {url}: dispatches {', '.join(events)}; the page has scripts "
            "whose listeners would react live, and they do not run in the offline sandbox "
            "(capture with the task's config to record the live answer)"
        )
    if unstyled and layout:
        raise ReplayMissError(
            f"evaluate({_short(expression)!r}) on {url}: reads {', '.join(dict.fromkeys(layout))}, which depends "
            f"on CSS, and the sandbox has no body for the page's stylesheet(s) {', '.join(unstyled[:3])}, "
            "so the answer could differ from live"
        )
    return value


def unstyled_stylesheets(page: Any) -> list[str]:
    """Stylesheets the sandboxed page links but could not load (no body in the session)."""
    _settle(page)
    _scripted, unstyled = page.evaluate(_INSTRUMENT)
    return list(unstyled)


def _settle(page: Any) -> None:
    """Let stylesheets the sandbox serves finish loading (it opens pages at DOMContentLoaded), so a
    sheet still in flight is not mistaken for a missing one."""
    with contextlib.suppress(Error):
        page.wait_for_load_state("load", timeout=_LOAD_TIMEOUT_MS)
