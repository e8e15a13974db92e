"""Work on untrusted input is linear in it: four times the input costs about four times the time.

Each case times the same work on an input of size n and 4n (CPU time of this process, the best of
three runs, so other processes on a loaded machine barely count) and bounds the ratio by 8: linear
work gives ~4, the quadratic scans these replaced gave ~16 (each was measured so before its fix).
The inputs are the crafted shapes that made them quadratic: unclosed tags, stray end tags, many
secrets, many steps and document loads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.replay.guard import captured_scripts
from cdp_integration.replay.offline import refresh_targets
from cdp_integration.replay.text import visible_text
from cdp_integration.session.markup import iter_tags
from cdp_integration.session.models import FormControlState, SessionEnd, Step, TabState
from cdp_integration.session.redact import redact_session
from cdp_integration.session.store import Session, new_header
from tests.hostile_gen import TRACE_HEAD, _har, _har_entry, _trace, snapshot

RATIO = 8.0


def _cpu(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return max(best, 1e-4)


def assert_linear(make: Callable[[int], Callable[[], object]], n: int) -> None:
    small, large = make(n), make(4 * n)
    ratio = _cpu(large) / _cpu(small)
    assert ratio < RATIO, f"4x the input took {ratio:.1f}x the time (linear: ~4, quadratic: ~16)"


def test_unclosed_input_tags_are_found_in_linear_time() -> None:
    assert_linear(lambda n: lambda: list(iter_tags('<input a="b" ' * n + "x" * n, "input")), 20_000)


def test_unclosed_quotes_in_input_tags_are_found_in_linear_time() -> None:
    assert_linear(lambda n: lambda: list(iter_tags('<input a="' * n + "x" * n, "input")), 20_000)


def test_unclosed_script_tags_are_checked_in_linear_time() -> None:
    assert_linear(lambda n: lambda: captured_scripts("<script type=x " * n), 20_000)


def test_unclosed_meta_tags_are_checked_in_linear_time() -> None:
    assert_linear(
        lambda n: lambda: refresh_targets("<meta http-equiv=refresh " * n, "http://shop.test/"), 20_000
    )


def test_stray_end_tags_cost_a_constant_each() -> None:
    control = FormControlState(
        tag="input", type="text", value="v", path=[0], name="q", id="", autocomplete=""
    )

    def make(n: int) -> Callable[[], object]:
        page = "<div>" * n + "</span>" * n + "<input name=q>"
        return lambda: visible_text(page, [control])

    assert_linear(make, 5_000)


def _session(secrets: int, page: int) -> Session:
    network = [
        {
            "request_id": f"r{n}",
            "tab_id": "T1",
            "started": 1.0,
            "request": {
                "method": "POST",
                "url": "http://shop.test/login",
                "headers": {"content-type": "application/x-www-form-urlencoded"},
                "post_data": f"user=emma&password=pw{n:08d}secret",
            },
        }
        for n in range(secrets)
    ]
    html = "<p>" + " ".join(f"word{n % 977} pw{n:08d}secret" for n in range(page)) + "</p>"
    step = Step.model_validate(
        {
            "index": 0,
            "trigger": "reset",
            "timestamp": 1.0,
            "url": "http://shop.test/",
            "title": "Shop",
            "tabs": [TabState(tab_id="T1", url="http://shop.test/", title="Shop", active=True, html=html)],
            "network": network,
        }
    )
    return Session(header=new_header(), steps=(step,), end=SessionEnd(ended=2.0), complete=True)


def test_redaction_is_linear_in_the_secrets_and_the_page() -> None:
    """Every secret is looked for in every string: one pattern for all, not one scan per secret."""

    def make(n: int) -> Callable[[], object]:
        session = _session(n, 10 * n)
        return lambda: redact_session(session)

    assert_linear(make, 400)


def _trace_of(steps: int, tmp: Path) -> Path:
    events: list[Any] = list(TRACE_HEAD)
    network = []
    for n in range(steps):
        call = f"a{n}"
        events.append(
            {
                "type": "before",
                "callId": call,
                "class": "Frame",
                "method": "click",
                "startTime": float(n),
                "params": {"selector": "p"},
            }
        )
        events.append(snapshot(["HTML", {}, ["BODY", {}, f"step {n}"]], call))
        events.append({"type": "after", "callId": call, "endTime": float(n) + 0.5})
        entry = _har_entry(n)
        entry.update(pageref="page@1", _monotonicTime=float(n) + 0.2)
        network.append(json.dumps({"type": "resource-snapshot", "snapshot": entry}).encode())
    path = tmp / f"{steps}.zip"
    return _trace(path, events, network=b"\n".join(network) + b"\n")


def test_trace_steps_look_up_their_snapshots_and_documents_by_index(tmp_path: Path) -> None:
    from cdp_integration.imports.playwright_trace import import_trace

    def make(n: int) -> Callable[[], object]:
        path = _trace_of(n, tmp_path)
        return lambda: import_trace(path)

    assert_linear(make, 300)


def test_cookies_sent_are_looked_up_by_name_not_searched(tmp_path: Path) -> None:
    """A Verified log whose requests send n cookies each: the jar indexes them by name."""
    from cdp_integration.imports.verified import import_verified_task

    def make(n: int) -> Callable[[], object]:
        task = tmp_path / f"{n}" / "7"
        task.mkdir(parents=True)
        (task / "agent_response.json").write_text('{"task_type": "RETRIEVE", "status": "SUCCESS"}')
        cookie = "; ".join(f"c{i}=v{i}" for i in range(n))
        entries = [_har_entry(i) for i in range(5)]
        for entry in entries:
            entry["request"]["headers"].append({"name": "Cookie", "value": cookie})
        (task / "network.har").write_bytes(_har(entries))
        return lambda: import_verified_task(task)

    assert_linear(make, 250)


@pytest.mark.parametrize("shape", ["nested", "flat"])
def test_the_linear_check_fails_on_quadratic_work(shape: str) -> None:
    """The bound is tight enough: a quadratic scan (each item looks at all before it) fails it."""

    def make(n: int) -> Callable[[], object]:
        items = list(range(n))
        if shape == "nested":
            return lambda: [sum(1 for _ in items[:i]) for i in range(0, n, 1)]
        return lambda: [items.index(i) for i in range(n)]

    with pytest.raises(AssertionError, match="quadratic"):
        assert_linear(make, 1_500)


def test_compare_is_linear_in_the_trials_of_one_task(tmp_path: Path) -> None:
    """Every line one task, every trial failing in both runs with another score: finding the trials
    whose outcome differs looks at each trial once, not at every pair."""
    from cdp_integration.evaluate.compare import compare_runs
    from cdp_integration.evaluate.runs import read_run
    from tests.unit.test_runs import line, write_run

    def make(n: int) -> Callable[[], object]:
        a = write_run(tmp_path / f"a{n}", [line(f"a{i}", 7, 0.0) for i in range(n)])
        b = write_run(tmp_path / f"b{n}", [line(f"b{i}", 7, 0.5) for i in range(n)])
        run_a, run_b = read_run(a), read_run(b)
        return lambda: compare_runs(run_a, run_b)

    assert_linear(make, 1_500)
