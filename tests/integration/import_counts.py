"""Per-format counts of the import tests (issue 22: "counts printed by the test").

Each import test tallies its real recordings: ``imported``, ``equal to live``, ``loud miss`` (a
``ReplayMissError`` naming what the format lacks) and ``silent`` (a score that differs from live:
must stay 0; the test counts it before failing, so the printed line says how many). ``report``
prints the line (seen with ``-s``, as ``make test-imports`` runs) and leaves it in the test run's
scratch directory, where ``tests/conftest.py`` prints every format's line in the terminal summary,
also under ``make test``'s ``-q`` and with pytest-xdist workers.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

__all__ = ["COUNTS_DIR", "report", "summary_lines"]

COUNTS_DIR = "import-counts"
ORDER = ("imported", "equal to live", "loud miss", "silent")


def report(fmt: str, counts: Counter[str] | dict[str, int]) -> str:
    """Print and record ``counts`` for ``fmt`` (e.g. ``browser-use``); returns the line."""
    known = [f"{key} {counts.get(key, 0)}" for key in ORDER]
    extra = [f"{key} {value}" for key, value in sorted(counts.items()) if key not in ORDER]
    line = f"{fmt}: " + ", ".join(known + extra)
    print(f"\nimports: {line}")
    run_dir = os.environ.get("CDP_TEST_RUN_DIR")
    if run_dir:
        where = Path(run_dir) / COUNTS_DIR
        where.mkdir(exist_ok=True)
        (where / f"{fmt}.json").write_text(json.dumps({"line": line}))
    return line


def summary_lines(run_dir: Path) -> list[str]:
    """The lines recorded in this test run, by format."""
    where = run_dir / COUNTS_DIR
    if not where.is_dir():
        return []
    return [json.loads(path.read_text())["line"] for path in sorted(where.glob("*.json"))]
