"""Redaction: every kind of secret leaves the file, placeholders are stable, the rest is untouched.

``crafted_sessions()`` is the crafted half of the removal corpus (the integration test adds the demo
episodes); ``original_secrets()`` collects the secrets of a session independently of the redactor,
with plain parsing, so the removal proof does not grade the redactor with its own logic.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.session import (
    Cookie,
    Evaluation,
    EvaluatorCall,
    HttpCall,
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    Session,
    SessionEnd,
    SessionWriter,
    Step,
    TabState,
    load_session,
    new_header,
)
from cdp_integration.session.models import FormControlState, MarkedAttributes
from cdp_integration.session.redact import (
    DEFAULT_TOKEN_PARAMS,
    PLACEHOLDER_PATTERN,
    RedactionPolicy,
    Redactor,
    redact_file,
    redact_session,
)

SITE = "http://shop.test"
PASSWORD = 'Hunter2 <Sekret>&"quoted"!'
"""Spelled differently raw, URL-encoded, HTML- and JSON-escaped: each spelling must go."""
SESSION_COOKIE = "c00kie-VALUE-7f3a9b"
TRACKING_COOKIE = "1"
API_KEY = "ak_live_5e8f0d2c"
BEARER = "eyJhbGciOi.JIUzI1NiJ9.sig-42"
ADMIN_PASSWORD = "admin-pass-99"
ADMIN_TOKEN = "e3ec5fb611fe0e4c63c77865e35622a4"
URL_TOKEN = "tok/en+with spaces&more"
RESET_TOKEN = "reset-7766554433"
BASIC_PASSWORD = "basic-pw-31337"
STORAGE_TOKEN = "ls-access-0a0b0c0d"
CSRF = "csrf-9f8e7d6c5b"
SET_COOKIE = "fresh-session-ABCDEF"
PROXY = "proxy-cred-123456"
MULTIPART_SECRET = "multipart-pin-2468"
PREFILLED = "prefilled-pass-1357"
BODY_SECRET = "b64-hidden-secret-8080"
LOCAL_ONLY = "ls-only-secret-5151"
USERINFO_PW = "userinfo-pw-777"
START_TOKEN = "start-token-4242"
TYPED_PASSWORD = "typed-pass-8642"
TYPED_PIN = "typed-pin-97531"
TYPED_TEXT = "Four mugs, none chipped"


def _dom_snapshot(password: str, *, shared_text: bool) -> dict[str, Any]:
    """A ``DOMSnapshot.captureSnapshot`` result: a login form, the password typed in (inputValue)."""
    strings = ["#document", "HTML", "INPUT", "type", "text", "name", "username", "emma", "password"]
    strings += [password, "#text", "value", "q", "skillet"]
    index = {text: i for i, text in enumerate(strings)}
    node_names = [
        index["#document"],
        index["HTML"],
        index["INPUT"],
        index["INPUT"],
        index["#text"],
        index["INPUT"],
    ]
    attributes = [
        [],
        [],
        [index["type"], index["text"], index["name"], index["username"]],
        [index["type"], index["password"], index["name"], index["password"], index["value"], index[password]],
        [],
        [index["name"], index["q"], index["value"], index["skillet"]],
    ]
    node_values = [-1, -1, -1, -1, index[password] if shared_text else -1, -1]
    return {
        "documents": [
            {
                "documentURL": 0,
                "nodes": {
                    "parentIndex": [-1, 0, 1, 1, 1, 1],
                    "nodeType": [9, 1, 1, 1, 3, 1],
                    "nodeName": node_names,
                    "nodeValue": node_values,
                    "attributes": attributes,
                    "inputValue": {
                        "index": [2, 3, 5],
                        "value": [index["emma"], index[password], index["skillet"]],
                    },
                },
                "layout": {"nodeIndex": [4], "text": [index[password] if shared_text else -1]},
            }
        ],
        "strings": strings,
    }


def _exchange(
    request_id: str, request: RequestInfo, response: ResponseInfo | None = None, **kw: Any
) -> NetworkExchange:
    return NetworkExchange(
        request_id=request_id, tab_id="T1", started=1.0, request=request, response=response, **kw
    )


def crafted_session() -> tuple[Session, dict[str, str]]:
    """One session holding every kind of secret the redactor knows, most of them repeated elsewhere.

    Returns the session and ``{secret: where it was planted}`` (the expected-gone list).
    """
    login_html = (
        f"<html><body><p>Welcome back! Your recovery phrase is {html.escape(PASSWORD)}.</p>"
        f'<a href="/confirm?next={quote(PASSWORD, safe="")}">confirm</a>'
        f'<form><input name="username" value="emma"><input type="password" name="pw" value="{PREFILLED}">'
        f'<input type=hidden name=csrf_token value={CSRF}><input name="q" value="skillet"></form>'
        f'<a href="/reset?token={RESET_TOKEN}&amp;lang=en">reset</a> <span>{SESSION_COOKIE}</span></body></html>'
    )
    tab = TabState(
        tab_id="T1",
        url=f"{SITE}/account?session={SESSION_COOKIE}&q=skillet",
        title="Account",
        active=True,
        html=login_html,
        dom_snapshot=_dom_snapshot(PASSWORD, shared_text=True),
        session_storage={SITE: {"authToken": STORAGE_TOKEN, "theme": "dark"}},
        screenshot_png=base64.b64encode(b"\x89PNG fake pixels showing " + PASSWORD.encode()).decode(),
        form_state=[
            FormControlState(path=[5], tag="input", type="password", name="pw", value=TYPED_PASSWORD),
            FormControlState(path=[6], tag="input", type="text", id="login-pin", value=TYPED_PIN),
            FormControlState(path=[7], tag="textarea", name="review", value=TYPED_TEXT),
            FormControlState(path=[8], tag="input", type="checkbox", name="password_shown", checked=True),
        ],
    )
    network = [
        _exchange(
            "1",
            RequestInfo(
                method="POST",
                url=f"{SITE}/login?next=%2Faccount",
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Cookie": f"session={SESSION_COOKIE}; tracking={TRACKING_COOKIE}",
                    "Referer": f"{SITE}/login?token={quote_plus(URL_TOKEN)}",
                },
                post_data=(
                    f"username=emma&password={quote_plus(PASSWORD)}&csrf_token={CSRF}&remember=1"
                    f"&confirm={quote_plus(TYPED_PASSWORD)}"
                ),
            ),
            ResponseInfo(
                status=302,
                headers={
                    "Set-Cookie": f"session={SET_COOKIE}; Path=/; HttpOnly\nseen=yes; Path=/",
                    "Location": f"{SITE}/account?access_token={BEARER}",
                },
                redirect_url=f"{SITE}/account?access_token={BEARER}",
            ),
        ),
        _exchange(
            "2",
            RequestInfo(
                method="POST",
                url=f"{SITE}/api/keys",
                headers={
                    "content-type": "application/json",
                    "X-Auth-Token": BEARER,
                    "Proxy-Authorization": PROXY,
                },
                post_data=json.dumps(
                    {"user": "emma", "api_key": API_KEY, "scopes": ["read"], "token_type": "Bearer"}
                ),
            ),
            ResponseInfo(
                status=200,
                headers={"content-type": "application/json"},
                mime_type="application/json",
                body=json.dumps({"ok": True, "echo": f"key {API_KEY} stored", "refresh_token": RESET_TOKEN}),
            ),
        ),
        _exchange(
            "3",
            RequestInfo(
                method="POST",
                url=f"{SITE}/upload",
                headers={
                    "content-type": "multipart/form-data; boundary=XyZ",
                    "Authorization": "Basic " + base64.b64encode(f"emma:{BASIC_PASSWORD}".encode()).decode(),
                },
                post_data=(
                    '--XyZ\r\nContent-Disposition: form-data; name="pin_code"\r\n\r\n'
                    f'{MULTIPART_SECRET}\r\n--XyZ\r\nContent-Disposition: form-data; name="title"\r\n\r\n'
                    f"Hello\r\n--XyZ--\r\n"
                ),
            ),
            ResponseInfo(
                status=200,
                mime_type="application/octet-stream",
                body=base64.b64encode(f"binary...{BODY_SECRET}...{PASSWORD}".encode()).decode(),
                body_base64=True,
            ),
        ),
        _exchange(
            "4",
            RequestInfo(
                method="GET",
                url=f"https://emma:{quote(USERINFO_PW)}@files.shop.test/doc?sid={SESSION_COOKIE}",
                headers={"authorization": f"Bearer {BEARER}"},
            ),
            origin="evaluator",
        ),
    ]
    evaluation = Evaluation(
        kind="validate",
        score=1.0,
        calls=[
            EvaluatorCall(page=0, op="url", url=f"{SITE}/account", result=f"{SITE}/account"),
            EvaluatorCall(
                page=1,
                op="goto",
                url="about:blank",
                arg=f"{SITE}/orders?auth={BEARER}",
                result=f"{SITE}/orders?auth={BEARER}",
            ),
            EvaluatorCall(
                page=1,
                op="evaluate",
                url=f"{SITE}/orders",
                arg="document.body.innerText",
                result=f"order 7 for token {ADMIN_TOKEN}, user emma:{BASIC_PASSWORD}",
            ),
        ],
        http=[
            HttpCall(
                client="requests",
                method="POST",
                url=f"{SITE}/rest/default/V1/integration/admin/token",
                request_body=json.dumps({"username": "admin", "password": ADMIN_PASSWORD}),
                status=200,
                response_headers={"content-type": "application/json", "set-cookie": f"admin={SET_COOKIE}"},
                response_body=json.dumps(ADMIN_TOKEN),
            ),
            HttpCall(
                client="requests",
                method="GET",
                url=f"{SITE}/rest/V1/orders?searchCriteria=x&api_key={API_KEY}",
                status=200,
                response_body=json.dumps({"items": [{"note": f"auth was Bearer {ADMIN_TOKEN}"}]}),
            ),
        ],
    )
    steps = (
        Step(
            index=0,
            trigger="reset",
            timestamp=1.0,
            url=f"{SITE}/login",
            title="Sign in",
            tabs=[tab.model_copy(update={"url": f"{SITE}/login", "dom_snapshot": None})],
            cookies=[Cookie(name="session", value=SESSION_COOKIE, domain="shop.test")],
        ),
        Step(
            index=1,
            trigger="action",
            action=f"fill('12', {PASSWORD!r})",
            timestamp=2.0,
            url=tab.url,
            title="Account",
            tabs=[tab],
            cookies=[
                Cookie(name="session", value=SESSION_COOKIE, domain="shop.test"),
                Cookie(name="tracking", value=TRACKING_COOKIE, domain="shop.test"),
            ],
            local_storage={
                SITE: {
                    "api_key": API_KEY,
                    "prefs": json.dumps({"jwt": BEARER, "lang": "en"}),
                    "clientSecret": LOCAL_ONLY,
                }
            },
            network=network,
            evaluation=evaluation,
        ),
    )
    header = new_header(
        instance_id="crafted.1",
        task={
            "goal": f"sign in (password {PASSWORD}) and check orders",
            "start_url": f"{SITE}/?auth_token={START_TOKEN}",
        },
    )
    end = SessionEnd(
        ended=3.0, instance_id="crafted.1", final_answer="done", network=network[:1], probe=evaluation
    )
    planted = {
        PASSWORD: "password input (DOM inputValue + value attribute), form post, page text, action, goal",
        SESSION_COOKIE: "cookie, Cookie header, URL parameter and path, page text",
        API_KEY: "JSON post data, JSON response text, localStorage, evaluator REST URL",
        BEARER: "X-Auth-Token, Authorization, Location, storage JSON, evaluator goto",
        ADMIN_PASSWORD: "evaluator REST login body",
        ADMIN_TOKEN: "evaluator REST token answer, evaluator page text and REST answer",
        URL_TOKEN: "Referer token parameter (URL-encoded)",
        RESET_TOKEN: "link in HTML, refresh_token in JSON response",
        BASIC_PASSWORD: "Basic Authorization (base64 of user:password), evaluator page text",
        USERINFO_PW: "URL user info",
        LOCAL_ONLY: "localStorage clientSecret, nowhere else",
        START_TOKEN: "a token parameter in the header's task, nowhere else",
        STORAGE_TOKEN: "sessionStorage authToken",
        CSRF: "form post field, hidden input",
        SET_COOKIE: "Set-Cookie (browser and evaluator REST)",
        PROXY: "Proxy-Authorization",
        MULTIPART_SECRET: "multipart field pin_code",
        PREFILLED: "server-filled password input value in HTML",
        BODY_SECRET: "nowhere structured: only inside a base64 body (must survive: not a known secret)",
        TYPED_PASSWORD: "typed into a password input (form state), posted under a plain name",
        TYPED_PIN: "typed into an input whose id names a pin (form state)",
    }
    return Session(header=header, steps=steps, end=end), planted


def write(session: Session, path: Path) -> Path:
    writer = SessionWriter(path.with_name(path.name + ".partial"), session.header)
    for step in session.steps:
        writer.write_step(step)
    if session.end is None:
        writer.abort()
        writer.partial_path.rename(path)
        return path
    return writer.finish(session.end, path)


# -- an independent collector of secrets, for the removal proof -----------------------------------

_SECRET_FIELD = re.compile(r"pass|pwd|secret|token|api_?key|auth|csrf|pin", re.IGNORECASE)


def _json_secret_values(value: Any, under_secret: bool = False) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            secret_key = bool(_SECRET_FIELD.search(key)) and not key.endswith("_type")
            yield from _json_secret_values(item, under_secret or secret_key)
    elif isinstance(value, list):
        for item in value:
            yield from _json_secret_values(item, under_secret)
    elif under_secret and isinstance(value, str | int) and not isinstance(value, bool):
        yield str(value)


def _body_secrets(body: str | None) -> Iterator[str]:
    if not body:
        return
    try:
        parsed = json.loads(body)
    except ValueError:
        for name, value in parse_qsl(body):
            if _SECRET_FIELD.search(name):
                yield value
        for name, value in re.findall(r'name="([^"]+)"\r\n\r\n(.*?)\r\n--', body, re.DOTALL):
            if _SECRET_FIELD.search(name):
                yield value
        return
    if isinstance(parsed, str):
        yield parsed  # a bare JSON string answer to a credentials POST: the token
    else:
        yield from _json_secret_values(parsed)


def _url_secrets(url: str | None) -> Iterator[str]:
    if not url:
        return
    parts = urlsplit(url)
    if parts.password:
        yield parts.password
    for name, value in parse_qsl(parts.query):
        if name.lower() in DEFAULT_TOKEN_PARAMS:
            yield value


def _header_secrets(headers: dict[str, str]) -> Iterator[str]:
    for name, value in headers.items():
        lowered = name.lower()
        if lowered == "cookie":
            yield from (part.partition("=")[2] for part in value.split(";"))
        elif lowered == "set-cookie":
            yield from (line.split(";")[0].partition("=")[2] for line in value.split("\n"))
        elif lowered in ("authorization", "proxy-authorization"):
            scheme, _, credentials = value.partition(" ")
            yield credentials or scheme
            if scheme.lower() == "basic":
                yield base64.b64decode(credentials).decode().partition(":")[2]
        elif re.fullmatch(r"x-.*-token", lowered):
            yield value
        elif lowered in ("referer", "location"):
            yield from _url_secrets(value)


def _dom_passwords(snapshot: dict[str, Any] | None) -> Iterator[str]:
    if not snapshot:
        return
    strings = snapshot["strings"]
    for document in snapshot["documents"]:
        nodes = document["nodes"]
        for node, pairs in enumerate(nodes["attributes"]):
            attributes = {strings[pairs[i]].lower(): strings[pairs[i + 1]] for i in range(0, len(pairs), 2)}
            if attributes.get("type", "").lower() == "password":
                if "value" in attributes:
                    yield attributes["value"]
                for position, index in enumerate(nodes.get("inputValue", {}).get("index", [])):
                    if index == node:
                        yield strings[nodes["inputValue"]["value"][position]]


def _html_passwords(html: str | None) -> Iterator[str]:
    for tag in re.findall(r"<input\b[^>]*>", html or "", re.IGNORECASE):
        if re.search(r"type=[\"']?password", tag, re.IGNORECASE):
            found = re.search(r"value=[\"']?([^\"' >]*)", tag)
            if found:
                yield found[1]


def _form_passwords(controls: list[FormControlState]) -> Iterator[str]:
    for control in controls:
        if control.value and (control.type == "password" or _SECRET_FIELD.search(control.name or control.id)):
            yield control.value


def original_secrets(session: Session, min_length: int = 6) -> set[str]:
    """Every secret of the kinds the issue names: cookie values, secret header values, password
    values, token parameters, password-like post fields, evaluator credentials and tokens.

    Shorter values are left out: a two-character cookie value cannot be proven absent from any file
    (the redactor replaces it where it is, not everywhere; see ``RedactionPolicy.min_secret_length``).
    """
    found: set[str] = set()

    def tab(state: TabState) -> None:
        found.update(_url_secrets(state.url))
        found.update(_dom_passwords(state.dom_snapshot))
        found.update(_html_passwords(state.html))
        found.update(_form_passwords(state.form_state))
        for items in state.session_storage.values():
            found.update(value for key, value in items.items() if _SECRET_FIELD.search(key))

    def exchanges(items: list[NetworkExchange]) -> None:
        for exchange in items:
            request, response = exchange.request, exchange.response
            found.update(_url_secrets(request.url))
            found.update(_header_secrets(request.headers))
            if not request.post_data_base64:
                found.update(_body_secrets(request.post_data))
            if response is not None:
                found.update(_header_secrets(response.headers))
                found.update(_url_secrets(response.redirect_url))

    def evaluation(record: Evaluation | None) -> None:
        if record is None:
            return
        for page in record.pages:
            tab(page)
        for call in record.calls:
            found.update(_url_secrets(call.url))
            if call.op == "goto":
                found.update(_url_secrets(call.arg))
        for http in record.http:
            found.update(_url_secrets(http.url))
            found.update(_header_secrets(http.response_headers))
            credentials = list(_body_secrets(http.request_body))
            found.update(credentials)
            if credentials and http.response_body:
                found.update(_body_secrets(http.response_body))

    for step in session.steps:
        found.update(cookie.value for cookie in step.cookies)
        for state in step.tabs:
            tab(state)
        for items in step.local_storage.values():
            found.update(value for key, value in items.items() if _SECRET_FIELD.search(key))
        exchanges(step.network)
        evaluation(step.evaluation)
    if session.end is not None:
        exchanges(session.end.network)
        evaluation(session.end.probe)
    return {secret for secret in found if len(secret) >= min_length}


def assert_no_secret_survives(path: Path, secrets: set[str]) -> None:
    """No secret in the file's raw bytes, nor in its decompressed text, raw, JSON- or URL-escaped."""
    raw = path.read_bytes()
    text = zlib.decompressobj(47).decompress(raw) if raw[:2] == b"\x1f\x8b" else raw  # partial files too
    for secret in secrets:
        forms = {
            secret,
            orjson.dumps(secret).decode()[1:-1],
            quote(secret, safe=""),
            quote_plus(secret),
            html.escape(secret),
        }
        for form in forms:
            assert form.encode() not in raw, (path, secret, "in the compressed bytes")
            assert form.encode() not in text, (path, secret, form)


