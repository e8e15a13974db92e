"""A step's network traffic: CDP's exchanges per tab, plus Playwright's for what CDP cannot see.

A new tab's first requests happen before its CDP session exists (the tab is attached when
Playwright reports it). Playwright's context-wide ``request``/``response`` events see them: such a
request is kept as an ``EarlyRequest`` and becomes an exchange (``source="playwright"``) unless CDP
recorded the same method and URL in the same drain.
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag

from playwright.sync_api import Error as PlaywrightError

from cdp_integration.capture.deadline import CaptureTimeout
from cdp_integration.capture.faults import as_fault, fault
from cdp_integration.capture.network import BodyPolicy, NetworkRecorder
from cdp_integration.capture.tabs import TabTracker
from cdp_integration.session.models import (
    CaptureFault,
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    TrafficOrigin,
)

__all__ = ["EarlyRequest", "TrafficRecorder"]


@dataclass
class EarlyRequest:
    """A request seen by Playwright before the tab's CDP session existed (a new tab's first load)."""

    request: Any
    seen: float
    traffic: TrafficOrigin
    response: Any = None
    """Kept from Playwright's ``response`` event: still readable after the tab has closed."""


class TrafficRecorder:
    """Drains the CDP recorder and the Playwright gap into one step's exchanges, in start order.

    Listens to the ``request``/``response`` events of every context ``tracker`` follows.
    """

    def __init__(self, network: NetworkRecorder, tracker: TabTracker, *, bodies: BodyPolicy) -> None:
        self.network = network
        self.tracker = tracker
        self.bodies = bodies
        self.early: dict[Any, EarlyRequest] = {}
        tracker.context_events = {"request": self.on_request, "response": self.on_response}

    def on_request(self, request: Any) -> None:
        try:
            page = request.frame.page
        except PlaywrightError:  # a service worker's request has no frame
            page = None
        if page is None or page not in self.tracker.tabs:
            self.early[request] = EarlyRequest(request, time.time(), self.tracker.traffic)

    def on_response(self, response: Any) -> None:
        item = self.early.get(response.request)
        if item is not None:
            item.response = response

    def prefetch_bodies(self) -> None:
        """Send ahead the body reads the next ``drain`` will make of exchanges already finished."""
        self.network.prefetch_bodies(self.tracker.sessions())

    def drain(self, faults: list[CaptureFault], *, final: bool) -> list[NetworkExchange]:
        """The exchanges finished since the last drain (``final``: all of them)."""
        exchanges: list[NetworkExchange] = []
        with as_fault(faults, "network"):
            exchanges, body_faults = self.network.drain(self.tracker.sessions(), final=final)
            faults.extend(body_faults)
        early, self.early = list(self.early.values()), {}
        seen = {(e.request.method, urldefrag(e.request.url).url) for e in exchanges}
        for item in early:
            try:
                exchange = self._exchange(item, faults)
            except Exception as exc:  # this request is lost, the others are still recorded
                faults.append(fault("network.early", exc))
                continue
            if (exchange.request.method, urldefrag(exchange.request.url).url) not in seen:
                exchanges.append(exchange)
        exchanges.sort(key=lambda e: e.started)
        return exchanges

    def _exchange(self, item: EarlyRequest, faults: list[CaptureFault]) -> NetworkExchange:
        """The exchange of an early request. Its wire headers and body are waited for within the
        capture's stall budget; a missed deadline keeps the provisional headers (or no body) and is
        a fault naming the request."""
        request = item.request
        tabs = self.tracker.tabs
        try:
            tab = tabs.get(request.frame.page)
        except PlaywrightError:  # no frame: match the tab by the URL it shows
            tab = next((t for t in reversed(tabs.values()) if t.page.url == request.url), None)
        traffic: TrafficOrigin = (
            "evaluator" if item.traffic == "evaluator" or (tab and tab.traffic == "evaluator") else "agent"
        )
        response = item.response
        response_info = None
        if response is not None:
            response_headers = self._wire_or_provisional(response, faults)
            redirect = request.redirected_to
            body: tuple[str | None, bool] = (None, False)
            if redirect is None and (
                self.bodies == "all" or (self.bodies == "documents" and request.resource_type == "document")
            ):
                body = self._body(response, faults)
            response_info = ResponseInfo(
                body=body[0],
                body_base64=body[1],
                status=response.status,
                status_text=response.status_text,
                headers=response_headers,
                redirect_url=redirect.url if redirect is not None else None,
                mime_type=response_headers.get("content-type", "").split(";")[0],
            )
        headers = self._wire_or_provisional(request, faults)
        return NetworkExchange(
            request_id=f"pw-{uuid.uuid4().hex[:12]}",
            tab_id=tab.tab_id if tab else None,
            origin=traffic,
            source="playwright",
            started=item.seen,
            request=RequestInfo(
                method=request.method,
                url=request.url,
                headers=headers,
                headers_source="wire" if "sec-fetch-mode" in headers else "devtools",
                post_data=request.post_data,
                resource_type=request.resource_type.capitalize() if request.resource_type != "xhr" else "XHR",
            ),
            response=response_info,
            error=request.failure,
        )

    def _body(self, response: Any, faults: list[CaptureFault]) -> tuple[str | None, bool]:
        """An early response's body (waits for the response to end: within the stall budget)."""
        try:
            raw: bytes = self.tracker.budget.call(response, "body")
        except PlaywrightError:  # the body is gone with its tab
            return None, False
        except CaptureTimeout as exc:
            faults.append(fault("network.early.body", CaptureTimeout(f"{response.url}: {exc}")))
            return None, False
        try:
            return raw.decode(), False
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode(), True

    def _wire_or_provisional(self, message: Any, faults: list[CaptureFault]) -> dict[str, str]:
        """A Playwright request's or response's wire headers, else the provisional headers at hand.

        The wire headers wait for CDP's extra-info event, which Chromium does not always send (a
        stylesheet of a popup its opener wrote): they are waited for within the stall budget, and a
        missed deadline is a fault. A closed tab's fail at once.
        """
        try:
            headers: dict[str, str] = self.tracker.budget.call(message, "all_headers")
        except PlaywrightError:
            return dict(message.headers)
        except CaptureTimeout as exc:
            faults.append(fault("network.early.headers", CaptureTimeout(f"{message.url}: {exc}")))
            return dict(message.headers)
        return headers
