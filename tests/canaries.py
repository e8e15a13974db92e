"""Canaries planted in every place a session can carry a value, and a search for them in any output.

``canary_session()`` walks the session schema itself (the pydantic models of
``cdp_integration.session.models``): every string a record can hold, at any depth, gets a value, so a
field added tomorrow carries canaries the day it is added. What the value is depends only on what the
field holds, which the walk tells from its type and name: a URL, HTML, an HTTP body, headers, web
storage, free JSON, or text. Two kinds of canary:

- **secrets the session itself declares** (typed into a password input, a ``Set-Cookie`` value, an
  ``Authorization`` credential, a cookie): each recurs in every text field, raw, URL-encoded, base64,
  JSON- and HTML-escaped, and must be gone from all of them;
- **structural canaries**, unknown to the session, each in a place that holds a secret by its
  structure: userinfo, query and fragment parameters, token-like path segments, header values outside
  the safe list, secret fields of form, JSON (also inside JSON strings), GraphQL and multipart bodies,
  nested storage values, URLs in HTML attributes and CSS ``url()``.

``find_canaries(root, canaries)`` decodes every file under ``root`` (gzip, zip, Parquet, HTML
entities, URL-encoding, JSON escapes, base64) and reports each canary found.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import types
import typing
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import orjson
from pydantic import BaseModel

from cdp_integration.session import models
from cdp_integration.session.store import Session

SITE = "http://shop.canary.test"
VERIFIED_TASK_ID = 0
"""A WebArena-Verified task (``shopping_admin``), so that ``export-verified`` takes the session."""


@dataclass
class Planter:
    """Makes unique canaries and remembers where each was planted."""

    planted: dict[str, str] = field(default_factory=dict)
    declared: dict[str, str] = field(default_factory=dict)
    """Secrets the session declares: canary -> how (each also recurs everywhere)."""
    counter: int = 0

    def token(self, where: str) -> str:
        """A token-looking canary (what a credential looks like: letters and digits mixed)."""
        self.counter += 1
        value = f"cQ{self.counter:04d}x7Rw2Tk9Lm4Pz8"
        self.planted[value] = where
        return value

    def secret(self, where: str, how: str, *, special: bool) -> str:
        """A secret the session declares; ``special``: spelled differently in each encoding."""
        self.counter += 1
        value = f'Pw{self.counter:04d} </&"+=%x9!' if special else f"Sk{self.counter:04d}-q8Zr3Wv6"
        self.planted[value] = where
        self.declared[value] = how
        return value


@dataclass
class Carriers:
    """The values each kind of field gets."""

    plant: Planter
    known: list[str]

    def recurrence(self, where: str, index: int) -> str:
        """Free text in which every declared secret recurs, each in another encoding."""
        encodings = (
            lambda s: s,
            lambda s: quote(s, safe=""),
            lambda s: quote_plus(s),
            lambda s: base64.b64encode(f"user:{s}".encode()).decode(),
            lambda s: base64.urlsafe_b64encode(f"xy{s}".encode()).decode(),
            lambda s: json.dumps(s)[1:-1],
            lambda s: html.escape(s),
        )
        pieces = [encodings[(index + i) % len(encodings)](secret) for i, secret in enumerate(self.known)]
        return f"text of {where}: " + " | ".join(pieces)

    def url(self, where: str) -> str:
        c = self.plant.token
        nested = quote(f"/next?access_token={c(where + ' URL in a parameter')}", safe="")
        return (
            f"https://{c(where + ' userinfo user')}:{c(where + ' userinfo password')}@shop.canary.test"
            f"/feeds/{c(where + ' path segment')}/items?q=mugs&feed_token={c(where + ' query parameter')}"
            f"&v={c(where + ' unnamed token-like value')}&next={nested}&k={quote(self.known[0], safe='')}"
            f"#access_token={c(where + ' fragment parameter')}&token_type=bearer"
        )

    def html(self, where: str) -> str:
        c = self.plant.token
        data = html.escape(json.dumps({"apiToken": c(where + " data-* JSON attribute")}), quote=True)
        return (
            f'<html><head><link rel="alternate" href="/dashboard/projects.atom?feed_token={c(where + " link href")}">'
            f'<meta http-equiv="refresh" content="0; url=/go?token={c(where + " meta refresh")}">'
            f"<style>.a{{background:url(/img/{c(where + ' CSS url() in <style>')}/a.png)}}</style></head>"
            f'<body><a href="/x#access_token={c(where + " href fragment")}&amp;token_type=bearer">x</a>'
            f'<img src="https://cdn.canary.test/{c(where + " src path segment")}/i.png">'
            f'<form action="/search?sid={c(where + " form action")}"><input type="password" name="p" '
            f'value="{c(where + " password input value")}"></form>'
            f'<div data-config="{data}" data-next="/n?auth_token={c(where + " data-* URL")}"'
            f" style=\"background:url('/bg?key={c(where + ' CSS url() in style=')}')\">"
            f"{html.escape(self.recurrence(where, 3))}</div></body></html>"
        )

    def bodies(self, where: str) -> list[tuple[str, str]]:
        """(content type, body) of each body type the redactor parses."""
        c = self.plant.token
        inner = json.dumps({"user": json.dumps({"accessToken": c(where + " JSON in a JSON string")})})
        return [
            (
                "application/x-www-form-urlencoded",
                f"user=emma&password={c(where + ' form field')}&next="
                + quote_plus(f"/a?token={c(where + ' URL in a form field')}")
                + "&state="
                + quote_plus(json.dumps({"refresh_token": c(where + " JSON in a form field")})),
            ),
            (
                "application/json",
                json.dumps(
                    {
                        "a": {"b": [{"secretKey": c(where + " nested JSON key")}]},
                        "blob": inner,
                        "link": f"https://x.canary.test/cb#id_token={c(where + ' URL in JSON')}",
                        "note": self.recurrence(where, 1),
                    }
                ),
            ),
            (
                "application/json",
                json.dumps(
                    {
                        "query": 'mutation { login(username: "emma", password: "'
                        + c(where + " GraphQL inline argument")
                        + '") { token } }',
                        "variables": {"input": {"password": c(where + " GraphQL variable")}},
                    }
                ),
            ),
            ("application/graphql", f'mutation {{ signIn(apiKey: "{c(where + " raw GraphQL argument")}") }}'),
            (
                "multipart/form-data; boundary=XyZ",
                '--XyZ\r\nContent-Disposition: form-data; name="api_token"\r\n\r\n'
                f"{c(where + ' multipart field')}\r\n--XyZ\r\nContent-Disposition: form-data; "
                f'name="payload"\r\n\r\n{json.dumps({"token": c(where + " JSON in a multipart field")})}'
                "\r\n--XyZ--\r\n",
            ),
            ("text/html", self.html(where + " HTML body")),
            ("text/plain", self.recurrence(where, 2)),
        ]

    def headers(self, where: str) -> dict[str, str]:
        c = self.plant.token
        return {
            "PRIVATE-TOKEN": c(where + " PRIVATE-TOKEN header"),
            "apikey": c(where + " apikey header"),
            "Zz-Custom": c(where + " a header of any name"),
            "Location": self.url(where + " Location"),
            "Referer": self.url(where + " Referer"),
            "Link": f"</page?feed_token={c(where + ' Link header')}>; rel=next",
        }

    def storage(self, where: str) -> dict[str, dict[str, str]]:
        c = self.plant.token
        persisted = json.dumps({"user": json.dumps({"accessToken": c(where + " redux-persist value")})})
        return {
            SITE: {
                "persist:root": persisted,
                "apiToken": c(where + " storage key named like a secret"),
                "prefs": json.dumps({"deep": {"list": [{"session_id": c(where + " nested storage JSON")}]}}),
                "next": f"/back?token={c(where + ' URL in storage')}",
                "plain": self.recurrence(where, 4),
            }
        }

    def json(self, where: str, *, public: bool = False) -> dict[str, Any]:
        """Free JSON. ``public``: the task's own record, whose token-like words are the task's (the
        redactor leaves those to the evaluator), so only declared and secret-named values go there."""
        value: dict[str, Any] = {
            "text": self.recurrence(where, 5),
            "nested": [{"deeper": self.recurrence(where + " nested", 6)}],
            "password": self.plant.token(where + " secret-named key"),
        }
        if not public:
            value["nested"].append({"url": self.url(where + " URL in JSON")})
        return value


_URL_NAMES = re.compile(r"(^|_)(url|frame|history)$")
_BODY_NAMES = frozenset({"post_data", "body", "request_body", "response_body"})
_HTML_NAMES = frozenset({"html"})


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without ``Optional``/``Annotated``, whether None is allowed)."""
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(annotation))
            annotation = args[0] if len(args) == 1 else Any
        elif str(annotation).startswith("pydantic.functional_validators.SkipValidation") or (
            getattr(annotation, "__origin__", None) is not None and "SkipValidation" in repr(annotation)
        ):
            annotation = typing.get_args(annotation)[0] if typing.get_args(annotation) else Any
        else:
            return annotation, optional


