"""Secret redaction: a session file that can be shared, and still loads, replays and scores.

Secrets are found by structure (``RedactionPolicy``): header values, unless the header is on the
safe list (``DEFAULT_SAFE_HEADERS``), ``Cookie``/``Set-Cookie`` values and ``Authorization``
credentials (names and schemes kept); URLs wherever they occur (fields, ``Location``/``Referer``, HTML
attributes, CSS ``url()``): user info, query and fragment parameters named like secrets or whose
values look like tokens, token-like path segments; bodies parsed by type (form, JSON also inside
JSON strings, GraphQL variables and inline arguments, multipart) and web storage values at any depth,
under keys named like secrets; values of password inputs (and inputs named like secrets) in captured
HTML, DOM snapshots, form state and ``marked_attributes``; and a token an HTTP call received in
exchange for credentials (an evaluator's REST login). Token-like words of the task's own config are
the task's, not secrets: the evaluator asks for them.

Two passes, so that nothing survives: the first replaces each secret where it was found and remembers
it; the second replaces every remembered secret, and its URL-, HTML-, JSON-escaped and base64 forms, in every
string of the session (page text, bodies, URLs, storage, evaluator answers, action strings, the task).
Placeholders are ``REDACTED-<kind>-<8 hex>``, a keyed hash of the secret: one secret gets one
placeholder throughout a file. The key is random per ``Redactor`` unless the policy fixes one, so a
placeholder cannot be reversed by hashing guessed passwords, nor linked to the same secret in another
file. Placeholders use only ``[A-Za-z0-9-]``: valid in URLs, headers, cookies, JSON and HTML.

At capture time (``CDPSessionLogger(redact=True)``) the same ``Redactor`` sees one step at a time: a
secret is removed from the step it is recognised in and from every later one; ``cdp-session redact``
on the finished file also cleans the steps before it and the header.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import functools
import hashlib
import html
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

import orjson

from cdp_integration.session.markup import iter_tags, sub_tags
from cdp_integration.session.models import CaptureFault, SessionEnd, SessionHeader, Step
from cdp_integration.session.placeholder import PLACEHOLDER_PATTERN
from cdp_integration.session.store import PARTIAL_SUFFIX, Session, SessionWriter, load_session

__all__ = [
    "DEFAULT_SECRET_HEADERS",
    "DEFAULT_SECRET_KEYS",
    "DEFAULT_TOKEN_PARAMS",
    "PLACEHOLDER_PATTERN",
    "RedactionPolicy",
    "Redactor",
    "redact_file",
    "redact_session",
]

DEFAULT_SECRET_KEYS = (
    "password",
    "passwd",
    "pwd",
    "pass",
    "pw",
    "passphrase",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "otp",
    "pin",
    "csrf",
    "xsrf",
    "session_id",
    "sessionid",
    "sid",
    "jwt",
    "cookie",
)
"""Words that make a form field, JSON key, storage key or input name secret. A key matches when one
of its words is listed (``new_password``, ``apiKey``, ``X-Auth-Token``), unless its last word says it
describes the secret rather than holds it (``token_type``, ``password_length``)."""

DEFAULT_TOKEN_PARAMS = (
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth",
    "auth_token",
    "authorization",
    "key",
    "api_key",
    "apikey",
    "session",
    "session_id",
    "sessionid",
    "sid",
    "jwt",
    "signature",
    "sig",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
)
"""Query parameters whose values are secrets (exact names, any case). In URL fields, parameters whose
name matches ``secret_keys`` count too."""

DEFAULT_SECRET_HEADERS = (
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    r"x-(?:[a-z0-9]+-)*(?:token|key|secret|signature|session)",
)
"""Header names (regular expressions, matched in full against the lower-cased name) whose values are
secrets searched for everywhere else too. Any header outside ``DEFAULT_SAFE_HEADERS`` is replaced."""

DEFAULT_SAFE_HEADERS = (
    "accept",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-allow-origin",
    "access-control-expose-headers",
    "access-control-max-age",
    "access-control-request-headers",
    "access-control-request-method",
    "age",
    "cache-control",
    "connection",
    "content-encoding",
    "content-language",
    "content-length",
    "content-range",
    "content-type",
    "cross-origin-embedder-policy",
    "cross-origin-opener-policy",
    "cross-origin-resource-policy",
    "date",
    "dnt",
    "etag",
    "expires",
    "host",
    "if-modified-since",
    "if-none-match",
    "keep-alive",
    "last-modified",
    "pragma",
    "priority",
    "purpose",
    "range",
    "referrer-policy",
    r"sec-ch-[a-z0-9-]+",
    r"sec-fetch-[a-z]+",
    "server",
    "status",
    "strict-transport-security",
    "te",
    "timing-allow-origin",
    "transfer-encoding",
    "upgrade",
    "upgrade-insecure-requests",
    "user-agent",
    "vary",
    "via",
    "x-content-type-options",
    "x-frame-options",
    "x-requested-with",
    "x-xss-protection",
    ":authority",
    ":method",
    ":scheme",
    ":status",
)
"""Header names (regular expressions, matched in full against the lower-cased name) whose values are
kept: they describe the exchange (types, sizes, caching, the browser) and hold no credential. Every
other header's value is replaced, whatever its name (``PRIVATE-TOKEN``, ``apikey``, ``X-Api-Key``);
``Location``, ``Referer``, ``Origin``, ``Link``, ``Refresh`` and ``:path`` are redacted as URLs."""

_URL_HEADERS = frozenset({"location", "referer", "origin", "content-location", "link", "refresh", ":path"})

_DESCRIPTIVE_LAST_WORDS = frozenset(
    {"type", "name", "length", "count", "expires", "expiry", "url", "uri", "endpoint", "label", "header"}
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_TAG_ATTR = re.compile(r"""([^\s"'<>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'<>`]+))?""")
_USERINFO = re.compile(r"(?P<lead>[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@\"'<>]*:)(?P<value>[^\s/@\"'<>]+)(?=@)")
_FORM_BODY = re.compile(r"[^=&\s]+=[^&\s]*(?:&[^=&\s]+=[^&\s]*)*")
_MULTIPART_FIELD = re.compile(
    r"(?P<head>Content-Disposition:[^\r\n]*\bname=\"(?P<name>[^\"]*)\"[^\r\n]*\r?\n(?:[^\r\n]+\r?\n)*\r?\n)"
    r"(?P<value>.*?)(?=\r?\n--)",
    re.IGNORECASE | re.DOTALL,
)
_TOKEN_ENDPOINT = re.compile(r"(?i)(?<![a-z])(?:token|oauth2?|login|signin|session|auth)(?![a-z])")
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "pw", "passphrase", "pin"})
_SECRET_AUTOCOMPLETE = ("password", "one-time-code")
_NON_TEXT_INPUTS = frozenset({"checkbox", "radio", "submit", "button", "image", "reset", "file"})
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;#])(?P<name>[^=&#\s\"'<>?;]+)=(?P<value>[^&#\s\"'<>;]*)")
_URL_PARTS = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:)?(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)"
    r"(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?",
    re.DOTALL,
)
_WHOLE_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]{0,30}://|/|\?|#)[^\s<>\"']*")
"""A string that is a URL as a whole: absolute, or relative from the root, a query or a fragment."""
_EMBEDDED_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s\"'<>()\\`]{1,8192}")
_URL_ATTRIBUTE = re.compile(
    r"(?i)(?<![\w-])(?P<name>href|src|action|formaction|poster|cite|background|ping|srcset|content|data"
    r"|xlink:href|data-[\w.:-]{1,64})(?P<eq>\s*=\s*)"
    r"(?P<value>\"[^\"]{0,8192}\"|'[^']{0,8192}'|[^\s\"'<>`]{1,8192})"
)
_CSS_URL = re.compile(r"(?i)url\(\s*(?P<quote>[\"']?)(?P<value>[^\"')\s]{1,8192})(?P=quote)\s*\)")
_NOT_URLS = ("data:", "javascript:", "mailto:", "tel:", "blob:", "about:")
_GRAPHQL = re.compile(r"\s*(?:(?:query|mutation|subscription|fragment)\b|\{)")
_GRAPHQL_ARGUMENT = re.compile(
    r"(?P<name>[_A-Za-z][_0-9A-Za-z]*)(?P<colon>\s*:\s*)"
    r"(?P<value>\"(?:[^\"\\\n]|\\.){0,8192}\"|-?[0-9][0-9.eE+-]{0,64})"
)
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_\-.~+/=]{16,}")
_DIGIT_RUN = re.compile(r"[0-9]+")
_WORD_PIECE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{3,}(?![A-Za-z0-9])")
_STRUCTURE_DEPTH = 8
"""How deep values inside values (JSON in a string in a form field in a URL...) are opened."""


