"""A fresh load is answered only by a capture of a page that had settled (issue 27).

The evaluator reads a fresh load ``EVALUATOR_WAIT_MS`` after its load event. A capture of a page that
runs scripts answers it only when its ``settling`` record shows the page did not change by itself
between the capture and that moment: from the capture itself (taken after it), from a later capture of
the same document, or from the session end's re-read. Otherwise a loud miss naming the reason.
Sessions built in memory; no browser.
"""

from __future__ import annotations

import pytest

from cdp_integration.errors import ReplayMissError
from cdp_integration.replay.page import MockBrowserContext
from cdp_integration.session import Step, TabState
from cdp_integration.session.models import EVALUATOR_WAIT_MS, SessionEnd, Settling
from cdp_integration.session.store import Session, new_header

URL = "http://meter.test/reading"
WAITING = '<html><body><p id="out">waiting for data</p><script src="/app.js"></script></body></html>'
FILLED = WAITING.replace("waiting for data", "reading: 17 kWh")
STATIC = "<html><body><p>reading: 9 kWh</p></body></html>"
LOAD = 200.0


def settled(age: float, *changes: tuple[float, float], origin: float = 1.0, **more: object) -> Settling:
    return Settling.model_validate(
        {
            "time_origin": origin,
            "age_ms": age,
            "load_ms": LOAD,
            "observed_from_ms": 5.0,
            "changes": changes,
            **more,
        }
    )


def step(index: int, html: str, settling: Settling | None) -> Step:
    tab = TabState(tab_id="T0", url=URL, title="t", active=True, html=html, settling=settling)
    return Step(index=index, trigger="action", timestamp=1000.0 + index, url=URL, title="t", tabs=[tab])


def context(*steps: Step, end: SessionEnd | None = None) -> MockBrowserContext:
    return MockBrowserContext(Session(header=new_header(), steps=tuple(steps), end=end), evaluation=None)


def refused(ctx: MockBrowserContext) -> str:
    assert ctx.fresh_load(URL) is None
    return ctx._refused[URL]


def test_a_capture_right_after_load_with_nothing_later_is_a_loud_miss() -> None:
    ctx = context(step(0, WAITING, settled(LOAD + 100, pending_requests=1)))
    reason = refused(ctx)
    assert "100 ms after its load (1 request(s) pending" in reason and "fill itself" in reason
    page = ctx.new_page()
    page.goto(URL)
    with pytest.raises(ReplayMissError, match="fill itself"):
        page.content()


def test_a_page_that_changed_by_itself_before_the_evaluators_read_is_refused() -> None:
    ctx = context(
        step(0, WAITING, settled(LOAD + 100)),
        step(1, FILLED, settled(LOAD + EVALUATOR_WAIT_MS + 500, (LOAD + 1200, LOAD + 1200))),
    )
    assert "changed by itself 1200 ms after the load" in refused(ctx)


def test_a_later_capture_of_the_same_document_proves_it_had_settled() -> None:
    early = step(0, FILLED, settled(LOAD + 100, (LOAD - 50, LOAD - 40)))
    ctx = context(early, step(1, FILLED, settled(LOAD + EVALUATOR_WAIT_MS + 500, (LOAD - 50, LOAD - 40))))
    assert ctx.fresh_load(URL) is not None


def test_a_later_capture_of_another_document_proves_nothing() -> None:
    late = LOAD + EVALUATOR_WAIT_MS + 500
    ctx = context(
        step(0, FILLED, settled(LOAD + 100)),
        step(1, FILLED, settled(late, (late - 100, late - 100), origin=2.0)),
    )
    assert ctx.fresh_load(URL) is None


def test_a_capture_after_the_wait_answers_unless_the_page_changed_in_between() -> None:
    late = LOAD + EVALUATOR_WAIT_MS + 800
    assert context(step(0, FILLED, settled(late, (LOAD + 900, LOAD + 950)))).fresh_load(URL) is not None
    changed = context(step(0, FILLED, settled(late, (LOAD + EVALUATOR_WAIT_MS + 300, late - 10))))
    assert "changed by itself" in refused(changed)
    overflow = context(step(0, FILLED, settled(late, changes_complete_until_ms=LOAD + 400)))
    assert "changed by itself" in refused(overflow)


def test_the_session_end_reread_settles_the_last_step() -> None:
    last = step(0, FILLED, settled(LOAD + 100))
    end = SessionEnd(ended=2000.0, settling={"T0": settled(LOAD + EVALUATOR_WAIT_MS + 100)})
    assert context(last, end=end).fresh_load(URL) is not None
    moved = SessionEnd(
        ended=2000.0, settling={"T0": settled(LOAD + EVALUATOR_WAIT_MS + 100, (LOAD + 700, LOAD + 700))}
    )
    assert "changed by itself" in refused(context(last, end=moved))


def test_still_loading_unrecorded_and_static_pages() -> None:
    loading = Settling(time_origin=1.0, age_ms=90.0, load_ms=None, observed_from_ms=5.0)
    assert "still loading" in refused(context(step(0, WAITING, loading)))
    unobserved = Settling(time_origin=1.0, age_ms=LOAD + EVALUATOR_WAIT_MS + 100, load_ms=LOAD)
    assert "not recorded" in refused(context(step(0, WAITING, unobserved)))
    assert context(step(0, STATIC, settled(LOAD + 10))).fresh_load(URL) is not None  # no scripts
    assert context(step(0, WAITING, None)).fresh_load(URL) is not None  # an earlier version's session
