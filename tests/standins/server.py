"""The HTTP layer the stand-in sites share: one threaded server per site on 127.0.0.1, port 0.

A site is a `SiteApp`: a route table of ``(method, regex, handler)``; a handler takes a parsed
`Request` and returns a `Response`. Sessions are cookies named after the site, because all stand-ins
share the host 127.0.0.1 and browsers do not separate cookies by port.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HTML = "text/html; charset=utf-8"
JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    user: str | None

    def field(self, name: str) -> str:
        return self.form.get(name, [""])[0].strip()


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = HTML
    headers: list[tuple[str, str]] = field(default_factory=list)


def page(title: str, body: str, *, user: str | None = None) -> Response:
    """A small HTML document; ``user`` shows who is signed in."""
    who = f'<span class="signed-in">Signed in as {esc(user)}</span>' if user else ""
    return Response(
        body=(
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{esc(title)}</title></head>'
            f"<body><header>{who}</header><main>{body}</main></body></html>"
        ).encode()
    )


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def redirect(location: str, *headers: tuple[str, str]) -> Response:
    return Response(302, b"", HTML, [("Location", location), *headers])


def json_response(value: object, status: int = 200) -> Response:
    return Response(status, json.dumps(value).encode(), JSON)


def not_found(message: str = "Page not found") -> Response:
    response = page("404", f"<h1>404</h1><p class='error'>{esc(message)}</p>")
    response.status = 404
    return response


Handler = Callable[[Request, "re.Match[str]"], Response]


class SiteApp:
    """Routes, signed-in sessions and per-site state; subclasses fill `routes` and `reset`."""

    name = "site"
    prefix = ""
    """Path under which the site lives (the admin is at ``/admin``)."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self.lock = threading.RLock()
        self.base_url = ""
        self.reset()

    def reset(self) -> None:
        """Back to the initial data (every episode starts from it)."""

    @property
    def cookie(self) -> str:
        return f"{self.name}_session"

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self.routes.append((method, re.compile(pattern + r"\Z"), handler))

    def sign_in(self, username: str, location: str) -> Response:
        token = secrets.token_hex(8)
        self.sessions[token] = username
        return redirect(location, ("Set-Cookie", f"{self.cookie}={token}; Path=/; HttpOnly; SameSite=Lax"))

    def handle(self, request: Request) -> Response:
        for method, pattern, handler in self.routes:
            if method == request.method and (m := pattern.match(request.path)):
                with self.lock:
                    return handler(request, m)
        return not_found()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        form: dict[str, list[str]] = {}
        if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            form = parse_qs(body.decode(), keep_blank_values=True)
        app = self.server.app
        user = None
        try:
            morsel = SimpleCookie(headers.get("cookie", "")).get(app.cookie)
            user = app.sessions.get(morsel.value) if morsel else None
        except CookieError:
            user = None
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        request = Request(method, parts.path, query, form, headers, body, user)
        response = app.handle(request)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(response.body)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, app: SiteApp) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.app = app

    def handle_error(self, request: object, client_address: object) -> None:
        """A browser dropping its connection (a tab or Chromium closed) is normal; anything else is
        printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class RunningSite:
    """One `SiteApp` served on a free port in a background thread."""

    def __init__(self, app: SiteApp) -> None:
        self.app = app
        self.server = _Server(app)
        self.thread = threading.Thread(
            target=self.server.serve_forever, name=f"standin-{app.name}", daemon=True
        )
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        app.base_url = self.root + app.prefix
        self.thread.start()

    @property
    def url(self) -> str:
        return self.app.base_url

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
