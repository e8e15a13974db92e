"""``Session``'s per-step accessors: the one place that knows what belongs to step i.

The end record holds what the last step's capture could not: traffic that completed afterwards (a
final form POST) and, when the last step had no ``validate()`` of its own, the logger's end probe.
"""

from __future__ import annotations

import pytest

from cdp_integration.errors import CDPIntegrationError, StepIndexError
from cdp_integration.session import (
    FORMAT_VERSION,
    Evaluation,
    NetworkExchange,
    RequestInfo,
    Session,
    SessionEnd,
    SessionHeader,
    Step,
)


def exchange(request_id: str) -> NetworkExchange:
    return NetworkExchange(
        request_id=request_id,
        tab_id="T1",
        started=1.0,
        request=RequestInfo(method="GET", url=f"http://127.0.0.1/{request_id}", headers={}),
    )


def step(index: int, *, evaluation: Evaluation | None = None) -> Step:
    return Step(
        index=index,
        trigger="action",
        timestamp=1.0,
        url=f"http://127.0.0.1/{index}",
        title=str(index),
        tabs=[],
        network=[exchange(f"s{index}")],
        evaluation=evaluation,
    )


HEADER = SessionHeader(format_version=FORMAT_VERSION, created=0.0, tool="test")
VALIDATE = Evaluation(kind="validate", score=0.0)
PROBE = Evaluation(kind="probe", score=1.0)


def session(steps: list[Step], end: SessionEnd | None = None) -> Session:
    return Session(header=HEADER, steps=tuple(steps), end=end)


def test_step_counts_from_the_end_when_negative() -> None:
    s = session([step(0), step(1), step(2)])
    assert s.step(0).index == 0 and s.step(-1).index == 2 and s.step(-3).index == 0
    assert s.step_index(-1) == 2


@pytest.mark.parametrize("wanted", [3, -4, 100])
def test_one_error_for_a_step_out_of_range(wanted: int) -> None:
    s = session([step(0), step(1), step(2)])
    for accessor in (s.step, s.step_index, s.evaluation_at, s.network_at, s.answer_at):
        with pytest.raises(
            StepIndexError, match=rf"step {wanted} is out of range: the session has steps 0\.\.2"
        ):
            accessor(wanted)
    assert issubclass(StepIndexError, IndexError) and issubclass(StepIndexError, CDPIntegrationError)


def test_an_empty_session_has_no_step() -> None:
    with pytest.raises(StepIndexError, match="the session has no steps"):
        session([]).step(-1)


def test_the_end_probe_is_the_evaluation_of_the_last_step_only() -> None:
    end = SessionEnd(ended=2.0, probe=PROBE)
    s = session([step(0), step(1)], end)
    assert s.evaluation_at(-1) == PROBE and s.evaluation_at(1) == PROBE
    assert s.evaluation_at(0) is None


def test_a_recorded_validate_wins_over_the_end_probe() -> None:
    s = session([step(0), step(1, evaluation=VALIDATE)], SessionEnd(ended=2.0, probe=PROBE))
    assert s.evaluation_at(-1) == VALIDATE


def test_the_end_records_traffic_belongs_to_the_last_step() -> None:
    end = SessionEnd(ended=2.0, network=[exchange("late-post")])
    s = session([step(0), step(1)], end)
    assert [e.request_id for e in s.network_at(0)] == ["s0"]
    assert [e.request_id for e in s.network_at(-1)] == ["s1", "late-post"]
    assert [e.request_id for e in session([step(0), step(1)]).network_at(1)] == ["s1"]


def test_the_final_answer_is_in_the_chat_of_the_last_step_only() -> None:
    s = session([step(0), step(1), step(2)], SessionEnd(ended=2.0, final_answer="42"))
    assert [s.answer_at(i) for i in (0, 1, 2, -1, -2, -3)] == [None, None, "42", "42", None, None]
    assert session([step(0)]).answer_at(-1) is None
