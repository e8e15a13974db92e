"""``MockCDPSession``: Chrome DevTools Protocol calls answered from a captured step.

A subclass of Playwright's ``CDPSession`` (the evaluators' ``client`` parameter is typed with it).
Each supported method maps to what the logger captured with the same CDP call; a method the session
cannot answer raises ``ReplayMissError`` naming it and listing the methods it can answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from playwright.sync_api import CDPSession

from cdp_integration.errors import ReplayMissError
from cdp_integration.replay.page import MockPage

__all__ = ["MockCDPSession"]


def _remote_object(value: Any) -> dict[str, Any]:
    if value is None:
        return {"type": "undefined"}
    kind = {bool: "boolean", int: "number", float: "number", str: "string"}.get(type(value), "object")
    return {"type": kind, "value": value}


class MockCDPSession(CDPSession):
    """CDP for the tab ``page`` shows (``DOMSnapshot``, ``DOM.getOuterHTML``, cookies, storage, ...)."""

    def __init__(self, page: MockPage) -> None:
        # Deliberately not calling CDPSession.__init__: there is no live session behind this one.
        self._page = page
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "Accessibility.getFullAXTree": self._ax_tree,
            "DOM.getOuterHTML": lambda params: {"outerHTML": self._page.content()},
            "DOMSnapshot.captureSnapshot": self._dom_snapshot,
            "DOMStorage.getDOMStorageItems": self._storage_items,
            "Network.getAllCookies": self._cookies,
            "Network.getCookies": self._cookies,
            "Page.captureScreenshot": self._screenshot,
            "Runtime.evaluate": self._evaluate,
            "Storage.getCookies": self._cookies,
            "Target.getTargets": self._targets,
        }

    @property
    def _impl_obj(self) -> Any:  # type: ignore[override]
        raise ReplayMissError("this CDPSession method is not available offline; use send(method, params)")

    def __repr__(self) -> str:
        return f"<MockCDPSession url={self._page.url!r}>"

    @property
    def methods(self) -> list[str]:
        """The CDP methods this session answers."""
        return sorted(self._methods)

    def send(self, method: str, params: dict | None = None, *, timeout: Any = None) -> dict:
        handler = self._methods.get(method)
        if handler is None:
            raise ReplayMissError(
                f"CDP method {method} was not captured; this session can answer: {', '.join(self.methods)}"
            )
        return handler(dict(params or {}))

    def detach(self) -> None:
        return None

    # -- answers -----------------------------------------------------------------------------

    def _tab(self, what: str, field: str) -> Any:
        tab = self._page._tab
        value = getattr(tab, field, None) if tab is not None else None
        if value is None:
            raise ReplayMissError(f"{what}: not captured for {self._page.url} (see the logger's options)")
        return value

    def _dom_snapshot(self, params: dict[str, Any]) -> dict[str, Any]:
        """The captured snapshot; else one taken now of the captured page in the offline sandbox
        (same HTML and stylesheets; layout from the sandbox's viewport, images absent)."""
        tab = self._page._tab
        if tab is not None and tab.dom_snapshot is not None:
            return tab.dom_snapshot
        offline = self._page._offline_page("DOMSnapshot.captureSnapshot", None)
        cdp = offline.context.new_cdp_session(offline)
        try:
            snapshot: dict[str, Any] = cdp.send(
                "DOMSnapshot.captureSnapshot", {"computedStyles": [], **params}
            )
        finally:
            cdp.detach()
        return snapshot

    def _ax_tree(self, params: dict[str, Any]) -> dict[str, Any]:
        tree = self._tab("Accessibility.getFullAXTree", "ax_tree")
        return tree if isinstance(tree, dict) else {"nodes": tree}

    def _screenshot(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"data": self._tab("Page.captureScreenshot", "screenshot_png")}

    def _cookies(self, params: dict[str, Any]) -> dict[str, Any]:
        step = self._page.context.step
        return {"cookies": [cookie.model_dump(by_alias=True) for cookie in step.cookies]}

    def _storage_items(self, params: dict[str, Any]) -> dict[str, Any]:
        storage_id = params.get("storageId") or {}
        origin = storage_id.get("securityOrigin", "")
        if storage_id.get("isLocalStorage", True):
            items = self._page.context.step.local_storage.get(origin, {})
        else:
            tab = self._page._tab
            items = tab.session_storage.get(origin, {}) if tab is not None else {}
        return {"entries": [[key, value] for key, value in items.items()]}

    def _targets(self, params: dict[str, Any]) -> dict[str, Any]:
        step = self._page.context.step
        return {
            "targetInfos": [
                {
                    "targetId": tab.tab_id,
                    "type": "page",
                    "title": tab.title,
                    "url": tab.url,
                    "attached": tab.active,
                }
                for tab in step.tabs
            ]
        }

    def _evaluate(self, params: dict[str, Any]) -> dict[str, Any]:
        expression = params.get("expression")
        if not isinstance(expression, str):
            raise ReplayMissError("Runtime.evaluate needs an 'expression' string")
        try:
            value = self._page.evaluate(expression)
        except ReplayMissError:
            raise
        except Exception as exc:
            text = str(exc)
            return {
                "result": {"type": "object", "subtype": "error", "description": text},
                "exceptionDetails": {"exceptionId": 1, "text": text, "lineNumber": 0, "columnNumber": 0},
            }
        json.dumps(value)  # a CDP answer is JSON
        return {"result": _remote_object(value)}
