"""What one capture reads from a tab over CDP: identity, DOM, HTML, storage, cookies, extras.

Every reader raises on failure; the logger decides what becomes a recorded fault.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Awaitable, Callable, Collection
from typing import Any
from urllib.parse import urlsplit

from cdp_integration.capture.html import IncrementalHtml, read_full_html
from cdp_integration.errors import CaptureError
from cdp_integration.session.models import (
    Cookie,
    CSSOMStyle,
    FormControlState,
    FrameState,
    PseudoClassState,
    Settling,
)

__all__ = [
    "THUMBNAIL_WIDTH",
    "AsyncSend",
    "frame_tree_command",
    "isolated_params",
    "isolated_world",
    "prefetch_isolated_reads",
    "read_accessibility_tree",
    "read_cookies",
    "read_cssom_styles",
    "read_dom_snapshot",
    "read_form",
    "read_form_state",
    "read_frames",
    "read_html",
    "read_html_incremental",
    "read_origins",
    "read_page_resources",
    "read_resource_content",
    "read_screenshot",
    "read_storage",
    "read_target_info",
    "read_thumbnail",
    "remember_marked_attributes",
    "storage_params",
    "thumbnail_of_pixels",
]

AsyncSend = Callable[[str, "dict[str, Any] | None"], Awaitable[Any]]
"""A CDP command sent without blocking the tab's other commands: ``await send(method, params)``."""


def read_target_info(cdp: Any) -> dict[str, Any]:
    """``{"targetId", "url", "title", ...}`` of the tab the session is attached to."""
    info: dict[str, Any] = cdp.send("Target.getTargetInfo")["targetInfo"]
    return info


def read_dom_snapshot(cdp: Any) -> dict[str, Any]:
    """``DOMSnapshot.captureSnapshot`` with DOM rects (the layout the agent saw)."""
    snapshot: dict[str, Any] = cdp.send(
        "DOMSnapshot.captureSnapshot",
        {"computedStyles": [], "includeDOMRects": True, "includePaintOrder": False},
    )
    return snapshot


def read_html(cdp: Any, *, max_bytes: int) -> str:
    """Serialized document, doctype included, as ``page.content()`` would return it, plus shadow
    roots as declarative shadow DOM (``<template shadowrootmode=...>``), which a parser attaches
    again: offline ``innerText`` and ``querySelector`` on a host see the same shadow tree."""
    return read_full_html(cdp, max_bytes=max_bytes)


def read_cookies(cdp: Any) -> list[Cookie]:
    """All cookies of the browser context, httpOnly included (the page-level getCookies misses some)."""
    return [Cookie.model_validate(c) for c in cdp.send("Network.getAllCookies")["cookies"]]


def frame_tree_command(*, resources: bool) -> tuple[str, None]:
    """The command ``read_frame_tree`` sends (to send it ahead: ``TimedCDP.prefetch``)."""
    return ("Page.getResourceTree" if resources else "Page.getFrameTree"), None


def storage_params(origin: str, *, local: bool) -> dict[str, Any]:
    """The params of ``read_storage``'s ``DOMStorage.getDOMStorageItems``."""
    return {"storageId": {"securityOrigin": origin, "isLocalStorage": local}}


def isolated_params(expression: str, context_id: int) -> dict[str, Any]:
    """The params of a ``Runtime.evaluate`` of ``expression`` in the isolated world ``context_id``."""
    return {"expression": expression, "contextId": context_id, "returnByValue": True}


def read_frame_tree(cdp: Any, *, resources: bool) -> dict[str, Any]:
    """The tab's frame tree (``Page.getFrameTree``), with each frame's subresources when ``resources``
    (``Page.getResourceTree``, same shape); one read serves every reader of a capture."""
    tree: dict[str, Any] = cdp.send(*frame_tree_command(resources=resources))["frameTree"]
    return tree


def read_origins(cdp: Any, tree: dict[str, Any] | None = None) -> list[str]:
    """Security origins of every frame in the tab (storage is keyed by origin)."""
    origins: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        frame = node["frame"]
        origin = frame.get("securityOrigin") or ""
        if urlsplit(origin).scheme in ("http", "https") and origin not in origins:
            origins.append(origin)
        for child in node.get("childFrames", ()):
            walk(child)

    walk(tree or read_frame_tree(cdp, resources=False))
    return origins


