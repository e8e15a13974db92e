"""Capture on a real single-page application: TiddlyWiki from npm, with its real CSS and JavaScript.

Run alone::

    .venv/bin/python benchmarks/real_spa.py [--steps N]

``make bench`` runs it (``scripts/setup.sh bench`` installs TiddlyWiki). TiddlyWiki 5 serves one page
of about 2.5 MB (its whole JavaScript and its stylesheets inline) from its own Node server, and renders
every tiddler in the browser. A wiki of 120 tiddlers (a paragraph each, links to four others) is made
fresh. Two kinds of navigating step, each captured at once by a logger on a plain Playwright page with
the default options:

- **full-page loads**: ``goto`` a permalink (``/?load=K#Topic N``: a document load each time), wait
  until the tiddler is shown;
- **in-app route changes**: click a link in the story river to a tiddler not open yet, wait until it
  is shown (TiddlyWiki updates the address bar's hash, no document load).

Printed side by side with the synthetic SPA row of ``capture_overhead.py``: capture p50 and p90 (the
logger's ``capture_ms`` and the call's wall time with the write), and the session's growth per step.
Where a target is missed, the per-stage profile of one capture of each kind says what bounds it.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdp_integration import environment
from cdp_integration.capture.logger import CDPSessionLogger

TARGET_P50_MS = 150.0
TARGET_P90_MS = 300.0
TARGET_KIB_PER_STEP = 20.0
TOPICS = 120


@dataclass
class Kind:
    """One kind of navigating step's measurements."""

    name: str
    capture_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    step_bytes: list[int] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    calls: dict[str, list[float]] = field(default_factory=dict)
    """CDP method -> ms of each call made during this kind's captures (what bounds them)."""


class _CallTimes:
    """Times every CDP command the logger waits for (``TimedCDP.send``: a command sent ahead is
    timed from when the capture asks for its answer) into ``kind.calls`` while a capture of that
    kind runs; the bench's own instrument, not the product's."""

    def __init__(self) -> None:
        from cdp_integration.capture.tabs import TimedCDP

        self.kind: Kind | None = None
        self._cls, self._send = TimedCDP, TimedCDP.send
        timer = self

        def send(cdp: Any, method: str, params: Any = None) -> Any:
            started = time.perf_counter()
            try:
                return timer._send(cdp, method, params)
            finally:
                if timer.kind is not None:
                    timer.kind.calls.setdefault(method, []).append((time.perf_counter() - started) * 1000)

        TimedCDP.send = send  # type: ignore[method-assign]

    def close(self) -> None:
        self._cls.send = self._send  # type: ignore[method-assign]


def wiki_tiddlers() -> dict[str, tuple[str, str]]:
    """The bench wiki: title -> (header lines, text), as ``apps.start_tiddlywiki`` takes them."""
    tiddlers: dict[str, tuple[str, str]] = {
        "$:/SiteTitle": ("", "Benchmark Notebook"),
        "$:/DefaultTiddlers": ("", "[[Topic 0]]"),
        "$:/config/AnimationDuration": ("", "0"),
    }
    for number in range(TOPICS):
        links = ", ".join(f"[[Topic {(number * 7 + k * 13 + 1) % TOPICS}]]" for k in range(4))
        text = (
            f"Topic {number} is about the {number}th subject of this notebook. " * 6
            + f"\n\nRead on: {links}.\n\n''Note:'' revised {number % 28 + 1} times."
        )
        tiddlers[f"Topic {number}"] = (f"tags: Group{number % 6}", text)
    return tiddlers


def _shown(page: Any, title: str) -> None:
    page.wait_for_selector(
        f'.tc-tiddler-frame[data-tiddler-title="{title}"]', state="visible", timeout=30_000
    )


def _capture(logger: CDPSessionLogger, kind: Kind, timer: _CallTimes) -> None:
    partial = logger.partial_path
    size = partial.stat().st_size if partial else 0
    started = time.perf_counter()
    timer.kind = kind
    try:
        step = logger.capture_state_snapshot(kind.name)
    finally:
        timer.kind = None
    kind.wall_ms.append((time.perf_counter() - started) * 1000)
    if step is not None:
        kind.capture_ms.append(step.capture_ms)
        kind.faults += [f"{f.stage}: {f.error_type}" for f in step.faults]
    if partial is not None:
        kind.step_bytes.append(partial.stat().st_size - size)


