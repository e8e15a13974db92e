"""``MockPage`` and ``MockBrowserContext``: a captured step behind Playwright's own types.

The official evaluators are beartype-checked against ``playwright.sync_api.Page``; these classes
subclass Playwright's ``Page`` and ``BrowserContext`` (without a live connection behind them), so the
unmodified evaluators accept them. They answer, in order of preference:

1. the live evaluator's recorded answer to the same question (same URL, same expressions already
   run on the page since its navigation, same operation and argument);
2. the captured state: a tab of the step at that URL, or a page the live evaluator opened and the
   logger snapshotted, with JavaScript run in the sandboxed offline browser (``replay.offline``);
3. otherwise a ``ReplayMissError`` that names the question and the closest recorded entries.

The context counts where each answer came from (``answers``: ``recorded`` / ``reconstructed``), so a
score can say so; with ``recorded_only`` a reconstructed answer is a ``ReconstructedAnswerError``
naming the question. Reconstructed JavaScript runs through ``replay.guard``, which refuses what the
sandbox cannot answer faithfully (events on a scripted page, page functions, CSS-dependent reads
without the page's stylesheets).

Any other Playwright method raises ``ReplayMissError`` naming it: replayed pages are read-only views.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import html as html_lib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urldefrag, urlsplit

from playwright.sync_api import BrowserContext, Error, Locator, Page

from cdp_integration.errors import ReconstructedAnswerError, ReplayMissError, SandboxTimeoutError
from cdp_integration.replay.guard import (
    captured_scripts,
    guarded_evaluate,
    settle,
    structural_selector,
    unstyled_stylesheets,
)
from cdp_integration.replay.offline import ReplayDocument, Resource, offline_browser
from cdp_integration.replay.recorded import CallBook, nearest
from cdp_integration.session.models import (
    EVALUATOR_WAIT_MS,
    Cookie,
    Evaluation,
    EvaluatorCall,
    NetworkExchange,
    Step,
    TabState,
)

if TYPE_CHECKING:
    from cdp_integration.session.store import Session

__all__ = ["MockBrowserContext", "MockLocator", "MockPage", "replay_step"]

Timeout = float | datetime.timedelta | None
_T = TypeVar("_T")


def _short(expression: str) -> str:
    text = " ".join(expression.split())
    return text if len(text) <= 120 else text[:117] + "..."


def _unsupported(kind: str) -> ReplayMissError:
    caller = sys._getframe(2).f_code.co_name
    return ReplayMissError(
        f"{kind}.{caller} is not available on a replayed page (it is a read-only view of a captured step); "
        "supported: url, title, content, evaluate, goto, locator, context, close, wait_for_load_state, screenshot"
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else ""


def _loads_document(exchange: NetworkExchange, tab: TabState) -> bool:
    """``exchange`` is a load of ``tab``'s current document: its final (non-redirect) response."""
    response = exchange.response
    return (
        exchange.tab_id == tab.tab_id
        and exchange.request.resource_type == "Document"
        and response is not None
        and not 300 <= response.status < 400
        and _same_document(exchange.request.url, tab.url)
    )


def _same_document(a: str, b: str) -> bool:
    return urldefrag(a)[0] == urldefrag(b)[0]


_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_ASCII_SPACE = re.compile(r"[\t\n\f\r ]+")


def _document_title(html: str) -> str | None:
    """``document.title`` of a captured document: its first ``<title>``'s text, ASCII whitespace
    stripped and collapsed, as the DOM has it (a script's ``document.title = ...`` rewrites that
    element; the browser's tab record of the title lags it). None: no HTML title element to read (none,
    or an SVG one first)."""
    found = _TITLE.search(html)
    if found is None or "<svg" in html[: found.start()].lower():
        return None
    return _ASCII_SPACE.sub(" ", html_lib.unescape(found.group(1))).strip(" ")


def _same_fresh_load(captured: str, url: str, scripted: str | None) -> bool:
    """Whether a fresh load of ``url`` shows the document captured at ``captured``: the fragment
    counts on a page that runs scripts (a hash-routed app renders another state per fragment), not on
    a script-free page (a fragment only scrolls)."""
    if not _same_document(captured, url):
        return False
    return scripted is None or urldefrag(captured)[1] == urldefrag(url)[1]


_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
"""Methods that change no server state; any other exchange may have changed what a page shows."""


def _completed(exchange: NetworkExchange) -> float:
    return exchange.started + max(exchange.duration_ms, 0.0) / 1000


def _document_name(url: str) -> str:
    """The last path or query token of ``url`` (``/doku.php/a:b`` and ``/doku.php?id=a:b`` give ``a:b``)."""
    parts = urlsplit(urldefrag(url)[0])
    tokens = [t for t in re.split(r"[/?&=]", f"{parts.path}?{parts.query}") if t]
    return f"{parts.netloc}|{tokens[-1]}" if tokens else ""


_MARKING_ATTRIBUTE = re.compile(r'\s(?:bid|browsergym_[A-Za-z0-9_-]*)="[^"]*"')
_MARKED_DESCRIPTION = re.compile(r'(\saria-(?:description|roledescription)=")browsergym_id_[^\s"]*\s?')


