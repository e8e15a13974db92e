"""CDP network events -> exchanges: extra-info merging in any order, redirects, cache, bodies."""

from __future__ import annotations

from typing import Any

from cdp_integration.capture.network import NetworkRecorder

WIRE = {
    "Accept": "text/html,application/xhtml+xml",
    "Sec-Fetch-Dest": "document",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-Site": "none",
    "Sec-Fetch-User": "?1",
    "Cookie": "session=abc",
}


class FakeCDP:
    """Stands in for the browser's CDP session: the recorder only subscribes and asks for bodies."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}
        self.bodies: dict[str, dict[str, Any]] = {}

    def on(self, event: str, handler: Any) -> None:
        self.handlers[event] = handler

    def emit(self, event: str, **params: Any) -> None:
        self.handlers[f"Network.{event}"](params)

    def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert method == "Network.getResponseBody"
        return self.bodies[params["requestId"]]


def request(rid: str, url: str, method: str = "GET", type_: str = "Document", **extra: Any) -> dict[str, Any]:
    return {
        "requestId": rid,
        "type": type_,
        "wallTime": 1000.0,
        "timestamp": 1.0,
        "request": {"url": url, "method": method, "headers": {"User-Agent": "UA"}, **extra},
    }


def response(rid: str, url: str, status: int = 200, **extra: Any) -> dict[str, Any]:
    return {
        "requestId": rid,
        "type": "Document",
        "response": {
            "url": url,
            "status": status,
            "statusText": "OK",
            "headers": {"X-Dev": "1"},
            "mimeType": "text/html",
            "protocol": "http/1.1",
            **extra,
        },
    }


def recorder_with_tab() -> tuple[NetworkRecorder, FakeCDP]:
    recorder, cdp = NetworkRecorder(), FakeCDP()
    recorder.listen(cdp, "T1", lambda: "agent")
    return recorder, cdp


def test_extra_info_before_or_after_is_merged() -> None:
    for extra_first in (True, False):
        recorder, cdp = recorder_with_tab()
        if extra_first:
            cdp.emit("requestWillBeSentExtraInfo", requestId="1", headers=WIRE)
        cdp.emit("requestWillBeSent", **request("1", "http://h/a"))
        if not extra_first:
            cdp.emit("requestWillBeSentExtraInfo", requestId="1", headers=WIRE)
        cdp.emit("responseReceived", **response("1", "http://h/a"))
        cdp.emit(
            "responseReceivedExtraInfo", requestId="1", statusCode=200, headers={"Set-Cookie": "a=1\nb=2"}
        )
        cdp.emit("loadingFinished", requestId="1", timestamp=1.5, encodedDataLength=123)
        cdp.bodies["1"] = {"body": "<html>a</html>", "base64Encoded": False}
        (exchange,), faults = recorder.drain({"T1": cdp})
        assert not faults
        assert exchange.request.headers_source == "wire"
        assert exchange.request.headers["accept"].startswith("text/html")
        assert exchange.request.headers["cookie"] == "session=abc"
        assert exchange.response.headers == {"set-cookie": "a=1\nb=2"}
        assert exchange.response.body == "<html>a</html>" and exchange.response.encoded_size == 123
        assert exchange.duration_ms == 500.0


def test_redirect_hops_share_the_request_id_and_get_their_own_headers() -> None:
    recorder, cdp = recorder_with_tab()
    cdp.emit("requestWillBeSent", **request("7", "http://h/login", "POST", postData="user=emma&pw=x"))
    cdp.emit("requestWillBeSentExtraInfo", requestId="7", headers={**WIRE, "Content-Type": "x-www-form"})
    redirect = response("7", "http://h/login", 302, headers={"Location": "/account"})["response"]
    cdp.emit("requestWillBeSent", **request("7", "http://h/account"), redirectResponse=redirect)
    cdp.emit("requestWillBeSentExtraInfo", requestId="7", headers=WIRE)
    cdp.emit("responseReceived", **response("7", "http://h/account"))
    cdp.emit("loadingFinished", requestId="7", timestamp=2.0, encodedDataLength=10)
    cdp.bodies["7"] = {"body": "PGh0bWw+", "base64Encoded": True}
    (post, get), _ = recorder.drain({"T1": cdp})
    assert (post.request.method, post.response.status, post.response.redirect_url) == (
        "POST",
        302,
        "http://h/account",
    )
    assert post.request.post_data == "user=emma&pw=x" and post.response.body is None
    assert post.request.headers["content-type"] == "x-www-form"
    assert "content-type" not in get.request.headers
    assert get.response.body == "PGh0bWw+" and get.response.body_base64


def test_cache_served_document_gets_headers_learned_from_the_wire() -> None:
    recorder, cdp = recorder_with_tab()
    cdp.emit("requestWillBeSent", **request("1", "http://h/a"))
    cdp.emit("requestWillBeSentExtraInfo", requestId="1", headers=WIRE)
    cdp.emit("responseReceived", **response("1", "http://h/a"))
    cdp.emit("loadingFinished", requestId="1", timestamp=1.1)
    cdp.emit("requestWillBeSent", **request("2", "http://h/a"))
    cdp.emit("responseReceived", **response("2", "http://h/a", fromDiskCache=True))
    cdp.emit("loadingFinished", requestId="2", timestamp=1.2)
    cdp.bodies = {"1": {"body": "a"}, "2": {"body": "a"}}
    (_first, back), _ = recorder.drain({"T1": cdp})
    assert back.response.from_cache
    assert back.request.headers_source == "inferred"
    assert back.request.headers["sec-fetch-mode"] == "navigate"
    assert back.request.headers["user-agent"] == "UA"
    assert "cookie" not in back.request.headers  # only the navigation-shape headers are carried over


def test_in_flight_request_waits_one_drain_then_is_emitted() -> None:
    recorder, cdp = recorder_with_tab()
    cdp.emit("requestWillBeSent", **request("9", "http://h/slow", type_="Fetch"))
    assert recorder.drain({"T1": cdp}) == ([], [])
    (exchange,), _ = recorder.drain({"T1": cdp})
    assert exchange.response is None and exchange.duration_ms == -1


def test_failed_request_and_missing_body_are_recorded_not_raised() -> None:
    recorder, cdp = recorder_with_tab()
    cdp.emit("requestWillBeSent", **request("3", "http://h/gone"))
    cdp.emit("loadingFailed", requestId="3", timestamp=1.3, errorText="net::ERR_CONNECTION_REFUSED")
    cdp.emit("requestWillBeSent", **request("4", "http://h/b"))
    cdp.emit("requestWillBeSentExtraInfo", requestId="4", headers=WIRE)
    cdp.emit("responseReceived", **response("4", "http://h/b"))
    cdp.emit("loadingFinished", requestId="4", timestamp=1.4)
    (failed, ok), faults = recorder.drain({"T1": cdp})  # no body stored for "4": send raises KeyError
    assert failed.error == "net::ERR_CONNECTION_REFUSED" and failed.response is None
    assert ok.response.status == 200 and ok.response.body is None
    assert [f.stage for f in faults] == ["network.body"]


def test_evaluator_origin_is_kept_per_event() -> None:
    recorder, cdp = NetworkRecorder(bodies="none"), FakeCDP()
    origin = ["agent"]
    recorder.listen(cdp, "T1", lambda: origin[0])  # type: ignore[arg-type, return-value]
    cdp.emit("requestWillBeSent", **request("1", "http://h/a"))
    origin[0] = "evaluator"
    cdp.emit("requestWillBeSent", **request("2", "http://h/b"))
    exchanges, _ = recorder.drain({"T1": cdp}, final=True)
    assert [(e.request.url, e.origin) for e in exchanges] == [
        ("http://h/a", "agent"),
        ("http://h/b", "evaluator"),
    ]
