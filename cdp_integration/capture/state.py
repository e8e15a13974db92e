"""What one capture reads from a tab over CDP: identity, DOM, HTML, storage, cookies, extras.

Every reader raises on failure; the logger decides what becomes a recorded fault.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from cdp_integration.errors import CaptureError
from cdp_integration.session.models import Cookie

__all__ = [
    "read_accessibility_tree",
    "read_cookies",
    "read_dom_snapshot",
    "read_html",
    "read_origins",
    "read_screenshot",
    "read_storage",
    "read_target_info",
]


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
    """Serialized document, doctype included, as ``page.content()`` would return it."""
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]
    html: str = cdp.send("DOM.getOuterHTML", {"nodeId": root["nodeId"]})["outerHTML"]
    if len(html) > max_bytes:
        raise CaptureError(f"HTML is {len(html)} characters, over the {max_bytes} limit")
    return html


def read_cookies(cdp: Any) -> list[Cookie]:
    """All cookies of the browser context, httpOnly included (the page-level getCookies misses some)."""
    return [Cookie.model_validate(c) for c in cdp.send("Network.getAllCookies")["cookies"]]


def read_origins(cdp: Any) -> list[str]:
    """Security origins of every frame in the tab (storage is keyed by origin)."""
    origins: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        frame = node["frame"]
        origin = frame.get("securityOrigin") or ""
        if urlsplit(origin).scheme in ("http", "https") and origin not in origins:
            origins.append(origin)
        for child in node.get("childFrames", ()):
            walk(child)

    walk(cdp.send("Page.getFrameTree")["frameTree"])
    return origins


def read_storage(cdp: Any, origin: str, *, local: bool) -> dict[str, str]:
    """localStorage (``local=True``) or this tab's sessionStorage for one origin."""
    items = cdp.send(
        "DOMStorage.getDOMStorageItems",
        {"storageId": {"securityOrigin": origin, "isLocalStorage": local}},
    )["entries"]
    return {key: value for key, value in items}


def read_screenshot(cdp: Any) -> str:
    """Base64 PNG of the viewport."""
    data: str = cdp.send("Page.captureScreenshot", {"format": "png"})["data"]
    return data


def read_accessibility_tree(cdp: Any) -> dict[str, Any]:
    tree: dict[str, Any] = cdp.send("Accessibility.getFullAXTree")
    return tree