def _unmarked(html: str) -> str:
    """``html`` without BrowserGym's marking: its ``bid`` and ``browsergym_*`` attributes and the
    ``browsergym_id_`` prefix it puts in ARIA descriptions, where the document shows that BrowserGym
    marked it (a ``browsergym_visibility_ratio`` attribute: it writes one on every element it marks;
    a page's own ``bid`` attribute is left alone elsewhere).

    Its observation marks the agent's page only and again at every step (new elements get new ids),
    so two captures of a document nobody changed differ there, and a fresh load (a new page nobody
    observed) has none of it. The ``value``/``checked`` attributes it writes are undone at capture.
    """
    if "browsergym_visibility_ratio=" not in html:
        return html
    return _MARKED_DESCRIPTION.sub(r"\1", _MARKING_ATTRIBUTE.sub("", html))


def _rendered(tab: TabState) -> tuple[Any, ...]:
    """What of ``tab``'s capture a page's scripts can change: its HTML, its frames' HTML and its
    CSSOM-only styles (BrowserGym's marking left out; typed form state is not part of it: a fresh
    load never gets it)."""
    return (
        _unmarked(tab.html or ""),
        tuple((frame.url, _unmarked(frame.html or "")) for frame in tab.frames),
        tuple(style.model_dump_json() for style in tab.cssom_styles),
    )


def _first_difference(a: str, b: str, around: int = 40) -> str:
    """The first place two HTML strings differ, as ``...then...`` / ``...now...`` excerpts."""
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, at - around)
    return f"{a[start : at + around]!r} became {b[start : at + around]!r}"


def _playwright_cookie(cookie: Cookie) -> dict[str, Any]:
    same_site = (cookie.same_site or "Lax").capitalize()
    return {
        "name": cookie.name,
        "value": cookie.value,
        "domain": cookie.domain,
        "path": cookie.path,
        "expires": cookie.expires,
        "httpOnly": cookie.http_only,
        "secure": cookie.secure,
        "sameSite": same_site if same_site in ("Strict", "Lax", "None") else "Lax",
    }


def _cookie_matches(cookie: Cookie, url: str) -> bool:
    parts = urlsplit(url)
    host = parts.hostname or ""
    domain = cookie.domain.lstrip(".")
    return (host == domain or host.endswith("." + domain)) and (parts.path or "/").startswith(cookie.path)


def replay_step(
    session: Session, step: int = -1, *, evaluation: Evaluation | Literal["auto"] | None = "auto"
) -> MockPage:
    """The one way to replay a captured step: its active tab as a Playwright ``Page``.

    ``page.context`` is the step's ``MockBrowserContext`` (all its tabs, cookies, storage, and the
    replay misses). The page answers first with ``evaluation``'s recorded evaluator calls: ``"auto"``
    is ``session.evaluation_at(step)`` (the step's own run, or the end probe on the last step),
    ``None`` answers from the captured state only. ``step`` counts from the end when negative;
    ``StepIndexError`` if the session has no such step.
    """
    return MockBrowserContext(session, step, evaluation=evaluation).active_page


