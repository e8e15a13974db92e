"""Capture inside OpenHands' unmodified ``BrowserEnv``, switched on by ``WEBARENA_CDP_LOGGING=true``.

Why an import hook installed at interpreter start-up. OpenHands' ``BrowserEnv`` runs BrowserGym in a
child process started with multiprocessing ``spawn`` (and with ``runtime=local`` that ``BrowserEnv``
itself lives in the action-execution server, another process). A spawned child is a fresh
interpreter that imports everything again, so a patch applied in the parent never reaches the
process that owns the page. The package therefore installs ``webarena_cdp_logging.pth`` next to
the other ``.pth`` files of the environment; Python's ``site`` runs its one line in every
interpreter of the environment, children included. The line only looks up the variable: unset,
nothing is imported. Set, it calls ``autoload()``, which (for a true value) adds a meta-path finder
that patches modules right after they load:

- ``browsergym.core.env``: ``environment.prepare()`` (system Chromium through
  ``PLAYWRIGHT_BROWSERS_PATH``, NLTK ``punkt_tab`` so ``import browsergym.webarena`` does not try to
  download it, ``WA_*`` placeholders), then ``BrowserEnv.__init__`` attaches a
  ``CDPSessionLogger`` (a snapshot after ``reset`` and after every ``step``, each live
  ``validate()`` recorded) and ``BrowserEnv.close`` saves the session before the browser closes.
  OpenHands sends ``SHUTDOWN`` on ``close()``, and its browser process answers with ``env.close()``.
- ``browsergym.webarena``: registers the demo tasks (``browsergym/webarena_demo.<task_id>``), the
  only ids besides WebArena's, VisualWebArena's and MiniWoB's that OpenHands accepts as eval envs.

Variables: ``WEBARENA_CDP_LOGGING`` (``true``/``1``/``yes``/``on``; read again when each env is
created, so a process can pause capture), ``WEBARENA_CDP_SESSION_DIR`` (default ``./cdp_sessions``),
``WEBARENA_CDP_INSTANCE_ID`` (default: the env id plus a timestamp and the process id). Child
processes inherit them. This module imports only the standard library.
"""

from __future__ import annotations

import os

__all__ = ["ENABLE_VARIABLE", "INSTANCE_VARIABLE", "SESSION_DIR_VARIABLE", "autoload", "enabled", "install"]

ENABLE_VARIABLE = "WEBARENA_CDP_LOGGING"
SESSION_DIR_VARIABLE = "WEBARENA_CDP_SESSION_DIR"
INSTANCE_VARIABLE = "WEBARENA_CDP_INSTANCE_ID"

_TRUE = frozenset({"1", "true", "yes", "on"})


def enabled() -> bool:
    """Whether ``WEBARENA_CDP_LOGGING`` asks for capture."""
    return os.environ.get(ENABLE_VARIABLE, "").strip().lower() in _TRUE


def install() -> None:
    """Patch BrowserGym as its modules load (at once for those already loaded). Idempotent."""
    from openhands_patch import _hooks

    _hooks.install()


def autoload() -> None:
    """What the ``.pth`` line calls when the variable is present: ``install()`` if it is true."""
    if enabled():
        install()