# -- tests ------------------------------------------------------------------------------------------


@pytest.fixture
def crafted(tmp_path: Path) -> tuple[Path, Session, dict[str, str]]:
    session, planted = crafted_session()
    return write(session, tmp_path / "crafted.session.jsonl.gz"), session, planted


def test_every_planted_secret_is_gone_from_the_redacted_file(
    crafted: tuple[Path, Session, dict[str, str]], tmp_path: Path
) -> None:
    path, _, planted = crafted
    out = tmp_path / "redacted.session.jsonl.gz"
    count = redact_file(path, out)
    expected = set(planted) - {BODY_SECRET}
    collected = original_secrets(load_session(path))
    assert len(collected & expected) >= 12, expected - collected  # the independent collector sees them
    assert_no_secret_survives(out, expected | collected)
    assert count >= len(expected)
    text = gzip.decompress(out.read_bytes()).decode()
    response = load_session(out).steps[1].network[2].response
    body = base64.b64decode(response.body or "") if response else b""
    assert BODY_SECRET.encode() in body and PASSWORD.encode() not in body  # base64 data: known secrets only
    assert "REDACTED-password-" in text and "REDACTED-cookie-" in text and "REDACTED-token-" in text


def test_typed_secrets_leave_the_form_state_and_typed_text_stays() -> None:
    session, _ = crafted_session()
    redacted = redact_session(session)
    controls = redacted.steps[1].tabs[0].form_state
    assert [(c.value or "").split("-")[:2] for c in controls[:2]] == [["REDACTED", "password"]] * 2
    assert (controls[2].value, controls[3].checked) == (TYPED_TEXT, True)
    assert controls[0].value in (redacted.steps[1].network[0].request.post_data or "")


