"""HAR export against real Chromium: differential check against Playwright's own HAR, cache-served
history navigations, step ranges, the ``cdp-session`` CLI on a plain Playwright page, and scoring
our entries with WebArena-Verified's ``evaluate_task``.

One browser per module; every file goes under pytest's temporary directories.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

import pytest
from click.testing import CliRunner

from cdp_integration import environment
from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.cli import cli
from cdp_integration.demo.site import DemoSite
from cdp_integration.har.export import session_to_har
from cdp_integration.session.store import Session, load_session

pytestmark = pytest.mark.integration

environment.prepare()

from playwright.sync_api import Browser, Page  # noqa: E402
from webarena_verified.api import WebArenaVerified  # noqa: E402
from webarena_verified.types.config import WebArenaVerifiedConfig  # noqa: E402
from webarena_verified.types.eval import EvalStatus, TaskEvalResult  # noqa: E402
from webarena_verified.types.tracing import NetworkEvent, NetworkTrace  # noqa: E402

NavKey = tuple[str, str, int, str | None]

# WebArena-Verified task 159 ("Go to the product page of the best storage option that fits 31 Nintendo
# Switch game cards"): a shopping navigate task scored on the URL of the last navigation event.
NAVIGATE_TASK_ID = 159
NAVIGATE_TASK_PATH = "/game-card-holder-storage-case-for-nintendo-switch-games-or-ps-vita-game-case-or-sd-memory-cards-black.html"
NAVIGATE_ANSWER = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}


# -- fixtures ------------------------------------------------------------------------------------


class _StaticServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, cache_control: str | None) -> None:
        super().__init__(("127.0.0.1", 0), _StaticHandler)
        self.root = root
        self.cache_control = cache_control
        self.hits: list[tuple[str, str]] = []

    def handle_error(self, request: object, client_address: object) -> None:
        """Browsers drop connections; stay quiet."""


class _StaticHandler(BaseHTTPRequestHandler):
    """Serves ``root/<name>`` as HTML; ``POST /submit`` answers 302 to ``/thanks.html``."""

    protocol_version = "HTTP/1.1"
    server: _StaticServer

    def log_message(self, format: str, *args: object) -> None:
        """No per-request logging."""

    def _send(self, status: int, body: bytes = b"", headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.hits.append(("GET", self.path))
        name = self.path.split("?", 1)[0].lstrip("/") or "index.html"
        file = self.server.root / name
        if "/" in name or not file.is_file():
            self._send(404, b"<h1>not found</h1>")
            return
        cache = (("Cache-Control", self.server.cache_control),) if self.server.cache_control else ()
        self._send(200, file.read_bytes(), cache)

    def do_POST(self) -> None:
        self.server.hits.append(("POST", self.path))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/submit":
            self._send(404, b"<h1>not found</h1>")
            return
        self._send(302, headers=(("Location", "/thanks.html"),))


@pytest.fixture
def static_server() -> Iterator[Callable[..., _StaticServer]]:
    """Factory: ``static_server(root, pages, cache_control=None)`` writes the pages, serves them."""
    started: list[tuple[_StaticServer, threading.Thread]] = []

    def start(root: Path, pages: dict[str, str], cache_control: str | None = None) -> _StaticServer:
        root.mkdir(parents=True, exist_ok=True)
        for name, body in pages.items():
            (root / name).write_text(f"<!doctype html><html><head><title>{name}</title></head><body>{body}")
        server = _StaticServer(root, cache_control)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        started.append((server, thread))
        return server

    yield start
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join()


def _base(server: _StaticServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


@dataclass
class DemoRun:
    base_url: str
    playwright_har: Path
    our_har: Path
    session: Session
    triggers: dict[str, int]


@pytest.fixture(scope="module")
def demo_run(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """A realistic shop episode recorded twice at once: Playwright's HAR and our session.

    No history navigations (so no navigation is served from cache): every document is fetched from
    the demo server, which sends no cache headers.
    """
    out = tmp_path_factory.mktemp("demo-run")
    with DemoSite() as site:
        base = site.base_url
        context = browser.new_context(record_har_path=str(out / "playwright.har"))
        page = context.new_page()
        logger = CDPSessionLogger(out / "sessions")
        logger.attach_to_page(page)

        def act(trigger: str, action: Callable[[], object]) -> None:
            action()
            logger.capture_state_snapshot(trigger, action=trigger)

        def login() -> None:
            page.fill("#username", "emma")
            page.fill("#password", "emma1234")
            with page.expect_navigation():
                page.click("#login-button")

        def open_help() -> None:
            with context.expect_page() as popup_info:
                page.click("#open-help")
            popup_info.value.wait_for_load_state()

        logger.capture_state_snapshot("start")
        act("home", lambda: page.goto(base + "/"))
        act("search", lambda: page.goto(base + "/search?q=mug"))
        act("product", lambda: (page.locator("a.product-link").first.click(), page.wait_for_load_state()))
        # anonymous /admin: GET 302 -> /login?next=/admin (a redirect chain inside one navigation)
        act("admin-anonymous", lambda: page.goto(base + "/admin"))
        # form POST /login -> 302 (HttpOnly session cookie) -> GET /admin -> 403 for a customer
        act("login", login)
        act("feed", lambda: (page.goto(base + "/feed"), page.wait_for_selector("#feed[data-loaded=true]")))
        # A URL fragment: HAR URLs carry none (HAR 1.2 says so; Playwright strips it too).
        act("links", lambda: page.goto(base + "/links#open-help"))
        # target=_blank: the new tab's first request is seen before its CDP session exists
        act("open-help", open_help)
        popup = context.pages[-1]
        act("popup-products", lambda: (popup.locator("#nav-products").click(), popup.wait_for_load_state()))
        # Requests still running at the last capture would only be counted at save (a LateTraffic
        # fault), not exported: let the favicon fetch after load finish, then capture once more.
        act("settle", lambda: popup.wait_for_load_state("networkidle"))
        context.close()  # flushes Playwright's HAR
        session_path = logger.save_session("demo-run")

    session = load_session(session_path)
    our_har = out / "ours.har"
    our_har.write_text(json.dumps(session_to_har(session)))
    triggers = {step.trigger: step.index for step in session.steps}
    return DemoRun(base, out / "playwright.har", our_har, session, triggers)


def _nav_keys(trace: NetworkTrace) -> list[NavKey]:
    return [
        (e.http_method, e.url, e.request_status, e.referer) for e in trace.events if e.is_navigation_event
    ]


def _only(events: list[NetworkEvent]) -> NetworkEvent:
    assert len(events) == 1, events
    return events[0]


# -- 1. differential: ours vs Playwright's HAR ---------------------------------------------------


def test_navigation_events_match_playwright_har(demo_run: DemoRun) -> None:
    ours = NetworkTrace.from_har(demo_run.our_har)
    theirs = NetworkTrace.from_har(demo_run.playwright_har)
    base = demo_run.base_url

    our_navs, their_navs = _nav_keys(ours), _nav_keys(theirs)
    assert our_navs == their_navs
    assert [(method, url.removeprefix(base), status) for method, url, status, _ in our_navs] == [
        ("GET", "/", 200),
        ("GET", "/search?q=mug", 200),
        ("GET", "/products/5", 200),
        ("GET", "/admin", 302),
        ("GET", "/login?next=/admin", 200),
        ("GET", "/admin", 403),
        ("GET", "/feed", 200),
        ("GET", "/links", 200),
        ("GET", "/help", 200),
        ("GET", "/products", 200),
    ]

    # The whole traffic, not only navigations, is the same request for request, with one documented
    # difference: Playwright drops every request whose URL ends in /favicon.ico (its frame manager
    # marks them `_isFavicon` and never emits them to the context, so its HAR recorder never sees
    # them); we record them (resource type "Other").
    def inventory(trace: NetworkTrace) -> Counter[tuple[str, str, int]]:
        return Counter((e.http_method, e.url, e.request_status) for e in trace.events)

    # (Chromium's headless shell fetches no favicon at all, as Playwright's own headless shell does not.)
    favicons = Counter({k: n for k, n in inventory(ours).items() if k[1].endswith("/favicon.ico")})
    assert inventory(ours) - favicons == inventory(theirs)

    # The login POST: same form fields, same redirect target, same HttpOnly cookie set.
    def login_post(trace: NetworkTrace) -> NetworkEvent:
        return _only([e for e in trace.events if e.http_method == "POST" and e.url == f"{base}/login"])

    our_post, their_post = login_post(ours), login_post(theirs)
    form = {"next": "/admin", "username": "emma", "password": "emma1234"}
    assert our_post.post_data == their_post.post_data == form
    assert our_post.request_status == their_post.request_status == 302
    assert our_post.redirect_url == their_post.redirect_url == f"{base}/admin"
    assert our_post.referer == their_post.referer == f"{base}/login?next=/admin"
    assert our_post.response_cookies == their_post.response_cookies
    assert set(our_post.response_cookies) == {"session"}
    our_cookie = _only([c for c in our_post.data["response"]["cookies"] if c["name"] == "session"])
    assert our_cookie["httpOnly"] is True and our_cookie["path"] == "/"
    assert not our_post.is_navigation_event  # a POST never counts as a navigation

    # The GET redirect hop and the fetch() call carry the same headers WebArena-Verified reads.
    for trace in (ours, theirs):
        anon_admin = _only([e for e in trace.events if e.url == f"{base}/admin" and e.request_status == 302])
        assert anon_admin.redirect_url == f"{base}/login?next=/admin"
        api = _only([e for e in trace.events if e.url == f"{base}/api/products?limit=5"])
        assert not api.is_navigation_event
        assert api.referer == f"{base}/feed"
        assert api.request_headers["sec-fetch-mode"] == "cors"

    # Every document request we exported carries its wire headers (nothing was cache-served here).
    sources = {e.data["_headersSource"] for e in ours.events if e.data["_resourceType"] == "Document"}
    assert sources == {"wire"}
    assert not [f for step in demo_run.session.steps for f in step.faults]
    assert demo_run.session.end is not None and not demo_run.session.end.faults


# -- 2. cache-served history navigation ---------------------------------------------------------


def test_back_navigation_served_from_cache_is_a_navigation_event(
    browser: Browser, static_server: Callable[..., _StaticServer], tmp_path: Path
) -> None:
    server = static_server(
        tmp_path / "site",
        {"a.html": '<a id="to-b" href="/b.html">to b</a>', "b.html": "<p>page b</p>"},
        cache_control="max-age=3600",
    )
    base = _base(server)
    context = browser.new_context(record_har_path=str(tmp_path / "playwright.har"))
    page = context.new_page()
    logger = CDPSessionLogger(tmp_path / "sessions")
    logger.attach_to_page(page)
    page.goto(f"{base}/a.html")
    logger.capture_state_snapshot("a")
    page.click("#to-b")
    page.wait_for_url(f"{base}/b.html")
    logger.capture_state_snapshot("b")
    # Playwright launches Chromium with --disable-back-forward-cache, so this history navigation goes
    # to the HTTP cache (a fresh max-age entry, used without revalidation) instead of the bfcache.
    page.go_back()
    assert page.url == f"{base}/a.html"
    logger.capture_state_snapshot("back")
    context.close()
    session = load_session(logger.save_session("back"))

    # The server saw a.html once: the back navigation was answered by the disk cache.
    assert [hit for hit in server.hits if hit[1] != "/favicon.ico"] == [
        ("GET", "/a.html"),
        ("GET", "/b.html"),
    ]

    back_step = session.steps[2]
    assert back_step.trigger == "back" and back_step.url == f"{base}/a.html"
    exchange = _only([x for x in back_step.network if x.request.url == f"{base}/a.html"])
    assert exchange.response is not None and exchange.response.from_cache
    assert exchange.response.status == 200

    har_path = tmp_path / "ours.har"
    har_path.write_text(json.dumps(session_to_har(session)))
    ours = NetworkTrace.from_har(har_path)
    back = _only([e for e in ours.events if e.data["_step"] == 2 and e.url == f"{base}/a.html"])
    # A disk-cache hit has no requestWillBeSentExtraInfo; the capture completes the provisional
    # headers with the Accept / Sec-Fetch-* the browser sent on the wire for documents before.
    assert back.data["_headersSource"] == "inferred"
    headers = back.request_headers
    assert "text/html" in headers["accept"]
    assert headers["sec-fetch-dest"] == "document" and headers["sec-fetch-mode"] == "navigate"
    assert back.is_navigation_event
    # So WebArena-Verified's "last navigation" (what navigate tasks are scored on) is page A.
    assert _nav_keys(ours)[-1][1] == f"{base}/a.html"
    assert [url for _, url, _, _ in _nav_keys(ours)] == [f"{base}/a.html", f"{base}/b.html", f"{base}/a.html"]

    # What Playwright's HAR gives for the same entry (Playwright 1.65, Chromium 156): it also records
    # the back navigation (status 200, response.\_transferSize 0), but with the renderer's provisional
    # headers only (Upgrade-Insecure-Requests, User-Agent, sec-ch-ua*): no Accept and no Sec-Fetch-*,
    # so `is_navigation_event` is False and WebArena-Verified would take page B for the last
    # navigation. Only its presence is asserted, so a Playwright that fixes this does not fail here.
    theirs = NetworkTrace.from_har(tmp_path / "playwright.har")
    their_a = [e for e in theirs.events if e.url == f"{base}/a.html"]
    assert len(their_a) == 2 and their_a[1].request_status == 200


# -- 3. step ranges -----------------------------------------------------------------------------


def _entry_key(entry: dict[str, Any]) -> tuple[str, str]:
    return entry["request"]["method"], entry["request"]["url"]


def test_step_ranges_select_entries_of_those_steps(demo_run: DemoRun) -> None:
    session = demo_run.session
    steps = session.steps
    count = len(steps)
    assert count == 11
    full = session_to_har(session)["log"]["entries"]
    assert len(full) == sum(len(step.network) for step in steps) > 0

    # Each entry is tagged with the step whose `network` held it, in capture order.
    for step in steps:
        tagged = [_entry_key(e) for e in full if e["_step"] == step.index]
        assert tagged == [(x.request.method, urldefrag(x.request.url).url) for x in step.network]
    assert [e["_step"] for e in full] == sorted(e["_step"] for e in full)

    # ... and the scenario's requests landed in the steps that caused them.
    base = demo_run.base_url
    tags = {_entry_key(e): e["_step"] for e in full if e["request"]["method"] == "POST"}
    assert tags == {("POST", f"{base}/login"): demo_run.triggers["login"]}
    fetch = _only([e for e in full if e["request"]["url"] == f"{base}/api/products?limit=5"])
    assert fetch["_step"] == demo_run.triggers["feed"]
    assert not [e for e in full if e["_step"] == demo_run.triggers["start"]]  # about:blank only

    for selected in (range(0, 0), range(0, 3), range(3, 6), range(4, 5), range(6, count), range(8, count)):
        log = session_to_har(session, steps=selected)["log"]
        entries = log["entries"]
        assert {e["_step"] for e in entries} <= set(selected)
        assert entries == [e for e in full if e["_step"] in selected]
        assert len(entries) == sum(len(steps[i].network) for i in selected)
        assert {p["id"] for p in log["pages"]} == {t.tab_id for i in selected for t in steps[i].tabs}
    # The popup steps hold two tabs, and the popup's own first request is in its step.
    popup_log = session_to_har(session, steps=range(demo_run.triggers["open-help"], count))["log"]
    assert len(popup_log["pages"]) == 2
    help_entry = _only([e for e in popup_log["entries"] if e["request"]["url"] == f"{base}/help"])
    assert help_entry["_step"] == demo_run.triggers["open-help"]
    assert help_entry["pageref"] == steps[demo_run.triggers["open-help"]].tabs[-1].tab_id

    # Disjoint ranges partition the export.
    parts = [
        session_to_har(session, steps=r)["log"]["entries"]
        for r in (range(0, 4), range(4, 7), range(7, count))
    ]
    assert [e for part in parts for e in part] == full


# -- 4. plain Playwright page + cdp-session CLI -------------------------------------------------


def _act(logger: CDPSessionLogger, page: Page, trigger: str, action: Callable[[], object]) -> None:
    action()
    page.wait_for_load_state()
    logger.capture_state_snapshot(trigger, action=trigger)


def test_plain_playwright_page_session_through_cli(
    browser: Browser, static_server: Callable[..., _StaticServer], tmp_path: Path
) -> None:
    server = static_server(
        tmp_path / "site",
        {
            "index.html": '<h1>Index</h1><a id="to-form" href="/form.html">Contact us</a>',
            "form.html": (
                '<form id="contact" method="post" action="/submit">'
                '<input id="name" name="name"><input id="topic" name="topic" value="returns">'
                '<button id="send" type="submit">Send</button></form>'
            ),
            "thanks.html": "<h1>Thanks</h1>",
        },
    )
    base = _base(server)
    context = browser.new_context()
    page = context.new_page()
    logger = CDPSessionLogger(tmp_path / "sessions")
    logger.attach_to_page(page)

    def submit() -> None:
        page.fill("#name", "Ada Lovelace")
        with page.expect_navigation():
            page.click("#send")

    _act(logger, page, "open-index", lambda: page.goto(f"{base}/"))
    _act(logger, page, "click-contact", lambda: page.click("#to-form"))
    _act(logger, page, "submit-form", submit)
    assert page.url == f"{base}/thanks.html"
    session_path = logger.save_session("plain-playwright")
    context.close()

    runner = CliRunner()
    info = runner.invoke(cli, ["info", str(session_path)])
    assert info.exit_code == 0, info.output
    rows = [line.split() for line in info.output.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"])]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("0", "open-index", f"{base}/"),
        ("1", "click-contact", f"{base}/form.html"),
        ("2", "submit-form", f"{base}/thanks.html"),
    ]
    assert "instance  plain-playwright" in info.output
    assert "finished" in info.output

    har_path = tmp_path / "out" / "plain.har"
    har_path.parent.mkdir()
    har = runner.invoke(cli, ["har", str(session_path), "-o", str(har_path)])
    assert har.exit_code == 0, har.output
    document = json.loads(har_path.read_text())
    assert har.output.strip() == f"wrote {len(document['log']['entries'])} entries to {har_path}"

    trace = NetworkTrace.from_har(har_path)
    assert _nav_keys(trace) == [
        ("GET", f"{base}/", 200, None),
        ("GET", f"{base}/form.html", 200, f"{base}/"),
        ("GET", f"{base}/thanks.html", 200, f"{base}/form.html"),
    ]
    post = _only([e for e in trace.events if e.http_method == "POST"])
    assert post.url == f"{base}/submit"
    assert post.post_data == {"name": "Ada Lovelace", "topic": "returns"}
    assert post.request_status == 302 and post.redirect_url == f"{base}/thanks.html"
    assert {e.data["_step"] for e in trace.events if e.url == f"{base}/submit"} == {2}

    # --steps narrows the export to the form submission step.
    last_path = tmp_path / "out" / "last.har"
    last = runner.invoke(cli, ["har", str(session_path), "-o", str(last_path), "--steps", "-1"])
    assert last.exit_code == 0, last.output
    last_trace = NetworkTrace.from_har(last_path)
    assert {e.data["_step"] for e in last_trace.events} == {2}
    assert [url for _, url, _, _ in _nav_keys(last_trace)] == [f"{base}/thanks.html"]


# -- 5. WebArena-Verified evaluate_task on our entries -----------------------------------------


def _webarena(shopping_url: str) -> WebArenaVerified:
    config = WebArenaVerifiedConfig.model_validate(
        {"environments": {"__SHOPPING__": {"urls": [shopping_url]}}}
    )
    return WebArenaVerified(config=config)


def test_webarena_verified_evaluates_demo_har_entries(demo_run: DemoRun) -> None:
    entries = session_to_har(demo_run.session)["log"]["entries"]
    wa = _webarena(demo_run.base_url)
    assert wa.get_task(NAVIGATE_TASK_ID).sites == ("shopping",)

    result = wa.evaluate_task(task_id=NAVIGATE_TASK_ID, agent_response=NAVIGATE_ANSWER, network_trace=entries)
    assert isinstance(result, TaskEvalResult)
    # The evaluation ran to the end (an unreadable trace would give status ERROR with a message):
    # the answer is right, the last navigation (/products on the demo) is not the expected page.
    assert result.error_msg is None, result.error_msg
    assert result.task_id == NAVIGATE_TASK_ID
    assert result.status == EvalStatus.FAILURE and result.score == 0.0
    by_name = {r.evaluator_name: r for r in result.evaluators_results}
    assert by_name["AgentResponseEvaluator"].status == EvalStatus.SUCCESS
    assert by_name["NetworkEventEvaluator"].status == EvalStatus.FAILURE


def test_webarena_verified_scores_our_navigation_as_success(
    browser: Browser, static_server: Callable[..., _StaticServer], tmp_path: Path
) -> None:
    """A task-shaped site: the agent clicks through to the product page task 159 expects."""
    server = static_server(
        tmp_path / "site",
        {
            "index.html": f'<a id="product" href="{NAVIGATE_TASK_PATH}#reviews">Game card case</a>',
            NAVIGATE_TASK_PATH.lstrip("/"): "<h1>Game Card Holder Storage Case</h1>",
        },
    )
    base = _base(server)
    context = browser.new_context()
    page = context.new_page()
    logger = CDPSessionLogger(tmp_path / "sessions")
    logger.attach_to_page(page)
    _act(logger, page, "open-index", lambda: page.goto(f"{base}/"))
    _act(logger, page, "click-product", lambda: page.click("#product"))
    # The link carries a fragment; WebArena-Verified compares fragments, so the HAR must drop it
    # (as Playwright's does) or the expected product URL would not match.
    assert page.url == f"{base}{NAVIGATE_TASK_PATH}#reviews"
    session = load_session(logger.save_session("task-159"))
    context.close()

    wa = _webarena(base)
    entries = session_to_har(session)["log"]["entries"]
    result = wa.evaluate_task(task_id=NAVIGATE_TASK_ID, agent_response=NAVIGATE_ANSWER, network_trace=entries)
    assert result.error_msg is None, result.error_msg
    assert result.status == EvalStatus.SUCCESS and result.score == 1.0

    # The same episode cut before the click never reached the page: the trace decides the score.
    before = session_to_har(session, steps=range(0, 1))["log"]["entries"]
    assert before and all(e["_step"] == 0 for e in before)
    early = wa.evaluate_task(task_id=NAVIGATE_TASK_ID, agent_response=NAVIGATE_ANSWER, network_trace=before)
    assert early.error_msg is None, early.error_msg
    assert early.status == EvalStatus.FAILURE and early.score == 0.0
