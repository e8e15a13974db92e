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
(a ``MutationObserver`` of the isolated world). Large texts travel as content-defined chunks named by
their content, so a chunk held from an earlier read of the tab (this document's or the previous
one's) is not sent again: a full-page load of the same app sends only the chunks that changed (the
state a server writes into its page). A fast read is checked before it is trusted: the first fast
read of the tab's first document is compared with the full read, and so is every
``VERIFY_EVERY``-th after it; that comparison also checks that the live document's digest (its
serialization hashed in the page, ``_FINISH``) equals the full read's, and once it has, the first
fast read of each later document is checked against that digest instead of a full read. Any
difference turns the fast path off for the document (and a digest that never matched keeps each new
document's first read a full one). Pages without large texts, and any read that cannot be sure,
take the full read.
"""

from __future__ import annotations

import contextlib
import json
import re
import zlib
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
    texts: new WeakMap(), observer: null, pending: null, mutated: false,
  });
  // A large text travels as content-defined chunks (cut where a hash of the last 32 characters
  // takes a chosen value, so an edit moves only the cuts around it), each named by its content (its
  // length and two 32-bit hashes of its code units): a chunk Python holds from an earlier read of
  // the tab, this document's or the one before, is not sent again. A name that stood for other text
  // would assemble a page unlike the live one, which the digest or the full read refuses.
  const mix = (h) => {  // murmur3's finalizer: each byte value its own well-spread 32-bit number
    h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35);
    return h ^ (h >>> 16);
  };
  const GEAR = S.gear || (S.gear = Int32Array.from({length: 256}, (_, i) => mix(i + 0x9e3779b9)));
  const chunks = (data) => {
    const out = [];
    let start = 0, g = 0, a = 0x811c9dc5, b = 0x9747b28c;
    for (let i = 0; i < data.length; i++) {
      const c = data.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995); b ^= b >>> 15;
      g = ((g << 1) + GEAR[c & 255]) | 0;  // its top bits depend on the last 32 characters
      const size = i + 1 - start;
      // never between the two halves of a surrogate pair: each chunk must be a well-formed string
      const pairStart = c >= 0xd800 && c <= 0xdbff;
      if (i === data.length - 1 || (!pairStart && ((size >= 4096 && (g & 0xfffc0000) === 0) || size >= 65536))) {
        out.push({token: "t" + size.toString(36) + "-" + (a >>> 0).toString(36) + "-" + (b >>> 0).toString(36), start, end: i + 1});
        start = i + 1; g = 0; a = 0x811c9dc5; b = 0x9747b28c;
      }
    }
    return out;
  };
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
      entry = {data, chunks: chunks(data)};
      S.texts.set(t, entry);
    }
    mark(t);
    marks.push({tokens: entry.chunks.map((c) => c.token)});
    for (const c of entry.chunks) if (!have.has(c.token)) send[c.token] = data.slice(c.start, c.end);
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

_FINISH = """((withDigest) => {
  const S = globalThis.__cdpHtml, p = S && S.pending;
  if (!p || !S.observer) return null;
  const mutated = S.mutated || S.observer.takeRecords().length > 0;
  S.observer.disconnect();
  S.observer = null; S.pending = null;
  if (mutated) return {mutated: true};
  if (!withDigest) return p;
  // The live document serialized as getOuterHTML does (doctype, comments, elements), as UTF-8:
  // its CRC-32, Adler-32 and length. Any other node at the top: no digest.
  let html = "";
  for (const n of document.childNodes) {
    if (n.nodeType === 1) html += n.outerHTML;
    else if (n.nodeType === 8) html += "<!--" + n.data + "-->";
    else if (n.nodeType === 10) {
      html += "<!DOCTYPE " + n.name + (n.publicId ? ' PUBLIC "' + n.publicId + '"' : "")
        + (n.systemId ? (n.publicId ? ' "' : ' SYSTEM "') + n.systemId + '"' : "") + ">";
    }
    else return {...p, digest: null};
  }
  const bytes = new TextEncoder().encode(html);
  const table = S.crcTable || (S.crcTable = Int32Array.from({length: 256}, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c;
  }));
  let crc = -1, a = 1, b = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    crc = table[(crc ^ byte) & 0xff] ^ (crc >>> 8);
    a += byte; b += a;
    if ((i & 4095) === 4095) { a %= 65521; b %= 65521; }
  }
  a %= 65521; b %= 65521;
  return {...p, digest: [(crc ^ -1) >>> 0, ((b << 16) | a) >>> 0, bytes.length]};
})"""
"""The markers' contents as of the copy, or ``{mutated: true}`` when the document changed since; with
``withDigest``, also the live document's digest (``_digest`` of its serialization)."""


