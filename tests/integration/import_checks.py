"""What the import tests share: per-format counts (issue 22: "counts printed by the test"), and the
check that ``view`` and ``debug`` work on an imported session.

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

__all__ = ["COUNTS_DIR", "report", "summary_lines", "view_and_debug"]

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


def view_and_debug(session_path: Path, out: Path) -> None:
    """``cdp-session view`` writes the viewer with every step and the last URL; ``debug`` steps from
    the first step to the second and shows its URL (issue 22: both work on imported sessions)."""
    from click.testing import CliRunner

    from cdp_integration.cli import cli
    from cdp_integration.session.store import load_session

    session = load_session(session_path)
    runner = CliRunner()
    viewer = runner.invoke(cli, ["view", str(session_path), "-o", str(out / "view.html")])
    assert viewer.exit_code == 0, viewer.output
    assert f"({len(session.steps)} steps" in viewer.output
    assert session.steps[-1].url in (out / "view.html").read_text()
    stepper = runner.invoke(cli, ["debug", str(session_path)], input="n\nq\n")
    assert stepper.exit_code == 0, stepper.output
    assert f"step      1 of {len(session.steps) - 1}" in stepper.output
    assert session.steps[1].url in stepper.output
