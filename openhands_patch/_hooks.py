"""Run a function right after a module has executed, whoever imports it and whenever.

A meta-path finder in front of ``sys.meta_path`` asks the other finders for the watched module's
spec and wraps that spec's loader's ``exec_module`` (the loader object belongs to this one module,
and stays the same type, so ``importlib.resources`` and friends see nothing different). Each
callback runs once per process. A failing callback is reported on stderr and the import goes on:
capture must never break the program it observes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType

__all__ = ["PostImportFinder", "install", "report"]

Callback = Callable[[ModuleType], None]


def report(what: str, exc: BaseException) -> None:
    """One line on stderr: capture problems are shown, never raised into the observed program."""
    detail = "".join(traceback.format_exception_only(exc)).strip()
    print(f"openhands_patch: {what}: {detail}", file=sys.stderr)


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Calls ``callbacks[name](module)`` once ``name`` has been executed."""

    def __init__(self, callbacks: dict[str, Callback]) -> None:
        self._callbacks = dict(callbacks)
        self._lock = threading.Lock()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            if module.__name__ == fullname:  # a loader shared by several modules (zipimport) runs others too
                self.fire(fullname, module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def fire(self, name: str, module: ModuleType) -> None:
        with self._lock:
            callback = self._callbacks.pop(name, None)
        if callback is None:
            return
        try:
            callback(module)
        except Exception as exc:
            report(f"patching {name} failed, no capture from it", exc)

    def fire_loaded(self) -> None:
        """Run the callbacks of modules imported before the finder was installed."""
        for name in list(self._callbacks):
            module = sys.modules.get(name)
            if module is not None:
                self.fire(name, module)


_installed: PostImportFinder | None = None


def _patch_browser_env(module: ModuleType) -> None:
    from openhands_patch import _capture

    _capture.prepare_environment()
    _capture.patch_browser_env(module.BrowserEnv)


def _register_demo_tasks(module: ModuleType) -> None:
    from openhands_patch import _capture

    _capture.register_demo_tasks()


def _patch_experiment_loop(module: ModuleType) -> None:
    from openhands_patch import _capture

    _capture.patch_experiment_loop(module)


def _patch_openhands_browse(module: ModuleType) -> None:
    from openhands_patch import _capture

    _capture.patch_openhands_browse(module)


def _patch_openhands_browser_env(module: ModuleType) -> None:
    from openhands_patch import _capture

    _capture.patch_openhands_browser_env(module.BrowserEnv)


def install() -> None:
    """Watch ``browsergym.core.env``, ``browsergym.webarena``, the experiment loops (AgentLab's,
    BrowserGym's older one) and OpenHands' browser runtime; idempotent."""
    global _installed
    if _installed is not None:
        return
    _installed = PostImportFinder(
        {
            "browsergym.core.env": _patch_browser_env,
            "browsergym.webarena": _register_demo_tasks,
            "agentlab.experiments.loop": _patch_experiment_loop,
            "browsergym.experiments.loop": _patch_experiment_loop,
            # OpenHands V0's runtime: the agent's thought goes to the browser process with its action
            "openhands.runtime.browser": _patch_openhands_browse,
            "openhands.runtime.browser.browser_env": _patch_openhands_browser_env,
        }
    )
    sys.meta_path.insert(0, _installed)
    _installed.fire_loaded()