def looks_like_token(value: str) -> bool:
    """Whether ``value`` (a URL path segment, a parameter value) looks like a credential rather than a
    name: 16+ characters of a token's alphabet, with digits scattered among letters (several runs),
    or a JWT, and not mostly words (``iphone-14-pro-max-256gb`` is a product, not a token)."""
    if len(value) < 16 or not _TOKEN_TEXT.fullmatch(value) or PLACEHOLDER_PATTERN.search(value):
        return False
    if value.startswith("eyJ"):
        return True
    if not any(char.isalpha() for char in value):
        return False
    words = sum(len(word) for word in _WORD_PIECE.findall(value))
    if words * 2 >= len(value):
        return False
    runs = len(_DIGIT_RUN.findall(value))
    if runs >= 3:
        return True
    switches = sum(1 for a, b in itertools.pairwise(value) if a.islower() and b.isupper())
    return runs >= 1 and switches >= 3 and len(value) >= 20


def _key_words(key: str) -> list[str]:
    return [word for word in _WORD_SPLIT.split(_CAMEL.sub("_", key).lower()) if word]


def _key_kind(key: str) -> str:
    """The placeholder kind of a value stored under ``key``: ``password`` or ``secret``."""
    return "password" if _PASSWORD_WORDS & set(_key_words(key)) else "secret"


@dataclass(frozen=True, kw_only=True)
class RedactionPolicy:
    """What ``Redactor`` treats as secret, and how. The defaults suit WebArena-style sites."""

    secret_keys: tuple[str, ...] = DEFAULT_SECRET_KEYS
    token_params: tuple[str, ...] = DEFAULT_TOKEN_PARAMS
    secret_headers: tuple[str, ...] = DEFAULT_SECRET_HEADERS
    safe_headers: tuple[str, ...] = DEFAULT_SAFE_HEADERS
    min_secret_length: int = 6
    """Secrets shorter than this are replaced where they were found but not searched for elsewhere:
    a one-character cookie value occurs everywhere, and replacing it everywhere would wreck the pages."""
    keep_screenshots: bool = False
    """Screenshots are pixels: a secret shown on the page cannot be removed from them, so by default
    they are dropped (replay and scoring never read them)."""
    hash_key: bytes | None = None
    """Key of the placeholder hash. ``None``: random per ``Redactor``. A fixed key makes placeholders
    comparable across files, and lets whoever holds the key test guesses against them."""

    def with_token_params(self, *names: str) -> RedactionPolicy:
        """This policy, with ``names`` added to the secret query parameters."""
        return dataclasses.replace(self, token_params=(*self.token_params, *names))

    @functools.cached_property
    def _secret_key_pattern(self) -> re.Pattern[str]:
        words = sorted({"_".join(_key_words(key)) for key in self.secret_keys} - {""}, key=len, reverse=True)
        return re.compile(rf"(?<![a-z])(?:{'|'.join(map(re.escape, words)) or '(?!)'})(?![a-z])")

    @functools.cached_property
    def _token_param_names(self) -> frozenset[str]:
        return frozenset(name.lower() for name in self.token_params)

    @functools.cached_property
    def _secret_header_pattern(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{pattern})" for pattern in self.secret_headers) or "(?!)")

    def is_secret_key(self, key: str) -> bool:
        """Whether a field, JSON key, storage key or input named ``key`` holds a secret."""
        words = _key_words(key)
        if not words or words[-1] in _DESCRIPTIVE_LAST_WORDS:
            return False
        return self._secret_key_pattern.search("_".join(words)) is not None

    def is_token_param(self, name: str, *, in_url_field: bool) -> bool:
        """Whether query parameter ``name`` holds a secret (``in_url_field``: also when named like one)."""
        if name.strip().lower() in self._token_param_names:
            return True
        return in_url_field and self.is_secret_key(unquote_plus(name))

    @functools.cached_property
    def _safe_header_pattern(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{pattern})" for pattern in self.safe_headers) or "(?!)")

    def is_secret_header(self, name: str) -> bool:
        return self._secret_header_pattern.fullmatch(name.strip().lower()) is not None

    def is_safe_header(self, name: str) -> bool:
        """Whether a header's value is kept (it is on ``safe_headers`` and not a secret header)."""
        lowered = name.strip().lower()
        return self._safe_header_pattern.fullmatch(lowered) is not None and not self.is_secret_header(lowered)


Json = Any
StringMap = Callable[[str], str]


