"""Run the official WebArena evaluator code as it is, with two settings it reads from its globals.

Nothing here edits or copies evaluator code. The evaluator modules read the site URLs from the
environment once, at import (``webarena.browser_env.env_config``, re-exported into
``helper_functions``), and ``HTMLContentEvaluator`` waits ``time.sleep(3)`` after each navigation.
``use_site_urls`` (from ``evaluate.configs``) points those module globals at the URLs an episode ran against, and
``skip_evaluator_sleep`` gives the evaluator module a ``time`` whose ``sleep`` returns at once.
"""

from __future__ import annotations

import contextlib
import os
import time
import types
from collections.abc import Iterator

from cdp_integration.evaluate.configs import use_site_urls

__all__ = ["offline_api_key", "skip_evaluator_sleep", "use_site_urls"]


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
