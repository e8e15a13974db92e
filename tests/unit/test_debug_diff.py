"""``diff(session, a, b)`` and the per-step views on a synthetic session built from the models.

``make_session()`` is the episode the other ``test_debug_*`` unit tests use: sign in (a POST that
redirects and sets a cookie), open a help tab, then answer.
"""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import pytest

from cdp_integration.debug import diff, step_requests, step_summaries
from cdp_integration.debug.views import end_evaluation, form_row
from cdp_integration.session import (
    Cookie,
    Evaluation,
    EvaluatorCall,
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    Session,
    SessionEnd,
    SessionWriter,
    Step,
    TabState,
    new_header,
)
from cdp_integration.session.models import FormControlState

ORIGIN = "http://shop.test"
LOGIN_HTML = (
    "<html><head><title>Login</title><script>steal()</script></head><body><h1>Customer Login</h1>"
    '<form action="/login" method="post"><label>User <input bid="5" name="username" value="{user}"></label>'
    '<button bid="7" id="sign-in" onclick="go()">Sign In</button></form></body></html>'
)
ACCOUNT_HTML = (
    '<html><head><link rel="stylesheet" href="/static/site.css"></head><body><h1>My Account</h1>'
    '<p>Welcome, Emma</p><img src="/static/logo.png" alt="logo"><a bid="9" href="/help">Help</a>'
    "<div hidden>secret</div></body></html>"
)