class Redactor:
    """Replaces secrets by placeholders and remembers them, so a whole file stays consistent.

    ``session()`` redacts a loaded session in two passes; ``step()`` / ``end()`` redact one record
    with what is known so far (capture time).
    """

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        self.policy = policy or RedactionPolicy()
        self._key = self.policy.hash_key if self.policy.hash_key is not None else os.urandom(32)
        self._placeholders: dict[str, str] = {}
        """secret -> placeholder, every secret seen."""
        self._forms: dict[str, str] = {}
        """secret and its escaped forms -> placeholder, for the secrets searched for everywhere."""
        self._pattern: re.Pattern[str] | None = None
        self._bytes_pattern: re.Pattern[bytes] | None = None
        self._password_fields: set[str] = set()
        """Names of ``type=password`` inputs seen in the session's pages: whatever they are called
        (``p``, ``login[secret]``), a post-data field of that name holds a password."""
        self._shared: dict[tuple[int, str], tuple[Json, Json]] | None = None
        """While ``session()`` runs: a value steps share (a page, a DOM snapshot) -> its redacted
        form, keyed by the value's id (or, for a long string, the string) and the pass; the value is
        kept so the id stays its own. Shared blobs stay shared: one redacted copy, not one per step."""
        self._shared_ids: set[int] = set()
        self._learned: set[str] = set()
        """The secrets searched for everywhere (their escaped forms are in ``_forms``)."""
        self._public: set[str] = set()
        """Token-like words of the task (its config, its start URL): the evaluator asks for them, so
        they are the task's, not secrets (a commit hash a reference URL names)."""

    @property
    def secret_count(self) -> int:
        """How many distinct secrets were replaced so far."""
        return len(self._placeholders)

    # -- records -------------------------------------------------------------------------------

    def session(self, session: Session) -> Session:
        """A copy of ``session`` with every secret replaced (``path`` is ``None``: not a file yet)."""
        self._shared, self._shared_ids = {}, set()
        try:
            return self._session(session)
        finally:
            self._shared, self._shared_ids = None, set()

    def _session(self, session: Session) -> Session:
        header = session.header.model_dump(mode="json")
        header["options"] = {**header.get("options", {}), "redacted": True}
        for task in (session.header.task, session.end.task if session.end else {}):
            self._public.update(_TOKEN_TEXT.findall(orjson.dumps(task, default=str).decode()))
        steps = [_dump_sharing(step) for step in session.steps]
        end = session.end.model_dump(mode="json", by_alias=True) if session.end else None
        for record in (header, end):
            for name in ("task", "options"):
                if record is not None and isinstance(record.get(name), dict):
                    record[name] = self._json(record[name], [])
        header = self._scan_all(header)
        for record in [*steps, *([end] if end is not None else [])]:
            self._learn_password_fields(record)
        steps = [self._find_in_step(record) for record in steps]
        end = self._find_in_end(end) if end is not None else None
        return Session(
            header=SessionHeader.model_validate(self._replace_known(header)),
            steps=tuple(Step.model_validate(self._replace_known(record)) for record in steps),
            end=SessionEnd.model_validate(self._replace_known(end)) if end is not None else None,
            path=None,
            complete=session.complete,
            blob_count=session.blob_count,
        )

    def step(self, step: Step) -> Step:
        """``step`` redacted with the secrets found in it and in the records redacted before."""
        record = self._find_in_step(step.model_dump(mode="json", by_alias=True))
        return Step.model_validate(self._replace_known(record))

    def end(self, end: SessionEnd) -> SessionEnd:
        record = self._find_in_end(end.model_dump(mode="json", by_alias=True))
        return SessionEnd.model_validate(self._replace_known(record))

    def capture_step(self, step: Step) -> Step:
        """``step()`` for the logger, which must never raise: if redaction fails, only a stub of the
        step is kept (never the unredacted one), with the failure as a fault."""
        try:
            return self.step(step)
        except Exception as exc:
            return Step(
                index=step.index,
                trigger=step.trigger,
                timestamp=step.timestamp,
                url="",
                title="",
                tabs=[],
                reward=step.reward,
                faults=[_redaction_fault(exc)],
            )

    def capture_end(self, end: SessionEnd) -> SessionEnd:
        """``end()`` for the logger: never raises; on failure keeps only what holds no secret."""
        try:
            return self.end(end)
        except Exception as exc:
            return SessionEnd(
                ended=end.ended,
                instance_id=end.instance_id,
                rewards=end.rewards,
                faults=[_redaction_fault(exc)],
            )

    # -- pass 1: find secrets where they are expected, replace them there ------------------------

    def _scan_all(self, record: dict[str, Json]) -> dict[str, Json]:
        """``record`` with token parameters and URL passwords replaced in every string."""
        result: dict[str, Json] = self._map_strings(record, self._scan_text)
        return result

    def _find_in_step(self, record: dict[str, Json]) -> dict[str, Json]:
        """Secrets in their known places (changed in ``record``), then token parameters anywhere."""
        self._learn_password_fields(record)
        for cookie in record.get("cookies") or ():
            if cookie.get("value"):
                cookie["value"] = self._secret(cookie["value"], "cookie")
        self._storage(record.get("local_storage"))
        for tab in record.get("tabs") or ():
            self._tab(tab)
        for exchange in record.get("network") or ():
            self._exchange(exchange)
        if record.get("evaluation"):
            self._evaluation(record["evaluation"])
        return self._scan_all(record)

    def _find_in_end(self, record: dict[str, Json]) -> dict[str, Json]:
        for exchange in record.get("network") or ():
            self._exchange(exchange)
        if record.get("probe"):
            self._evaluation(record["probe"])
        return self._scan_all(record)

    def _learn_password_fields(self, record: dict[str, Json]) -> None:
        """Remember the names of password inputs in ``record``'s pages (HTML and DOM snapshots)."""
        tabs = list(record.get("tabs") or ())
        for name in ("evaluation", "probe"):
            evaluation = record.get(name)
            if isinstance(evaluation, dict):
                tabs += list(evaluation.get("pages") or ())
        for tab in tabs:
            if not isinstance(tab, dict):
                continue
            markup = tab.get("html")
            if isinstance(markup, str) and "<input" in markup.lower():
                for start, end in iter_tags(markup, "input"):
                    found = {m[1].lower(): m[2] for m in _TAG_ATTR.finditer(markup[start:end], len("<input"))}
                    attributes = {key: html.unescape(_unquoted(value or "")) for key, value in found.items()}
                    if attributes.get("type", "").strip().lower() == "password" and attributes.get("name"):
                        self._password_fields.add(attributes["name"])
            snapshot = tab.get("dom_snapshot")
            if isinstance(snapshot, dict):
                self._password_fields.update(_snapshot_password_names(snapshot))
            for control in [*(tab.get("form_state") or ()), *(tab.get("marked_attributes") or ())]:
                if isinstance(control, dict) and control.get("type") == "password" and control.get("name"):
                    self._password_fields.add(str(control["name"]))

    def _field_kind(self, name: str) -> str:
        return "password" if name in self._password_fields else _key_kind(name)

    def _is_secret_field(self, name: str) -> bool:
        """Whether a post-data field (form, multipart, JSON key) named ``name`` holds a secret."""
        return name in self._password_fields or self.policy.is_secret_key(name)

    def _once(self, value: Json, tag: str, convert: Callable[[Json], Json]) -> Json:
        """``convert(value)``, computed once per shared value while ``session()`` runs."""
        if self._shared is None:
            return convert(value)
        key = (value, tag) if isinstance(value, str) else (id(value), tag)
        if key not in self._shared:  # type: ignore[comparison-overlap]
            self._shared[key] = (value, convert(value))  # type: ignore[index]
        return self._shared[key][1]  # type: ignore[index]

    def _tab(self, tab: dict[str, Json]) -> None:
        tab["url"] = self._scan_url(tab["url"])
        if tab.get("html"):
            tab["html"] = self._once(tab["html"], "inputs", self._html_inputs)  # type: ignore[arg-type]
        if isinstance(tab.get("dom_snapshot"), dict):
            tab["dom_snapshot"] = self._once(tab["dom_snapshot"], "snapshot", self._redacted_snapshot)
            self._shared_ids.add(id(tab["dom_snapshot"]))
        if isinstance(tab.get("ax_tree"), dict):
            tab["ax_tree"] = self._once(tab["ax_tree"], "json", lambda tree: self._json(tree, []))
            self._shared_ids.add(id(tab["ax_tree"]))
        for frame in tab.get("frames") or ():
            frame["url"] = self._scan_url(frame["url"])
            if frame.get("html"):
                frame["html"] = self._once(frame["html"], "inputs", self._html_inputs)
        self._form_state(tab.get("form_state"))
        self._marked_attributes(tab.get("marked_attributes"))
        self._storage(tab.get("session_storage"))
        if not self.policy.keep_screenshots:
            tab["screenshot_png"] = tab["thumbnail_webp"] = None

    def _exchange(self, exchange: dict[str, Json]) -> None:
        request, response = exchange["request"], exchange.get("response")
        request["url"] = self._scan_url(request["url"])
        request["headers"] = self._headers(request["headers"])
        sent_credentials = False
        if request.get("post_data") is not None:
            content_type = _header(request["headers"], "content-type")
            if request.get("post_data_base64"):
                text = _b64_text(request["post_data"])
                if text is not None:
                    redacted, sent_credentials = self._body(text, content_type)
                    request["post_data"] = base64.b64encode(redacted.encode()).decode()
            else:
                request["post_data"], sent_credentials = self._body(request["post_data"], content_type)
        if response is None:
            return
        response["headers"] = self._headers(response["headers"])
        if response.get("redirect_url"):
            response["redirect_url"] = self._scan_url(response["redirect_url"])
        body = response.get("body")
        if body is None or response.get("body_base64"):
            return
        mime = response.get("mime_type") or _header(response["headers"], "content-type")
        response["body"] = self._token_answer(body, sent_credentials or _is_token_url(request["url"]))
        response["body"], _ = self._body(response["body"], mime)

    def _evaluation(self, evaluation: dict[str, Json]) -> None:
        for page in evaluation.get("pages") or ():
            self._tab(page)
        for call in evaluation.get("calls") or ():
            call["url"] = self._scan_url(call["url"])
            if call.get("op") == "goto" and isinstance(call.get("arg"), str):
                call["arg"] = self._scan_url(call["arg"])
            if call.get("op") == "content" and isinstance(call.get("result"), str):
                call["result"] = self._html_inputs(call["result"])
            elif isinstance(call.get("result"), dict | list):
                call["result"] = self._json(call["result"], [])
        for call in evaluation.get("http") or ():
            call["url"] = self._scan_url(call["url"])
            sent_credentials = False
            if call.get("request_body") is not None:
                call["request_body"], sent_credentials = self._body(call["request_body"], "")
            call["response_headers"] = self._headers(call.get("response_headers") or {})
            if call.get("response_body") is not None:
                answer = self._token_answer(
                    call["response_body"], sent_credentials or _is_token_url(call["url"])
                )
                call["response_body"], _ = self._body(
                    answer, _header(call["response_headers"], "content-type")
                )

    def _storage(self, origins: Json) -> None:
        """``{origin: {key: value}}``: values under secret keys, and secret keys inside JSON values."""
        if not isinstance(origins, dict):
            return
        for items in origins.values():
            if not isinstance(items, dict):
                continue
            for key, value in items.items():
                if not isinstance(value, str) or not value:
                    continue
                if self.policy.is_secret_key(key):
                    items[key] = self._secret(value, _key_kind(key))
                else:
                    items[key] = self._structured(value, 0)

    def _headers(self, headers: dict[str, str]) -> dict[str, str]:
        out = {}
        for name, value in headers.items():
            lowered = name.strip().lower()
            if not value or PLACEHOLDER_PATTERN.fullmatch(value):
                out[name] = value
            elif lowered in _URL_HEADERS:
                out[name] = self._scan_url(value)
            elif lowered == "cookie":
                out[name] = re.sub(
                    r"(?P<lead>(?:^|;)\s*[^=;\s]+=)(?P<value>[^;]*)",
                    lambda m: m["lead"] + (self._secret(m["value"], "cookie") if m["value"].strip() else ""),
                    value,
                )
            elif lowered == "set-cookie":
                out[name] = "\n".join(
                    re.sub(
                        r"^(?P<lead>\s*[^=;]+=)(?P<value>[^;]*)",
                        lambda m: (
                            m["lead"] + (self._secret(m["value"], "cookie") if m["value"].strip() else "")
                        ),
                        line,
                    )
                    for line in value.split("\n")
                )
            elif lowered in ("authorization", "proxy-authorization"):
                out[name] = self._credentials(value)
            elif self.policy.is_safe_header(lowered):
                out[name] = value
            else:  # any other header may carry a credential, whatever it is called
                learn = self.policy.is_secret_header(lowered) or any(
                    looks_like_token(word) for word in _TOKEN_TEXT.findall(value)
                )
                out[name] = self._secret(value, "header", learn=learn)
        return out

    def _credentials(self, value: str) -> str:
        """``Scheme credentials``: the scheme stays (replay may look at it); Basic's password is learnt too."""
        scheme, space, credentials = value.strip().partition(" ")
        if not space or not credentials.strip():
            return self._secret(value, "auth")
        if scheme.lower() == "basic":
            decoded = _b64_text(credentials.strip())
            if decoded is not None and ":" in decoded:
                self._secret(decoded, "auth")
                self._secret(decoded.partition(":")[2], "password")
        return f"{scheme} {self._secret(credentials.strip(), 'auth')}"

    def _body(self, text: str, content_type: str) -> tuple[str, bool]:
        """A body parsed by its type: JSON (recursively, JSON inside strings too), GraphQL, a form,
        multipart; also says whether it held fields named like secrets (credentials were sent)."""
        stripped = text.strip()
        found: list[bool] = []
        if "html" in content_type or stripped.startswith("<"):
            return self._html_inputs(text), False
        if "multipart/form-data" in content_type:

            def field(match: re.Match[str]) -> str:
                value = match["value"]
                if not value:
                    return match[0]
                if self._is_secret_field(match["name"]):
                    found.append(True)
                    return match["head"] + self._secret(value, self._field_kind(match["name"]))
                return match["head"] + self._structured(value, 1, found)

            return _MULTIPART_FIELD.sub(field, text), bool(found)
        if not stripped.startswith(("{", "[")) and ("graphql" in content_type or _GRAPHQL.match(stripped)):
            return self._graphql(text, found), bool(found)
        if "json" in content_type or stripped[:1] in ("{", "[", '"'):
            redacted = self._structured(text, 0, found)
            if redacted != text or stripped[:1] in ("{", "["):
                return redacted, bool(found)
        if "x-www-form-urlencoded" in content_type or _FORM_BODY.fullmatch(stripped):
            return self._form(text, found), bool(found)
        if "://" in text or "=" in text:
            return self._scan_text(text), False
        return text, False

    def _json(self, value: Json, found: list[bool], depth: int = 0) -> Json:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if self._is_secret_field(key) and _has_leaf(item):
                    found.append(True)
                    out[key] = self._json_leaves(item, self._field_kind(key))
                else:
                    out[key] = self._json(item, found, depth)
            return out
        if isinstance(value, list):
            if all(not isinstance(item, str | list | dict) for item in value):
                return value
            return [self._json(item, found, depth) for item in value]
        if isinstance(value, str):
            return self._structured(value, depth + 1, found)
        return value

    def _json_leaves(self, value: Json, kind: str) -> Json:
        if isinstance(value, dict):
            return {key: self._json_leaves(item, kind) for key, item in value.items()}
        if isinstance(value, list):
            return [self._json_leaves(item, kind) for item in value]
        if isinstance(value, str) and value:
            return self._secret(value, kind)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._secret(str(value), kind)
        return value

    def _token_answer(self, body: str, after_credentials: bool) -> str:
        """A JSON string answered to a credentials exchange (Magento's admin token) is a token."""
        if not after_credentials:
            return body
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        if isinstance(value, str) and value.strip():
            return _dump_json(self._secret(value, "token"), (",", ":"))
        return body

    def _secret_input(self, attributes: dict[str, str]) -> bool:
        """Whether an ``<input>`` holds a secret: a password field, or one named like a secret."""
        kind = attributes.get("type", "").strip().lower()
        autocomplete = attributes.get("autocomplete", "").lower()
        if kind == "password" or any(word in autocomplete for word in _SECRET_AUTOCOMPLETE):
            return True
        named = attributes.get("name") or attributes.get("id") or ""
        return kind not in _NON_TEXT_INPUTS and self.policy.is_secret_key(named)

    def _html_inputs(self, text: str) -> str:
        """The ``value`` attribute of secret inputs in HTML (typed values are not attributes; a
        server-filled one is)."""

        def tag(source: str) -> str:
            found = {m[1].lower(): m for m in _TAG_ATTR.finditer(source, len("<input"))}
            attributes = {name: html.unescape(_unquoted(m[2] or "")) for name, m in found.items()}
            value = found.get("value")
            if value is None or not attributes["value"] or not self._secret_input(attributes):
                return source
            placeholder = self._secret(attributes["value"], "password")
            quote_char = value[2][0] if value[2][0] in "\"'" else '"'
            return (
                f"{source[: value.start()]}{value[1]}={quote_char}{placeholder}{quote_char}"
                f"{source[value.end() :]}"
            )

        return sub_tags(text, "input", tag) if "<input" in text.lower() else text

    def _form_state(self, controls: Json) -> None:
        """Typed values of secret inputs (``FormControlState`` records): a password typed in, a field
        named like a secret; the value is also searched for everywhere else."""
        for control in controls if isinstance(controls, list) else ():
            self._typed_value(control)

    def _marked_attributes(self, marks: Json) -> None:
        """The ``value`` attributes BrowserGym's marking wrote (``MarkedAttributes`` records): it copies
        what was typed, a password too, so they are secrets exactly where the form state's are."""
        for mark in marks if isinstance(marks, list) else ():
            self._typed_value(mark)

    def _typed_value(self, control: Json) -> None:
        """``control["value"]`` as a placeholder if it is what a secret input or a textarea named like
        a secret holds (``type``, ``name``, ``id``, ``autocomplete`` and ``tag`` say which)."""
        if not isinstance(control, dict) or not isinstance(control.get("value"), str) or not control["value"]:
            return
        attributes = {name: str(control.get(name) or "") for name in ("type", "name", "id", "autocomplete")}
        if control.get("tag") == "input" and self._secret_input(attributes):
            control["value"] = self._secret(control["value"], "password")
        elif control.get("tag") == "textarea" and self.policy.is_secret_key(
            attributes["name"] or attributes["id"]
        ):
            control["value"] = self._secret(
                control["value"], _key_kind(attributes["name"] or attributes["id"])
            )

    def _redacted_snapshot(self, snapshot: Json) -> Json:
        """A redacted copy of ``snapshot`` (a shared snapshot is never changed in place)."""
        copied = copy.deepcopy(snapshot) if self._shared is not None else snapshot
        self._dom_snapshot(copied)  # type: ignore[arg-type]
        return self._json(copied, [])

    def _dom_snapshot(self, snapshot: dict[str, Json]) -> None:
        """``DOMSnapshot.captureSnapshot``: secret inputs' ``value`` attributes and ``inputValue``.

        Nodes point into one shared string table; a secret's pointer is moved to an appended
        placeholder, so other nodes with the same text keep theirs (the second pass still replaces a
        secret long enough to be searched for everywhere).
        """
        strings = snapshot.get("strings")
        if not isinstance(strings, list):
            return

        def text(index: Json) -> str:
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(strings):
                value = strings[index]
                return value if isinstance(value, str) else ""
            return ""

        appended: dict[str, int] = {}

        def redacted(index: Json) -> Json:
            if not text(index):
                return index
            placeholder = self._secret(text(index), "password")
            if placeholder not in appended:
                appended[placeholder] = len(strings)
                strings.append(placeholder)
            return appended[placeholder]

        for document in snapshot.get("documents") or ():
            nodes = document.get("nodes") if isinstance(document, dict) else None
            if not isinstance(nodes, dict):
                continue
            names = nodes.get("nodeName") or []
            secret_nodes = set()
            for node, pairs in enumerate(nodes.get("attributes") or []):
                if node >= len(names) or text(names[node]).upper() != "INPUT" or not isinstance(pairs, list):
                    continue
                positions = {text(pairs[i]).lower(): i + 1 for i in range(0, len(pairs) - 1, 2)}
                if self._secret_input({name: text(pairs[at]) for name, at in positions.items()}):
                    secret_nodes.add(node)
                    if "value" in positions:
                        pairs[positions["value"]] = redacted(pairs[positions["value"]])
            input_values = nodes.get("inputValue")
            if secret_nodes and isinstance(input_values, dict):
                indexes, values = input_values.get("index") or [], input_values.get("value") or []
                for position, node in enumerate(indexes):
                    if node in secret_nodes and position < len(values):
                        values[position] = redacted(values[position])

    def _scan_url(self, url: str) -> str:
        """A URL field (see ``_url``); a field that holds no URL gets ``_scan_text``."""
        return self._url(url) if _WHOLE_URL.fullmatch(url) else self._scan_text(url)

    def _scan_text(self, text: str, *, in_url_field: bool = True) -> str:
        """Any string: a URL as a whole (``_url``); otherwise ``?token=...``/``#token=...``-style
        parameters, ``scheme://user:password@`` passwords, the URLs in it (absolute ones, HTML's
        ``href``/``src``/``action``/``data-*``/... attributes, CSS ``url()``)."""
        if not text:
            return text
        if _WHOLE_URL.fullmatch(text) and len(text) <= 65536:
            return self._url(text)
        if "://" in text:
            text = _EMBEDDED_URL.sub(lambda m: self._url(m[0]), text)
        if "=" in text and "<" in text:
            text = _URL_ATTRIBUTE.sub(self._url_attribute, text)
        if "url(" in text.lower():
            text = _CSS_URL.sub(lambda m: f"url({m['quote']}{self._url(m['value'])}{m['quote']})", text)
        if "=" in text:

            def param(match: re.Match[str]) -> str:
                value = match["value"]
                if (
                    not value
                    or PLACEHOLDER_PATTERN.fullmatch(value)
                    or not self.policy.is_token_param(match["name"], in_url_field=in_url_field)
                ):
                    return match[0]
                return f"{match['lead']}{match['name']}={self._secret(unquote_plus(value), 'param')}"

            text = _QUERY_PARAM.sub(param, text)
        if "@" in text:
            text = _USERINFO.sub(
                lambda m: (
                    m["lead"]
                    + (
                        m["value"]
                        if PLACEHOLDER_PATTERN.fullmatch(m["value"])
                        else self._secret(unquote(m["value"]), "url")
                    )
                ),
                text,
            )
        return text

    def _url(self, url: str, depth: int = 0) -> str:
        """A URL by its structure: the user info's credentials, query and fragment parameters named
        like secrets or whose values look like tokens (values holding a URL, JSON or a form are
        opened), path segments that look like tokens. Other parts stay as they were."""
        if url.lower().startswith(_NOT_URLS) or PLACEHOLDER_PATTERN.fullmatch(url):
            return url
        parts = _URL_PARTS.fullmatch(url)
        if parts is None:  # pragma: no cover - the pattern matches any string
            return url
        out = parts["scheme"] or ""
        if parts["authority"] is not None:
            user_info, at, host = parts["authority"].rpartition("@")
            if at:
                user_info = ":".join(self._word(part, "url", always=True) for part in user_info.split(":"))
            out += f"//{user_info}{at}{host}"
        out += "/".join(self._word(segment, "path") for segment in parts["path"].split("/"))
        if parts["query"] is not None:
            out += "?" + self._params(parts["query"], depth)
        if parts["fragment"] is not None:
            fragment = parts["fragment"]
            route, question, query = fragment.partition("?")
            if question:
                fragment = "/".join(self._word(s, "path") for s in route.split("/")) + "?"
                fragment += self._params(query, depth)
            elif "=" in fragment:
                fragment = self._params(fragment, depth)
            else:
                fragment = "/".join(self._word(s, "path") for s in fragment.split("/"))
            out += "#" + fragment
        return out

    def _word(self, raw: str, kind: str, *, always: bool = False) -> str:
        """A URL component (percent-encoded): its placeholder if it is a secret (``always``) or looks
        like a token, else as it was."""
        if not raw or PLACEHOLDER_PATTERN.search(raw):
            return raw
        value = unquote(raw)
        if always or (looks_like_token(value) and value not in self._public):
            return self._secret(value, kind)
        return raw

    def _params(self, query: str, depth: int) -> str:
        """``a=1&token=...;b=2``: each value named like a secret, or looking like a token, replaced;
        a value holding a URL, JSON or a form is redacted inside."""
        pieces = re.split(r"([&;])", query)
        for index in range(0, len(pieces), 2):
            name, equals, raw = pieces[index].partition("=")
            if not equals:
                pieces[index] = self._word(name, "param")
                continue
            if not raw or PLACEHOLDER_PATTERN.fullmatch(raw):
                continue
            value = unquote_plus(raw)
            if self.policy.is_token_param(name, in_url_field=True) or (
                looks_like_token(value) and value not in self._public
            ):
                pieces[index] = f"{name}={self._secret(value, 'param')}"
                continue
            inner = self._structured(value, depth + 1)
            if inner != value:
                pieces[index] = f"{name}={quote(inner, safe='/:@!$()*,')}"
        return "".join(pieces)

    def _url_attribute(self, match: re.Match[str]) -> str:
        """An HTML attribute that holds a URL (or, ``data-*``, anything): redacted as one."""
        raw = match["value"]
        quote_char = raw[0] if raw[0] in "\"'" else ""
        value = html.unescape(_unquoted(raw))
        name = match["name"].lower()
        if name == "srcset":
            redacted = ",".join(
                " ".join([self._url(item.strip().split(" ")[0]), *item.strip().split(" ")[1:]])
                for item in value.split(",")
            )
        elif name == "content" or name.startswith("data-"):
            redacted = self._structured(value, 0)
            if redacted == value:
                redacted = self._scan_text(value) if not _WHOLE_URL.fullmatch(value) else value
        else:
            redacted = self._url(value)
        if redacted == value:
            return match[0]
        escaped = html.escape(redacted, quote=True)
        return f"{match['name']}{match['eq']}{quote_char or '"'}{escaped}{quote_char or '"'}"

    def _structured(self, text: str, depth: int, found: list[bool] | None = None) -> str:
        """A value that may hold others: JSON (opened recursively), GraphQL, a URL, a form."""
        if depth > _STRUCTURE_DEPTH or not text or PLACEHOLDER_PATTERN.fullmatch(text):
            return text
        found = [] if found is None else found
        stripped = text.strip()
        if stripped[:1] in ("{", "[", '"'):
            try:
                value = orjson.loads(stripped)
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict | list):
                redacted = self._json(value, found, depth + 1)
                if redacted == value:
                    return text
                separators = (", ", ": ") if '": ' in text or ", " in text else (",", ":")
                return _dump_json(redacted, separators)
            if isinstance(value, str):
                inner = self._structured(value, depth + 1, found)
                return text if inner == value else _dump_json(inner, (",", ":"))
        if _GRAPHQL.match(stripped):
            return self._graphql(text, found)
        if _WHOLE_URL.fullmatch(stripped) or _EMBEDDED_URL.fullmatch(stripped):
            return self._url(text, depth)
        if "=" in stripped and _FORM_BODY.fullmatch(stripped):
            return self._form(text, found, depth)
        return text

    def _graphql(self, text: str, found: list[bool]) -> str:
        """Inline arguments of a GraphQL document: those named like secrets, and string values that
        look like tokens (variables are JSON, redacted as JSON)."""

        def argument(match: re.Match[str]) -> str:
            raw = match["value"]
            value = orjson.loads(raw) if raw.startswith('"') else raw
            if not isinstance(value, str) or not value or PLACEHOLDER_PATTERN.fullmatch(value):
                return match[0]
            if self._is_secret_field(match["name"]):
                found.append(True)
            elif not (looks_like_token(value) and value not in self._public):
                return match[0]
            placeholder = self._secret(value, self._field_kind(match["name"]))
            return f"{match['name']}{match['colon']}" + (
                f'"{placeholder}"' if raw.startswith('"') else placeholder
            )

        try:
            return _GRAPHQL_ARGUMENT.sub(argument, text)
        except orjson.JSONDecodeError:  # an escape JSON does not know: leave the document as it is
            return text

    def _form(self, text: str, found: list[bool], depth: int = 0) -> str:
        pairs = []
        for pair in text.split("&"):
            name, equals, raw = pair.partition("=")
            if equals and raw and not PLACEHOLDER_PATTERN.fullmatch(raw):
                field, value = unquote_plus(name), unquote_plus(raw)
                if self._is_secret_field(field):
                    found.append(True)
                    pair = f"{name}={self._secret(value, self._field_kind(field))}"
                elif looks_like_token(value) and value not in self._public:
                    pair = f"{name}={self._secret(value, 'param')}"
                else:
                    inner = self._structured(value, depth + 1, found)
                    if inner != value:
                        pair = f"{name}={quote_plus(inner, safe='/:@!$()*,')}"
            pairs.append(pair)
        return "&".join(pairs)

    # -- pass 2: every known secret, everywhere --------------------------------------------------

    def _secret(self, value: str, kind: str, *, learn: bool = True) -> str:
        """The placeholder of ``value``, remembering it (and, if ``learn``, its escaped forms, to be
        replaced everywhere) the first time."""
        if PLACEHOLDER_PATTERN.fullmatch(value):
            return value
        placeholder = self._placeholders.get(value)
        if placeholder is None:
            digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), key=self._key, digest_size=4)
            placeholder = f"REDACTED-{kind}-{digest.hexdigest()}"
            self._placeholders[value] = placeholder
        if learn and value not in self._learned and len(value) >= self.policy.min_secret_length:
            self._learned.add(value)
            for form in _escaped_forms(value):
                self._forms.setdefault(form, placeholder)
            self._pattern = self._bytes_pattern = None
        return placeholder

    def _known(self) -> re.Pattern[str] | None:
        if self._pattern is None and self._forms:
            self._pattern = re.compile(f"({PLACEHOLDER_PATTERN.pattern})|" + _trie_pattern(list(self._forms)))
        return self._pattern

    def _known_bytes(self) -> re.Pattern[bytes] | None:
        if self._bytes_pattern is None and self._forms:
            forms = [form.encode("utf-8", "surrogatepass").decode("latin-1") for form in self._forms]
            self._bytes_pattern = re.compile(_trie_pattern(forms).encode("latin-1"))
        return self._bytes_pattern

    def _replace_known(self, record: dict[str, Json]) -> dict[str, Json]:
        pattern = self._known()
        if pattern is None:
            return record
        forms = self._forms

        def replace(text: str) -> str:
            if not pattern.search(text):
                return text
            return pattern.sub(lambda m: m[1] or forms[m[0]], text)

        result: dict[str, Json] = self._map_strings(record, replace, self._replace_in_base64)
        return result

    def _replace_in_base64(self, text: str) -> str:
        pattern = self._known_bytes()
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return text
        if pattern is None or not pattern.search(data):
            return text
        forms = {form.encode("utf-8", "surrogatepass"): p.encode() for form, p in self._forms.items()}
        return base64.b64encode(pattern.sub(lambda m: forms[m[0]], data)).decode()

    def _map_strings(self, value: Json, convert: StringMap, base64_convert: StringMap | None = None) -> Json:
        """``value`` with ``convert`` applied to every string (dict keys too); base64 data is decoded
        for ``base64_convert`` instead (or left alone). A value steps share is converted once."""
        if self._shared is not None and (
            (isinstance(value, str) and len(value) >= _SHARED_STRING) or id(value) in self._shared_ids
        ):
            tag = f"map:{getattr(convert, '__qualname__', '')}"  # pass 2's closure is made per record
            return self._once(value, tag, lambda item: self._map_items(item, convert, base64_convert))
        return self._map_items(value, convert, base64_convert)

    def _map_items(self, value: Json, convert: StringMap, base64_convert: StringMap | None = None) -> Json:
        if isinstance(value, str):
            return convert(value)
        if isinstance(value, list):
            if all(not isinstance(item, str | list | dict) for item in value):
                return value
            return [self._map_strings(item, convert, base64_convert) for item in value]
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if isinstance(item, str) and _is_base64_field(value, key):
                    out[convert(key)] = base64_convert(item) if base64_convert else item
                else:
                    out[convert(key)] = self._map_strings(item, convert, base64_convert)
            return out
        return value


