"""Refuse, loudly, JavaScript whose offline answer would silently differ from the live one.

The sandbox shows the captured DOM with the page's own scripts off (``replay.offline``). Three kinds
of expression can therefore read something other than what the live page would have answered:

- **events and page functions**: ``el.click()``, ``dispatchEvent``, ``form.submit()``, ``focus()``
  on a page that has scripts did whatever the page's listeners do live; offline no listener exists.
  A call of a function or global the page's scripts define (``jQuery(...)``, ``window.dw_toggle()``)
  fails offline with a ``ReferenceError`` or "is not a function". On a page with no scripts at all
  an event only has Chromium's default action, which the sandbox performs too, so it is allowed
  there. On a page with scripts, ``click()`` is still allowed where the answer is the default action
  alone and the captured page attaches no inline handler on the way (``NATIVE_CLICKS``, each
  measured equal to live by ``tests/integration/test_replay.py``).
- **navigation**: a question that clicks a link to another document or submits a form navigates
  live; the sandbox keeps the document (``replay.offline`` answers 204), so it refuses instead.
- **layout without stylesheets**: ``innerText``, ``getComputedStyle``, ``checkVisibility``,
  offsets and client rects depend on the page's CSS; when a stylesheet the page links was not
  served in the sandbox (the session holds no body for it), they may differ from live (text the
  app's CSS hides is in ``innerText`` offline).

Whether a page runs scripts is decided from the capture (``captured_scripts``: script elements,
inline ``on*`` handlers, ``javascript:`` URLs in the stored HTML), never from the page's own globals
(``document.scripts`` is clobbered by ``<img name=scripts>``). ``guarded_evaluate`` runs an expression
with the DOM prototypes instrumented (only in the sandbox's page, never in a live one) and raises
``ReplayMissError`` naming the expression and the reason instead of returning a possibly wrong value.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from playwright.sync_api import Error

from cdp_integration.errors import ReplayMissError
from cdp_integration.session.markup import captured_scripts

__all__ = [
    "NATIVE_CLICKS",
    "captured_scripts",
    "guarded_evaluate",
    "settle",
    "structural_selector",
    "unstyled_stylesheets",
]

NATIVE_CLICKS: tuple[str, ...] = (
    "summary (toggles its details)",
    "label of a checkbox or radio (activates it)",
    "checkbox or radio input (checks it)",
    "link to a fragment (href starting with #: scrolls, sets location.hash and :target)",
)
"""``click()`` targets answered on a page with scripts: their default action needs no page script.
Refused all the same when the target, its control or an ancestor carries an inline ``on*`` handler."""

_INSTRUMENT = r"""([dropped, structuralSource]) => {
  let g = window.__cdpiGuard;
  if (!g) {
    g = { events: [], layout: [], markup: [] };
    Object.defineProperty(window, '__cdpiGuard', { value: g, enumerable: false });
    // Prototype getters and methods, taken before any question runs: a page's named elements
    // (<form><input name=attributes>, <img name=querySelectorAll>) cannot shadow them.
    const get = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
    const tagName = get(Element.prototype, 'tagName'), localName = get(Element.prototype, 'localName');
    const attributes = get(Element.prototype, 'attributes'), parentNode = get(Node.prototype, 'parentNode');
    const nodeType = get(Node.prototype, 'nodeType'), getAttribute = Element.prototype.getAttribute;
    const idOf = get(Element.prototype, 'id'), classOf = get(Element.prototype, 'className');
    const control = get(HTMLLabelElement.prototype, 'control'), inputType = get(HTMLInputElement.prototype, 'type');
    const firstSummary = (details) => {
      for (let n = details.firstElementChild; n; n = n.nextElementSibling) if (localName.call(n) === 'summary') return n;
      return null;
    };
    const describe = (node) => {
      if (!(node instanceof Element)) return node === window ? 'window' : node === document ? 'document' : '';
      const id = idOf.call(node) ? '#' + idOf.call(node) : '';
      const c = classOf.call(node), cls = typeof c === 'string' && c.trim() ? '.' + c.trim().split(/\s+/).join('.') : '';
      return tagName.call(node).toLowerCase() + id + cls;
    };
    const inline = (node) => {
      for (let n = node; n && nodeType.call(n) === 1; n = parentNode.call(n))
        for (const a of attributes.call(n)) if (/^on/i.test(a.name)) return true;
      return false;
    };
    const checkable = (el) => el instanceof HTMLInputElement && ['checkbox', 'radio'].includes(inputType.call(el));
    // NATIVE_CLICKS in guard.py: a click whose whole effect is the element's default action.
    const native = (el) => {
      if (!(el instanceof HTMLElement) || inline(el)) return false;
      const tag = localName.call(el);
      if (tag === 'summary') {
        const details = parentNode.call(el);
        return details instanceof HTMLDetailsElement && firstSummary(details) === el;
      }
      if (tag === 'label') { const c = control.call(el); return !!c && checkable(c) && !inline(c); }
      if (tag === 'input') return checkable(el);
      if (tag === 'a') { const href = getAttribute.call(el, 'href'); return typeof href === 'string' && href.startsWith('#'); }
      return false;
    };
    // A click that follows a link to another document or submits a form, or a form submission:
    // live the next answers come from another document (decided here, synchronously; the 204 the
    // sandbox answers the navigation with may reach Playwright only after the question returns).
    const hasAttribute = Element.prototype.hasAttribute;
    const navigates = (el, name, args) => {
      if (name === 'submit' || name === 'requestSubmit') return el instanceof HTMLFormElement;
      const click = name === 'click' || (name === 'dispatchEvent' && args[0] && args[0].type === 'click');
      if (!click || !(el instanceof Element)) return false;
      for (let n = el; n && nodeType.call(n) === 1; n = parentNode.call(n)) {
        const tag = localName.call(n);
        if ((tag === 'a' || tag === 'area') && hasAttribute.call(n, 'href')) {
          const href = getAttribute.call(n, 'href').trim();
          return !(href.startsWith('#') || /^javascript:/i.test(href));
        }
      }
      const button = el instanceof HTMLButtonElement || (el instanceof HTMLInputElement && ['submit', 'image'].includes(inputType.call(el)));
      return button && (el instanceof HTMLInputElement || get(HTMLButtonElement.prototype, 'type').call(el) === 'submit')
        && !!get(Object.getPrototypeOf(el), 'form').call(el);
    };
    const method = (proto, name, kind) => {
      const original = proto && proto[name];
      if (typeof original !== 'function') return;
      Object.defineProperty(proto, name, {
        configurable: true, writable: true,
        value: function (...args) {
          const what = kind === 'events' && name === 'dispatchEvent' && args[0] ? 'dispatchEvent(' + args[0].type + ')' : name + '()';
          g[kind].push({ what: what + ' on ' + describe(this), native: kind === 'events' && name === 'click' && native(this),
                         navigates: kind === 'events' && navigates(this, name, args) });
          return original.apply(this, args);
        },
      });
    };
    const getter = (proto, name) => {
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (!d || !d.get) return;
      Object.defineProperty(proto, name, { ...d, get: function () { g.layout.push({ what: name }); return d.get.call(this); } });
    };
    method(EventTarget.prototype, 'dispatchEvent', 'events');
    for (const name of ['click', 'focus', 'blur']) method(HTMLElement.prototype, name, 'events');
    for (const name of ['submit', 'requestSubmit', 'reset']) method(HTMLFormElement.prototype, name, 'events');
    for (const name of ['innerText', 'outerText', 'offsetWidth', 'offsetHeight', 'offsetTop', 'offsetLeft', 'offsetParent'])
      getter(HTMLElement.prototype, name);
    for (const name of ['clientWidth', 'clientHeight']) getter(Element.prototype, name);
    for (const name of ['getBoundingClientRect', 'getClientRects', 'checkVisibility']) method(Element.prototype, name, 'layout');
    method(window, 'getComputedStyle', 'layout');
    g.links = Document.prototype.querySelectorAll;
  }
  if (dropped && !g.markupOn) {
    g.markupOn = true;
    // The markup lacks elements the live page had (SNAPSHOT_DROPPED_MARKER): reads of markup, of
    // text that includes <script> text, of children and siblings, and selectors that count siblings
    // or name what was left out are answered from another tree than live.
    const markup = (proto, name) => {
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (!d || !d.get) return;
      Object.defineProperty(proto, name, { ...d, get: function () { g.markup.push({ what: name }); return d.get.call(this); } });
    };
    for (const name of ['textContent', 'childNodes', 'firstChild', 'lastChild', 'nextSibling', 'previousSibling'])
      markup(Node.prototype, name);
    for (const name of ['innerHTML', 'outerHTML', 'children', 'childElementCount', 'firstElementChild',
                        'lastElementChild', 'nextElementSibling', 'previousElementSibling'])
      markup(Element.prototype, name);
    for (const name of ['scripts', 'children', 'childElementCount', 'firstElementChild', 'lastElementChild'])
      markup(Document.prototype, name);
    const structural = new RegExp(structuralSource, 'i');  // _STRUCTURAL_SELECTOR
    const selecting = (proto, name) => {
      const original = proto[name];
      if (typeof original !== 'function') return;
      Object.defineProperty(proto, name, {
        configurable: true, writable: true,
        value: function (...args) {
          const selector = String(args[0]).replace(/"[^"]*"|'[^']*'/g, '""');  // _QUOTED_TEXT
          if (structural.test(selector)) g.markup.push({ what: name + '(' + JSON.stringify(String(args[0])).slice(0, 80) + ')' });
          return original.apply(this, args);
        },
      });
    };
    for (const proto of [Element.prototype, Document.prototype, DocumentFragment.prototype])
      for (const name of ['querySelector', 'querySelectorAll', 'getElementsByTagName']) selecting(proto, name);
    for (const name of ['matches', 'closest']) selecting(Element.prototype, name);
  }
  g.events.length = 0;
  g.layout.length = 0;
  g.markup.length = 0;
  // A stylesheet the sandbox refused still gets an empty sheet: "loaded" means it has rules (or, when
  // cross-origin rules cannot be read, that the browser timed a response for it).
  const loaded = (l) => {
    if (!l.sheet) return false;
    try { return l.sheet.cssRules.length > 0; }
    catch (e) { return performance.getEntriesByName(l.href).some((t) => t.responseEnd > 0 && t.transferSize + t.decodedBodySize > 0); }
  };
  return [...g.links.call(document, 'link[rel~="stylesheet" i]')]
    .filter((l) => !l.disabled && (!l.media || matchMedia(l.media).matches) && !loaded(l)).map((l) => l.href);
}"""

_READ = (
    "() => window.__cdpiGuard ? [window.__cdpiGuard.events.slice(0, 20), window.__cdpiGuard.layout.slice(0, 5), "
    "window.__cdpiGuard.markup.slice(0, 5)] : [[], [], []]"
)

_LOAD_TIMEOUT_MS = 10_000

_SANDBOX_GONE = ("Target crashed", "Target page, context or browser has been closed")
"""A page that crashed (or was stopped) gives no answer; the evaluator would swallow the error as a 0."""

_PAGE_FUNCTION_ERRORS = (
    "ReferenceError",
    "is not a function",
)


_STRUCTURAL_SELECTOR = re.compile(
    r":(?:nth-|first-|last-|only-|empty)|[+~](?!=)|nth=|(?:^|[\s>+~,(])(?:noscript|script|base|link|meta)(?![\w-])",
    re.IGNORECASE,
)
_QUOTED_TEXT = re.compile(r'"[^"]*"|\'[^\']*\'')


def structural_selector(selector: str) -> bool:
    """Whether ``selector`` (CSS or Playwright's) counts siblings or names elements a trace snapshot leaves
    out (its quoted parts ignored), so its matches on a rebuilt page may differ from live."""
    return _STRUCTURAL_SELECTOR.search(_QUOTED_TEXT.sub('""', selector)) is not None


def _short(expression: str) -> str:
    text = " ".join(expression.split())
    return text if len(text) <= 160 else text[:157] + "..."


def guarded_evaluate(
    page: Any, expression: str, arg: Any = None, *, url: str, scripted: str | None, dropped: str | None = None
) -> Any:
    """``page.evaluate(expression, arg)`` in the sandbox, or ``ReplayMissError`` if its answer
    would depend on the page's scripts (``scripted``: why the captured page runs scripts, None if it
    runs none), on a navigation, on stylesheets the sandbox could not apply, or on elements the captured
    markup lacks (``dropped``: why, for a page rebuilt from a trace snapshot; None if it lacks none).

    Runs under the sandbox's time limit (``OfflineBrowser.limit``): an expression that never ends is
    a ``SandboxTimeoutError``.
    """
    from cdp_integration.replay.offline import offline_browser

    sandbox = offline_browser()
    with sandbox.limit(f"evaluate({_short(expression)!r}) on {url}"):
        settle(page)
        unstyled = page.evaluate(_INSTRUMENT, [dropped is not None, _STRUCTURAL_SELECTOR.pattern])
        try:
            value = page.evaluate(expression, arg)
        except Error as exc:
            message = (exc.message or str(exc)).splitlines()[0]
            if any(marker in message for marker in _SANDBOX_GONE) and not sandbox.stopped():
                raise ReplayMissError(
                    f"evaluate({_short(expression)!r}) on {url}: the offline sandbox's page died while answering "
                    f"({message!r}), so there is no answer"
                ) from None
            if scripted and any(marker in message for marker in _PAGE_FUNCTION_ERRORS):
                raise ReplayMissError(
                    f"evaluate({_short(expression)!r}) on {url}: failed offline with {message!r}; the page "
                    f"runs scripts ({scripted}), and the page's own scripts do not run in the offline sandbox, "
                    "so the functions and globals they define do not exist there (capture with the task's "
                    "config to record the live answer)"
                ) from None
            raise
        events, layout, markup = page.evaluate(_READ)
        navigations = sandbox.navigations(page)
    navigations += [event["what"] for event in events if event.get("navigates")]
    if navigations:  # this question navigated, or an earlier one did: live, this page is gone
        raise ReplayMissError(
            f"evaluate({_short(expression)!r}) on {url}: navigates the page ({navigations[-1]}); live the "
            "next answers would come from another document, which the offline sandbox does not load"
        )
    refused = [event["what"] for event in events if not event["native"]]
    if scripted and refused:
        raise ReplayMissError(
            f"evaluate({_short(expression)!r}) on {url}: dispatches {', '.join(refused[:5])}; the page runs "
            f"scripts ({scripted}) whose listeners would react live, and they do not run in the offline "
            "sandbox (capture with the task's config to record the live answer)"
        )
    if dropped and markup:
        reads = ", ".join(dict.fromkeys(item["what"] for item in markup))
        raise ReplayMissError(
            f"evaluate({_short(expression)!r}) on {url}: reads {reads}, which depends on elements the page "
            f"had live and its capture lacks: {dropped}"
        )
    if unstyled and layout:
        reads = ", ".join(dict.fromkeys(item["what"] for item in layout))
        raise ReplayMissError(
            f"evaluate({_short(expression)!r}) on {url}: reads {reads}, which depends on CSS, and the sandbox "
            f"has no body for the page's stylesheet(s) {', '.join(unstyled[:3])}, so the answer could differ "
            "from live"
        )
    return value


def unstyled_stylesheets(page: Any) -> list[str]:
    """Stylesheets the sandboxed page links but could not load (no body in the session)."""
    settle(page)
    return list(page.evaluate(_INSTRUMENT, [False, _STRUCTURAL_SELECTOR.pattern]))


def settle(page: Any) -> None:
    """Let stylesheets the sandbox serves finish loading (it opens pages at DOMContentLoaded), so a
    sheet still in flight is not mistaken for a missing one."""
    with contextlib.suppress(Error):
        page.wait_for_load_state("load", timeout=_LOAD_TIMEOUT_MS)
