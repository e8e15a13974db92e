"""One capture's reads of the followed tabs: each tab's state, the shared storage, new subresources.

``state`` has the single CDP reads; ``StateReader`` decides, per the options, which of them a tab gets
and turns each failed read into a fault of its stage (``tab``, ``html``, ``cookies``, ...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from cdp_integration.capture import state
from cdp_integration.capture.faults import as_fault, fault
from cdp_integration.capture.marking import restore_attributes
from cdp_integration.capture.options import CaptureOptions
from cdp_integration.capture.tabs import Tab, TabTracker
from cdp_integration.errors import CaptureError
from cdp_integration.session.models import (
    CaptureFault,
    Cookie,
    MarkedAttributes,
    NetworkExchange,
    PageResource,
    Settling,
    TabState,
)

__all__ = ["StateReader"]


class StateReader:
    """Reads tab state for a logger; remembers the subresources already stored in its session.

    ``own_dom_snapshot``: take Chromium's DOMSnapshot where no observation snapshot is given.
    """

    def __init__(self, options: CaptureOptions, tracker: TabTracker, *, own_dom_snapshot: bool) -> None:
        self.options = options
        self.tracker = tracker
        self.own_dom_snapshot = own_dom_snapshot
        self.resource_urls: set[str] = set()
        """Subresources already stored in this session (by URL)."""

    def origins(self, tab: Tab, faults: list[CaptureFault]) -> list[str]:
        """The web origins of the tab's frames (storage is read per origin); reads the frame tree."""
        if self.tracker.is_crashed(tab):
            return []
        with as_fault(faults, "origins", tab.tab_id):
            return state.read_origins(tab.cdp, self.tracker.frame_tree(tab))
        return []

    def tab(
        self,
        tab: Tab,
        active: bool,
        origins: list[str],
        faults: list[CaptureFault],
        observed_dom: dict[str, Any] | None = None,
        observed_screenshot: Any = None,
    ) -> TabState:
        """The tab's state; a tab whose CDP session fails is dropped from the tracker (re-attached later)."""
        if self.tracker.is_crashed(tab):
            faults.append(
                CaptureFault(
                    stage="tab",
                    error_type="TargetCrashed",
                    message="the tab's renderer crashed",
                    tab_id=tab.tab_id,
                )
            )
            return TabState(tab_id=tab.tab_id, url=tab.page.url, title="", active=active)
        url, title = "", ""
        try:
            info = state.read_target_info(tab.cdp)
        except Exception as exc:  # a fault, and the tab is followed anew from the next capture
            faults.append(fault("tab", exc, tab.tab_id))
            self.tracker.drop(tab)
            with contextlib.suppress(Exception):  # the page may be gone too: then url and title stay empty
                url, title = tab.page.url, self.tracker.budget.call(tab.page, "title")
            return TabState(tab_id=tab.tab_id, url=url, title=title, active=active)
        url, title = info.get("url", ""), info.get("title", "")
        for origin in origins:  # read after the tab's other reads, sent with them
            tab.cdp.prefetch("DOMStorage.getDOMStorageItems", state.storage_params(origin, local=False))
        fields: dict[str, Any] = {"dom_snapshot_source": "observation" if observed_dom is not None else "cdp"}
        options = self.options
        thumbnail = None
        if active and options.thumbnail and not options.screenshot:
            if observed_screenshot is not None:  # the harness's own picture of this state
                with as_fault(faults, "thumbnail", tab.tab_id):
                    fields["thumbnail_webp"], fields["viewport"] = state.thumbnail_of_pixels(
                        observed_screenshot, tab.page.viewport_size
                    )
            else:  # started first: Chromium draws it from the next frame while the reads below run
                thumbnail = tab.cdp.begin(state.read_thumbnail)
        try:
            self._reads(tab, active, fields, faults, observed_dom)
            if thumbnail is not None:
                with as_fault(faults, "thumbnail", tab.tab_id):
                    taken = thumbnail.result()
                    if taken is not None:
                        fields["thumbnail_webp"], fields["viewport"] = taken
        finally:
            if thumbnail is not None:
                thumbnail.cancel()
        session_storage: dict[str, dict[str, str]] = {}
        with as_fault(faults, "session_storage", tab.tab_id):
            for origin in origins:
                session_storage[origin] = state.read_storage(tab.cdp, origin, local=False)
        return TabState(
            tab_id=tab.tab_id, url=url, title=title, active=active, session_storage=session_storage, **fields
        )

    def _reads(
        self,
        tab: Tab,
        active: bool,
        fields: dict[str, Any],
        faults: list[CaptureFault],
        observed_dom: dict[str, Any] | None,
    ) -> None:
        """The tab's single reads per the options, into ``fields``; each failed read is a fault."""
        options = self.options
        reads: list[tuple[str, Callable[[], Any]]] = []
        if active or options.dom == "all_tabs":
            own = self.own_dom_snapshot
            with contextlib.suppress(Exception):  # a failed world fails each read below, as a fault
                state.prefetch_isolated_reads(
                    tab.cdp,
                    state.isolated_world(tab.cdp, tab.frame_tree, tab.worlds),
                    cssom=options.cssom_styles,
                    form=options.form_state,
                )
            # First: the page's clock at this read is no later than the HTML's, so a change that lands
            # while the capture reads counts as after it (refused), never as already captured.
            reads.append(("settling", lambda: state.read_settling(tab.cdp, tab.frame_tree, tab.worlds)))
            reads += [
                ("dom_snapshot", lambda: observed_dom or (state.read_dom_snapshot(tab.cdp) if own else None)),
                (
                    "html",
                    lambda: state.read_html_incremental(
                        tab.cdp,
                        tab.html,
                        max_bytes=options.max_html_bytes,
                        tree=tab.frame_tree,
                        worlds=tab.worlds,
                    ),
                ),
            ]
            if options.frames:
                reads.append(
                    (
                        "frames",
                        lambda: state.read_frames(
                            tab.cdp, max_bytes=options.max_html_bytes, tree=tab.frame_tree
                        ),
                    )
                )
            if options.cssom_styles:
                reads.append(
                    ("cssom_styles", lambda: state.read_cssom_styles(tab.cdp, tab.frame_tree, tab.worlds))
                )
            if options.form_state:
                reads.append(("form_state", lambda: state.read_form(tab.cdp, tab.frame_tree, tab.worlds)))
        if active and options.screenshot:
            reads.append(("screenshot_png", lambda: state.read_screenshot(tab.cdp)))
        if active and options.accessibility_tree:
            reads.append(("ax_tree", lambda: state.read_accessibility_tree(tab.cdp)))
        for name, read in reads:
            with as_fault(faults, _STAGES.get(name, name), tab.tab_id):
                fields[name] = read()
        if "settling" in fields:
            fields["settling"] = self._settling_through(tab, fields["settling"], faults)
        if "form_state" in fields:
            fields["form_state"], restored, fields["pseudo_classes"] = fields["form_state"]
            if restored:
                with as_fault(faults, "form_state", tab.tab_id):
                    _unmark(fields, restored)

    def _settling_through(self, tab: Tab, before: Settling, faults: list[CaptureFault]) -> Settling:
        """``before`` (read ahead of the HTML) with the changes recorded until the HTML had been read:
        whatever landed while the capture read counts as after it. A document replaced meanwhile
        reads as still loading (refused), and so does one whose second read failed."""
        try:
            after = state.read_settling(tab.cdp, tab.frame_tree, tab.worlds)
        except Exception as exc:
            faults.append(fault("settling", exc, tab.tab_id))
            return before.model_copy(update={"load_ms": None})
        if after.time_origin != before.time_origin:
            return before.model_copy(update={"load_ms": None})
        return before.model_copy(
            update={
                "read_until_ms": after.age_ms,
                "changes": after.changes,
                "changes_complete_until_ms": after.changes_complete_until_ms,
            }
        )

    @staticmethod
    def prefetch_shared(active: Tab, tabs: list[Tab], origins: dict[str, list[str]]) -> None:
        """Send ahead the reads ``cookies`` and ``local_storage`` make after the tabs' reads (they
        read the context's state, whose order among the tab reads does not matter)."""
        active.cdp.prefetch("Network.getAllCookies")
        seen: set[str] = set()
        for tab in tabs:
            for origin in origins[tab.tab_id]:
                if origin not in seen:
                    seen.add(origin)
                    tab.cdp.prefetch(
                        "DOMStorage.getDOMStorageItems", state.storage_params(origin, local=True)
                    )

    def cookies(self, tab: Tab, faults: list[CaptureFault]) -> list[Cookie]:
        with as_fault(faults, "cookies", tab.tab_id):
            return state.read_cookies(tab.cdp)
        return []

    @staticmethod
    def local_storage(
        tabs: list[Tab], origins: dict[str, list[str]], faults: list[CaptureFault]
    ) -> dict[str, dict[str, str]]:
        """localStorage is shared by a context's tabs: read each origin once, from the first tab having it."""
        result: dict[str, dict[str, str]] = {}
        for tab in tabs:
            with as_fault(faults, "local_storage", tab.tab_id):
                for origin in origins[tab.tab_id]:
                    if origin not in result:
                        result[origin] = state.read_storage(tab.cdp, origin, local=True)
        return result

    def new_resources(
        self, tabs: list[Tab], faults: list[CaptureFault], network: list[NetworkExchange]
    ) -> tuple[list[PageResource], list[NetworkExchange]]:
        """Bodies of the tabs' subresources (``page_resources`` types) this session has not stored
        yet, and ``network`` without the bodies it only carried for them.

        Read once per URL, never fetched again and never waited for: a subresource the network
        capture saw is taken from its exchange once it has finished (a later capture, if it is still
        loading now); one loaded before the logger attached is read from the renderer's own copy
        (``Page.getResourceContent``) within the capture's stall budget.
        """
        found: list[PageResource] = []
        types = self.options.page_resources
        if not types:
            return found, network
        keep_bodies = self.options.response_bodies == "all"
        kept: list[NetworkExchange] = []
        for exchange in network:
            response = exchange.response
            if exchange.request.resource_type not in types or response is None or response.body is None:
                kept.append(exchange)
                continue
            url = exchange.request.url
            if url not in self.resource_urls and 200 <= response.status < 300 and url.startswith(_WEB):
                self.resource_urls.add(url)
                found.append(
                    PageResource(
                        url=url,
                        type=exchange.request.resource_type,
                        mime_type=response.mime_type,
                        body=response.body,
                        body_base64=response.body_base64,
                    )
                )
            if not keep_bodies:
                exchange = exchange.model_copy(
                    update={"response": response.model_copy(update={"body": None, "body_base64": False})}
                )
            kept.append(exchange)
        recorder = self.tracker.network
        from_network = recorder.seen_urls
        for tab in tabs:
            if self.tracker.is_crashed(tab):
                continue
            with as_fault(faults, "resources", tab.tab_id):
                for frame_id, url, kind, mime in state.read_page_resources(tab.cdp, types, tab.frame_tree):
                    if url in self.resource_urls or url in from_network or not url.startswith(_WEB):
                        continue
                    if not tab.page_enabled:
                        tab.cdp.send("Page.enable")
                        tab.page_enabled = True
                    body, base64_encoded = state.read_resource_content(tab.cdp, frame_id, url)
                    self.resource_urls.add(url)
                    found.append(
                        PageResource(
                            url=url, type=kind, mime_type=mime, body=body, body_base64=base64_encoded
                        )
                    )
        return found, kept