def read_storage(cdp: Any, origin: str, *, local: bool) -> dict[str, str]:
    """localStorage (``local=True``) or this tab's sessionStorage for one origin."""
    items = cdp.send("DOMStorage.getDOMStorageItems", storage_params(origin, local=local))["entries"]
    return {key: value for key, value in items}


def read_screenshot(cdp: Any) -> str:
    """Base64 PNG of the viewport."""
    data: str = cdp.send("Page.captureScreenshot", {"format": "png"})["data"]
    return data


THUMBNAIL_WIDTH = 160
"""The thumbnail's width in pixels at most: the width the viewer's filmstrip draws it at."""
THUMBNAIL_QUALITY = 50


async def read_thumbnail(send: AsyncSend) -> tuple[str, tuple[int, int]] | None:
    """A base64 WebP of the viewport at most ``THUMBNAIL_WIDTH`` pixels wide and the viewport's size
    in CSS pixels; None for a viewport of no size. Chromium draws it from the compositor's next
    frame, so it is sent beside the tab's other reads (``TimedCDP.begin``)."""
    metrics = await send("Page.getLayoutMetrics", None)
    css, device = metrics["cssVisualViewport"], metrics["visualViewport"]
    width, height = int(css["clientWidth"]), int(css["clientHeight"])
    if width <= 0 or height <= 0:
        return None
    scale = min(1.0, THUMBNAIL_WIDTH / max(1.0, float(device["clientWidth"])))
    shot = await send(
        "Page.captureScreenshot",
        {
            "format": "webp",
            "quality": THUMBNAIL_QUALITY,
            "optimizeForSpeed": True,
            "clip": {"x": css["pageX"], "y": css["pageY"], "width": width, "height": height, "scale": scale},
        },
    )
    return shot["data"], (width, height)