def test_redacted_file_loads_with_the_same_shape(
    crafted: tuple[Path, Session, dict[str, str]], tmp_path: Path
) -> None:
    path, session, _ = crafted
    out = tmp_path / "redacted.session.jsonl.gz"
    redact_file(path, out)
    redacted = load_session(out)
    assert redacted.complete and redacted.header.options["redacted"] is True
    assert [s.index for s in redacted.steps] == [s.index for s in session.steps]
    assert [len(s.network) for s in redacted.steps] == [len(s.network) for s in session.steps]
    step = redacted.steps[1]
    assert step.tabs[0].screenshot_png is None  # pixels cannot be redacted
    assert step.tabs[0].title == "Account" and step.tabs[0].session_storage[SITE]["theme"] == "dark"
    assert step.network[0].request.url == f"{SITE}/login?next=%2Faccount"
    post = dict(parse_qsl(step.network[0].request.post_data or ""))
    assert post["username"] == "emma" and post["remember"] == "1"
    assert PLACEHOLDER_PATTERN.fullmatch(post["password"]) and post["password"].startswith(
        "REDACTED-password-"
    )
    body = json.loads(step.network[1].request.post_data or "")
    assert body["user"] == "emma" and body["scopes"] == ["read"] and body["token_type"] == "Bearer"
    assert step.network[1].request.headers["content-type"] == "application/json"
    assert step.network[3].request.headers["authorization"].startswith("Bearer REDACTED-")
    assert step.network[2].request.headers["Authorization"].startswith("Basic REDACTED-")
    assert "tracking=REDACTED-cookie-" in step.network[0].request.headers["Cookie"]
    assert "seen=REDACTED-cookie-" in step.network[0].response.headers["Set-Cookie"]  # type: ignore[union-attr]
    assert "Path=/; HttpOnly" in step.network[0].response.headers["Set-Cookie"]  # type: ignore[union-attr]
    assert 'name="q" value="skillet"' in (step.tabs[0].html or "")
    assert "?q=skillet" not in step.url and "&q=skillet" in step.url
    http = step.evaluation.http  # type: ignore[union-attr]
    assert json.loads(http[0].request_body or "")["username"] == "admin"
    assert PLACEHOLDER_PATTERN.fullmatch(json.loads(http[0].response_body or ""))


