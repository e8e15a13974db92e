"""The session file's data model: frozen pydantic records, one place for the format.

A session is a header, then one ``Step`` per capture (after reset, after every action), then an
optional ``SessionEnd``. Field names follow CDP where a value comes straight from CDP (cookies), and
HAR where the value is HTTP (headers, status). Large values (HTML, DOM snapshots, response bodies,
screenshots) are stored once per distinct content by the store; the models hold them resolved.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SkipValidation

__all__ = [
    "EVALUATOR_WAIT_MS",
    "FORMAT_VERSION",
    "AgentMessage",
    "AgentReasoning",
    "AgentToolCall",
    "CSSOMStyle",
    "CaptureFault",
    "ConsoleEntry",
    "Cookie",
    "CurrentTabSource",
    "Evaluation",
    "EvaluatorCall",
    "FormControlState",
    "FrameState",
    "HttpCall",
    "MarkedAttributes",
    "NetworkExchange",
    "PageResource",
    "PseudoClassState",
    "RequestInfo",
    "ResponseInfo",
    "SessionEnd",
    "SessionHeader",
    "Settling",
    "Step",
    "TabState",
    "TrafficOrigin",
]

FORMAT_VERSION = 3
"""Bumped on any change a reader of the previous version could misread. 2: chunked HTML and DOM
snapshots (blob ``kind``), captured stylesheets (``Step.resources``). 3: form state
(``TabState.form_state``); later, additively, ``TabState.marked_attributes``, ``TabState.settling`` and
``Step.current_tab_source``, ``TabState.pseudo_classes``, ``Step.console``, ``Step.reasoning``, ``TabState.thumbnail_webp`` and
``TabState.viewport`` (a file without them reads as before; a reader that predates it refuses the field, never misreads it). Formats 1 and 2 still read."""

TrafficOrigin = Literal["agent", "evaluator"]
"""Who caused a request: the agent's episode, or the live evaluator's own tabs during ``validate()``."""

CurrentTabSource = Literal[
    "harness", "explicit", "only_tab", "opened", "navigated", "acted", "attached", "unknown"
]
"""How a step's current tab was decided: ``harness``, the agent's harness said (BrowserGym's active page,
browser-use's focused tab, a ``current_page`` callable); ``explicit``, ``mark_current_page``; ``only_tab``;
else the tab the agent last ``opened``, ``navigated`` or ``acted`` in (a trusted input event, or focus), or
the page given to ``attach_to_page`` (``attached``) when nothing happened since; ``unknown``: several tabs and
nothing to tell them apart, so an answer that depends on the current tab is a loud miss offline."""


def _an_object(value: Any) -> Any:
    if not isinstance(value, dict):
        raise ValueError("an object expected")
    return value


SharedObject = Annotated[SkipValidation[dict[str, Any]], BeforeValidator(_an_object)]
"""A JSON object kept as the very dict given, never copied: a blob the store shares between steps
(a DOM snapshot referenced by every step of an unchanged page) stays one object in memory."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Cookie(_Record):
    """One cookie as ``Network.getAllCookies`` reports it (httpOnly ones included)."""

    name: str
    value: str
    domain: str
    path: str = "/"
    expires: float = -1
    http_only: bool = Field(default=False, alias="httpOnly")
    secure: bool = False
    same_site: str | None = Field(default=None, alias="sameSite")
    session: bool = True

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class FrameState(_Record):
    """The document of a child frame (a same-origin iframe) as it was, serialized like the tab's HTML."""

    url: str
    name: str = ""
    html: str | None = None


class CSSOMStyle(_Record):
    """Style rules that exist only in the CSSOM, not in the serialized HTML.

    ``adopted``: the constructed stylesheets adopted by the document (``path`` empty) or by the open
    shadow root of the element at ``path``; ``style_element``: rules inserted through the CSSOM into
    the empty ``<style>`` at ``path``. A path is a list of indexes into ``root.querySelectorAll("*")``,
    each after the first taken inside the shadow root of the element the previous one found.
    """

    target: Literal["adopted", "style_element"]
    path: list[int] = []
    css: list[str] = []


class FormControlState(_Record):
    """The live state of one form control where it differs from the control's default (format 3).

    ``DOM.getOuterHTML`` serializes attributes, not what was typed: an input's ``value``, a checkbox's
    ``checked``, an ``<option>``'s selectedness live only in the DOM. Only controls whose state a
    fresh load would not reproduce are stored (``value`` != ``defaultValue``, ``checked`` !=
    ``defaultChecked``, selectedness != the select's default), so a session stays small.

    ``path`` addresses the control like ``CSSOMStyle.path``: indexes into ``root.querySelectorAll("*")``,
    each after the first taken inside the open shadow root, or the document of the same-origin
    ``<iframe>``, of the element the previous one found. ``tag``, ``name`` and ``id`` identify it
    (checked when it is applied, and shown by the debug views); ``frame`` is the URL of the frame's
    document holding it (empty: the tab's own document).
    """

    path: list[int]
    tag: Literal["input", "textarea", "select"]
    type: str = ""
    """An input's ``type`` (``text``, ``password``, ``checkbox``, ...); empty for the others."""
    name: str = ""
    id: str = ""
    autocomplete: str = ""
    frame: str = ""
    value: str | None = None
    """Inputs (other than checkboxes and radios) and textareas: the current value."""
    checked: bool | None = None
    """Checkboxes and radios: the current checkedness."""
    selected: list[int] | None = None
    """Selects: indexes (into ``select.options``) of the selected options."""
    selected_text: list[str] = []
    """The selected options' labels, for display."""


UserActionPseudoClass = Literal["hover", "active", "focus", "focus-within", "focus-visible"]
"""The dynamic pseudo-classes that follow the mouse and the focus rather than the document."""


class PseudoClassState(_Record):
    """One element that matched user-action pseudo-classes when the tab was captured (the chain under
    the mouse pointer, the focused element and its ancestors).

    The page's CSS may show or hide content on ``:hover`` or ``:focus-within`` (menus, page tools), and
    ``innerText``, visibility and layout follow: the page as the agent left it answers with the pointer
    where the agent left it. Replayed on that page only (forced through CDP), never on a fresh load.
    ``path``, ``frame`` and ``tag`` address the element as ``FormControlState``'s do.
    """

    path: list[int]
    tag: str = ""
    frame: str = ""
    classes: list[UserActionPseudoClass]


class MarkedAttributes(_Record):
    """What BrowserGym's observation wrote into one element's ``value``/``checked`` attributes, where
    that differs from the page's own attribute (which the captured HTML holds).

    BrowserGym's marking writes each element's live ``.value`` into its ``value`` attribute and
    ``.checked`` into ``checked``, and never undoes it, so the live agent's page answers
    ``getAttribute('value')``, ``[value=...]`` selectors and ``outerHTML`` with what was typed. The
    capture puts the page's own attributes in the HTML (a fresh load has those) and keeps what the
    marking wrote here, for the page as the agent left it only. ``bid`` is BrowserGym's id of the
    element (on exactly one start tag of the tab's or a frame's HTML); ``tag``, ``type``, ``name``,
    ``id``, ``autocomplete`` identify it (checked on apply, used by redaction); ``frame`` as in
    ``FormControlState``.
    """

    bid: str
    tag: str = ""
    type: str = ""
    """An input's ``type``; empty for other elements."""
    name: str = ""
    id: str = ""
    autocomplete: str = ""
    frame: str = ""
    value: str | None = None
    """The ``value`` attribute as the marking left it (None: the page's own is kept)."""
    checked: bool | None = None
    """Whether the marking left a ``checked`` attribute (None: the page's own is kept)."""
    value_at: int | None = None
    """The ``value`` attribute's place among the element's attributes (``outerHTML`` lists them in
    the order they were added; BrowserGym adds ``value`` before its ``bid``)."""
    checked_at: int | None = None
    """The same for ``checked``."""


class PageResource(_Record):
    """A subresource body read from the renderer (``Page.getResourceContent``): stylesheets, so the
    page renders offline as it did live. Stored once per URL per session, at the first step that had it."""

    url: str
    type: str
    """CDP resource type: ``Stylesheet``, ``Font``, ``Image``."""
    mime_type: str = ""
    body: str
    body_base64: bool = False


EVALUATOR_WAIT_MS = 3_000
"""How long after a fresh load's load event the WebArena evaluator reads the page (``time.sleep(3)``)."""


class Settling(_Record):
    """Whether a tab's document was still changing by itself, read at capture (times in ms since the
    document's navigation start, the page's own ``performance.now()`` clock).

    A fresh load of the URL is read by the evaluator a fixed wait after its load event; a capture
    answers it only if the page showed the same then (``MockBrowserContext.fresh_load``).
    """

    time_origin: float
    """``performance.timeOrigin``: which document (two captures of one document share it)."""
    age_ms: float
    """When the capture began reading the document."""
    read_until_ms: float | None = None
    """When it had read it all (``changes`` are recorded up to then); None: at ``age_ms``."""
    load_ms: float | None = None
    """The end of its load event; None while it was still loading."""
    observed_from_ms: float | None = None
    """Since when its DOM changes are recorded (the document's start, or when the logger attached);
    None: not recorded."""
    changes: list[tuple[float, float]] = []
    """Spans in which the page's DOM changed by itself (not BrowserGym's marking, not within 150 ms
    of the agent's input), merged when less than 100 ms apart."""
    changes_complete_until_ms: float | None = None
    """Beyond this time ``changes`` is incomplete (too many spans); None: complete."""
    pending_requests: int = 0
    """The tab's requests started and not finished (XHR, fetch, long polls, subresources)."""
    open_websockets: int = 0


class ConsoleEntry(_Record):
    """One thing a tab's page said between two captures: a console message (``console.log`` and its
    kin: ``level`` is the call's type), an uncaught error (``exception``: its message and stack), or an
    entry of the browser's own log (``log``: a failed resource, an intervention; ``source`` says which).
    ``text`` is at most 2,000 characters; objects are shown by the preview the event carried."""

    tab_id: str
    kind: Literal["console", "exception", "log"]
    level: str = "log"
    source: str = ""
    text: str
    url: str = ""
    """The script (or resource) the entry points at, if any."""
    line: int | None = None
    """1-based line in ``url``."""
    timestamp: float = 0.0
    """Seconds since the epoch, as the browser stamped it."""


class AgentMessage(_Record):
    """One message of the agent's conversation around a step (``role``: ``assistant``, ``user``, ...)."""

    role: str
    text: str


class AgentToolCall(_Record):
    """One tool the agent called at a step: its name, its arguments (JSON text) and what it got back."""

    name: str
    arguments: str = ""
    result: str | None = None


class AgentReasoning(_Record):
    """Why the agent took a step's action, as its harness recorded it: its ``thought`` (the model's
    reasoning or BrowserGym's ``think``), the messages it wrote or read, the tool calls it made, and
    ``notes`` its harness names (browser-use's ``evaluation_previous_goal``, ``memory``, ``next_goal``).
    ``source`` names the harness. Each text is at most 4,000 characters, at most 20 messages and 20
    tool calls per step; redacted like everything else."""

    source: str
    thought: str | None = None
    messages: list[AgentMessage] = []
    tool_calls: list[AgentToolCall] = []
    notes: dict[str, str] = {}


class TabState(_Record):
    """An open tab at capture time. DOM fields are captured for every tab (``dom`` option)."""

    tab_id: str
    url: str
    title: str
    active: bool
    html: str | None = None
    dom_snapshot: SharedObject | None = None
    dom_snapshot_source: Literal["cdp", "observation"] = "cdp"
    """``observation``: the snapshot the agent's env took for its observation of this state (BrowserGym,
    with its ``bid`` marker attributes), reused instead of taking a second one."""
    session_storage: dict[str, dict[str, str]] = {}
    screenshot_png: str | None = None
    """Base64 PNG, only with the ``screenshot`` option."""
    thumbnail_webp: str | None = None
    """Base64 WebP image of the viewport at most 160 pixels wide (the ``thumbnail`` option, on by default;
    not taken when ``screenshot`` is on); None in earlier sessions and redacted ones."""
    viewport: tuple[int, int] | None = None
    """The viewport's width and height in CSS pixels when the thumbnail was taken."""
    ax_tree: SharedObject | None = None
    """``Accessibility.getFullAXTree`` result, only with the ``accessibility_tree`` option."""
    frames: list[FrameState] = []
    """Same-origin child frames' documents (format 2)."""
    cssom_styles: list[CSSOMStyle] = []
    """Adopted stylesheets and CSSOM-inserted rules the HTML lacks (format 2)."""
    form_state: list[FormControlState] = []
    """Form controls whose live state differs from their default, in the tab's document, its open
    shadow roots and its same-origin frames (format 3)."""
    marked_attributes: list[MarkedAttributes] = []
    """On a page BrowserGym marked: the ``value``/``checked`` attributes its marking wrote where the
    page's own (in ``html``) differ; replayed on the page as the agent left it, never on a fresh load."""
    settling: Settling | None = None
    """Whether the document was still changing by itself; None in sessions of earlier versions."""
    pseudo_classes: list[PseudoClassState] = []
    """Elements matching ``:hover``, ``:active``, ``:focus``, ``:focus-within`` or ``:focus-visible`` in the
    tab's document, its open shadow roots and same-origin frames; empty in sessions of earlier versions."""


class RequestInfo(_Record):
    method: str
    url: str
    headers: dict[str, str]
    """Wire headers when Chromium reported them (``requestWillBeSentExtraInfo``)."""
    headers_source: Literal["wire", "devtools", "inferred"] = "wire"
    """``devtools``: only the renderer's provisional headers were seen (served from cache);
    ``inferred``: provisional headers completed with the Accept/Sec-Fetch-* headers the same browser
    sent on the wire for the same kind of request earlier in the session."""
    post_data: str | None = None
    post_data_base64: bool = False
    resource_type: str = "Other"
    referrer_policy: str | None = None


class ResponseInfo(_Record):
    status: int
    status_text: str = ""
    headers: dict[str, str] = {}
    mime_type: str = ""
    protocol: str = "http/1.1"
    remote_address: str | None = None
    from_cache: bool = False
    encoded_size: int = -1
    redirect_url: str | None = None
    body: str | None = None
    body_base64: bool = False


class NetworkExchange(_Record):
    """One request/response hop; a redirect chain is several exchanges sharing ``request_id``."""

    request_id: str
    tab_id: str | None
    origin: TrafficOrigin = "agent"
    source: Literal["cdp", "playwright"] = "cdp"
    """``playwright``: the request happened in a new tab before its CDP session attached, so it was
    taken from Playwright's context-level request events instead."""
    started: float
    """Wall-clock seconds since the epoch."""
    duration_ms: float = -1
    request: RequestInfo
    response: ResponseInfo | None = None
    error: str | None = None
    """``loadingFailed`` error text (e.g. ``net::ERR_ABORTED``)."""


class CaptureFault(_Record):
    """A capture failure, recorded instead of raised: what failed and why."""

    stage: str
    error_type: str
    message: str
    tab_id: str | None = None


class EvaluatorCall(_Record):
    """One question the official evaluator asked of a page during a live run, with the answer it got.

    Replay looks calls up by ``(url, history, op, arg)``: the same expression can give another answer
    after a ``prep_action`` ran on the same page, so the expressions evaluated since the page's last
    navigation are part of the key.
    """

    page: int
    """0 = the page handed to the evaluator; 1, 2, ... = pages it opened, in order."""
    op: Literal["url", "title", "goto", "content", "evaluate", "close", "new_page"]
    url: str
    """The page's URL when asked."""
    history: list[str] = []
    arg: str | None = None
    """``goto``: the URL; ``evaluate``: the expression."""
    result: Any = None
    """``goto``: the URL after redirects; others: the value returned (JSON)."""
    error: str | None = None
    """``"<ExceptionType>: <message>"`` when the call raised."""


class HttpCall(_Record):
    """One HTTP exchange made by evaluation code itself: WebArena's REST helpers, the LLM judge."""

    client: Literal["requests", "httpx"]
    method: str
    url: str
    request_body: str | None = None
    status: int | None = None
    response_headers: dict[str, str] = {}
    response_body: str | None = None
    error: str | None = None


class Evaluation(_Record):
    """A live run of the official evaluator, recorded so it can be replayed offline.

    ``validate``: BrowserGym's per-step ``task.validate()`` (after the step's action, before the
    capture). ``probe``: the logger's own end-of-episode run on the final state.
    """

    kind: Literal["validate", "probe"]
    answer: str | None = None
    """The answer in the trajectory handed to the evaluator (the last ``STOP`` action's)."""
    action_type: str | None = None
    """``STOP`` or ``NONE``, as BrowserGym built the trajectory."""
    chat_role: str | None = None
    """The role of the last chat message at that time (BrowserGym derives the trajectory from it)."""
    score: float | None = None
    error: str | None = None
    calls: list[EvaluatorCall] = []
    http: list[HttpCall] = []
    pages: list[TabState] = []
    """Pages the evaluator opened, captured before it closed them (for offline JavaScript)."""
    duration_ms: float = 0.0


class Step(_Record):
    """The browser state after one trigger (``reset``, an action), plus the traffic since the last step."""

    index: int
    trigger: str
    action: str | None = None
    timestamp: float
    url: str
    title: str
    tabs: list[TabState]
    cookies: list[Cookie] = []
    local_storage: dict[str, dict[str, str]] = {}
    """Per origin; localStorage is shared by the tabs of a browser context."""
    network: list[NetworkExchange] = []
    resources: list[PageResource] = []
    """Subresources (stylesheets) first seen at this step; later steps reuse them (format 2)."""
    reward: float | None = None
    """The live per-step reward, when the capture ran inside an env that computed one."""
    current_tab_source: CurrentTabSource | None = None
    """How the current tab (the one marked ``active``) was decided; None in sessions of earlier versions."""
    capture_ms: float = 0.0
    faults: list[CaptureFault] = []
    console: list[ConsoleEntry] = []
    """What the pages said since the previous step (console messages, uncaught errors, browser log),
    in the order heard; at most 200 (``console_dropped`` counts the rest). Empty in earlier sessions."""
    console_dropped: int = 0
    reasoning: AgentReasoning | None = None
    """What the agent thought, said and called to take this step's action, when its harness says."""
    evaluation: Evaluation | None = None
    """The live evaluator run that produced ``reward``, when it was recorded."""

    @property
    def active_tab(self) -> TabState | None:
        return next((tab for tab in self.tabs if tab.active), self.tabs[0] if self.tabs else None)

    @property
    def html(self) -> str | None:
        tab = self.active_tab
        return tab.html if tab else None


class SessionHeader(_Record):
    format_version: int
    instance_id: str | None = None
    created: float
    tool: str
    browser_version: str | None = None
    user_agent: str | None = None
    options: dict[str, Any] = {}
    task: dict[str, Any] = {}
    """What is known of the task: env id, goal, WebArena config when given."""


class SessionEnd(_Record):
    ended: float
    instance_id: str | None = None
    task: dict[str, Any] = {}
    """What was learned of the task after the header was written (e.g. its WebArena config)."""
    final_answer: str | None = None
    rewards: list[float] = []
    """The live per-step rewards as the env reported them."""
    network: list[NetworkExchange] = []
    """Traffic that completed after the last step was captured (e.g. a final form POST)."""
    probe: Evaluation | None = None
    """The end-of-episode evaluator run on the final state, when the last step had none."""
    settling: dict[str, Settling] = {}
    """Per tab id: the last step's documents read again when the session was saved, once the
    evaluator's wait after their load had passed (what a fresh load of them would show by then)."""
    faults: list[CaptureFault] = []