def thumbnail_of_pixels(pixels: Any, viewport: dict[str, int] | None) -> tuple[str, tuple[int, int]]:
    """The thumbnail (as ``read_thumbnail``) of a screenshot the harness took itself: an RGB or RGBA
    array of the viewport (BrowserGym's observation, made with Pillow, its own dependency)."""
    from PIL import Image

    image = Image.fromarray(pixels)
    # A box filter by a whole factor (a quarter of a resize's cost), then RGB of the small image.
    small = image.reduce(max(1, -(-image.width // THUMBNAIL_WIDTH))).convert("RGB")
    buffer = io.BytesIO()
    small.save(buffer, "WEBP", quality=THUMBNAIL_QUALITY)
    size = (int(viewport["width"]), int(viewport["height"])) if viewport else (image.width, image.height)
    return base64.b64encode(buffer.getvalue()).decode(), size


def read_accessibility_tree(cdp: Any) -> dict[str, Any]:
    tree: dict[str, Any] = cdp.send("Accessibility.getFullAXTree")
    return tree


def read_page_resources(
    cdp: Any, types: Collection[str], tree: dict[str, Any] | None = None
) -> list[tuple[str, str, str, str]]:
    """``(frame_id, url, type, mime_type)`` of every subresource of ``types`` (CDP resource types,
    e.g. ``Stylesheet``) the tab's frames hold, ``@import``-ed sheets included."""
    found: list[tuple[str, str, str, str]] = []

    def walk(node: dict[str, Any]) -> None:
        frame_id = node["frame"]["id"]
        for resource in node.get("resources", ()):
            if resource.get("type") in types and not resource.get("failed") and not resource.get("canceled"):
                found.append((frame_id, resource["url"], resource["type"], resource.get("mimeType", "")))
        for child in node.get("childFrames", ()):
            walk(child)

    walk(tree if tree is not None and "resources" in tree else read_frame_tree(cdp, resources=True))
    return found


def read_resource_content(cdp: Any, frame_id: str, url: str) -> tuple[str, bool]:
    """``(body, base64)`` of a subresource from the renderer's cache (no network request)."""
    content = cdp.send("Page.getResourceContent", {"frameId": frame_id, "url": url})
    return content["content"], bool(content.get("base64Encoded"))


def read_frames(cdp: Any, *, max_bytes: int, tree: dict[str, Any] | None = None) -> list[FrameState]:
    """The documents of the tab's child frames that live in this renderer (same-origin iframes),
    serialized like ``read_html``. Out-of-process (cross-site) frames have no document here."""
    tree = tree or read_frame_tree(cdp, resources=False)
    frames: list[FrameState] = []

    def walk(node: dict[str, Any]) -> None:
        for child in node.get("childFrames", ()):
            frame = child["frame"]
            owner = cdp.send("DOM.getFrameOwner", {"frameId": frame["id"]})
            described = cdp.send(
                "DOM.describeNode", {"backendNodeId": owner["backendNodeId"], "depth": 0, "pierce": True}
            )["node"]
            document = described.get("contentDocument")
            if document is not None:
                html: str = cdp.send(
                    "DOM.getOuterHTML", {"backendNodeId": document["backendNodeId"], "includeShadowDOM": True}
                )["outerHTML"]
                if len(html) > max_bytes:
                    raise CaptureError(f"frame HTML is {len(html)} characters, over the {max_bytes} limit")
                frames.append(FrameState(url=frame.get("url", ""), name=frame.get("name", ""), html=html))
            walk(child)

    walk(tree)
    return frames


_CSSOM_STYLES = """(() => {
  const out = [];
  const text = (sheet) => { try { return Array.from(sheet.cssRules, (r) => r.cssText).join("\\n"); }
                            catch (e) { return null; } };
  const visit = (root, path) => {
    const adopted = root.adoptedStyleSheets || [];
    if (adopted.length) {
      out.push({target: "adopted", path, css: adopted.map(text).filter((t) => t !== null)});
    }
    const all = root.querySelectorAll("*");
    for (let i = 0; i < all.length; i++) {
      const el = all[i];
      if (el.localName === "style" && el.sheet && !el.textContent.trim() && el.sheet.cssRules.length) {
        const css = text(el.sheet);
        if (css !== null) out.push({target: "style_element", path: path.concat(i), css: [css]});
      }
      if (el.shadowRoot) visit(el.shadowRoot, path.concat(i));
    }
  };
  visit(document, []);
  return out;
})()"""


def isolated_world(cdp: Any, tree: dict[str, Any] | None, worlds: dict[str, int]) -> int:
    """The execution context of the tab's isolated world for its current document (created on first
    use per document, kept in ``worlds`` by loader id)."""
    frame = (tree or read_frame_tree(cdp, resources=False))["frame"]
    context_id = worlds.get(frame["loaderId"])
    if context_id is None:
        world = cdp.send("Page.createIsolatedWorld", {"frameId": frame["id"], "worldName": "cdp-integration"})
        worlds.clear()
        context_id = worlds[frame["loaderId"]] = world["executionContextId"]
    return context_id


def read_html_incremental(
    cdp: Any, reader: IncrementalHtml, *, max_bytes: int, tree: dict[str, Any] | None, worlds: dict[str, int]
) -> str:
    """``read_html``'s text, read through the tab's ``IncrementalHtml`` (large unchanged script/style
    texts are not transferred again; see ``capture.html``)."""
    return reader.read(cdp, max_bytes=max_bytes, world=lambda: isolated_world(cdp, tree, worlds))


def _evaluate_isolated(
    cdp: Any, expression: str, what: str, tree: dict[str, Any] | None, worlds: dict[str, int] | None
) -> Any:
    """The value of ``expression`` evaluated in the tab's isolated world (created on first use per
    document): the page's own scripts and globals cannot interfere with what it reads."""
    worlds = {} if worlds is None else worlds
    context_id = isolated_world(cdp, tree, worlds)
    try:
        result = cdp.send("Runtime.evaluate", isolated_params(expression, context_id))
    except Exception:
        worlds.clear()  # the context went away (a navigation in between): a new world next time
        raise
    if "exceptionDetails" in result:
        raise CaptureError(f"reading {what} failed: {result['exceptionDetails'].get('text', '')}")
    return result["result"].get("value")


def prefetch_isolated_reads(cdp: Any, context_id: int, *, cssom: bool, form: bool) -> None:
    """Send ahead (``TimedCDP.prefetch``) the isolated-world reads of a tab's capture, in the order
    the capture reads them: the settling read first (it must precede the HTML), then the CSSOM
    styles and the form state (before the HTML is read; the second settling read, sent when the HTML
    has been read, still brackets them)."""
    cdp.prefetch("Runtime.evaluate", isolated_params(_SETTLING, context_id))
    if cssom:
        cdp.prefetch("Runtime.evaluate", isolated_params(_CSSOM_STYLES, context_id))
    if form:
        cdp.prefetch("Runtime.evaluate", isolated_params(_FORM_STATE, context_id))


def read_cssom_styles(
    cdp: Any, tree: dict[str, Any] | None = None, worlds: dict[str, int] | None = None
) -> list[CSSOMStyle]:
    """Style rules the HTML does not carry: adopted (constructed) stylesheets of the document and of
    open shadow roots, and rules inserted through the CSSOM into an empty ``<style>`` (CSS-in-JS).

    Read in an isolated world, so the page's own scripts and globals cannot interfere. ``worlds``
    keeps the world's context per document (loader id) across captures.
    """
    found = _evaluate_isolated(cdp, _CSSOM_STYLES, "CSSOM styles", tree, worlds)
    return [CSSOMStyle.model_validate(item) for item in found or []]


_ATTRIBUTES = """
  const attributes = (el) => ({value: el.getAttribute("value"), checked: el.hasAttribute("checked")});
  const marks = (el) => "value" in el || "checked" in el || el.localName.includes("-");
  const each = (root, visit, path = [], frame = "", enter = null) => {
    if (enter) enter(root);
    const all = root.querySelectorAll("*");
    for (let i = 0; i < all.length; i++) {
      const el = all[i];
      visit(el, path.concat(i), frame);
      if (el.localName === "iframe" || el.localName === "frame") {
        let inner = null;
        try { inner = el.contentDocument; } catch (e) { inner = null; }
        if (inner && inner.documentElement) each(inner, visit, path.concat(i), inner.URL, enter);
      } else if (el.shadowRoot) each(el.shadowRoot, visit, path.concat(i), frame, enter);
    }
  };
"""
"""Shared by the scripts below: an element's ``value``/``checked`` attributes, whether BrowserGym's
marking may overwrite them (it writes ``.value`` and ``.checked`` of every element that has them;
custom elements' own properties are invisible in the isolated world, so they count too), and the walk
over the document, open shadow roots and same-origin frames in ``querySelectorAll("*")`` order
(``enter``, if given, is called with each root before its elements)."""

_MARKING_STORE = "globalThis.__cdpMarkedAttributes"
"""Per element of the document (a ``WeakMap`` in the isolated world, which page scripts and BrowserGym
cannot see): ``{original, marked}``, the attributes as the page had them and as BrowserGym's last
marking left them."""

_REMEMBER_ATTRIBUTES = (
    """((phase) => {"""
    + _ATTRIBUTES
    + f"""
  const store = {_MARKING_STORE} || ({_MARKING_STORE} = new WeakMap());"""
    + """
  each(document, (el) => {
    if (!marks(el)) return;
    const now = attributes(el), known = store.get(el);
    if (phase === "after") { if (known) known.marked = now; return; }
    if (!known) { store.set(el, {original: now, marked: null}); return; }
    if (known.marked === null) return;
    // Changed since BrowserGym's last marking: the page itself wrote it, so it is the page's own.
    if (now.value !== known.marked.value) known.original.value = now.value;
    if (now.checked !== known.marked.checked) known.original.checked = now.checked;
  });
  return true;
})"""
)
"""Before BrowserGym marks the page (``phase`` "before"): remember each element's attributes the first
time it is seen, and again where the page changed them since the last marking; after it (``"after"``):
remember what the marking wrote."""

_FORM_STATE = (
    """(() => {
  const out = [];
"""
    + _ATTRIBUTES
    + f"""
  const store = {_MARKING_STORE} || null;"""
    + """
  const restored = [];
  const original = (el) => {
    const known = store && store.get(el);
    if (!known || known.marked === null) return null;
    const now = attributes(el), put = {};
    if (now.value === known.marked.value && now.value !== known.original.value) put.value = known.original.value;
    if (now.checked === known.marked.checked && now.checked !== known.original.checked) put.checked = known.original.checked;
    return Object.keys(put).length ? put : null;
  };
  const noValue = new Set(["checkbox", "radio", "file", "hidden", "button", "submit", "reset", "image"]);
  const sanitizing = ["type", "value", "min", "max", "step", "multiple"];
  const freshValue = (el, put) => {
    const tag = el.localName;
    const fresh = el.ownerDocument.createElement(tag);
    if (tag === "textarea") fresh.textContent = el.defaultValue;
    else for (const name of sanitizing) {
      const v = name === "value" && put && "value" in put ? put.value : el.getAttribute(name);
      if (v !== null) fresh.setAttribute(name, v);
    }
    return fresh.value;
  };
  const defaultSelection = (select, options) => {
    if (select.multiple) return options.map((o) => o.defaultSelected);
    let chosen = -1;
    options.forEach((o, i) => { if (o.defaultSelected) chosen = i; });
    if (chosen < 0 && select.size <= 1) chosen = options.findIndex((o) => !o.matches(":disabled"));
    return options.map((_, i) => i === chosen);
  };
  const record = (el, tag, path, frame, put) => {
    let state = null;
    if (tag === "select") {
      const options = Array.from(el.options);
      const before = defaultSelection(el, options);
      if (options.some((o, i) => o.selected !== before[i])) {
        const chosen = options.filter((o) => o.selected);
        state = {selected: options.flatMap((o, i) => (o.selected ? [i] : [])), selected_text: chosen.map((o) => o.label)};
      }
    } else if (tag === "textarea" || !noValue.has(el.type)) {
      const byDefault = tag === "input" && put && "value" in put ? put.value || "" : el.defaultValue;
      if (el.value !== byDefault && el.value !== freshValue(el, put)) state = {value: el.value};
    } else if (el.type === "checkbox" || el.type === "radio") {
      const byDefault = put && "checked" in put ? put.checked : el.defaultChecked;
      if (el.checked !== byDefault) state = {checked: el.checked};
    }
    if (state) {
      out.push(Object.assign({
        path, frame, tag, type: tag === "input" ? el.type : "", name: el.getAttribute("name") || "",
        id: el.id || "", autocomplete: el.getAttribute("autocomplete") || "",
      }, state));
    }
  };
  const pseudo = [], flagged = new Set();
  const userAction = ["hover", "active", "focus", "focus-within", "focus-visible"];
  const enter = (root) => {
    for (const el of root.querySelectorAll(":hover, :active, :focus-within")) flagged.add(el);
  };
  each(document, (el, path, frame) => {
    const tag = el.localName;
    if (flagged.has(el) && pseudo.length < 256) {
      pseudo.push({path, frame, tag, classes: userAction.filter((name) => el.matches(":" + name))});
    }
    const put = original(el);
    if (put) restored.push(Object.assign({
      bid: el.getAttribute("bid"), frame, tag, type: tag === "input" ? el.type : "",
      name: el.getAttribute("name") || "", id: el.getAttribute("id") || "",
      autocomplete: el.getAttribute("autocomplete") || "",
    }, put));
    if (tag === "input" || tag === "textarea" || tag === "select") record(el, tag, path, frame, put);
  }, [], "", enter);
  return {controls: out, restored, pseudo};
})()"""
)
"""Controls whose state differs from the page's own default, (on a page BrowserGym marked, see
``remember_marked_attributes``) the attributes to put back where its marking overwrote the page's:
``{bid, frame, tag, type, name, id, autocomplete, value?, checked?}`` (a control's default is then
reckoned from the page's attribute), and the elements matching user-action pseudo-classes (the chain
under the pointer, the focused element's; at most 256)."""


def read_form_state(
    cdp: Any, tree: dict[str, Any] | None = None, worlds: dict[str, int] | None = None
) -> list[FormControlState]:
    """Form controls whose live state differs from their default (what the agent typed, checked,
    selected), in the document, its open shadow roots and its same-origin frames.

    The serialized HTML has attributes only, so a control's ``value``/``checked``/selectedness is read
    here, in the isolated world (see ``read_cssom_styles``). A value counts as changed when it differs
    from ``defaultValue`` and from what a fresh control with the same attributes would hold (a range
    input's midpoint, a colour input's black), so only state a fresh load would not give is stored.
    """
    return read_form(cdp, tree, worlds)[0]


def read_form(
    cdp: Any, tree: dict[str, Any] | None = None, worlds: dict[str, int] | None = None
) -> tuple[list[FormControlState], list[dict[str, Any]], list[PseudoClassState]]:
    """``read_form_state``, the attributes BrowserGym's marking overwrote that the HTML must get
    back (``{"bid", "frame", "tag", ..., "value"?, "checked"?}``; see ``remember_marked_attributes``),
    and the elements the pointer and the focus left in ``:hover``/``:focus-within``/... states.

    On a marked page a control's default is its attribute as the page had it, so what the agent typed
    is form state even though BrowserGym copied it into the ``value`` attribute.
    """
    found = _evaluate_isolated(cdp, _FORM_STATE, "form state", tree, worlds) or {}
    controls = [FormControlState.model_validate(item) for item in found.get("controls") or []]
    pseudo = [
        PseudoClassState.model_validate(item) for item in found.get("pseudo") or [] if item.get("classes")
    ]
    return controls, list(found.get("restored") or []), pseudo


SETTLING_WORLD_SCRIPT = """(() => {
  if (globalThis.__cdpSettling) return;
  const ignored = new Set(["bid", "browsergym_visibility_ratio", "browsergym_set_of_marks", "value", "checked",
                           "aria-roledescription", "aria-description"]);
  const state = globalThis.__cdpSettling = {from: performance.now(), changes: [], full: null, input: -1e9,
                                            acted: null};
  for (const type of ["pointerdown", "mousedown", "click", "keydown", "input", "change", "wheel", "touchstart"]) {
    addEventListener(type, (e) => { if (e.isTrusted) state.acted = state.input = performance.now(); }, true);
  }
  addEventListener("focus", (e) => { if (e.isTrusted && e.target === window) state.acted = performance.now(); }, true);
  const note = (records) => {
    if (!records.some((r) => r.type !== "attributes" || !ignored.has(r.attributeName))) return;
    const t = performance.now();
    if (t - state.input < 150) return;
    const spans = state.changes, last = spans[spans.length - 1];
    if (last && t - last[1] < 100) last[1] = t;
    else if (spans.length < 200) spans.push([t, t]);
    else if (state.full === null) state.full = t;
  };
  new MutationObserver(note).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
})()"""
"""Runs in the logger's isolated world of every new document of a followed tab (and of the current
one when the tab is attached): records when the page's DOM changes by itself. Left out: BrowserGym's
marking attributes (it writes them at every observation) and changes within 150 ms of a trusted
input event (the agent's own click or typing, which a fresh load does not replay; a change the
page makes later, even in answer to it, counts). The page's scripts cannot see or alter it."""

_SETTLING = """(() => {
  const s = globalThis.__cdpSettling || null;
  const nav = performance.getEntriesByType("navigation")[0];
  return {time_origin: performance.timeOrigin, age_ms: performance.now(),
          load_ms: nav && nav.loadEventEnd > 0 ? nav.loadEventEnd : null,
          observed_from_ms: s ? s.from : null, changes: s ? s.changes : [],
          changes_complete_until_ms: s ? s.full : null};
})()"""


def watch_settling(cdp: Any) -> None:
    """Record, from now on, when each document of the tab changes by itself (``SETTLING_WORLD_SCRIPT``).
    Needs ``Page.enable`` (for documents created later)."""
    cdp.send(
        "Page.addScriptToEvaluateOnNewDocument",
        {"source": SETTLING_WORLD_SCRIPT, "worldName": "cdp-integration", "runImmediately": True},
    )


_ACTED = """(() => {
  const s = globalThis.__cdpSettling;
  return s && s.acted !== null ? performance.timeOrigin + s.acted : null;
})()"""


def read_last_acted(
    cdp: Any, tree: dict[str, Any] | None = None, worlds: dict[str, int] | None = None
) -> float | None:
    """When the agent last acted in the tab's document (a trusted input event, or the window got focus),
    in wall-clock seconds; None: not since the document (or the watcher) started."""
    value = _evaluate_isolated(cdp, _ACTED, "last input", tree, worlds)
    return float(value) / 1000 if isinstance(value, int | float) else None


def read_settling(
    cdp: Any, tree: dict[str, Any] | None = None, worlds: dict[str, int] | None = None
) -> Settling:
    """The document's load time, age and the spans in which it changed (``Settling``; requests and
    websockets pending are the network recorder's, filled in by the logger)."""
    return Settling.model_validate(_evaluate_isolated(cdp, _SETTLING, "settling", tree, worlds))


def remember_marked_attributes(cdp: Any, worlds: dict[str, int], *, phase: str) -> None:
    """Keep, in the isolated world, each element's ``value``/``checked`` attributes as the page had
    them, around BrowserGym's marking (``phase`` "before" / "after" it).

    BrowserGym writes every element's live ``.value`` into its ``value`` attribute and ``.checked``
    into ``checked`` at each observation. Served as captured, that HTML would give a fresh load the
    agent's typed text where a live fresh load has the page's own; the capture puts the page's
    attributes back (``restore_attributes``) and stores what was typed as form state.
    """
    _evaluate_isolated(cdp, f"{_REMEMBER_ATTRIBUTES}({json.dumps(phase)})", "marked attributes", None, worlds)