def test_the_same_secret_gets_the_same_placeholder_everywhere(
    crafted: tuple[Path, Session, dict[str, str]],
) -> None:
    _, session, _ = crafted
    redacted = redact_session(session)
    step = redacted.steps[1]
    cookie = step.cookies[0].value
    assert cookie.startswith("REDACTED-cookie-")
    assert f"session={cookie};" in step.network[0].request.headers["Cookie"]
    assert f"session={cookie}&" in step.url
    assert f"<span>{cookie}</span>" in (step.tabs[0].html or "")
    assert redacted.steps[0].cookies[0].value == cookie
    password = dict(parse_qsl(step.network[0].request.post_data or ""))["password"]
    snapshot = step.tabs[0].dom_snapshot or {}
    nodes = snapshot["documents"][0]["nodes"]
    assert snapshot["strings"][nodes["inputValue"]["value"][1]] == password
    assert f"fill('12', '{password}')" == step.action
    assert password in redacted.header.task["goal"]
    assert step.cookies[1].value != cookie  # another secret, another placeholder
    placeholders = set(
        PLACEHOLDER_PATTERN.findall(
            orjson.dumps([s.model_dump(mode="json") for s in redacted.steps]).decode()
        )
    )
    assert len(placeholders) >= 14


def test_placeholders_are_unlinkable_across_runs_unless_the_key_is_fixed(
    crafted: tuple[Path, Session, dict[str, str]],
) -> None:
    _, session, _ = crafted
    first, second = redact_session(session), redact_session(session)
    assert first.steps[1].cookies[0].value != second.steps[1].cookies[0].value
    keyed = RedactionPolicy(hash_key=b"k" * 32)
    assert redact_session(session, keyed).steps[1] == redact_session(session, keyed).steps[1]