@dataclass
class Walk:
    """Builds one valid record of each model with every string field carrying canaries."""

    carriers: Carriers
    fields_seen: set[str] = field(default_factory=set)

    def record(self, model: type[BaseModel], where: str, **fixed: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, info in model.model_fields.items():
            key = info.alias or name
            self.fields_seen.add(f"{model.__name__}.{name}")
            if name in fixed:  # filled by the caller, with canaries of its own where it holds text
                out[key] = fixed[name]
                continue
            out[key] = self.value(info.annotation, name, f"{where}.{name}", model)
        return out

    def value(self, annotation: Any, name: str, where: str, owner: type[BaseModel]) -> Any:
        annotation, _optional = _unwrap(annotation)
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        public = owner in (models.SessionHeader, models.SessionEnd) and name == "task"
        if annotation is str:
            return self.text(name, where)
        if annotation is bool:
            return False
        if annotation is int:
            return 0
        if annotation is float:
            return 1.0
        if origin is Literal:
            return args[0]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return self.record(annotation, where)
        if origin is list:
            (item,) = args
            item, _ = _unwrap(item)
            if item is str:
                return [self.text(name, where), self.carriers.url(where + " item")]
            if item is int:
                return [0]
            if item is float:
                return [1.0]
            if isinstance(item, type) and issubclass(item, BaseModel):
                return [self.record(item, f"{where}[0]")]
            return [self.value(item, name, f"{where}[0]", owner)]
        if origin is tuple:
            return [self.value(arg, name, where, owner) for arg in args]
        if origin is dict:
            value_type, _ = _unwrap(args[1])
            if value_type is str:
                if "headers" in name:
                    return self.carriers.headers(where)
                return {self.carriers.recurrence(where + " key", 0): self.carriers.recurrence(where, 1)}
            if typing.get_origin(value_type) is dict:
                return self.carriers.storage(where)
            if isinstance(value_type, type) and issubclass(value_type, BaseModel):
                return {"T1": self.record(value_type, f"{where}[T1]")}
            return self.carriers.json(where, public=public)
        if annotation is Any or annotation is dict:
            return self.carriers.json(where, public=public)
        raise TypeError(f"{where}: the canary walk does not know {annotation!r}; teach it")

    def text(self, name: str, where: str) -> str:
        if _URL_NAMES.search(name):
            return self.carriers.url(where)
        if name in _HTML_NAMES:
            return self.carriers.html(where)
        if name in ("screenshot_png", "thumbnail_webp"):
            return base64.b64encode(self.carriers.recurrence(where, 0).encode()).decode()
        return self.carriers.recurrence(where, 0)


def canary_session() -> tuple[Session, Planter, set[str]]:
    """The canary session, its planter (canary -> where), and the model fields the walk filled."""
    plant = Planter()
    typed = plant.secret("typed into a password input (form state)", "typed", special=True)
    set_cookie = plant.secret("a Set-Cookie value", "set-cookie", special=False)
    bearer = plant.secret("an Authorization credential", "authorization", special=False)
    cookie = plant.secret("a cookie's value", "cookie", special=False)
    carriers = Carriers(plant, [typed, set_cookie, bearer, cookie])
    walk = Walk(carriers)

    def exchanges(where: str) -> list[dict[str, Any]]:
        out = []
        for number, (content_type, body) in enumerate(carriers.bodies(where)):
            record = walk.record(models.NetworkExchange, f"{where}[{number}]")
            record["tab_id"] = "T1"
            request, response = record["request"], record["response"]
            request.update(method="POST", post_data=body, post_data_base64=False, resource_type="Document")
            request["url"] = carriers.url(f"{where}[{number}].request.url")
            request["headers"] |= {
                "content-type": content_type,
                "Authorization": f"Bearer {bearer}",
                "Cookie": f"sid={cookie}; theme=dark",
                "sec-fetch-dest": "document",
                "sec-fetch-mode": "navigate",
                "sec-fetch-user": "?1",
                "accept": "text/html",
            }
            response.update(status=200, mime_type=content_type.split(";")[0], body=body, body_base64=False)
            response["headers"] |= {"content-type": content_type, "Set-Cookie": f"s={set_cookie}; Path=/"}
            out.append(record)
        binary = walk.record(models.NetworkExchange, f"{where}[base64]")
        binary["tab_id"] = "T1"
        binary["request"]["method"] = "GET"  # a navigation, which WebArena-Verified needs to see
        binary["request"]["headers"] |= {"sec-fetch-dest": "document", "sec-fetch-mode": "navigate"}
        binary["request"]["headers"] |= {"sec-fetch-user": "?1", "accept": "text/html"}
        binary["request"]["post_data_base64"] = True
        binary["request"]["post_data"] = base64.b64encode(carriers.recurrence(where, 3).encode()).decode()
        binary["response"]["body_base64"] = True
        binary["response"]["body"] = base64.b64encode(carriers.recurrence(where, 4).encode()).decode()
        return [*out, binary]

    def http_calls(where: str) -> list[dict[str, Any]]:
        out = []
        for number, (content_type, body) in enumerate(carriers.bodies(where)):
            record = walk.record(models.HttpCall, f"{where}[{number}]")
            record.update(client="requests", request_body=body, response_body=body, status=200)
            record["response_headers"] |= {"content-type": content_type, "set-cookie": f"s={set_cookie}"}
            out.append(record)
        return out

    def evaluation(where: str) -> dict[str, Any]:
        record = walk.record(models.Evaluation, where, http=http_calls(where + ".http"))
        record["calls"] += [
            walk.record(
                models.EvaluatorCall, f"{where}.calls[goto]", op="goto", arg=carriers.url(where + " goto")
            ),
            walk.record(models.EvaluatorCall, f"{where}.calls[content]", op="content")
            | {"result": carriers.html(where + " content result")},
        ]
        return record

    def tab(where: str) -> dict[str, Any]:
        record = walk.record(models.TabState, where)
        record.update(tab_id="T1", active=True)
        record["form_state"].append(
            walk.record(models.FormControlState, where + ".form_state[password]")
            | {"tag": "input", "type": "password", "value": typed}
        )
        return record

    header = walk.record(models.SessionHeader, "header", format_version=models.FORMAT_VERSION)
    header["task"] |= {
        "task_id": VERIFIED_TASK_ID,
        "site_urls": {"SHOPPING_ADMIN": SITE, "SHOPPING": SITE},
    }
    step = walk.record(
        models.Step,
        "step",
        index=0,
        network=exchanges("step.network"),
        evaluation=evaluation("step.evaluation"),
        tabs=[tab("step.tabs[0]")],
    )
    step["cookies"].append({"name": "sid", "value": cookie, "domain": "shop.canary.test"})
    end = walk.record(
        models.SessionEnd,
        "end",
        network=exchanges("end.network"),
        probe=evaluation("end.probe"),
    )
    end["task"] |= {"task_id": VERIFIED_TASK_ID}
    end["settling"] = {"T1": walk.record(models.Settling, "end.settling[T1]")}
    session = Session(
        header=models.SessionHeader.model_validate(header),
        steps=(models.Step.model_validate(step),),
        end=models.SessionEnd.model_validate(end),
        path=None,
        complete=True,
        blob_count=0,
    )
    dumped = orjson.dumps([header, step, end]).decode()
    plant.planted = {  # the walk's values that the records above replaced were never written
        canary: where
        for canary, where in plant.planted.items()
        if canary in plant.declared or canary in dumped
    }
    return session, plant, walk.fields_seen


def schema_fields() -> set[str]:
    """Every ``Model.field`` of the session schema, reached from the three top-level records."""
    found: set[str] = set()
    pending: list[type[BaseModel]] = [models.SessionHeader, models.Step, models.SessionEnd]
    done: set[type[BaseModel]] = set()
    while pending:
        model = pending.pop()
        if model in done:
            continue
        done.add(model)
        for name, info in model.model_fields.items():
            found.add(f"{model.__name__}.{name}")
            stack = [info.annotation]
            while stack:
                annotation = stack.pop()
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    pending.append(annotation)
                stack.extend(typing.get_args(annotation))
    return found


# -- the search ---------------------------------------------------------------------------------------

_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{12,}={0,2}")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)")


