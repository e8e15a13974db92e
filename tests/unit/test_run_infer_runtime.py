"""``run_infer.py``'s V0 agent mode (``sdk_v0``) gives OpenHands' LocalRuntime longer to start than its fixed 120 s."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))


def test_the_runtime_waits_run_infers_limit_with_openhands_own_check() -> None:
    import sdk_v0
    from openhands.runtime.impl.local.local_runtime import LocalRuntime

    runtime = LocalRuntime.__new__(LocalRuntime)  # no server started: only the wait is inspected
    sdk_v0._wait_longer_for_start(runtime)
    patient = runtime._wait_until_alive
    stops = getattr(patient.retry.stop, "stops", (patient.retry.stop,))
    assert [s.max_delay for s in stops if hasattr(s, "max_delay")] == [sdk_v0.RUNTIME_START_S]
    assert len(stops) == 2  # OpenHands' own "should exit" stop is kept
    assert patient.__self__ is runtime
    assert patient.__wrapped__ is LocalRuntime._wait_until_alive.__wrapped__  # the same check, retried longer
    assert LocalRuntime._wait_until_alive.retry.stop is not patient.retry.stop  # the class is untouched
