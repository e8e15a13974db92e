"""Attach a ``CDPSessionLogger`` to any running Chromium by its DevTools endpoint.

Agents that drive Chromium over raw CDP (browser-use, OpenHands V1's browser tool) hand us no
Playwright ``Page``. Playwright's ``connect_over_cdp`` gives us one for every tab of the browser
(tabs of contexts other clients created are reported in its default context), so the logger's
per-tab code runs unchanged. Playwright's sync API refuses to run inside a running asyncio loop and
binds its objects to the thread that made them, and the callers here are asyncio programs: the
connection lives in a ``BrowserThread`` of its own, the logger's public calls are run there, and
while idle the thread keeps dispatching Playwright's events (new tabs are followed when they open,
requests are stamped when they happen). Detaching stops only our connection; the browser runs on.

``ChromiumProcess`` starts a Chromium with ``--remote-debugging-port=0`` and reads its endpoint,
for callers (run_infer, examples, tests) that own the browser an agent attaches to.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

from cdp_integration import environment
from cdp_integration.errors import CaptureError, EnvironmentSetupError

__all__ = ["BrowserThread", "ChromiumProcess", "check_endpoint"]


_IDLE_PUMP_MS = 25
"""How long the idle thread lets Playwright dispatch events between two looks at its work queue."""


def check_endpoint(endpoint: str) -> str:
    """``endpoint`` if it is an ``http(s)://host:port`` or ``ws(s)://`` DevTools URL, else ``CaptureError``."""
    try:
        parsed = urlparse(endpoint)
        valid = endpoint.isascii() and endpoint.isprintable() and parsed.hostname and parsed.port != -1
    except ValueError:  # a bracket left open, a port that is no number, a host NFKC would change
        valid = False
    if not valid or parsed.scheme not in ("http", "https", "ws", "wss"):
        raise CaptureError(f"not a CDP endpoint (want http://host:port or ws://...): {endpoint!r}")
    return endpoint


class BrowserThread:
    """One thread owning a Playwright connection to the browser at ``endpoint``.

    ``call(fn, ...)`` runs ``fn`` in that thread and returns its result (or raises its exception);
    from the thread itself it runs inline. ``on_idle`` runs in the thread between calls (it must not
    raise). A connection failure is kept in ``error``; ``browser`` is then ``None``.
    """

    def __init__(self, endpoint: str, *, timeout_ms: float = 30_000) -> None:
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self.browser: Any = None
        self.error: BaseException | None = None
        self.on_idle: Callable[[], None] | None = None
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"cdp-attach {endpoint}", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        from playwright.sync_api import sync_playwright

        manager = None
        playwright = None
        try:
            manager = sync_playwright()
            playwright = manager.start()
            self.browser = playwright.chromium.connect_over_cdp(self.endpoint, timeout=self.timeout_ms)
        except BaseException as exc:
            self.error = exc
        finally:
            self._ready.set()
        try:
            self._serve()
        finally:
            if playwright is not None:
                with contextlib.suppress(Exception):  # stops the driver: our CDP connection closes
                    playwright.stop()

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                self._idle()
                continue
            if job is None:
                return
            function, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

    def _idle(self) -> None:
        """Let Playwright read and dispatch what the browser sent; a sleep when there is no tab."""
        page = None
        if self.browser is not None:
            with contextlib.suppress(Exception):
                page = next((p for c in self.browser.contexts for p in c.pages if not p.is_closed()), None)
        if page is None:
            time.sleep(_IDLE_PUMP_MS / 1000)
        else:
            try:
                page.wait_for_timeout(_IDLE_PUMP_MS)
            except Exception:
                time.sleep(_IDLE_PUMP_MS / 1000)
        if self.on_idle is not None:
            with contextlib.suppress(Exception):
                self.on_idle()

    @property
    def in_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def call[T](self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.in_thread:
            return function(*args, **kwargs)
        if self._closed or not self._thread.is_alive():
            raise CaptureError("the CDP attachment is closed")
        future: Future[T] = Future()
        self._jobs.put((lambda: function(*args, **kwargs), future))
        return future.result()

    def close(self) -> None:
        """Stop the thread and our Playwright driver; the browser is left running."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        if not self.in_thread:
            self._thread.join(timeout=30)


class ChromiumProcess:
    """A headless system Chromium with a DevTools port, stopped by its PID on exit.

    Its profile lives in a private temporary directory (removed on exit); ``endpoint`` is
    ``http://127.0.0.1:<port>`` as read from the ``DevToolsActivePort`` file Chromium writes there.
    """

    def __init__(
        self, *, headless: bool = True, extra_args: tuple[str, ...] = (), start_url: str = "about:blank"
    ) -> None:
        self.headless = headless
        self.extra_args = extra_args
        self.start_url = start_url
        self.process: subprocess.Popen[bytes] | None = None
        self.user_data_dir: Path | None = None
        self.endpoint = ""

    def start(self, timeout_s: float = 30.0) -> ChromiumProcess:
        self.user_data_dir = Path(tempfile.mkdtemp(prefix="cdp-chromium-"))
        args = [
            environment.chromium_executable(),
            *environment.CHROMIUM_ARGS,
            *(("--headless=new",) if self.headless else ()),
            f"--user-data-dir={self.user_data_dir}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            *self.extra_args,
            self.start_url,
        ]
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        port_file = self.user_data_dir / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with contextlib.suppress(OSError, ValueError, IndexError):
                port = int(port_file.read_text().split()[0])
                self.endpoint = f"http://127.0.0.1:{port}"
                return self
            time.sleep(0.05)
        self.stop()
        raise EnvironmentSetupError(f"Chromium did not open a DevTools port within {timeout_s:.0f} s")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.user_data_dir is not None:
            shutil.rmtree(self.user_data_dir, ignore_errors=True)
            self.user_data_dir = None

    def __enter__(self) -> ChromiumProcess:
        return self.start() if self.process is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
