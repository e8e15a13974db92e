"""What keeping the checks costs: scoring the golden sessions with and without them, side by side.

Run::

    .venv/bin/python benchmarks/explain_overhead.py [--rounds 5]

Each round scores every golden session (``tests/fixtures/sessions/v*/``, every step BrowserGym
validated) three times in this process: once as shipped (the official evaluators' comparisons recorded,
the failure class worked out from the failed checks asked again at every step), once with the class
as a no-op, and once with the recording of the checks too,
in alternating order. CPU time of this process is compared (wall time is printed too; on a shared
machine it is noisier). Target: scoring with checks within 10% of scoring without (exit status 1
on a miss); the failure class's own cost is printed per failed session (only those pay it).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdp_integration.evaluate import scoring
from cdp_integration.session.store import Session, load_session

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.10


@contextlib.contextmanager
def _without(*, checks: bool) -> Iterator[None]:
    """The failure class (asking the failed checks again, the evidence) as no-ops; ``checks``: the
    recording of the checks too."""
    record, attribute, ask = scoring.record_webarena_checks, scoring.attribute, scoring._ask_failed_checks

    def no_attribution(*args: Any, **kwargs: Any) -> None:
        return None

    if checks:
        scoring.record_webarena_checks = lambda recorder: contextlib.nullcontext(recorder)  # type: ignore[assignment,return-value]
    scoring.attribute = no_attribution  # type: ignore[assignment]
    scoring._ask_failed_checks = lambda *args, **kwargs: {}  # type: ignore[assignment]
    try:
        yield
    finally:
        scoring.record_webarena_checks, scoring.attribute, scoring._ask_failed_checks = record, attribute, ask


def _score_all(sessions: list[Session]) -> tuple[float, float, list[float | None]]:
    cpu, wall = time.process_time(), time.perf_counter()
    scores = [scoring.evaluate_session(session).score for session in sessions]
    return time.process_time() - cpu, time.perf_counter() - wall, scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    paths = sorted((REPO / "tests" / "fixtures" / "sessions").glob("v*/*.session.jsonl.gz"))
    sessions = [load_session(path) for path in paths]
    steps = sum(sum(1 for s in session.steps if s.evaluation is not None) for session in sessions)
    _score_all(sessions)  # imports and caches warm
    modes: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
        "without checks": lambda: _without(checks=True),
        "checks only": lambda: _without(checks=False),
        "checks + class": contextlib.nullcontext,
    }
    totals = {mode: [0.0, 0.0] for mode in modes}
    for round_ in range(args.rounds):
        order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
        results = {}
        for mode in order:
            with modes[mode]():
                cpu, wall, scores = _score_all(sessions)
            totals[mode][0] += cpu
            totals[mode][1] += wall
            results[mode] = scores
        if len({tuple(map(str, scores)) for scores in results.values()}) != 1:
            print("FAIL: the scores differ with and without the checks")
            return 1
    failed = sum(1 for session in sessions if scoring.evaluate_session(session).score == 0.0)
    print(
        f"{len(sessions)} golden sessions ({failed} failed), {steps} evaluated steps, {args.rounds} rounds each"
    )
    print(f"{'':<16}{'CPU s':>10}{'wall s':>10}{'ms/session':>12}")
    for mode, (cpu, wall) in totals.items():
        per = cpu / (args.rounds * len(sessions)) * 1000
        print(f"{mode:<16}{cpu:>10.2f}{wall:>10.2f}{per:>12.1f}")
    ratio = totals["checks only"][0] / totals["without checks"][0]
    wall_ratio = totals["checks only"][1] / totals["without checks"][1]
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(
        f"cost of scoring with checks: {ratio:.3f}x CPU ({wall_ratio:.3f}x wall); target <= {TARGET:.2f}x {verdict}"
    )
    extra = (totals["checks + class"][0] - totals["checks only"][0]) / (args.rounds * max(failed, 1)) * 1000
    print(
        f"the failure class (failed checks asked at every step, evidence): {extra:.1f} ms CPU per failed "
        f"session ({totals['checks + class'][0] / totals['without checks'][0]:.3f}x CPU in all)"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
