"""The tab's HTML without moving an unchanged large script or style text through CDP again.

``DOM.getOuterHTML`` of a page with megabytes of inline data (a single-page app's JSON in a
``<script>``, Magento's ``x-magento-init``) costs ~150-260 ms of CPU per capture, almost all of it
moving the string renderer -> browser -> Playwright's driver -> Python; Chromium serializes it in
~8 ms. ``IncrementalHtml`` sends each large text once per document and then only what is around it:

1. in the tab's isolated world, the document is copied into an inert document
   (``createHTMLDocument`` + ``importNode`` of every child of the document: no browsing context, so no
   script runs, no custom element upgrades, nothing loads, and the live DOM is not touched); in the
   copy, each ``<script>``/``<style>`` text over ``MIN_TEXT`` characters becomes a marker naming a
   token (the text is sent only when Python does not hold that token yet), and, when the live
   serializer writes ``<noscript>`` text literally (scripting on), each such text becomes a marker
   too (the inert copy would escape it);
2. ``DOM.getOuterHTML`` of the copy (the same serializer) and the markers filled in Python.

It is used only where it is exact: an HTML document with no shadow root other than the user agent's
(``DOM.describeNode`` of the live document; closed roots are invisible to JavaScript but
``getOuterHTML`` serializes them), and no mutation of the document between the copy and that check
(a ``MutationObserver`` of the isolated world). The first fast read of each document (and every
``VERIFY_EVERY``-th after it) is compared with the full read, and the fast path is off for that
document on any difference. Pages without
large texts, and any read that cannot be sure, take the full read. So does the first read of each
document: the fast path starts with its second read (a step per full-page load never pays for it).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cdp_integration.errors import CaptureError

__all__ = ["IncrementalHtml", "read_full_html"]

MIN_TEXT = 16 * 1024
"""A script/style text node at least this long (characters) is sent once and cached."""
MIN_TOTAL = 128 * 1024
"""The fast path is tried only when the large texts add up to this much ..."""
PER_ELEMENT = 200
"""... and to this many characters per element of the document (``describeNode`` costs per node)."""
MIN_HTML = 256 * 1024
"""A tab whose last HTML was shorter than this is read in full (no extra round trip on usual pages)."""
VERIFY_EVERY = 16
"""Every this many fast reads of a document, one is compared with the full read again (what the
document holds changes; a difference turns the fast path off for it)."""

_GROUP = "cdp-integration-html"

_COPY = """((known, minText, minTotal, perElement) => {
  const S = globalThis.__cdpHtml || (globalThis.__cdpHtml = {
    texts: new WeakMap(), count: 0, observer: null, pending: null, mutated: false,
    world: Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join(""),
  });
  if (S.observer) S.observer.disconnect();
  S.observer = null; S.pending = null;
  if (document.contentType !== "text/html" || !document.documentElement) return "not an HTML document";
  const XHTML = "http://www.w3.org/1999/xhtml";
  const textsOf = (selector, keep) => {
    const out = [];
    for (const el of document.querySelectorAll(selector)) {
      if (el.namespaceURI !== XHTML) continue;
      for (let t = el.firstChild; t; t = t.nextSibling) if (t.nodeType === 3 && keep(t)) out.push(t);
    }
    return out;
  };
  const big = textsOf("script,style", (t) => t.data.length >= minText);
  let total = 0;
  for (const t of big) total += t.data.length;
  if (total < minTotal) return "no large script or style text";
  if (total < perElement * document.getElementsByTagName("*").length) return "large texts too small for the page";
  const probe = document.createElement("noscript");
  probe.textContent = "<";
  const literal = probe.outerHTML === "<noscript><</noscript>";
  const inline = literal ? textsOf("noscript", () => true) : [];
  const path = (node) => {
    const p = [];
    for (let n = node; n.parentNode; n = n.parentNode) {
      let i = 0;
      for (let s = n.previousSibling; s; s = s.previousSibling) i++;
      p.push(i);
    }
    return p.reverse();
  };
  const copy = document.implementation.createHTMLDocument("");
  while (copy.firstChild) copy.removeChild(copy.firstChild);
  const kids = Array.from(document.childNodes, (n) => copy.importNode(n, true));
  const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  const have = new Set(known);
  const marks = [], send = {};
  const mark = (node) => {
    const p = path(node);
    let c = {childNodes: kids};
    for (const k of p) c = c.childNodes[k];
    if (!c || c.nodeType !== 3 || c.data !== node.data) throw new Error("copy differs from the document");
    c.data = "cdphtml" + nonce + "x" + marks.length + "y";
  };
  for (const t of big) {
    const data = t.data;
    let entry = S.texts.get(t);
    if (!entry || entry.data !== data) {
      entry = {data, token: S.world + "-" + (++S.count)};
      S.texts.set(t, entry);
    }
    mark(t);
    marks.push({token: entry.token});
    if (!have.has(entry.token)) send[entry.token] = data;
  }
  for (const t of inline) { mark(t); marks.push({text: t.data}); }
  for (const k of kids) copy.appendChild(k);
  S.mutated = false;
  S.observer = new MutationObserver(() => { S.mutated = true; });
  S.observer.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  S.pending = {nonce, marks, send};
  return copy;
})"""
"""The inert copy with markers (a remote object), or why the fast path does not apply (a string)."""

_FINISH = """(() => {
  const S = globalThis.__cdpHtml, p = S && S.pending;
  if (!p || !S.observer) return null;
  const mutated = S.mutated || S.observer.takeRecords().length > 0;
  S.observer.disconnect();
  S.observer = null; S.pending = null;
  return mutated ? {mutated: true} : p;
})()"""
"""The markers' contents as of the copy, or ``{mutated: true}`` when the document changed since."""


