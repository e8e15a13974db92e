"""A small site that offers every behaviour the trajectory generator plays (``tests/trajectories.py``).

Each page has same-origin links, a ``target=_blank`` link, a button that calls ``window.open``, hash
routes and ``history.pushState`` routes (rendered by the page's script, served by the server too, so a
reload or a fresh load of a pushed route works), a POST-redirect-GET form that adds an item, a GET
search form, text inputs, a select and a checkbox, and an iframe with a form of its own (also
POST-redirect-GET). Served by a real HTTP server on a free port, one thread per request.
"""

from __future__ import annotations

import contextlib
import html
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

__all__ = ["bundled_site"]

_SCRIPT = """
const view = document.getElementById('view');
function render() {
  const route = location.hash.slice(1) || location.pathname;
  view.textContent = 'route ' + route;
  document.title = 'Trajectories ' + route;
}
addEventListener('hashchange', render);
addEventListener('popstate', render);
for (const b of document.querySelectorAll('button.push')) {
  b.addEventListener('click', () => { history.pushState({route: b.dataset.route}, '', b.dataset.route); render(); });
}
render();
"""


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[str, str, str]] = []
        self.messages: list[str] = []


def _page(path: str, query: dict[str, list[str]], state: _State) -> str:
    number = sum(map(ord, path)) % 7 + 1
    with state.lock:
        items = "".join(
            f"<li class='item {html.escape(kind)}'>{html.escape(title)}<span class='note'>{html.escape(note)}</span></li>"
            for title, note, kind in state.items[-12:]
        )
    searched = query.get("q", [""])[0]
    results = ""
    if path == "/search":
        with state.lock:
            hits = [title for title, _, _ in state.items if searched.lower() in title.lower()]
        results = "<ol id='results'>" + "".join(f"<li>{html.escape(t)}</li>" for t in hits) + "</ol>"
    paragraphs = "".join(f"<p class='p{i}'>Paragraph {i} of {html.escape(path)}.</p>" for i in range(number))
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>Trajectories {html.escape(path)}</title>
<style>.item {{ color: #246; }} .hidden {{ display: none; }} .urgent {{ font-weight: bold; }}</style></head>
<body><h1>{html.escape(path)}</h1>
<nav><a href="/">home</a> <a href="/page/1">one</a> <a href="/page/2?tab=x">two</a> <a href="/page/3">three</a>
<a href="/items">items</a> <a href="/search?q=item">search items</a></nav>
<p><a id="blank" target="_blank" href="/page/{number}?from=blank">open a page in a new tab</a>
<button id="popup" type="button" onclick="window.open('/page/{number + 1}?from=popup')">open a window</button></p>
<p id="routes"><a class="hash" href="#/red">red</a> <a class="hash" href="#/blue">blue</a>
<button class="push" type="button" data-route="/app/green">green</button>
<button class="push" type="button" data-route="/app/yellow?shade=2">yellow</button></p>
<div id="view"></div>
{paragraphs}
<form id="add" method="post" action="/items">
<input name="title" placeholder="title"> <textarea name="note"></textarea>
<select name="kind"><option>plain</option><option>urgent</option><option>later</option></select>
<label><input type="checkbox" name="starred"> starred</label>
<button type="submit">Add</button></form>
<form id="search" method="get" action="/search"><input name="q" value="{html.escape(searched)}"><button>Search</button></form>
{results}
<ul id="items">{items}</ul>
<p class="hidden">hidden text</p>
<iframe id="frame" src="/frame" width="400" height="120"></iframe>
<script>{_SCRIPT}</script></body></html>"""


def _frame(query: dict[str, list[str]], state: _State) -> str:
    with state.lock:
        messages = "".join(f"<li>{html.escape(m)}</li>" for m in state.messages[-5:])
    return f"""<!DOCTYPE html><html><head><title>frame</title></head><body>
<form id="message" method="post" action="/frame"><input name="msg"><button type="submit">Send</button></form>
<ul id="messages">{messages}</ul></body></html>"""


class _Handler(http.server.BaseHTTPRequestHandler):
    state: _State

    def _send(self, status: int, body: str = "", location: str | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parsed.query)
        if parsed.path == "/favicon.ico":
            self._send(404)
        elif parsed.path == "/frame":
            self._send(200, _frame(query, self.state))
        else:
            self._send(200, _page(parsed.path, query, self.state))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        path = urllib.parse.urlsplit(self.path).path
        with self.state.lock:
            if path == "/frame":
                self.state.messages.append(form.get("msg", [""])[0])
                target = f"/frame?sent={len(self.state.messages)}"
            else:
                kind = form.get("kind", ["plain"])[0]
                self.state.items.append((form.get("title", [""])[0], form.get("note", [""])[0], kind))
                target = f"/items?added={len(self.state.items)}"
        self._send(303, location=target)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def bundled_site() -> Iterator[str]:
    """Serve the site on a free local port for the block; yields its base URL (no trailing slash)."""
    handler = type("Handler", (_Handler,), {"state": _State()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