_SHARED_STRING = 64 * 1024
"""Strings at least this long are converted once per distinct value while a session is redacted."""


def _dump_sharing(step: Step) -> dict[str, Json]:
    """``step`` as JSON data, its tabs' DOM snapshots and AX trees left the very objects the session
    holds (``model_dump`` would copy a snapshot that every step shares once per step)."""
    record: dict[str, Json] = step.model_dump(
        mode="json", by_alias=True, exclude={"tabs": {"__all__": {"dom_snapshot", "ax_tree"}}}
    )
    for tab, dumped in zip(step.tabs, record["tabs"], strict=True):  # type: ignore[arg-type]
        dumped["dom_snapshot"] = tab.dom_snapshot  # type: ignore[index]
        dumped["ax_tree"] = tab.ax_tree  # type: ignore[index]
    return record


def _snapshot_password_names(snapshot: dict[str, Json]) -> set[str]:
    """Names of ``type=password`` inputs in a ``DOMSnapshot.captureSnapshot`` result."""
    strings = snapshot.get("strings")
    if not isinstance(strings, list):
        return set()

    def text(index: Json) -> str:
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(strings):
            value = strings[index]
            return value if isinstance(value, str) else ""
        return ""

    names: set[str] = set()
    for document in snapshot.get("documents") or ():
        nodes = document.get("nodes") if isinstance(document, dict) else None
        if not isinstance(nodes, dict):
            continue
        node_names = nodes.get("nodeName") or []
        for node, pairs in enumerate(nodes.get("attributes") or []):
            if (
                node >= len(node_names)
                or text(node_names[node]).upper() != "INPUT"
                or not isinstance(pairs, list)
            ):
                continue
            attributes = {text(pairs[i]).lower(): text(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)}
            if attributes.get("type", "").strip().lower() == "password" and attributes.get("name"):
                names.add(attributes["name"])
    return names


