"""Run the official WebArena evaluator code as it is, with the settings it reads from its globals.

Nothing here edits or copies evaluator code. The evaluator modules read the site URLs from the
environment once, at import (``webarena.browser_env.env_config``, re-exported into
``helper_functions``), and ``HTMLContentEvaluator`` waits ``time.sleep(3)`` after each navigation.
``use_site_urls`` points those module globals at the URLs an episode ran against, and
``skip_evaluator_sleep`` gives the evaluator module a ``time`` whose ``sleep`` returns at once.

A bottom-layer module: the logger's live end-of-episode probe (capture) and offline scoring
(evaluate) both need these settings, and neither may import the other's layer for them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import types
from collections.abc import Iterator, Mapping

from cdp_integration.environment import WEBARENA_SITES

__all__ = ["offline_api_key", "skip_evaluator_sleep", "use_site_urls"]

_URL_MODULES = ("webarena.browser_env.env_config", "webarena.evaluation_harness.helper_functions")


@contextlib.contextmanager
def skip_evaluator_sleep() -> Iterator[None]:
    """Within the block, ``HTMLContentEvaluator``'s fixed 3 s waits return immediately.

    Offline there is nothing to wait for; live, use it only where pages are loaded when ``goto``
    returns (the in-process demo site).
    """
    import webarena.evaluation_harness.evaluators as evaluators

    quick = types.SimpleNamespace(
        **{name: getattr(time, name) for name in dir(time) if not name.startswith("__")}
    )
    quick.sleep = lambda seconds: None
    original = evaluators.time
    evaluators.time = quick  # type: ignore[assignment]
    try:
        yield
    finally:
        evaluators.time = original


@contextlib.contextmanager
def use_site_urls(urls: Mapping[str, str]) -> Iterator[None]:
    """Point the evaluator's site globals (``SHOPPING``, ...) and variables at ``urls`` for the block.

    ``urls`` maps site names, in either spelling (``SHOPPING`` or ``shopping``), to base URLs;
    sites not given keep their current value.
    """
    import webarena.evaluation_harness.helper_functions  # noqa: F401 - reads the variables at first import

    wanted = {name.upper(): url for name, url in urls.items() if name.upper() in WEBARENA_SITES}
    saved_env = {key: os.environ.get(key) for site in wanted for key in (site, f"WA_{site}")}
    for site, url in wanted.items():
        os.environ[site] = os.environ[f"WA_{site}"] = url
    saved_globals: list[tuple[types.ModuleType, str, object]] = []
    for module_name in _URL_MODULES:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for site, url in wanted.items():
            if hasattr(module, site):
                saved_globals.append((module, site, getattr(module, site)))
                setattr(module, site, url)
    try:
        yield
    finally:
        for module, site, value in reversed(saved_globals):
            setattr(module, site, value)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def offline_api_key() -> Iterator[None]:
    """An ``OPENAI_API_KEY`` placeholder for the block when none is set.

    The LLM judge's client refuses to start without a key even when every call it makes is answered
    from a recording; the placeholder never leaves the process (replay intercepts the transport).
    """
    if os.environ.get("OPENAI_API_KEY"):
        yield
        return
    os.environ["OPENAI_API_KEY"] = "cdp-integration-offline-replay"
    try:
        yield
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