def read_full_html(cdp: Any, *, max_bytes: int) -> str:
    """Serialized document, doctype included, as ``page.content()`` would return it, plus open and
    closed shadow roots as declarative shadow DOM (``<template shadowrootmode=...>``), which a parser
    attaches again: offline ``innerText`` and ``querySelector`` on a host see the same shadow tree."""
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]
    html: str = cdp.send("DOM.getOuterHTML", {"nodeId": root["nodeId"], "includeShadowDOM": True})[
        "outerHTML"
    ]
    _check_size(html, max_bytes)
    return html


def _check_size(html: str, max_bytes: int) -> None:
    if len(html) > max_bytes:
        raise CaptureError(f"HTML is {len(html)} characters, over the {max_bytes} limit")


@dataclass
class _Document:
    """What the fast path knows about one document (one isolated-world context)."""

    context_id: int
    backend_node_id: int | None = None
    verified: bool = False
    """A fast read of this document was compared with the full read and was equal."""
    fast_reads: int = 0
    """Fast reads since the last comparison with the full read."""
    plain_at: int | None = None
    """The HTML size when the world last found too little large text for the fast path: it is not
    asked again until the HTML has grown by ``MIN_TOTAL`` (either read is exact; this saves a round
    trip per capture on a large page without large scripts)."""
    disabled: str | None = None
    """Why the fast path is off for this document (a comparison differed)."""
    texts: dict[str, str] = field(default_factory=dict)
    """token -> large text, as the isolated world sent it (only the last read's tokens are kept)."""


