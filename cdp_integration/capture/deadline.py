"""Deadlines for the capture's Playwright calls, and the stall budget one capture may spend on them.

Playwright's sync API blocks its thread until the driver answers, and some calls wait on browser
events that may never come (``Response.all_headers()`` waits for CDP's extra-info event, ``body()``
for the end of the response, ``title()`` for a frozen renderer). Nothing can interrupt such a call
from the same thread. ``bounded()`` does not wait that way: it runs the call's own coroutine (the
async implementation under the sync wrapper) inside ``asyncio.wait_for`` on Playwright's loop, so
the wait itself carries the deadline. On expiry asyncio cancels the coroutine, and Playwright turns
the cancelled protocol call into an ``__abort__`` message to its driver: nothing is left waiting.

``StallBudget`` is the time one capture (or one attach) may lose to calls that time out: each
waiting call gets at most ``min(cap, remaining budget)``; a call that times out spends what it
waited; once spent, further waiting calls fall back at once. So a stall costs the step at most the
budget, however many calls would have stalled, plus a tenth of it for each further frozen tab (a
renderer's first command always gets that much: see ``TimedCDP``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CaptureTimeout", "StallBudget", "bounded"]


class CaptureTimeout(TimeoutError):
    """A capture call missed its deadline (or was not made: the capture's stall budget was spent)."""


class StallBudget:
    """What is left of ``budget_ms`` for calls that never answer; ``cap_ms``: one waiting call's limit."""

    def __init__(self, budget_ms: float, cap_ms: float | None = None) -> None:
        self.budget_ms = budget_ms
        self.cap_ms = budget_ms if cap_ms is None else cap_ms
        self.spent_ms = 0.0
        self.timeouts = 0

    @property
    def remaining_ms(self) -> float:
        return max(0.0, self.budget_ms - self.spent_ms)

    def limit_ms(self, cap_ms: float | None = None) -> float:
        """The deadline of the next waiting call: its cap, or what is left of the budget if less."""
        return min(self.cap_ms if cap_ms is None else cap_ms, self.remaining_ms)

    def liveness_ms(self, cap_ms: float) -> float:
        """The deadline of a renderer's first command in this block: what is left of the budget, but
        at least a tenth of it, so one frozen tab does not cost the healthy ones their state."""
        return min(cap_ms, max(self.remaining_ms, self.budget_ms / 10))

    def spend(self, waited_ms: float) -> None:
        self.spent_ms += waited_ms
        self.timeouts += 1

    def within[T](self, wait: Callable[[float], T], what: str, cap_ms: float | None = None) -> T:
        """``wait(limit_ms)``, a wait that raises ``TimeoutError`` at its limit, given what is left of
        this budget (at most ``cap_ms``); what it waited before timing out is spent. ``CaptureTimeout``
        without waiting when the budget is spent already."""
        limit = self.limit_ms(cap_ms)
        if limit <= 0:
            raise CaptureTimeout(
                f"{what} not waited for: the capture's stall budget of {self.budget_ms:.0f} ms is spent"
            )
        started = time.monotonic()
        try:
            return wait(limit)
        except TimeoutError:
            self.spend((time.monotonic() - started) * 1000)
            raise

    def call(self, owner: Any, method: str, *args: Any, cap_ms: float | None = None) -> Any:
        """``owner.method(*args)`` (a Playwright sync-API call) within this budget; ``CaptureTimeout``
        when it misses its deadline or the budget is spent before it starts."""
        return self.within(
            lambda limit: bounded(owner, method, *args, timeout_ms=limit), f"{method}()", cap_ms
        )


def bounded(owner: Any, method: str, *args: Any, timeout_ms: float) -> Any:
    """``owner.method(*args)`` for a Playwright sync-API object, given up after ``timeout_ms``
    (``CaptureTimeout``). An object that is not Playwright's (a test double) is called as is."""
    impl = getattr(owner, "_impl_obj", None)
    run = getattr(owner, "_sync", None)
    if impl is None or run is None:
        return getattr(owner, method)(*args)
    from playwright._impl._sync_base import mapping

    function = getattr(impl, method)
    positional = [mapping.to_impl(arg) for arg in args]
    coroutine = function(
        *positional, **dict.fromkeys(_unset_options(impl, method, function, len(positional)))
    )
    try:
        result = run(asyncio.wait_for(coroutine, timeout_ms / 1000))
    except TimeoutError as exc:
        _forget(impl)
        raise CaptureTimeout(
            f"{type(owner).__name__}.{method}() gave no answer within {timeout_ms:.0f} ms"
        ) from exc
    return mapping.from_maybe_impl(result)


_UNSET_OPTIONS: dict[tuple[type, str, int], tuple[str, ...]] = {}


def _unset_options(impl: Any, method: str, function: Any, given: int) -> tuple[str, ...]:
    """The options of ``function`` (``impl.method``) after its ``given`` positional arguments that have
    no default: the sync API passes every option of a call, unset ones as None (``Page.content``'s
    ``include_shadow``). Worked out once per class and method, not on every capture call."""
    key = (type(impl), method, given)
    names = _UNSET_OPTIONS.get(key)
    if names is None:
        names = _UNSET_OPTIONS[key] = tuple(
            name
            for name, parameter in list(inspect.signature(function).parameters.items())[given:]
            if parameter.default is inspect.Parameter.empty
            and parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        )
    return names


def _forget(impl: Any) -> None:
    """Retrieve, whenever it ends, the wire-headers request a timed-out ``all_headers()`` left behind
    (Playwright shares it between callers and shields it from their cancellation); else asyncio
    reports its eventual error as never retrieved."""
    promise = getattr(impl, "_actual_headers_promise", None)
    if isinstance(promise, asyncio.Future):
        promise.add_done_callback(lambda done: done.cancelled() or done.exception())