def _json_unescape(text: str) -> str:
    return _JSON_ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else m[2], text)


def _decoded_files(name: str, data: bytes, depth: int = 0) -> Iterator[tuple[str, bytes]]:
    """``data`` and what it contains: gzip inflated, zip members, Parquet rows as JSON."""
    yield name, data
    if depth > 3:
        return
    if data[:2] == b"\x1f\x8b":
        yield from _decoded_files(name + "|gunzip", zlib.decompressobj(47).decompress(data), depth + 1)
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.namelist():
                yield from _decoded_files(f"{name}!{member}", archive.read(member), depth + 1)
    if data[:4] == b"PAR1":
        import pyarrow.parquet as pq

        rows = pq.read_table(io.BytesIO(data)).to_pylist()
        yield name + "|parquet", orjson.dumps(rows, default=str)


def _views(text: str) -> Iterator[tuple[str, str]]:
    """``text`` decoded every way a value is escaped in it, and two ways in a row."""
    decoders = {
        "html": html.unescape,
        "url": unquote,
        "url+": unquote_plus,
        "json": _json_unescape,
    }
    yield "raw", text
    for first, decode in decoders.items():
        once = decode(text)
        yield first, once
        for second, again in decoders.items():
            if second != first:
                yield f"{first}+{second}", again(once)