@dataclass
class IncrementalHtml:
    """One tab's HTML reads (see the module docstring); ``read`` returns exactly the full read's text."""

    last_size: int = 0
    document: _Document | None = None
    stats: dict[str, int] = field(default_factory=dict)
    """How reads went (``full``, ``fast``, ``verified``, ``fallback:<why>``): for benchmarks and tests."""

    def read(self, cdp: Any, *, max_bytes: int, world: Callable[[], int]) -> str:
        """The document's HTML; ``world()`` gives the tab's isolated world for its current document
        (asked only for a page that may take the fast path)."""
        if self.last_size < MIN_HTML:
            return self._full(cdp, max_bytes, "small page")
        context_id = world()
        document = self.document
        if document is None or document.context_id != context_id:
            # A new document is read in full: its first fast read would have to be compared with the
            # full read anyway, and would send every large text besides (a full-page load of a
            # single-page app paid both on every step). The fast path starts with its second read.
            self.document = _Document(context_id)
            return self._full(cdp, max_bytes, "new document")
        if document.disabled is not None:
            return self._full(cdp, max_bytes, "disabled")
        if document.plain_at is not None and self.last_size < document.plain_at + MIN_TOTAL:
            return self._full(cdp, max_bytes, "no large text")
        try:
            fast = self._fast(cdp, document, max_bytes)
        except CaptureError:
            raise
        except Exception as exc:  # a CDP error (the document went away): the full read decides
            self.document = None
            fast = _Fallback(f"error: {type(exc).__name__}")
        if isinstance(fast, _Fallback):
            if fast.plain:
                document.plain_at = self.last_size
            return self._full(cdp, max_bytes, fast.why)
        if not document.verified or document.fast_reads >= VERIFY_EVERY:
            full = self._full(cdp, max_bytes, None)
            if full != fast:
                document.disabled = "differs from the full read"
                self._count("disabled")
                return full
            document.verified = True
            document.fast_reads = 0
            self._count("verified")
            return full
        document.fast_reads += 1
        self.last_size = len(fast)
        self._count("fast")
        return fast

    def _full(self, cdp: Any, max_bytes: int, why: str | None) -> str:
        html = read_full_html(cdp, max_bytes=max_bytes)
        self.last_size = len(html)
        if why is not None:
            self._count("full" if why == "small page" else f"fallback:{why}")
        return html

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def _fast(self, cdp: Any, document: _Document, max_bytes: int) -> str | _Fallback:
        known = json.dumps(sorted(document.texts))
        made = cdp.send(
            "Runtime.evaluate",
            {
                "expression": f"{_COPY}({known}, {MIN_TEXT}, {MIN_TOTAL}, {PER_ELEMENT})",
                "contextId": document.context_id,
                "objectGroup": _GROUP,
            },
        )
        if "exceptionDetails" in made:
            return _Fallback("copy failed")
        result = made["result"]
        if result.get("subtype") != "node" or "objectId" not in result:
            why = str(result.get("value", "no copy"))
            return _Fallback(why, plain=why in _PLAIN)
        try:
            copy: str = cdp.send(
                "DOM.getOuterHTML", {"objectId": result["objectId"], "includeShadowDOM": True}
            )["outerHTML"]
        finally:
            _release(cdp)
        if document.backend_node_id is None:
            document.backend_node_id = cdp.send("DOM.getDocument", {"depth": 0})["root"]["backendNodeId"]
        live = cdp.send("DOM.describeNode", {"backendNodeId": document.backend_node_id, "depth": -1})["node"]
        shadow = _has_shadow_root(live)
        finished = cdp.send(
            "Runtime.evaluate",
            {"expression": _FINISH, "contextId": document.context_id, "returnByValue": True},
        )
        pending = finished.get("result", {}).get("value")
        if "exceptionDetails" in finished or not isinstance(pending, dict):
            return _Fallback("no pending copy")
        if pending.get("mutated"):
            return _Fallback("document changed during the read")
        if shadow:
            return _Fallback("shadow root")
        texts = {**document.texts, **pending["send"]}
        html = _assemble(copy, pending["nonce"], pending["marks"], texts)
        if html is None:
            return _Fallback("markers")
        _check_size(html, max_bytes)
        document.texts = {m["token"]: texts[m["token"]] for m in pending["marks"] if "token" in m}
        return html


@dataclass(frozen=True)
class _Fallback:
    why: str
    plain: bool = False
    """The document has too little large text for the fast path (see ``_Document.plain_at``)."""


_PLAIN = frozenset({"no large script or style text", "large texts too small for the page"})


def _release(cdp: Any) -> None:
    with contextlib.suppress(Exception):  # the context went away with its objects
        cdp.send("Runtime.releaseObjectGroup", {"objectGroup": _GROUP})


def _has_shadow_root(node: dict[str, Any]) -> bool:
    """Whether the described subtree holds a shadow root other than the user agent's (template
    contents included; frames' documents are not described without ``pierce``)."""
    stack = [node]
    while stack:
        current = stack.pop()
        for root in current.get("shadowRoots") or ():
            if root.get("shadowRootType") != "user-agent":
                return True
        stack.extend(current.get("children") or ())
        if "templateContent" in current:
            stack.append(current["templateContent"])
    return False


def _assemble(copy: str, nonce: str, marks: list[dict[str, Any]], texts: dict[str, str]) -> str | None:
    """The copy with each marker replaced by its text; ``None`` unless every marker is there once."""
    if not re.fullmatch(r"[0-9a-f]{32}", nonce):
        return None
    parts = re.split(rf"cdphtml{nonce}x(\d+)y", copy)
    seen: set[int] = set()
    out = [parts[0]]
    for i in range(1, len(parts), 2):
        index = int(parts[i])
        if index in seen or index >= len(marks):
            return None
        seen.add(index)
        mark = marks[index]
        text = texts.get(mark["token"]) if "token" in mark else mark.get("text")
        if not isinstance(text, str):
            return None
        out.append(text)
        out.append(parts[i + 1])
    if len(seen) != len(marks):
        return None
    return "".join(out)