def test_short_secrets_are_replaced_where_found_only() -> None:
    """A one-character cookie value occurs everywhere; replacing it everywhere would wreck the pages."""
    session, _ = crafted_session()
    step = redact_session(session).steps[1]
    assert step.cookies[1].value.startswith("REDACTED-cookie-")
    assert "remember=1" in (step.network[0].request.post_data or "")


def test_dom_snapshot_keeps_other_uses_of_a_short_password() -> None:
    """The string table is shared: a short password's pointer moves; the same text elsewhere stays."""
    snapshot = _dom_snapshot("abc", shared_text=True)
    step = Step(
        index=0,
        trigger="reset",
        timestamp=0,
        url="http://x/",
        title="",
        tabs=[TabState(tab_id="T", url="http://x/", title="", active=True, dom_snapshot=snapshot)],
    )
    redacted = Redactor().step(step).tabs[0].dom_snapshot or {}
    strings, nodes = redacted["strings"], redacted["documents"][0]["nodes"]
    assert strings[nodes["inputValue"]["value"][1]].startswith("REDACTED-password-")
    assert strings[nodes["nodeValue"][4]] == "abc"
    assert strings[nodes["inputValue"]["value"][0]] == "emma"  # a text input keeps its value
    assert strings[nodes["inputValue"]["value"][2]] == "skillet"