def _base64_decoded(data: bytes) -> Iterator[str]:
    for match in _BASE64_RUN.finditer(data):
        run = match[0]
        for candidate in (run, run.replace(b"-", b"+").replace(b"_", b"/")):
            for trim in range(4):
                chunk = candidate[: len(candidate) - trim] if trim else candidate
                padded = chunk + b"=" * (-len(chunk) % 4)
                try:
                    yield base64.b64decode(padded, validate=True).decode("utf-8", "replace")
                except ValueError:
                    continue
                break


def find_canaries(root: Path, canaries: dict[str, str]) -> list[str]:
    """Each canary found in any file under ``root`` (or ``root`` itself): ``"canary (where planted)
    in file [how decoded]"``."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    pattern = re.compile("|".join(re.escape(canary) for canary in sorted(canaries, key=len, reverse=True)))
    found: dict[str, str] = {}
    for path in files:
        for name, data in _decoded_files(str(path), path.read_bytes()):
            text = data.decode("utf-8", "replace")
            texts = [*_views(text), *(("base64", decoded) for decoded in _base64_decoded(data))]
            for view, decoded in texts:
                for canary in pattern.findall(decoded):
                    found.setdefault(canary, f"{canary!r} ({canaries[canary]}) in {name} [{view}]")
    return sorted(found.values())