def measure(pw: Any, base_url: str, session_root: Path, steps: int) -> tuple[Kind, Kind, int]:
    """``steps`` full-page loads and ``steps`` in-app route changes; also the page's HTML size."""
    loads, routes = Kind("full-page load"), Kind("in-app route change")
    timer = _CallTimes()
    browser = pw.chromium.launch(
        executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )
    try:
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        logger = CDPSessionLogger(session_root, instance_id="real-spa")
        logger.attach_to_page(page)
        page.goto(base_url + "/", wait_until="load")
        _shown(page, "Topic 0")
        logger.capture_state_snapshot("warm-up")
        html_chars = len(page.content())
        for number in range(steps):
            title = f"Topic {(number * 11 + 5) % TOPICS}"
            # a query of its own each time: a document load, never a same-document hash change
            page.goto(f"{base_url}/?load={number}#{quote(title)}", wait_until="load")
            _shown(page, title)
            _capture(logger, loads, timer)
        opened: set[str] = set()
        while len(routes.wall_ms) < steps:
            links = page.locator(".tc-story-river .tc-tiddler-frame .tc-tiddlylink-resolves")
            titles = [t for t in links.evaluate_all("(els) => els.map((e) => e.textContent)") if t]
            fresh = [t for t in titles if t not in opened and t.startswith("Topic ")]
            if not fresh:  # everything linked is open: close them all, start again from one
                page.goto(f"{base_url}/?again={len(routes.wall_ms)}#{quote('Topic 0')}", wait_until="load")
                _shown(page, "Topic 0")
                opened = {"Topic 0"}
                continue
            title = fresh[0]
            links.filter(has_text=re.compile(f"^{re.escape(title)}$")).first.click()
            _shown(page, title)
            opened.add(title)
            _capture(logger, routes, timer)
        logger.save_session("real-spa")
        logger.detach()
    finally:
        browser.close()
        timer.close()
    return loads, routes, html_chars


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def targets(kinds: list[Kind]) -> list[tuple[str, str, bool]]:
    found = []
    for kind in kinds:
        p50, p90 = pct(kind.wall_ms, 0.5), pct(kind.wall_ms, 0.9)
        per_step = sum(kind.step_bytes) / max(1, len(kind.step_bytes)) / 1024
        found += [
            (f"TiddlyWiki {kind.name}: capture p50 <= {TARGET_P50_MS:.0f} ms (incl. write)", f"{p50:.1f} ms",
             p50 <= TARGET_P50_MS),
            (f"TiddlyWiki {kind.name}: capture p90 <= {TARGET_P90_MS:.0f} ms (incl. write)", f"{p90:.1f} ms",
             p90 <= TARGET_P90_MS),
            (f"TiddlyWiki {kind.name}: stored per step (mean) <= {TARGET_KIB_PER_STEP:.0f} KiB",
             f"{per_step:.1f} KiB", per_step <= TARGET_KIB_PER_STEP),
        ]  # fmt: skip
    return found


def rows(kinds: list[Kind]) -> list[str]:
    lines = [f"  {'':56}{'n':>4}  {'p50':>8}  {'p90':>8}  {'max':>8}  {'KiB/step':>9}"]
    for kind in kinds:
        per_step = sum(kind.step_bytes) / max(1, len(kind.step_bytes)) / 1024
        for label, values in (("capture_ms", kind.capture_ms), ("wall (incl. write)", kind.wall_ms)):
            lines.append(
                f"  {'TiddlyWiki, ' + kind.name + ': ' + label:56}{len(values):>4}  {pct(values, 0.5):8.1f}  "
                f"{pct(values, 0.9):8.1f}  {max(values):8.1f}  {per_step:9.1f}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps of each kind")
    args = parser.parse_args(argv)
    environment.prepare()
    from playwright.sync_api import sync_playwright

    from tests.conformance import apps

    missing = apps.tiddlywiki_missing()
    if missing:
        print(f"real_spa: error: {missing} (scripts/setup.sh bench installs it)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cdp-bench-real-spa-") as root, sync_playwright() as pw:
        app = apps.start_tiddlywiki(Path(root), tiddlers=wiki_tiddlers())
        try:
            loads, routes, html_chars = measure(pw, app.url, Path(root) / "sessions", args.steps)
        finally:
            apps.stop(app)
    kinds = [loads, routes]
    print(
        f"\n[real SPA: TiddlyWiki, {TOPICS} tiddlers, page {html_chars / 1e6:.1f} M chars] navigating steps, "
        "ms; stored = the session's growth per step, compressed"
    )
    print("\n".join(rows(kinds)))
    for kind in kinds:
        count = max(1, len(kind.wall_ms))
        heaviest = sorted(kind.calls.items(), key=lambda item: -sum(item[1]))[:4]
        print(
            f"  bound, {kind.name}: waits for CDP answers per capture "
            + ", ".join(f"{method} {sum(times) / count:.0f} ms" for method, times in heaviest)
            + f" (of {sum(kind.wall_ms) / count:.0f} ms)"
        )
    faults = sorted({f for kind in kinds for f in kind.faults})
    if faults:
        print(f"  capture faults: {', '.join(faults)}")
    print("\n[targets]")
    results = targets(kinds)
    for label, value, ok in results:
        print(f"  {'PASS' if ok else 'FAIL'}  {label:84} {value}")
    return 0 if all(ok for *_, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