def test_values_browsergym_wrote_into_attributes_are_redacted_like_the_form_state() -> None:
    """BrowserGym's marking copies a typed password into the ``value`` attribute; the tab keeps what
    it wrote (``marked_attributes``), so that copy goes too, even when too short to be searched for
    everywhere, with the form state's placeholder; a typed search term and a list item's value stay."""
    form = [
        FormControlState(path=[3], tag="input", type="password", name="pw", value="ab1"),
        FormControlState(path=[4], tag="input", type="text", id="login-pin", value="4321"),
        FormControlState(path=[5], tag="input", type="text", name="q", value="skillet"),
    ]
    marks = [
        MarkedAttributes(bid="12", tag="input", type="password", name="pw", value="ab1"),
        MarkedAttributes(bid="13", tag="input", type="text", id="login-pin", value="4321"),
        MarkedAttributes(bid="14", tag="input", type="text", name="q", value="skillet"),
        MarkedAttributes(bid="15", tag="textarea", name="review", value="ab1 is fine"),
        MarkedAttributes(bid="16", tag="li", value="0"),
        MarkedAttributes(bid="17", tag="input", type="checkbox", name="password_shown", checked=True),
    ]
    tab = TabState(
        tab_id="T", url="http://x/", title="", active=True, form_state=form, marked_attributes=marks
    )
    step = Step(index=0, trigger="action", timestamp=0, url="http://x/", title="", tabs=[tab])
    redacted = Redactor().step(step).tabs[0]
    values = [mark.value for mark in redacted.marked_attributes]
    assert all(PLACEHOLDER_PATTERN.fullmatch(value or "") for value in values[:2]), values
    assert values[:2] == [control.value for control in redacted.form_state[:2]]
    assert values[0].startswith("REDACTED-password-")  # type: ignore[union-attr]
    assert values[2:] == ["skillet", "ab1 is fine", "0", None]
    assert redacted.marked_attributes[5].checked is True