_WEB = ("http://", "https://")


def _unmark(fields: dict[str, Any], restored: list[dict[str, Any]]) -> None:
    """The page's own ``value``/``checked`` attributes back in the tab's HTML and frames' HTML where
    BrowserGym's marking overwrote them (what was typed is in the form state read with them), and
    what the marking had written there as the tab's ``marked_attributes`` (the agent's page has it)."""
    done: dict[str, dict[str, Any]] = {}
    if fields.get("html") is not None:
        fields["html"], done = restore_attributes(fields["html"], restored)
    frames = []
    for frame in fields.get("frames") or []:
        html, in_frame = restore_attributes(frame.html, restored)
        frames.append(frame.model_copy(update={"html": html}) if in_frame else frame)
        done |= in_frame
    if "frames" in fields:
        fields["frames"] = frames
    by_bid = {str(item.get("bid")): item for item in restored}
    fields["marked_attributes"] = [
        MarkedAttributes.model_validate({**_identity(by_bid[bid]), **marked}) for bid, marked in done.items()
    ]
    framed = "frames" in fields
    missing = [
        str(item.get("bid"))
        for item in restored
        if str(item.get("bid")) not in done and (framed or not item.get("frame"))
    ]
    if missing:
        raise CaptureError(
            f"{len(missing)} element(s) BrowserGym marked (bid {', '.join(missing[:5])}) are not on one "
            "start tag of the captured HTML: their value/checked attributes stay as marked there, so a "
            "fresh load of this URL offline shows them as the agent left them"
        )


def _identity(item: dict[str, Any]) -> dict[str, Any]:
    """A restored element's bid and identity, without the page's own attributes it carries."""
    return {key: item[key] for key in ("bid", "frame", "type", "name", "id", "autocomplete") if key in item}


_STAGES = {"screenshot_png": "screenshot", "ax_tree": "accessibility_tree"}
"""Fault stage names that differ from the ``TabState`` field read."""
