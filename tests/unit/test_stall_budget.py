"""The capture's stall budget: what calls that never answer may cost one capture, in total.

Browser-free: ``bounded`` runs a Playwright-like object's coroutine under ``asyncio.wait_for`` through
its ``_sync`` (here an event loop of the test's own); ``TimedCDP`` over a fake session that times out.
The real-Chromium stalls are in ``tests/integration/test_capture_stalls.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from cdp_integration.capture.deadline import CaptureTimeout, StallBudget, bounded
from cdp_integration.capture.tabs import TimedCDP


class Never:
    """An impl whose ``all_headers`` waits forever (the extra info Chromium never sends)."""

    async def all_headers(self) -> dict[str, str]:
        await asyncio.Event().wait()
        return {}

    async def title(self) -> str:
        return "answered"


class SyncLike:
    def __init__(self) -> None:
        self._impl_obj = Never()
        self.loop = asyncio.new_event_loop()

    def _sync(self, coroutine: Any) -> Any:
        """Run on a thread of its own: an earlier test's Playwright (the offline sandbox) may have left
        its loop marked running in this thread, where a second loop cannot run."""
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = self.loop.run_until_complete(coroutine)
            except BaseException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]


def test_a_call_that_never_answers_gives_up_at_its_deadline() -> None:
    owner = SyncLike()
    try:
        started = time.monotonic()
        with pytest.raises(CaptureTimeout, match="all_headers"):
            bounded(owner, "all_headers", timeout_ms=100)
        assert time.monotonic() - started < 2
        assert bounded(owner, "title", timeout_ms=100) == "answered"
    finally:
        owner.loop.close()


def test_the_budget_is_spent_once_then_waiting_calls_fall_back_at_once() -> None:
    owner = SyncLike()
    budget = StallBudget(300, cap_ms=200)
    try:
        started = time.monotonic()
        for _ in range(5):
            with pytest.raises(CaptureTimeout):
                budget.call(owner, "all_headers")
        assert time.monotonic() - started < 1.5  # 200 + 100 ms, then no more waiting
        assert budget.remaining_ms == 0 and budget.timeouts == 2
    finally:
        owner.loop.close()


class HungSession:
    def __init__(self, answers: set[str]) -> None:
        self.answers = answers
        self.limits: list[tuple[str, float]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, *, timeout: float) -> Any:
        self.limits.append((method, timeout))
        if method not in self.answers:
            raise PlaywrightTimeoutError(f"{method}: timeout {timeout}ms")
        return {}


def test_a_renderers_first_command_waits_only_for_the_budget_then_patience() -> None:
    budget = StallBudget(2_000)
    alive = TimedCDP(HungSession({"Page.getFrameTree", "DOM.getDocument"}), 30_000, lambda: budget)
    alive.send("Page.getFrameTree")
    alive.send("DOM.getDocument")
    assert [limit for _, limit in alive.session.limits] == [2_000, 30_000]
    frozen = TimedCDP(HungSession({"Target.getTargetInfo"}), 30_000, lambda: budget)
    with pytest.raises(PlaywrightTimeoutError):
        frozen.send("Page.getFrameTree")
    with pytest.raises(TimeoutError, match="not sent"):
        frozen.send("DOM.getDocument")
    frozen.send("Target.getTargetInfo")  # the browser process still answers
    budget.spend(budget.remaining_ms)
    other = TimedCDP(HungSession(set()), 30_000, lambda: budget)
    with pytest.raises(PlaywrightTimeoutError):
        other.send("Page.getFrameTree")
    assert other.session.limits == [("Page.getFrameTree", 200)]  # a tenth of the budget, always