def _is_base64_field(record: dict[str, Json], key: str) -> bool:
    return (
        key in ("screenshot_png", "thumbnail_webp")
        or (key == "body" and record.get("body_base64") is True)
        or (key == "post_data" and record.get("post_data_base64") is True)
    )


_TRIE_NESTING = 120
"""Nested groups of the secrets' pattern at most (Python's regex parser recurses per group)."""


def _trie_pattern(words: list[str]) -> str:
    """A regex matching any of ``words`` (the longest one where several match), shaped as their
    prefix tree: at each position the regex tries one branch per distinct next character, not one
    per secret, so scanning a text costs the same with ten secrets or ten thousand (linear in the
    text). Deeper than ``_TRIE_NESTING`` branchings, the rest is a plain longest-first alternation."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True

    def suffixes(node: dict[str, Any], prefix: str, out: list[str]) -> None:
        stack = [(node, prefix)]
        while stack:
            current, text = stack.pop()
            for char, child in current.items():
                if char == "":
                    out.append(text)
                else:
                    stack.append((child, text + char))

    def emit(node: dict[str, Any], depth: int) -> str:
        if depth > _TRIE_NESTING:
            rest: list[str] = []
            suffixes(node, "", rest)
            return "(?:" + "|".join(re.escape(w) for w in sorted(rest, key=len, reverse=True)) + ")"
        branches = []
        for char in sorted(key for key in node if key):
            text, child = char, node[char]
            while len(child) == 1 and "" not in child:
                ((next_char, child),) = child.items()
                text += next_char
            inner = "" if set(child) == {""} else emit(child, depth + 1)
            branches.append(re.escape(text) + inner)
        if "" in node:
            branches.append("")
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return emit(root, 0)


def _escaped_forms(value: str) -> Iterable[str]:
    """The ways a secret is spelled inside other strings: raw, URL-encoded, HTML- and JSON-escaped,
    and base64 (standard and URL-safe) at each of the three alignments inside a longer encoding."""
    json_escaped = orjson.dumps(value).decode()[1:-1]
    forms = {
        value,
        quote(value, safe=""),
        quote_plus(value, safe=""),
        quote(value, safe="/:@!$&'()*+,;="),
        html.escape(value, quote=True),
        html.escape(value, quote=False),
        json_escaped,
        json_escaped.replace("/", "\\/"),
        json.dumps(value)[1:-1],
        *_base64_cores(value.encode("utf-8", "surrogatepass")),
    }
    return sorted(form for form in forms if form)


def _base64_cores(data: bytes) -> Iterable[str]:
    """The part of ``base64(prefix + data + suffix)`` that depends on ``data`` alone, for each
    ``len(prefix) % 3``: what a secret looks like inside any base64 text that encodes it."""
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data + bytes(3))
        start = -(-offset * 4 // 3)  # characters touched by the prefix
        stop = (offset + len(data)) * 4 // 3  # characters wholly inside prefix + data
        core = encoded[start:stop].decode()
        if len(core) >= 8:
            yield core
            yield core.replace("+", "-").replace("/", "_")


def _redaction_fault(exc: Exception) -> CaptureFault:
    return CaptureFault(
        stage="redact",
        error_type=type(exc).__name__,
        message="redaction failed; the record was reduced to a stub so no secret is written",
    )


def _unquoted(raw: str) -> str:
    return raw[1:-1] if len(raw) >= 2 and raw[0] in "\"'" and raw[-1] == raw[0] else raw


def _dump_json(value: Json, separators: tuple[str, str]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=separators)


def _has_leaf(value: Json) -> bool:
    if isinstance(value, dict):
        return any(_has_leaf(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_leaf(item) for item in value)
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, int | float) and not isinstance(value, bool)
    )


def _header(headers: dict[str, str], name: str) -> str:
    return next((value for key, value in headers.items() if key.lower() == name), "").lower()


def _is_token_url(url: str) -> bool:
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    return bool(_TOKEN_ENDPOINT.search(path.rsplit("/", 1)[-1] or path))


def _b64_text(data: str) -> str | None:
    try:
        return base64.b64decode(data, validate=True).decode()
    except (binascii.Error, ValueError):
        return None


def redact_session(session: Session, policy: RedactionPolicy | None = None) -> Session:
    """A copy of ``session`` with its secrets replaced by stable placeholders (see the module doc)."""
    return Redactor(policy).session(session)


def redact_file(
    source: str | os.PathLike[str], output: str | os.PathLike[str], policy: RedactionPolicy | None = None
) -> int:
    """Write a redacted copy of the session file ``source`` to ``output``; return how many distinct
    secrets were replaced. A partial (unfinished) session stays partial; ``output`` appears atomically."""
    output = Path(output)
    redactor = Redactor(policy)
    session = redactor.session(load_session(source))
    writer = SessionWriter(output.with_name(output.name + PARTIAL_SUFFIX), session.header)
    try:
        for step in session.steps:
            writer.write_step(step)
        if session.end is not None:
            writer.finish(session.end, output)
        else:
            writer.abort()
            os.replace(writer.partial_path, output)
    except BaseException:
        writer.abort()
        writer.partial_path.unlink(missing_ok=True)
        raise
    return redactor.secret_count