def test_capture_time_redaction_carries_secrets_forward() -> None:
    """At capture time a secret found in one step is removed from every later one."""
    redactor = Redactor()
    login = Step(
        index=0,
        trigger="action",
        timestamp=0,
        url="http://x/login",
        title="",
        tabs=[],
        network=[
            _exchange(
                "1",
                RequestInfo(
                    method="POST",
                    url="http://x/login",
                    headers={},
                    post_data=f"password={quote_plus(PASSWORD)}",
                ),
            )
        ],
    )
    later = Step(
        index=1,
        trigger="action",
        action=f"send_msg_to_user({PASSWORD!r})",
        timestamp=1,
        url="http://x/",
        title="",
        tabs=[],
    )
    first, second = redactor.step(login), redactor.step(later)
    placeholder = dict(parse_qsl(first.network[0].request.post_data or ""))["password"]
    assert second.action == f"send_msg_to_user('{placeholder}')"


def test_capture_time_redaction_never_writes_an_unredacted_step(monkeypatch: pytest.MonkeyPatch) -> None:
    session, _ = crafted_session()
    redactor = Redactor()

    def broken(step: Step) -> Step:
        raise RuntimeError(f"bug while looking at {PASSWORD}")

    monkeypatch.setattr(redactor, "step", broken)
    stub = redactor.capture_step(session.steps[1])
    assert stub.index == 1 and stub.tabs == [] and stub.network == [] and stub.action is None
    assert [(f.stage, f.error_type) for f in stub.faults] == [("redact", "RuntimeError")]
    assert PASSWORD not in stub.model_dump_json()


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("password", True),
        ("new_password", True),
        ("passwordConfirmation", True),
        ("apiKey", True),
        ("X-Auth-Token", True),
        ("csrf_token", True),
        ("session_id", True),
        ("client_secret", True),
        ("token_type", False),
        ("password_length", False),
        ("passenger", False),
        ("author", False),
        ("prompt_tokens", False),
        ("shipping", False),
        ("q", False),
        ("", False),
    ],
)
def test_secret_key_names(key: str, secret: bool) -> None:
    assert RedactionPolicy().is_secret_key(key) is secret