class MockBrowserContext(BrowserContext):
    """The tabs, cookies and storage of one captured step, plus the pages an evaluator opens."""

    def __init__(
        self,
        session: Session,
        step: int = -1,
        *,
        evaluation: Evaluation | Literal["auto"] | None = "auto",
        recorded_only: bool = False,
    ) -> None:
        # Deliberately not calling BrowserContext.__init__: there is no live context behind this one.
        self._session = session
        self._position = session.step_index(step)
        self.step = session.steps[self._position]
        if evaluation == "auto":
            evaluation = session.evaluation_at(step)
        self.evaluation: Evaluation | None = evaluation if isinstance(evaluation, Evaluation) else None
        self.calls = CallBook(self.evaluation.calls if self.evaluation else ())
        self._resources: dict[str, Resource] | None = None
        self._scripted: dict[int, str | None] = {}
        self._changes: list[NetworkExchange] | None = None
        self._rendering: dict[int, tuple[Any, ...]] = {}
        self._refused: dict[str, str] = {}
        """Why a fresh load of a URL was not answered from a captured tab (for the miss)."""
        self._opened = 0
        self.misses: list[str] = []
        """Questions no recording or captured page could answer (evaluators may swallow the error)."""
        self.recorded_only = recorded_only
        self.answers: dict[str, int] = {"recorded": 0, "reconstructed": 0}
        """How many questions were answered from the live recording / reconstructed from captured pages."""
        self.journal: list[tuple[str, str, str]] = []
        """Every answered question in order: ``(kind, question, url)``; says which page answered a check."""
        self._pages: list[MockPage] = [
            MockPage(self, url=tab.url, tab=tab, index=0 if tab is self.step.active_tab else -1)
            for tab in self.step.tabs
        ]
        if not self._pages:
            self._pages.append(MockPage(self, url=self.step.url or "about:blank", tab=None, index=0))

    @property
    def _impl_obj(self) -> Any:  # type: ignore[override]
        raise _unsupported("BrowserContext")

    def __repr__(self) -> str:
        return f"<MockBrowserContext step={self.step.index} pages={len(self._pages)}>"

    # -- what the evaluators use ---------------------------------------------------------------

    @property
    def pages(self) -> list[Page]:
        return list(self._pages)

    @property
    def active_page(self) -> MockPage:
        return next((page for page in self._pages if page.index == 0), self._pages[0])

    def new_page(self) -> MockPage:
        self._opened += 1
        page = MockPage(self, url="about:blank", tab=None, index=self._opened)
        self._pages.append(page)
        return page

    def cookies(self, urls: str | Sequence[str] | None = None) -> list[Any]:
        wanted = [urls] if isinstance(urls, str) else list(urls or [])
        return [
            _playwright_cookie(cookie)
            for cookie in self.step.cookies
            if not wanted or any(_cookie_matches(cookie, url) for url in wanted)
        ]

    def storage_state(self, **options: Any) -> Any:  # type: ignore[override]
        return {
            "cookies": self.cookies(),
            "origins": [
                {"origin": origin, "localStorage": [{"name": k, "value": v} for k, v in items.items()]}
                for origin, items in self.step.local_storage.items()
            ],
        }

    def close(self, *, reason: str | None = None) -> None:
        for page in list(self._pages):
            page.close()

    # -- documents ---------------------------------------------------------------------------

    def _session_resources(self) -> dict[str, Resource]:
        """Bodies of the GET responses captured up to this step (latest wins), by URL, and the
        subresources (stylesheets) read from the page."""
        if self._resources is None:
            found: dict[str, Resource] = {}
            for step in self._session.steps[: self._position + 1]:
                for resource in step.resources:
                    body = base64.b64decode(resource.body) if resource.body_base64 else resource.body.encode()
                    mime = resource.mime_type or "application/octet-stream"
                    found[urldefrag(resource.url)[0]] = Resource(200, {"content-type": mime}, body)
                for exchange in step.network:
                    response = exchange.response
                    if exchange.request.method != "GET" or response is None or response.status >= 300:
                        continue
                    if response.body is None:
                        continue
                    body = (
                        base64.b64decode(response.body)
                        if response.body_base64
                        else response.body.encode("utf-8")
                    )
                    headers = {"content-type": response.mime_type or "application/octet-stream"}
                    found[urldefrag(exchange.request.url)[0]] = Resource(response.status, headers, body)
            self._resources = found
        return self._resources

    def document(self, url: str, tab: TabState | None = None) -> ReplayDocument | None:
        """The captured page for ``url``: ``tab`` (a page as the agent left it), or for a fresh load
        (``tab`` None: the evaluator's own ``goto``) what ``fresh_load`` picks.

        Only the page as the agent left it gets what was typed into its forms and BrowserGym's marking
        (``bid`` attributes and the ``value``/``checked`` attributes it wrote: its observation marks the
        agent's page); a fresh load, as live, has none.
        """
        as_left = tab is not None and tab.html is not None
        if tab is None or tab.html is None:
            tab = self.fresh_load(url)
        if tab is None or tab.html is None:
            return None
        origin = _origin(url)
        return ReplayDocument(
            url=url,
            html=tab.html if as_left else _unmarked(tab.html),
            cookies=tuple(_playwright_cookie(c) for c in self.step.cookies if _cookie_matches(c, url)),
            local_storage=dict(self.step.local_storage.get(origin, {})),
            session_storage=dict(tab.session_storage.get(origin, {})),
            resources=self._session_resources(),
            frames={
                urldefrag(f.url)[0]: f.html if as_left else _unmarked(f.html)
                for f in tab.frames
                if f.html is not None
            },
            cssom_styles=tuple(style.model_dump() for style in tab.cssom_styles),
            form_state=tuple(control.model_dump() for control in tab.form_state) if as_left else (),
            marked_attributes=tuple(mark.model_dump() for mark in tab.marked_attributes) if as_left else (),
            pseudo_classes=tuple(state.model_dump() for state in tab.pseudo_classes) if as_left else (),
        )

    def scripted(self, tab: TabState) -> str | None:
        """Why ``tab``'s captured page runs scripts (its HTML or a frame's), or None."""
        key = id(tab)
        if key not in self._scripted:
            sources = [tab.html or "", *(frame.html or "" for frame in tab.frames)]
            self._scripted[key] = next(
                (reason for reason in map(captured_scripts, sources) if reason is not None), None
            )
        return self._scripted[key]

    def fresh_load(self, url: str) -> TabState | None:
        """The captured document a fresh load of ``url`` at this step shows live, or None (the reason
        goes into the miss).

        1. A page the live evaluator opened at this step and snapshotted right after its navigation
           (a fresh load itself, after everything the agent did).
        2. An open tab whose document loaded after the last state-changing request of the session
           (any method but GET/HEAD/OPTIONS, from any tab, up to this step): a tab loaded before a
           later POST shows the state before it, which a fresh load would not. Not a tab whose
           document is itself the response to such a request (``_submitted``). On a page that runs
           scripts, only as its document loaded (``_as_loaded``): the agent's clicks and typing may
           have changed it through the page's scripts since, which a fresh load would not show.
        Both match the URL as a document: on a page with scripts the fragment counts too.
        """
        if self.evaluation:
            for snapshot in self.evaluation.pages:
                if snapshot.html is not None and _same_fresh_load(snapshot.url, url, self.scripted(snapshot)):
                    return snapshot
        changes = self._state_changes()
        for tab in self.step.tabs:
            if tab.html is None or not _same_fresh_load(tab.url, url, self.scripted(tab)):
                continue
            loaded = self._loaded_at(tab)
            later = [c for c in changes if loaded is None or _completed(c) > loaded]
            submitted = self._submitted(tab)
            if not later and submitted is not None:
                self._refused[url] = (
                    f"the open tab {tab.tab_id} shows {tab.url}, but its document is the response to "
                    f"{submitted.request.method} {submitted.request.url} (a form submission, or the redirect "
                    "after one): it may show what only that response shows (a one-time message such as "
                    '"saved successfully"), which a fresh load of the URL does not'
                )
                continue
            if not later:
                as_loaded = self._as_loaded(tab, url)
                if as_loaded is not None:
                    return as_loaded
                continue
            change = later[-1]
            when = (
                "after its document loaded"
                if loaded is not None
                else "and its document's load was not captured"
            )
            self._refused[url] = (
                f"the open tab {tab.tab_id} shows {tab.url}, but {change.request.method} {change.request.url} "
                f"(tab {change.tab_id or '?'}) completed {when}, so a fresh load could show a newer state "
                "than that tab; no capture of this URL after that request"
            )
        unmatched = [
            t.url
            for t in self.step.tabs
            if t.html is not None
            and _same_document(t.url, url)
            and not _same_fresh_load(t.url, url, self.scripted(t))
        ]
        if unmatched and url not in self._refused:
            self._refused[url] = (
                f"{unmatched[0]} differs in its fragment and its page runs scripts "
                f"({self.scripted(next(t for t in self.step.tabs if t.url == unmatched[0]))}): on such a page "
                "(a hash-routed app) another fragment is another rendered state"
            )
        return None

    def _submitted(self, tab: TabState) -> NetworkExchange | None:
        """The state-changing request whose response (directly, or through redirects: Post/Redirect/Get)
        is ``tab``'s current document, or None. Such a document is not what a fresh ``GET`` shows:
        apps put one-time content there (Django's and Magento's "saved" messages)."""
        exchanges = [e for step in self._session.steps[: self._position + 1] for e in step.network]
        final = None
        for exchange in exchanges:
            if _loads_document(exchange, tab):
                final = exchange
        if final is None:
            return None
        return next(
            (
                e
                for e in exchanges
                if e.request_id == final.request_id
                and e.tab_id == final.tab_id
                and e.request.method.upper() not in _SAFE_METHODS
            ),
            None,
        )

    def _as_loaded(self, tab: TabState, url: str) -> TabState | None:
        """``tab`` (an open tab of this step at ``url``) as a fresh load of ``url`` shows it, or None
        (the reason goes into the miss).

        A fresh load shows the page as the server sends it after its load scripts ran. On a page
        without scripts the tab's document is that (typed values are form state, left out of fresh
        loads). On a page that runs scripts, every capture since the tab's document loaded is
        compared with the first one (BrowserGym's marking left out): unchanged, the tab answers;
        changed, the first capture answers instead (it was taken right after the load, before any
        later action of the agent), provided the cookies a load of ``url`` sends and its origin's
        local storage are what they were then (a script may keep state there that the next load
        reads). A document whose load the capture did not see in that tab (a script changed the
        tab's URL, or history brought it back) has no such first capture: a loud miss.
        """
        if self.scripted(tab) is None:
            return tab
        first_step, reason = self._document_start(tab)
        if first_step is None:
            self._refused[url] = f"the open tab {tab.tab_id} shows {tab.url}, but {reason}"
            return None
        if first_step == self._position:
            return self._settled(tab, self._position, url)
        first = next(t for t in self._session.steps[first_step].tabs if t.tab_id == tab.tab_id)
        now, then = self._render(tab), self._render(first)
        if now == then:
            return self._settled(tab, self._position, url) or self._settled(first, first_step, url)
        changed = (
            _first_difference(then[0], now[0]) if then[0] != now[0] else "its frames or CSSOM styles differ"
        )
        prefix = (
            f"the agent changed this tab's document after it loaded: the open tab {tab.tab_id} at {tab.url} "
            f"(step {self.step.index}) differs from its first capture after the load (step "
            f"{self._session.steps[first_step].index}; {changed})"
        )
        if not _same_fresh_load(first.url, url, self.scripted(first)):
            self._refused[url] = (
                f"{prefix}, and that capture shows {first.url}, another rendered state of a page that runs scripts"
            )
            return None
        drift = self._client_state_drift(first_step, url)
        if drift is not None:
            self._refused[url] = f"{prefix}, and {drift}, so that capture is not what a fresh load shows now"
            return None
        return self._settled(first, first_step, url)

    def _settled(self, tab: TabState, position: int, url: str) -> TabState | None:
        """``tab`` (captured at step ``position``, on a page that runs scripts) if it shows what the
        page showed when the evaluator reads a fresh load (``EVALUATOR_WAIT_MS`` after its load
        event), else None (the reason goes into the miss).

        A page that fills itself after load (timers, fetch, polling, websockets) shows something
        else then than a capture taken right after its load, and the scripts-off sandbox cannot
        run it forward. So the page must not have changed by itself between the capture and the
        evaluator's read: known from the capture's own record (``TabState.settling``) when it was
        taken after that moment, or from a later capture of the same document that was. A capture
        without that record answers as before in a session of an earlier version (its header has no
        ``stall_budget_ms``), and is refused in a later one (the read failed).
        """
        settling = tab.settling
        if settling is None and "stall_budget_ms" in self._session.header.options:
            self._refused[url] = (
                f"the open tab {tab.tab_id} at {tab.url}: its capture has no record of whether the page "
                "had settled (the read failed), and its page runs scripts"
            )
            return None
        if settling is None:
            return tab
        where = (
            f"the open tab {tab.tab_id} at {tab.url} (captured at step {self._session.steps[position].index})"
        )
        if settling.load_ms is None:
            self._refused[url] = (
                f"{where} was still loading when captured: a fresh load shows the page after its load"
            )
            return None
        read_at = settling.load_ms + EVALUATOR_WAIT_MS
        evidence = settling
        for step in self._session.steps[position + 1 : self._position + 1]:
            later = next((t.settling for t in step.tabs if t.tab_id == tab.tab_id and t.settling), None)
            if later is not None and later.time_origin == settling.time_origin:
                evidence = later
        end = self._session.end
        if end is not None and self._position == len(self._session.steps) - 1:
            at_save = end.settling.get(tab.tab_id)
            if at_save is not None and at_save.time_origin == settling.time_origin:
                evidence = at_save
        captured = settling.age_ms
        since = min(captured, read_at)
        until = max(settling.read_until_ms or captured, read_at)
        pending = (
            f" ({settling.pending_requests} request(s) pending, {settling.open_websockets} websocket(s) open then)"
            if settling.pending_requests or settling.open_websockets
            else ""
        )
        if evidence.age_ms < read_at:
            self._refused[url] = (
                f"{where} was captured {captured - settling.load_ms:.0f} ms after its load{pending}, and no capture "
                f"of that document shows it still unchanged {EVALUATOR_WAIT_MS} ms after the load, when the "
                "evaluator reads a fresh load: a page that runs scripts may fill itself in by then (timers, "
                "fetch, polling, websockets), which the offline sandbox cannot reproduce"
            )
            return None
        if evidence.observed_from_ms is None or evidence.observed_from_ms > since:
            self._refused[url] = f"{where}: its page's changes were not recorded from before that capture"
            return None
        incomplete = evidence.changes_complete_until_ms
        changed = [end for start, end in evidence.changes if end > since and start <= until]
        if incomplete is not None and incomplete <= until:
            changed.append(incomplete)
        if changed:
            self._refused[url] = (
                f"{where} was captured {captured - settling.load_ms:.0f} ms after its load{pending}, but the page "
                f"changed by itself {min(changed) - settling.load_ms:.0f} ms after the load, between that capture "
                f"and the evaluator's read of a fresh load {EVALUATOR_WAIT_MS} ms after it: content arriving after "
                "load (timers, fetch, polling, websockets) that the offline sandbox cannot reproduce"
            )
            return None
        return tab

    def _render(self, tab: TabState) -> tuple[Any, ...]:
        key = id(tab)
        if key not in self._rendering:
            self._rendering[key] = _rendered(tab)
        return self._rendering[key]

    def _document_start(self, tab: TabState) -> tuple[int | None, str]:
        """The position of the first step whose capture of ``tab`` shows its current document: the
        step whose traffic holds the tab's (latest) load of that URL, or, when the load is not in the
        traffic, the tab's first capture (loaded before the capture began). None, with the reason,
        when the tab came to this URL without a load the capture saw."""
        steps = self._session.steps[: self._position + 1]

        def shows(step: Step) -> bool:
            return any(
                t.tab_id == tab.tab_id and t.html is not None and _same_document(t.url, tab.url)
                for t in step.tabs
            )

        run = self._position
        while run > 0 and shows(steps[run - 1]):
            run -= 1
        loaded = None
        for position, step in enumerate(steps):
            for exchange in step.network:
                if _loads_document(exchange, tab):
                    loaded = position
        if loaded is not None and loaded >= run:
            return loaded, ""
        existed = run > 0 and any(t.tab_id == tab.tab_id for t in steps[run - 1].tabs)
        if loaded is None and not existed:
            return run, ""
        return None, (
            f"it came to that URL at step {steps[run].index} without a document load the capture saw in "
            "that tab (a script changed its URL, or history brought the page back), and its page runs "
            "scripts: no capture shows that document as a fresh load would"
        )

    def _client_state_drift(self, first_step: int, url: str) -> str | None:
        """What of the state a fresh load of ``url`` reads changed between ``first_step`` and now."""
        then, now = self._session.steps[first_step], self.step

        def cookies(step: Step) -> list[tuple[str, str, str, str]]:
            return sorted(
                (c.name, c.value, c.domain, c.path) for c in step.cookies if _cookie_matches(c, url)
            )

        if cookies(then) != cookies(now):
            changed = sorted({c[0] for c in set(cookies(then)) ^ set(cookies(now))})
            return f"the cookies a load of it sends changed since ({', '.join(changed)})"
        origin = _origin(url)
        if then.local_storage.get(origin, {}) != now.local_storage.get(origin, {}):
            return f"the local storage of {origin} changed since"
        return None

    def _state_changes(self) -> list[NetworkExchange]:
        """The agent's state-changing requests up to this step, by completion time."""
        if self._changes is None:
            found = [
                exchange
                for step in self._session.steps[: self._position + 1]
                for exchange in step.network
                if exchange.origin == "agent" and exchange.request.method.upper() not in _SAFE_METHODS
            ]
            self._changes = sorted(found, key=_completed)
        return self._changes

    def _loaded_at(self, tab: TabState) -> float | None:
        """When ``tab``'s document arrived: its latest document response for the tab's URL."""
        loaded = None
        for step in self._session.steps[: self._position + 1]:
            for exchange in step.network:
                response = exchange.response
                if (
                    exchange.tab_id == tab.tab_id
                    and exchange.request.resource_type == "Document"
                    and response is not None
                    and not 300 <= response.status < 400
                    and _same_document(exchange.request.url, tab.url)
                ):
                    loaded = max(loaded or 0.0, _completed(exchange))
        return loaded

    @property
    def imported(self) -> bool:
        """The session was imported from another tool's recording (its tab titles are the DOM's)."""
        return isinstance(self._session.header.options.get("imported"), dict)

    def known_urls(self) -> list[str]:
        urls = [t.url for t in self.step.tabs]
        if self.evaluation:
            urls += [p.url for p in self.evaluation.pages]
        return urls + self.calls.urls()

    def miss_hints(self, url: str, known: list[str]) -> str:
        """Why a near-identical capture was not used: another URL form, or an earlier step."""
        hints = [self._refused[url]] if url in self._refused else []
        hints += self._imported_gaps(url)
        name = _document_name(url)
        other_forms = [k for k in known if name and _document_name(k) == name and not _same_document(k, url)]
        if other_forms:
            hints.append(
                f"{other_forms[0]} may be the same document at another URL form, but only the application's "
                "routing could say so: ask for the captured URL, or capture with the task's config"
            )
        earlier = [
            s.index
            for s in self._session.steps[: self.step.index]
            if any(_same_document(t.url, url) and t.html is not None for t in s.tabs)
        ]
        if earlier:
            hints.append(
                f"this URL was captured at step {earlier[-1]}, not at step {self.step.index}; the application's "
                "state may have changed since, so that capture is not used"
            )
        return "".join(f"; {hint}" for hint in hints)

    def _imported_gaps(self, url: str) -> list[str]:
        """Why an imported recording holds no DOM of a tab at ``url`` (the importer's own words)."""
        imported = self._session.header.options.get("imported")
        lacks = imported.get("lacks") if isinstance(imported, dict) else None
        if not isinstance(lacks, list) or not any(
            tab.html is None and _same_document(tab.url, url) for tab in self.step.tabs
        ):
            return []
        about_dom = [lack for lack in lacks if isinstance(lack, str) and "DOM" in lack]
        return [f"the imported recording lacks {'; '.join(about_dom)}"] if about_dom else []

    def answered(self, kind: str, question: str, url: str) -> None:
        """Count an answer; with ``recorded_only`` a reconstructed one raises (and is remembered)."""
        if kind == "reconstructed" and self.recorded_only:
            error = ReconstructedAnswerError(
                f"{question} on {url} (step {self.step.index}): the live evaluator never asked this, and "
                "recorded-only scoring refuses an answer reconstructed from the captured page"
            )
            self.misses.append(str(error))
            raise error
        self.answers[kind] += 1
        self.journal.append((kind, question, url))

    def _forget(self, page: MockPage) -> None:
        with contextlib.suppress(ValueError):
            self._pages.remove(page)


