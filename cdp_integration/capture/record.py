"""``cdp-session record --cdp URL``: record a browser someone (or something) else drives.

The logger attaches by the DevTools endpoint and captures a step on each Enter (a line on stdin)
and, with ``every_navigation``, after each top-level document load in any tab; Ctrl-C (SIGINT) or
the end of stdin stops the recording and saves the session. The browser is left running.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.errors import CaptureError

__all__ = ["record_browser"]


def _read_lines(stream: IO[str], events: queue.SimpleQueue[tuple[str, str | None]]) -> None:
    with contextlib.suppress(Exception):
        for _ in iter(stream.readline, ""):
            events.put(("enter", None))
    events.put(("eof", None))


def record_browser(
    endpoint: str,
    output_dir: Path,
    *,
    every_navigation: bool = False,
    instance_id: str | None = None,
    task: dict[str, Any] | None = None,
    final_answer: str | None = None,
    stdin: IO[str] | None = None,
    on_step: Callable[[int, str], None] | None = None,
) -> Path:
    """Record until stdin ends or SIGINT (``KeyboardInterrupt``); return the saved session file.

    Raises ``CaptureError`` when nothing answers at ``endpoint`` (no session file is left then).
    ``on_step(index, url)`` is told about each captured step.
    """
    logger = CDPSessionLogger(output_dir, instance_id=instance_id, task=task)
    logger.attach_to_cdp(endpoint, timeout_ms=10_000)
    thread = logger._browser_thread
    if thread is None:
        logger._pending_faults.clear()
        raise CaptureError(f"cannot attach to the browser at {endpoint}")
    events: queue.SimpleQueue[tuple[str, str | None]] = queue.SimpleQueue()

    def capture(trigger: str, action: str | None) -> None:
        step = logger.capture_state_snapshot(trigger, action=action)
        if step is not None and on_step is not None:
            on_step(step.index, step.url)

    if every_navigation:

        def follow(page: Any) -> None:
            page.on("load", lambda loaded: events.put(("navigation", loaded.url)))

        def watch() -> None:
            seen: set[int] = set()

            def each_page() -> None:
                for context in list(thread.browser.contexts):
                    for page in list(context.pages):
                        if id(page) not in seen:
                            seen.add(id(page))
                            follow(page)

            each_page()
            previous = thread.on_idle

            def on_idle() -> None:
                if previous is not None:
                    previous()
                each_page()

            thread.on_idle = on_idle

        thread.call(watch)
    if stdin is not None:
        threading.Thread(target=_read_lines, args=(stdin, events), daemon=True).start()
    try:
        capture("start", None)
        while True:
            try:
                kind, detail = events.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "eof":
                break
            if kind == "navigation":
                capture("navigation", f"navigated to {detail}")
            else:
                capture("enter", None)
    except KeyboardInterrupt:
        pass
    with contextlib.suppress(queue.Empty, KeyboardInterrupt):  # loads seen before the stop still count
        while True:
            kind, detail = events.get_nowait()
            if kind == "navigation":
                capture("navigation", f"navigated to {detail}")
    try:
        return logger.save_session(final_answer=final_answer)
    finally:
        logger.detach()
