"""Capture on navigating steps of a single-page app that fills itself over XHR (~400k characters).

Run alone::

    .venv/bin/python benchmarks/spa_navigation.py [--navigations N]

``capture_overhead.py`` runs it too and prints its rows next to the other capture rows. A local
server serves an app shell whose script fetches ``/api/items`` (JSON, ~200 ms) and renders ~400k
characters of HTML; three stylesheets (linked after the script, as apps that load CSS lazily do)
take 800 ms each and are never cached (``no-store``), so at every capture of a navigating step they
are still loading. Each navigating step: ``goto`` a new page of the app (``domcontentloaded``),
wait until the app rendered its data, capture at once. The capture must not wait for the
stylesheets (they are read from the network capture at a later step, once they have arrived) and
must not fetch them again.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import socketserver
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdp_integration import environment
from cdp_integration.capture.logger import CDPSessionLogger

TARGET_P50_MS = 150.0
TARGET_P90_MS = 400.0
STYLESHEET_DELAY_S = 0.8
DATA_DELAY_S = 0.2
SHEETS = ("app", "theme", "widgets")

_SHELL = """<!doctype html><html><head><title>Inventory {page}</title></head><body>
<nav><a href="/app/{next}">next</a></nav><main id="app">loading…</main>
<script>
fetch("/api/items?page={page}").then((r) => r.json()).then((items) => {{
  const rows = items.map((it) => `<tr class="row"><td class="sku">${{it.sku}}</td><td>${{it.name}}</td>` +
    `<td class="qty">${{it.qty}}</td><td>${{it.note}}</td></tr>`);
  document.getElementById("app").innerHTML = `<table id="items">${{rows.join("")}}</table>`;
  document.body.dataset.ready = "{page}";
}});
</script>
{sheets}
</body></html>"""


def _items(page: int) -> bytes:
    items = [
        {
            "sku": f"SKU-{page}-{i:05d}",
            "name": f"Item {i} of page {page}",
            "qty": (i * 7) % 90,
            "note": "n" * 60,
        }
        for i in range(2_600)
    ]
    return json.dumps(items).encode()


class SpaServer:
    """The app's pages (``/app/<n>``), its data (``/api/items``) and its slow stylesheets."""

    def __init__(self) -> None:
        css = {name: (f".{name} {{ color: #123; }}\n" * 400).encode() for name in SHEETS}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path.startswith("/app/"):
                    page = int(path.rsplit("/", 1)[1] or 0)
                    sheets = "".join(f'<link rel="stylesheet" href="/static/{n}.css">' for n in SHEETS)
                    body = _SHELL.format(page=page, next=page + 1, sheets=sheets).encode()
                    kind = "text/html"
                elif path == "/api/items":
                    time.sleep(DATA_DELAY_S)
                    body, kind = _items(int(query.split("=")[1])), "application/json"
                elif path.startswith("/static/") and path[8:-4] in css:
                    time.sleep(STYLESHEET_DELAY_S)
                    body, kind = css[path[8:-4]], "text/css"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@dataclass
class SpaTimes:
    capture_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    html_chars: list[int] = field(default_factory=list)
    stylesheets_stored: int = 0
    stylesheet_requests: int = 0
    navigations: int = 0
    faults: list[str] = field(default_factory=list)


@contextlib.contextmanager
def spa_server() -> Iterator[SpaServer]:
    server = SpaServer()
    try:
        yield server
    finally:
        server.close()


def spa_captures(pw: Any, session_root: Path, navigations: int) -> SpaTimes:
    """Capture right after each navigating step of the app (after one warm-up navigation)."""
    times = SpaTimes(navigations=navigations)
    browser = pw.chromium.launch(
        executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    with spa_server() as server:
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
            requests: list[str] = []
            page.context.on("request", lambda r: requests.append(r.url) if "/static/" in r.url else None)
            logger = CDPSessionLogger(session_root / "spa", instance_id="spa")
            logger.attach_to_page(page)
            for number in range(navigations + 1):
                page.goto(f"{server.base}/app/{number}", wait_until="domcontentloaded")
                page.wait_for_function(f"document.body.dataset.ready === '{number}'")
                started = time.perf_counter()
                step = logger.capture_state_snapshot("navigate", action=f"goto /app/{number}")
                wall = (time.perf_counter() - started) * 1000
                if step is None or number == 0:
                    continue
                times.wall_ms.append(wall)
                times.capture_ms.append(step.capture_ms)
                active = next((t for t in step.tabs if t.active), None)
                times.html_chars.append(len(active.html or "") if active else 0)
                times.faults += [f"{f.stage}: {f.error_type}" for f in step.faults]
            page.wait_for_timeout(STYLESHEET_DELAY_S * 1000 + 300)
            logger.capture_state_snapshot("after")
            session = logger.save_session("spa")
            logger.detach()
            from cdp_integration import load_session

            loaded = load_session(session)
            times.stylesheets_stored = sum(
                1 for s in loaded.steps for r in s.resources if r.type == "Stylesheet"
            )
            times.stylesheet_requests = len(requests)
        finally:
            browser.close()
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rows(times: SpaTimes) -> list[tuple[str, list[float]]]:
    return [
        ("SPA over XHR (~400k chars), navigating steps: capture_ms", times.capture_ms),
        ("SPA over XHR (~400k chars), navigating steps: wall (incl. write)", times.wall_ms),
    ]


def targets(times: SpaTimes) -> list[tuple[str, str, bool]]:
    p50, p90 = pct(times.wall_ms, 0.5), pct(times.wall_ms, 0.9)
    requests_per_navigation = times.stylesheet_requests / max(1, times.navigations + 1)
    return [
        (
            f"capture on navigating SPA steps p50 <= {TARGET_P50_MS:.0f} ms (incl. write)",
            f"{p50:.1f} ms",
            p50 <= TARGET_P50_MS,
        ),
        (
            f"capture on navigating SPA steps p90 <= {TARGET_P90_MS:.0f} ms (incl. write)",
            f"{p90:.1f} ms",
            p90 <= TARGET_P90_MS,
        ),
        (
            "SPA stylesheets requested once per page load (never fetched again by the capture)",
            f"{requests_per_navigation:.2f} per load, {times.stylesheets_stored} stored",
            requests_per_navigation <= len(SHEETS) and times.stylesheets_stored == len(SHEETS),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--navigations", type=int, default=20)
    args = parser.parse_args(argv)
    environment.prepare()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="cdp-bench-spa-") as root, sync_playwright() as pw:
        times = spa_captures(pw, Path(root), args.navigations)
    print(
        f"\n[SPA navigating steps] ms, {times.navigations} navigations, HTML p50 {pct([float(c) for c in times.html_chars], 0.5):.0f} chars"
    )
    for label, values in rows(times):
        print(
            f"  {label:66} p50 {pct(values, 0.5):8.1f}  p90 {pct(values, 0.9):8.1f}  max {max(values):8.1f}"
        )
    if times.faults:
        print(f"  capture faults: {', '.join(sorted(set(times.faults)))}")
    print("\n[targets]")
    results = targets(times)
    for label, value, ok in results:
        print(f"  {'PASS' if ok else 'FAIL'}  {label:84} {value}")
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