class MockPage(Page):
    """One tab of a captured step (or a page an evaluator opened offline), as a Playwright ``Page``."""

    def __init__(self, context: MockBrowserContext, *, url: str, tab: TabState | None, index: int) -> None:
        # Deliberately not calling Page.__init__: there is no live page behind this one.
        self._context = context
        self._url = url
        self._tab = tab
        self.index = index
        """0: the page an evaluator is handed; 1, 2, ...: pages it opened; -1: other tabs."""
        self._history: list[str] = []
        self._document: ReplayDocument | bool | None = False  # False: not looked up yet
        self._offline: Any = None
        self._offline_ran = 0
        self._closed = False

    @property
    def _impl_obj(self) -> Any:  # type: ignore[override]
        raise _unsupported("Page")

    def __repr__(self) -> str:
        return f"<MockPage url={self._url!r} step={self._context.step.index}>"

    # -- recorded answers --------------------------------------------------------------------

    def _recorded(self, op: str, arg: str | None = None) -> EvaluatorCall | None:
        call = self._context.calls.answer(self._url, self._history, op, arg)
        if call is not None:
            self._context.answered("recorded", op, self._url)
        return call

    def _reconstructed(self, op: str, arg: str | None = None) -> None:
        self._context.answered("reconstructed", f"{op}({arg!r})" if arg is not None else f"{op}()", self._url)

    def _guarded(self, page: Any, expression: str, arg: Any = None) -> Any:
        """Run reconstructed JavaScript in the sandbox; a refusal is remembered as a miss."""
        document = self._captured()
        try:
            return guarded_evaluate(
                page,
                expression,
                arg,
                url=self._url,
                scripted=document.scripted if document else None,
                dropped=document.dropped if document else None,
            )
        except ReplayMissError as exc:
            self._context.misses.append(str(exc))
            raise

    @contextlib.contextmanager
    def _question(self, asked: str) -> Iterator[None]:
        """One question's sandbox work (page load, replayed expressions, its own JavaScript) under
        the sandbox's time limit; a timeout is remembered as a miss and the page is dropped."""
        document = self._captured()
        if self._offline is None and document is not None:
            # Loading runs no session JavaScript: it is bounded by Playwright's timeouts, not the limit.
            try:
                self._offline = offline_browser().open(document)
                self._offline_ran = 0
                settle(self._offline)
            except ReplayMissError as exc:  # remembered: an evaluator may swallow the error
                self._context.misses.append(str(exc))
                raise
            except Exception as exc:  # no page to ask: no answer, never the evaluator's swallowed ""
                self._drop_offline()
                miss = ReplayMissError(
                    f"{asked} on {self._url} (step {self._context.step.index}): the offline browser could "
                    f"not load the captured page ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
                )
                self._context.misses.append(str(miss))
                raise miss from exc
        try:
            with offline_browser().limit(f"{asked} on {self._url} (step {self._context.step.index})"):
                yield
        except SandboxTimeoutError as exc:
            self._context.misses.append(str(exc))
            self._drop_offline()
            raise

    @staticmethod
    def _replay_outcome(call: EvaluatorCall) -> Any:
        if call.error is not None:
            raise Error(call.error)
        return call.result

    def _dropped(self) -> str | None:
        """Why the captured markup of this page lacks elements the live page had, or None."""
        document = self._captured()
        return document.dropped if document is not None else None

    def _captured(self) -> ReplayDocument | None:
        if self._document is False:
            self._document = self._context.document(self._url, self._tab)
        return self._document if isinstance(self._document, ReplayDocument) else None

    def _miss(self, op: str, arg: str | None = None) -> ReplayMissError:
        asked = f"{op}({arg!r})" if arg is not None else f"{op}()"
        known = nearest(self._url, self._context.known_urls())
        closest = self._context.calls.describe(op, self._url, arg)
        hints = self._context.miss_hints(self._url, known)
        if any(_same_document(url, self._url) for url in known):
            # the URL is known (a tab, a recorded call) but no capture of it can answer: say why, not the URL
            has_content = any(
                _same_document(tab.url, self._url) and tab.html is not None for tab in self._context.step.tabs
            )
            page = (
                "a captured page at this URL cannot answer"
                if hints and has_content
                else "no captured page at this URL (the recording holds its URL, not its content)"
            )
            others = [url for url in known if not _same_document(url, self._url)]
            pages = f"other captured pages: {', '.join(others)}; " if others else ""
        else:
            page, pages = "no captured page at this URL", f"captured pages: {', '.join(known) or 'none'}; "
        error = ReplayMissError(
            f"{asked} on {self._url} (step {self._context.step.index}): no recorded answer and {page}; "
            f"{pages}closest recorded calls: {'; '.join(closest) or 'none'}{hints}"
        )
        self._context.misses.append(str(error))
        return error

    def _offline_page(self, op: str, arg: str | None) -> Any:
        """The sandboxed replay of this page, brought up to date with the expressions run so far."""
        document = self._captured()
        if document is None:
            raise self._miss(op, arg)
        if self._offline is None:
            try:
                self._offline = offline_browser().open(document)
            except ReplayMissError as exc:  # remembered: an evaluator may swallow the error
                self._context.misses.append(str(exc))
                raise
            self._offline_ran = 0
        for expression in self._history[self._offline_ran :]:
            # Expressions answered from the recording ran live; offline they must have the same effect.
            try:
                self._guarded(self._offline, expression)
            except ReplayMissError:
                raise
            except Exception:  # it failed live too, or its failure changes nothing offline
                pass
        self._offline_ran = len(self._history)
        return self._offline

    def _drop_offline(self) -> None:
        if self._offline is not None:
            offline_browser().release(self._offline)
            self._offline = None

    # -- the Page surface the evaluators use --------------------------------------------------

    @property
    def url(self) -> str:
        return self._url

    @property
    def context(self) -> MockBrowserContext:
        return self._context

    def is_closed(self) -> bool:
        return self._closed

    def title(self) -> str:
        call = self._recorded("title")
        if call is not None:
            return str(self._replay_outcome(call))
        self._reconstructed("title")
        if self._tab is not None and _same_document(self._tab.url, self._url):
            if self._tab.html is None and self._context.imported:
                raise self._miss("title")  # an imported recording without this page's DOM: nor its title
            if self._tab.html is not None and "<title" not in self._tab.html.lower():
                return ""  # no <title>: document.title is ""; the captured target title is the URL then
            in_dom = _document_title(self._tab.html) if self._tab.html is not None else None
            return self._tab.title if in_dom is None else in_dom
        with self._question("title()"):
            return str(self._offline_page("title", None).title())

    def content(self, *, include_shadow: bool | None = None) -> str:
        call = self._recorded("content")
        if call is not None:
            return str(self._replay_outcome(call))
        self._reconstructed("content")
        dropped = self._dropped()
        if dropped is not None:
            error = ReplayMissError(
                f"content() on {self._url}: the page's markup is not what the live page held: {dropped}"
            )
            self._context.misses.append(str(error))
            raise error
        if not self._history:
            document = self._captured()
            if document is None:
                raise self._miss("content")
            if not document.marked_attributes:  # else the HTML lacks the attributes BrowserGym wrote
                return document.html
        with self._question("content()"):
            return str(self._offline_page("content", None).content())

    def evaluate(self, expression: str, arg: Any = None) -> Any:
        call = self._recorded("evaluate", expression) if arg is None else None
        if call is not None:
            self._history.append(expression)
            return self._replay_outcome(call)
        self._reconstructed("evaluate", expression)
        with self._question(f"evaluate({_short(expression)!r})"):
            page = self._offline_page("evaluate", expression)
            self._history.append(expression)
            self._offline_ran += 1
            return self._guarded(page, expression, arg)

    def goto(
        self,
        url: str,
        *,
        timeout: Timeout = None,
        wait_until: Any = None,
        referer: str | None = None,
    ) -> None:
        call = self._context.calls.answer(self._url, (), "goto", url)
        if call is not None and call.error is not None:
            raise Error(call.error)
        self._url = str(call.result) if call is not None and call.result else url
        self._history = []
        self._tab = None
        self._document = False
        self._drop_offline()
        return None

    def wait_for_load_state(self, state: Any = None, *, timeout: Timeout = None) -> None:
        return None

    def wait_for_timeout(self, timeout: float | datetime.timedelta) -> None:
        return None

    def bring_to_front(self) -> None:
        return None

    def set_default_timeout(self, timeout: float | datetime.timedelta) -> None:
        return None

    def set_default_navigation_timeout(self, timeout: float | datetime.timedelta) -> None:
        return None

    def close(self, *, run_before_unload: bool | None = None, reason: str | None = None) -> None:
        self._closed = True
        self._drop_offline()
        self._context._forget(self)

    def locator(self, selector: str, **kwargs: Any) -> MockLocator:
        if kwargs:
            raise ReplayMissError(
                f"locator({selector!r}, {', '.join(kwargs)}=...): only a selector is supported offline"
            )
        return MockLocator(self, selector)

    def inner_text(self, selector: str, *, strict: bool | None = None, timeout: Timeout = None) -> str:
        return self.locator(selector).inner_text()

    def text_content(
        self, selector: str, *, strict: bool | None = None, timeout: Timeout = None
    ) -> str | None:
        return self.locator(selector).text_content()

    def screenshot(self, **kwargs: Any) -> bytes:
        if self._tab is not None and self._tab.screenshot_png and _same_document(self._tab.url, self._url):
            return base64.b64decode(self._tab.screenshot_png)
        raise ReplayMissError(
            f"screenshot() on {self._url}: no screenshot was captured for this page "
            "(capture with CDPSessionLogger(screenshot=True))"
        )