def _digest(html: str) -> list[int]:
    """CRC-32, Adler-32 and length of ``html`` as UTF-8: what ``_FINISH`` computes of the live document."""
    data = html.encode("utf-8", "surrogatepass")
    return [zlib.crc32(data), zlib.adler32(data), len(data)]


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


@dataclass
class IncrementalHtml:
    """One tab's HTML reads (see the module docstring); ``read`` returns exactly the full read's text."""

    last_size: int = 0
    document: _Document | None = None
    texts: dict[str, str] = field(default_factory=dict)
    """token -> chunk of a large text, as the isolated world sent it (the last fast read's, kept across
    the tab's documents: a token names its chunk's content)."""
    digest_trusted: bool | None = None
    """Whether the live document's digest (computed in the page) equals the full read's on this tab:
    learnt at the first comparison with the full read. Once true, a new document's first fast read
    is checked against the digest instead of a full read."""
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
            document = self.document = _Document(context_id)
            if self.digest_trusted is False:
                # Read in full: a first fast read would have to be compared with the full read anyway
                # (and a full-page load of a single-page app would pay for both on every step).
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
        html, live = fast
        if not document.verified and self.digest_trusted and live is not None:
            if _digest(html) != live:  # the assembled page is not the live one: the full read decides
                document.disabled = "differs from the live document's digest"
                self._count("disabled")
                return self._full(cdp, max_bytes, None)
            document.verified = True
            document.fast_reads = 0
            self.last_size = len(html)
            self._count("digest-verified")
            return html
        if not document.verified or document.fast_reads >= VERIFY_EVERY:
            full = self._full(cdp, max_bytes, None)
            if live is not None and self.digest_trusted is None:
                self.digest_trusted = _digest(full) == live
            if full != html:
                document.disabled = "differs from the full read"
                self._count("disabled")
                return full
            document.verified = True
            document.fast_reads = 0
            self._count("verified")
            return full
        document.fast_reads += 1
        self.last_size = len(html)
        self._count("fast")
        return html

    def _full(self, cdp: Any, max_bytes: int, why: str | None) -> str:
        html = read_full_html(cdp, max_bytes=max_bytes)
        self.last_size = len(html)
        if why is not None:
            self._count("full" if why == "small page" else f"fallback:{why}")
        return html

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def _fast(
        self, cdp: Any, document: _Document, max_bytes: int
    ) -> tuple[str, list[int] | None] | _Fallback:
        """The assembled HTML and, when the reader still needs one, the live document's digest."""
        known = json.dumps(sorted(self.texts))
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
        # The digest is asked while trust is being learnt, and for a document not verified yet.
        with_digest = self.digest_trusted is None or (self.digest_trusted and not document.verified)
        finished = cdp.send(
            "Runtime.evaluate",
            {
                "expression": f"{_FINISH}({json.dumps(with_digest)})",
                "contextId": document.context_id,
                "returnByValue": True,
            },
        )
        pending = finished.get("result", {}).get("value")
        if "exceptionDetails" in finished or not isinstance(pending, dict):
            return _Fallback("no pending copy")
        if pending.get("mutated"):
            return _Fallback("document changed during the read")
        if shadow:
            return _Fallback("shadow root")
        texts = {**self.texts, **pending["send"]}
        html = _assemble(copy, pending["nonce"], pending["marks"], texts)
        if html is None:
            return _Fallback("markers")
        _check_size(html, max_bytes)
        self.texts = {t: texts[t] for m in pending["marks"] for t in m.get("tokens", ())}
        live = pending.get("digest")
        valid = isinstance(live, list) and len(live) == 3 and all(type(v) is int for v in live)
        return html, live if valid else None


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
        if "tokens" in mark:
            tokens = mark["tokens"]
            pieces = [texts.get(t) for t in tokens] if isinstance(tokens, list) else [None]
            text = "".join(pieces) if all(isinstance(p, str) for p in pieces) else None  # type: ignore[arg-type]
        else:
            text = mark.get("text")
        if not isinstance(text, str):
            return None
        out.append(text)
        out.append(parts[i + 1])
    if len(seen) != len(marks):
        return None
    return "".join(out)
