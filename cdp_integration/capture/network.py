"""CDP ``Network.*`` events of the tabs of one browser context -> ``NetworkExchange`` records.

Event handlers only append; all matching happens in ``drain()`` at capture time, off the hot path.
Three CDP facts shape the matching:

- ``requestWillBeSent`` carries the renderer's provisional headers; the wire headers (Accept,
  Sec-Fetch-*, Cookie) arrive in ``requestWillBeSentExtraInfo``, in no guaranteed order. Extra-info
  events of one request id are assigned to its non-cached hops in order.
- A redirect reuses the request id: the next ``requestWillBeSent`` carries ``redirectResponse``.
- A response served from cache has no extra-info at all; for documents we complete the provisional
  headers with those the same browser sent on the wire for documents earlier (marked ``inferred``).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from cdp_integration.session.models import (
    CaptureFault,
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    TrafficOrigin,
)

__all__ = ["BodyPolicy", "NetworkRecorder"]

BodyPolicy = Literal["documents", "all", "none"]

_LEARNED_HEADERS = (
    "accept",
    "accept-encoding",
    "accept-language",
    "sec-fetch-dest",
    "sec-fetch-mode",
    "sec-fetch-site",
    "sec-fetch-user",
    "upgrade-insecure-requests",
)
_EVENTS = (
    "requestWillBeSent",
    "requestWillBeSentExtraInfo",
    "responseReceived",
    "responseReceivedExtraInfo",
    "requestServedFromCache",
    "loadingFinished",
    "loadingFailed",
    "webSocketCreated",
    "webSocketClosed",
)


@dataclass
class _Hop:
    request: dict[str, Any]
    resource_type: str
    wall_time: float
    timestamp: float
    response: dict[str, Any] | None = None
    redirect_url: str | None = None
    from_cache: bool = False
    finished: float | None = None
    encoded_size: int = -1
    error: str | None = None
    wire_headers: dict[str, str] | None = None
    wire_response_headers: dict[str, str] | None = None


@dataclass
class _Chain:
    tab_id: str
    request_id: str
    traffic: TrafficOrigin
    hops: list[_Hop] = field(default_factory=list)
    request_extra: list[dict[str, str]] = field(default_factory=list)
    response_extra: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    drains_waited: int = 0


def _lower(headers: dict[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def _post_data(request: dict[str, Any]) -> tuple[str | None, bool]:
    if request.get("postData") is not None:
        return request["postData"], False
    entries = request.get("postDataEntries")
    if not entries:
        return None, False
    raw = b"".join(base64.b64decode(entry.get("bytes", "")) for entry in entries)
    try:
        return raw.decode(), False
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode(), True


class NetworkRecorder:
    """Collects network events from any number of tabs; ``drain()`` returns finished exchanges."""

    def __init__(
        self,
        *,
        bodies: BodyPolicy = "documents",
        max_body_bytes: int = 5_000_000,
        resource_types: tuple[str, ...] = (),
    ) -> None:
        self.bodies = bodies
        self.max_body_bytes = max_body_bytes
        self.resource_types = resource_types
        """CDP resource types whose bodies are read too (the logger's ``page_resources``): such a
        request is kept until it finishes (or the final drain), and its body read from the tab's
        network buffer then, so the capture neither waits for it nor fetches it again."""
        self._open: dict[str, set[str]] = {}
        """Request ids started and not finished, per tab."""
        self._sockets: dict[str, set[str]] = {}
        """Open websockets, per tab."""
        self.seen_urls: set[str] = set()
        """URLs of requests of ``resource_types`` this recorder has seen start."""
        self.stored_urls: set[str] = set()
        """URLs whose ``resource_types`` body the session holds already: not read again."""
        self._events: list[tuple[str, str, dict[str, Any], TrafficOrigin]] = []
        self._chains: dict[tuple[str, str], _Chain] = {}
        self._order: list[tuple[str, str]] = []
        self._learned: dict[str, dict[str, str]] = {}

    def listen(self, cdp: Any, tab_id: str, traffic: Callable[[], TrafficOrigin]) -> None:
        """Subscribe to a tab's CDP session (``Network.enable`` must be sent by the caller).

        ``traffic()``: whose traffic an event is (``agent`` or ``evaluator``), asked as it arrives.
        """
        for name in _EVENTS:
            cdp.on(f"Network.{name}", self._handler(name, tab_id, traffic))

    def _handler(self, name: str, tab_id: str, traffic: Callable[[], TrafficOrigin]) -> Callable[[Any], None]:
        def handle(params: Any) -> None:
            self._events.append((name, tab_id, params, traffic()))

        return handle

    def _chain(self, tab_id: str, request_id: str, traffic: TrafficOrigin) -> _Chain:
        key = (tab_id, request_id)
        chain = self._chains.get(key)
        if chain is None:
            chain = self._chains[key] = _Chain(tab_id, request_id, traffic)
            self._order.append(key)
        return chain

    def _apply(self, name: str, tab_id: str, p: dict[str, Any], traffic: TrafficOrigin) -> None:
        request_id = p.get("requestId", "")
        if name.startswith("webSocket"):
            sockets = self._sockets.setdefault(tab_id, set())
            (sockets.add if name == "webSocketCreated" else sockets.discard)(request_id)
            return
        if name == "requestWillBeSent":
            self._open.setdefault(tab_id, set()).add(request_id)
        elif name in ("loadingFinished", "loadingFailed"):
            self._open.get(tab_id, set()).discard(request_id)
        chain = self._chain(tab_id, p.get("requestId", ""), traffic)
        last = chain.hops[-1] if chain.hops else None
        if name == "requestWillBeSent":
            if last is not None and p.get("redirectResponse"):
                last.response = p["redirectResponse"]
                last.redirect_url = p["request"]["url"]
                last.finished = p.get("timestamp")
            chain.hops.append(
                _Hop(
                    request=p["request"],
                    resource_type=p.get("type", "Other"),
                    wall_time=p.get("wallTime", time.time()),
                    timestamp=p.get("timestamp", 0.0),
                )
            )
            chain.done = False
        elif name == "requestWillBeSentExtraInfo":
            chain.request_extra.append(_lower(p.get("headers")))
        elif name == "responseReceivedExtraInfo":
            chain.response_extra.append(p)
        elif last is None:
            return
        elif name == "responseReceived":
            last.response = p["response"]
            last.resource_type = p.get("type", last.resource_type)
        elif name == "requestServedFromCache":
            last.from_cache = True
        elif name == "loadingFinished":
            last.finished = p.get("timestamp")
            last.encoded_size = int(p.get("encodedDataLength", -1))
            chain.done = True
        elif name == "loadingFailed":
            last.finished = p.get("timestamp")
            last.error = p.get("errorText") or "failed"
            chain.done = True

    def _assign_extra_info(self, chain: _Chain) -> None:
        wire_hops = [hop for hop in chain.hops if not self._cached(hop)]
        for hop, headers in zip(wire_hops, chain.request_extra, strict=False):
            hop.wire_headers = headers
        for hop, extra in zip(wire_hops, chain.response_extra, strict=False):
            hop.wire_response_headers = _lower(extra.get("headers"))

    @staticmethod
    def _cached(hop: _Hop) -> bool:
        response = hop.response or {}
        return hop.from_cache or bool(
            response.get("fromDiskCache")
            or response.get("fromPrefetchCache")
            or response.get("fromServiceWorker")
        )

    def _ready(self, chain: _Chain, final: bool) -> bool:
        if (
            chain.hops
            and not chain.done
            and not final
            and chain.hops[-1].resource_type in self.resource_types
        ):
            return False
        if final or chain.drains_waited >= 1:
            return bool(chain.hops)
        if not chain.done:
            return False
        on_wire = sum(1 for hop in chain.hops if hop.response is not None and not self._cached(hop))
        missing_extra = on_wire > len(chain.request_extra)
        return not missing_extra

    def drain(
        self, sessions: dict[str, Any], *, final: bool = False
    ) -> tuple[list[NetworkExchange], list[CaptureFault]]:
        """Exchanges completed since the last drain, in request order, with document bodies fetched.

        A request still in flight is kept for the next drain (at most one), then emitted as it is.
        ``sessions`` maps tab id -> CDP session, for ``Network.getResponseBody``.
        """
        self._absorb()
        exchanges: list[NetworkExchange] = []
        faults: list[CaptureFault] = []
        remaining: list[tuple[str, str]] = []
        for key in self._order:
            chain = self._chains[key]
            if not chain.hops and (final or chain.drains_waited >= 2):
                del self._chains[key]  # extra-info of a request that started before we attached
                continue
            if not self._ready(chain, final):
                chain.drains_waited += 1
                remaining.append(key)
                continue
            del self._chains[key]
            self._assign_extra_info(chain)
            for index, hop in enumerate(chain.hops):
                is_last = index == len(chain.hops) - 1
                body: tuple[str | None, bool] = (None, False)
                if is_last and hop.response and hop.error is None and self._wants_body(hop):
                    body = self._body(sessions.get(chain.tab_id), chain, faults)
                exchanges.append(self._exchange(chain, hop, body))
        self._order = remaining
        return exchanges, faults

    def _absorb(self) -> None:
        """Apply the events heard since the last call."""
        events, self._events = self._events, []
        for name, tab_id, params, traffic in events:
            self._apply(name, tab_id, params, traffic)
            if name == "requestWillBeSent" and params.get("type") in self.resource_types:
                self.seen_urls.add(params["request"].get("url", ""))

    def prefetch_bodies(self, sessions: dict[str, Any]) -> None:
        """Send ahead (``TimedCDP.prefetch``) the ``Network.getResponseBody`` of each exchange the next
        ``drain`` will emit with a body and that has finished already: a body does not change once
        its response has finished, and a large one (a 2 MB single-page app) then travels while the
        capture reads the tabs."""
        self._absorb()
        for key in self._order:
            chain = self._chains[key]
            if not chain.hops or not chain.done or not self._ready(chain, False):
                continue
            hop = chain.hops[-1]
            cdp = sessions.get(chain.tab_id)
            if cdp is not None and hop.response and hop.error is None and self._wants_body(hop):
                cdp.prefetch("Network.getResponseBody", {"requestId": chain.request_id})

    def pending(self, tab_id: str) -> tuple[int, int]:
        """``(requests, websockets)`` of the tab open as of the last drain."""
        return len(self._open.get(tab_id, ())), len(self._sockets.get(tab_id, ()))

    def in_flight(self) -> set[str]:
        """URLs of requests of ``resource_types`` started and not finished yet."""
        return {
            chain.hops[-1].request.get("url", "")
            for chain in self._chains.values()
            if chain.hops and not chain.done and chain.hops[-1].resource_type in self.resource_types
        }

    def _wants_body(self, hop: _Hop) -> bool:
        if self.bodies == "all":
            return True
        if hop.resource_type in self.resource_types:
            return hop.request.get("url", "") not in self.stored_urls
        return self.bodies == "documents" and hop.resource_type == "Document"

    def _body(self, cdp: Any, chain: _Chain, faults: list[CaptureFault]) -> tuple[str | None, bool]:
        if cdp is None:
            return None, False
        try:
            result = cdp.send("Network.getResponseBody", {"requestId": chain.request_id})
        except Exception as exc:
            faults.append(
                CaptureFault(
                    stage="network.body",
                    error_type=type(exc).__name__,
                    message=f"{chain.hops[-1].request.get('url')}: {exc}"[:500],
                    tab_id=chain.tab_id,
                )
            )
            return None, False
        data: str = result.get("body", "")
        if len(data) > self.max_body_bytes:
            faults.append(
                CaptureFault(
                    stage="network.body",
                    error_type="BodyTooLarge",
                    message=f"{len(data)} bytes > {self.max_body_bytes}",
                    tab_id=chain.tab_id,
                )
            )
            return None, False
        return data, bool(result.get("base64Encoded"))

    def _request_headers(self, hop: _Hop) -> tuple[dict[str, str], Literal["wire", "devtools", "inferred"]]:
        if hop.wire_headers is not None:
            learned = {k: v for k, v in hop.wire_headers.items() if k in _LEARNED_HEADERS}
            self._learned.setdefault(hop.resource_type, {}).update(learned)
            return hop.wire_headers, "wire"
        provisional = _lower(hop.request.get("headers"))
        seen_on_wire = self._learned.get(hop.resource_type)
        if hop.resource_type == "Document" and seen_on_wire:
            return {**seen_on_wire, **provisional}, "inferred"
        return provisional, "devtools"

    def _exchange(self, chain: _Chain, hop: _Hop, body: tuple[str | None, bool]) -> NetworkExchange:
        headers, source = self._request_headers(hop)
        post_data, post_b64 = _post_data(hop.request)
        response = None
        if hop.response is not None:
            r = hop.response
            response = ResponseInfo(
                status=int(r.get("status", 0)),
                status_text=r.get("statusText", ""),
                headers=hop.wire_response_headers
                if hop.wire_response_headers is not None
                else _lower(r.get("headers")),
                mime_type=r.get("mimeType", ""),
                protocol=r.get("protocol") or "http/1.1",
                remote_address=(
                    f"{r['remoteIPAddress']}:{r.get('remotePort', '')}" if r.get("remoteIPAddress") else None
                ),
                from_cache=self._cached(hop),
                encoded_size=hop.encoded_size
                if hop.encoded_size >= 0
                else int(r.get("encodedDataLength", -1)),
                redirect_url=hop.redirect_url,
                body=body[0],
                body_base64=body[1],
            )
        duration = (hop.finished - hop.timestamp) * 1000 if hop.finished else -1.0
        return NetworkExchange(
            request_id=chain.request_id,
            tab_id=chain.tab_id,
            origin=chain.traffic,
            started=hop.wall_time,
            duration_ms=round(duration, 3),
            request=RequestInfo(
                method=hop.request.get("method", "GET"),
                url=hop.request.get("url", "") + hop.request.get("urlFragment", ""),
                headers=headers,
                headers_source=source,
                post_data=post_data,
                post_data_base64=post_b64,
                resource_type=hop.resource_type,
                referrer_policy=hop.request.get("referrerPolicy"),
            ),
            response=response,
            error=hop.error,
        )