class MockLocator(Locator):
    """A selector on a replayed page, resolved in the offline browser (Playwright selector syntax)."""

    def __init__(self, page: MockPage, selector: str) -> None:
        self._page = page
        self._selector = selector

    @property
    def _impl_obj(self) -> Any:  # type: ignore[override]
        raise _unsupported("Locator")

    def __repr__(self) -> str:
        return f"<MockLocator selector={self._selector!r} url={self._page.url!r}>"

    def _live(self, op: str = "count", *, layout: bool = False) -> Locator:
        page = self._page
        page._reconstructed(f"locator({self._selector!r}).{op}")
        offline = page._offline_page("locator", self._selector)
        unstyled = unstyled_stylesheets(offline) if layout else []
        if unstyled:
            error = ReplayMissError(
                f"locator({self._selector!r}).{op}() on {page.url}: depends on CSS, and the sandbox has no body "
                f"for the page's stylesheet(s) {', '.join(unstyled[:3])}, so the answer could differ from live"
            )
            page.context.misses.append(str(error))
            raise error
        return offline.locator(self._selector)

    def _ask(
        self, op: str, read: Callable[[Locator], _T], *, layout: bool = False, markup: bool = False
    ) -> _T:
        """``read`` of the sandbox's locator, as one question under the sandbox's time limit.

        ``markup``: the answer includes markup or the text of ``<script>`` elements (``textContent``,
        ``innerHTML``), so a page whose capture lacks elements the live page had cannot give it; nor can
        it match a selector that counts siblings or names such elements."""
        dropped = self._page._dropped()
        if dropped is not None and (markup or structural_selector(self._selector)):
            what = (
                "reads markup or <script> text"
                if markup
                else "its selector counts siblings or names left-out elements"
            )
            error = ReplayMissError(
                f"locator({self._selector!r}).{op}() on {self._page.url}: {what}, and the page's markup is not "
                f"what the live page held: {dropped}"
            )
            self._page.context.misses.append(str(error))
            raise error
        with self._page._question(f"locator({self._selector!r}).{op}()"):
            return read(self._live(op, layout=layout))

    @property
    def page(self) -> MockPage:
        return self._page

    def count(self) -> int:
        return self._ask("count", lambda live: live.count())

    def inner_text(self, *, timeout: Timeout = None) -> str:
        wait = timeout if timeout is not None else 1000.0
        return self._ask("inner_text", lambda live: live.inner_text(timeout=wait), layout=True)

    def text_content(self, *, timeout: Timeout = None) -> str | None:
        wait = timeout if timeout is not None else 1000.0
        return self._ask("text_content", lambda live: live.text_content(timeout=wait), markup=True)

    def inner_html(self, *, timeout: Timeout = None) -> str:
        wait = timeout if timeout is not None else 1000.0
        return self._ask("inner_html", lambda live: live.inner_html(timeout=wait), markup=True)

    def get_attribute(self, name: str, *, timeout: Timeout = None) -> str | None:
        wait = timeout if timeout is not None else 1000.0
        return self._ask("get_attribute", lambda live: live.get_attribute(name, timeout=wait))

    def all_inner_texts(self) -> list[str]:
        return self._ask("all_inner_texts", lambda live: live.all_inner_texts(), layout=True)

    def all_text_contents(self) -> list[str]:
        return self._ask("all_text_contents", lambda live: live.all_text_contents(), markup=True)

    def is_visible(self, *, timeout: Timeout = None) -> bool:
        return self._ask("is_visible", lambda live: live.is_visible(), layout=True)