def test_cli_redacts_with_extra_token_parameters(
    crafted: tuple[Path, Session, dict[str, str]], tmp_path: Path
) -> None:
    path, _, _ = crafted
    out = tmp_path / "out.session.jsonl.gz"
    result = CliRunner().invoke(cli, ["redact", str(path), "-o", str(out), "--tokens", "q"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {out} (") and "distinct secrets replaced" in result.output
    redacted = load_session(out)
    assert "q=skillet" not in redacted.steps[1].url and "&q=REDACTED-param-" in redacted.steps[1].url
    assert not list(tmp_path.glob("*.partial"))


def test_cli_reports_an_unreadable_session_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["redact", str(tmp_path / "missing.gz"), "-o", str(tmp_path / "o.gz")])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "cannot read" in result.output
    assert not (tmp_path / "o.gz").exists()


def test_a_partial_session_stays_partial(tmp_path: Path) -> None:
    session, _ = crafted_session()
    partial = Session(header=session.header, steps=session.steps, end=None)
    source = write(partial, tmp_path / "p.session.jsonl.gz")
    out = tmp_path / "r.session.jsonl.gz"
    redact_file(source, out)
    redacted = load_session(out)
    assert not redacted.complete and len(redacted.steps) == 2
    assert_no_secret_survives(out, original_secrets(load_session(source)))