def tiny_png(width: int = 4, height: int = 3) -> str:
    """A valid, blank PNG of the given size, base64 (what ``TabState.screenshot_png`` holds)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\xff\xff" * width for _ in range(height))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode()


def exchange(
    request_id: str,
    method: str,
    path: str,
    status: int | None,
    kind: str = "Document",
    *,
    tab: str = "T1",
    error: str | None = None,
    body: str | None = None,
    mime: str = "text/html",
) -> NetworkExchange:
    response = (
        ResponseInfo(status=status, mime_type=mime, body=body, body_base64=mime.startswith("image/"))
        if status is not None
        else None
    )
    return NetworkExchange(
        request_id=request_id,
        tab_id=tab,
        started=10.0,
        duration_ms=12.5,
        request=RequestInfo(method=method, url=ORIGIN + path, headers={}, resource_type=kind),
        response=response,
        error=error,
    )


def tab(tab_id: str, path: str, title: str, html: str, *, active: bool = True, **fields: object) -> TabState:
    return TabState(tab_id=tab_id, url=ORIGIN + path, title=title, active=active, html=html, **fields)  # type: ignore[arg-type]


def step(
    index: int, action: str | None, path: str, title: str, tabs: list[TabState], **fields: object
) -> Step:
    return Step(
        index=index,
        trigger="reset" if action is None else "action",
        action=action,
        timestamp=100.0 + index,
        url=ORIGIN + path,
        title=title,
        tabs=tabs,
        capture_ms=20.0 + index,
        **fields,  # type: ignore[arg-type]
    )


EVALUATION = Evaluation(
    kind="validate",
    score=1.0,
    calls=[
        EvaluatorCall(page=0, op="url", url=f"{ORIGIN}/account", result=f"{ORIGIN}/account"),
        EvaluatorCall(
            page=0, op="evaluate", url=f"{ORIGIN}/account", arg="document.title", result="My Account"
        ),
    ],
)
"""A recorded run of the official evaluator after step 2."""


def make_steps() -> list[Step]:
    login = LOGIN_HTML.format(user="")
    filled = LOGIN_HTML.format(user="emma")
    account_tab = tab("T1", "/account", "My Account", ACCOUNT_HTML, active=False, screenshot_png=tiny_png())
    help_tab = tab(
        "T2", "/help", "Help", "<body><h1>Help</h1></body>", session_storage={ORIGIN: {"visit": "v1"}}
    )
    signed_in = step(
        2,
        "click('7')",
        "/account",
        "My Account",
        [tab("T1", "/account", "My Account", ACCOUNT_HTML, screenshot_png=tiny_png())],
        cookies=[Cookie(name="session", value="abc", domain="shop.test", httpOnly=True)],
        local_storage={ORIGIN: {"theme": "dark"}},
        network=[
            exchange("r1", "POST", "/login", 302),
            exchange("r1", "GET", "/account", 200),
            exchange(
                "r2",
                "GET",
                "/static/site.css",
                200,
                "Stylesheet",
                body="h1 { color: rgb(1, 2, 3) }",
                mime="text/css",
            ),
            exchange("r3", "GET", "/static/logo.png", 200, "Image", body=tiny_png(), mime="image/png"),
            exchange("r4", "GET", "/ads.js", None, "Script", error="net::ERR_ABORTED"),
        ],
        reward=0.0,
    )
    return [
        step(0, None, "/login", "Login", [tab("T1", "/login", "Login", login, screenshot_png=tiny_png())]),
        step(
            1,
            "fill('5', 'emma')",
            "/login",
            "Login",
            [tab("T1", "/login", "Login", filled, screenshot_png=tiny_png())],
            reward=0.0,
        ),
        signed_in.model_copy(update={"evaluation": EVALUATION}),
        step(
            3,
            "click('9')",
            "/help",
            "Help",
            [account_tab, help_tab],
            cookies=[
                Cookie(name="session", value="xyz", domain="shop.test", httpOnly=True),
                Cookie(name="seen_help", value="1", domain="shop.test"),
            ],
            local_storage={ORIGIN: {}},
            network=[exchange("r5", "GET", "/help", 200, tab="T2")],
            reward=0.0,
        ),
        step(
            4,
            "send_msg_to_user('Emma')",
            "/help",
            "Help",
            [tab("T1", "/account", "My Account", ACCOUNT_HTML, screenshot_png=tiny_png())],
            cookies=[Cookie(name="seen_help", value="1", domain="shop.test")],
            reward=1.0,
        ),
    ]


def make_session(*, end: bool = True) -> Session:
    final = SessionEnd(
        ended=200.0,
        instance_id="demo.unit",
        final_answer="Emma",
        network=[exchange("r9", "POST", "/bye", 204)],
    )
    header = new_header(instance_id="demo.unit", task={"goal": "Find the account holder's name."})
    return Session(header=header, steps=tuple(make_steps()), end=final if end else None, complete=end)


def write_session(path: Path) -> Path:
    """The same episode as a session file (what the CLI reads)."""
    session = make_session()
    assert session.end is not None
    writer = SessionWriter(path.with_name(path.name + ".partial"), session.header)
    for captured in make_steps():
        writer.write_step(captured)
    return writer.finish(session.end, path)


def test_url_title_cookies_storage_and_text_change_from_a_to_b() -> None:
    change = diff(make_session(), 1, 2)
    assert (change.a, change.b) == (1, 2)
    assert change.url == (f"{ORIGIN}/login", f"{ORIGIN}/account") and change.url_changed
    assert change.title == ("Login", "My Account") and change.title_changed
    assert [(c.kind, c.name, c.before, c.after) for c in change.cookies] == [
        ("added", "session", None, "abc")
    ]
    assert [(s.kind, s.area, s.origin, s.key, s.after) for s in change.storage] == [
        ("added", "local", ORIGIN, "theme", "dark")
    ]
    assert "-Customer Login" in change.text_diff and "+My Account" in change.text_diff
    assert "+Welcome, Emma" in change.text_diff
    assert not any("secret" in line or "steal" in line for line in change.text_diff)


def test_changed_and_removed_cookies_opened_tabs_and_session_storage() -> None:
    change = diff(make_session(), 2, 3)
    assert [(c.kind, c.name, c.before, c.after) for c in change.cookies] == [
        ("added", "seen_help", None, "1"),
        ("changed", "session", "abc", "xyz"),
    ]
    assert [(s.kind, s.area, s.key, s.before, s.after) for s in change.storage] == [
        ("removed", "local", "theme", "dark", None),
        ("added", "session", "visit", None, "v1"),
    ]
    assert change.storage[1].tab_id == "T2"
    assert [(t.kind, t.tab_id, t.url) for t in change.tabs] == [("opened", "T2", f"{ORIGIN}/help")]
    closed = diff(make_session(), 3, 4)
    assert [(t.kind, t.tab_id) for t in closed.tabs] == [("closed", "T2")]
    assert [(c.kind, c.name) for c in closed.cookies] == [("removed", "session")]


def test_requests_in_between_are_those_of_steps_a_plus_1_to_b() -> None:
    session = make_session()
    spanning = diff(session, 0, 3)
    assert [(r.step, r.method, r.url.removeprefix(ORIGIN), r.status) for r in spanning.requests] == [
        (2, "POST", "/login", 302),
        (2, "GET", "/account", 200),
        (2, "GET", "/static/site.css", 200),
        (2, "GET", "/static/logo.png", 200),
        (2, "GET", "/ads.js", None),
        (3, "GET", "/help", 200),
    ]
    assert spanning.requests[4].status_label == "net::ERR_ABORTED"
    assert diff(session, 2, 3).requests == diff(session, 3, 2).requests  # the same span either way
    # traffic that completed after the last capture belongs to the last step
    assert [r.url for r in diff(session, -2, -1).requests] == [f"{ORIGIN}/bye"]


def test_negative_indices_count_from_the_end_and_same_step_is_empty() -> None:
    session = make_session()
    assert diff(session, -3, -2) == diff(session, 2, 3)
    assert diff(session, 2, 2).is_empty and not diff(session, 2, 2).text_diff
    assert not diff(session, 0, 1).is_empty  # the filled field shows in the text
    with pytest.raises(IndexError, match=r"step 5 is out of range: the session has steps 0\.\.4"):
        diff(session, 0, 5)
    assert session.step_index(-1) == 4


def test_step_table_rows() -> None:
    rows = step_summaries(make_session())
    assert [r.label for r in rows] == [
        "reset",
        "fill('5', 'emma')",
        "click('7')",
        "click('9')",
        "send_msg_to_user('Emma')",
    ]
    assert [r.document_status for r in rows] == [
        "-",
        "-",
        "302→200",
        "200",
        "-",
    ]  # step 3: the new, active tab
    assert [r.requests for r in rows] == [0, 0, 5, 1, 1]
    assert rows[2].evaluation is not None
    assert (rows[2].evaluation.source, rows[2].evaluation.label, rows[2].evaluation.calls) == (
        "validate",
        "1",
        2,
    )
    assert rows[0].evaluation is None
    assert rows[4].evaluation is not None and (rows[4].evaluation.source, rows[4].evaluation.label) == (
        "reward",
        "1",
    )
    assert rows[3].tabs == 2 and rows[0].has_screenshot


def test_failed_evaluation_label_and_end_probe() -> None:
    session = make_session()
    failing = Evaluation(kind="probe", score=0.0, answer="Emma", error="TimeoutError: page.goto")
    assert session.end is not None
    probed = Session(
        header=session.header, steps=session.steps, end=session.end.model_copy(update={"probe": failing})
    )
    summary = end_evaluation(probed)
    assert summary is not None and summary.label == "0 (TimeoutError: page.goto)" and summary.answer == "Emma"
    assert end_evaluation(session) is None


def test_step_requests_rows() -> None:
    rows = step_requests(make_session(), 2)
    assert [(r.method, r.status_label, r.resource_type, r.time_label) for r in rows][:2] == [
        ("POST", "302", "Document", "12 ms"),
        ("GET", "200", "Document", "12 ms"),
    ]


def form_session() -> Session:
    """A review form: nothing typed, then a title typed and a box checked, then the title edited and
    a size picked, then the same page with the title cleared; then another page."""
    title = FormControlState(path=[4], tag="input", type="text", name="title", id="title", value="Great mug")
    agree = FormControlState(path=[5], tag="input", type="checkbox", name="agree", checked=True)
    size = FormControlState(path=[2, 1], tag="select", id="size", selected=[2], selected_text=["Large"])
    states = [
        [],
        [title, agree],
        [title.model_copy(update={"value": "Great mugs"}), agree, size],
        [agree, size],
    ]
    steps = [
        step(
            i,
            None if i == 0 else f"act{i}",
            "/products/5",
            "Mug",
            [tab("T1", "/products/5", "Mug", "<p>x</p>", form_state=s)],
        )
        for i, s in enumerate(states)
    ]
    steps.append(step(4, "goto", "/help", "Help", [tab("T1", "/help", "Help", "<p>x</p>")]))
    return Session(header=new_header(instance_id="forms"), steps=tuple(steps), end=None, complete=False)


def test_diff_says_what_was_typed_checked_selected_and_cleared() -> None:
    session = form_session()
    assert [f.text for f in diff(session, 0, 1).forms] == [
        "typed 'Great mug' into input#title",
        "checked input[name=agree]",
    ]
    assert [f.text for f in diff(session, 1, 2).forms] == [
        "typed 'Great mugs' into input#title (was 'Great mug')",
        "selected 'Large' in shadow root > select#size",
    ]
    assert [f.text for f in diff(session, 2, 3).forms] == [
        "input#title back to its default (was 'Great mugs')"
    ]
    assert diff(session, 3, 4).forms == ()  # another page: its form holds nothing typed
    assert not diff(session, 0, 1).is_empty and diff(session, 0, 1).text_diff == ()


def test_password_values_are_shown_as_the_page_showed_them() -> None:
    secret = FormControlState(path=[1], tag="input", type="password", name="pw", value="hunter22")
    assert form_row("T1", secret).text == "typed '••••••••' into input[name=pw]"


def test_typed_values_written_into_attributes_show_as_typed() -> None:
    """BrowserGym writes each control's live value into its ``value`` attribute when it observes the
    page: the HTML then changes where the form state does not."""
    assert [f.text for f in diff(make_session(), 0, 1).forms] == ["typed 'emma' into input[name=username]"]
    assert diff(make_session(), 1, 2).forms == ()  # another page
