"""V0 ``--num-workers N`` starts its per-task children one at a time (``sdk_v0.StartGate``).

The children here are small Python processes speaking the gate's protocol (one byte on the fd
``--v0-ready-fd`` names once "the browser is up"), so the gate is exercised with real processes
and pipes, without OpenHands. What an OpenHands child does with the fd is checked end to end by
``test_webarena_run_infer.py``'s ``agent-n2`` run.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))

import sdk_v0  # noqa: E402  (this directory's own module)

FIRST = """
import os, sys, time
marks, fd = sys.argv[1], int(sys.argv[sys.argv.index("--v0-ready-fd") + 1])
open(os.path.join(marks, "first-started"), "w").close()
deadline = time.monotonic() + 3  # long enough for an ungated second child to start
while time.monotonic() < deadline and not os.path.exists(os.path.join(marks, "second-started")):
    time.sleep(0.05)
saw = os.path.exists(os.path.join(marks, "second-started"))
open(os.path.join(marks, "first-saw-second" if saw else "first-alone"), "w").close()
os.write(fd, b"1")
"""
SECOND = """
import os, sys
open(os.path.join(sys.argv[1], "second-started"), "w").close()
"""


def _start(gate: sdk_v0.StartGate, script: str, marks: Path, log: Path, out: list[object]) -> None:
    with open(log, "wb") as sink:
        process, waited, up = gate.start([sys.executable, "-c", script, str(marks)], sink)
        out.extend([process.wait(), waited, up])


def test_the_next_child_starts_once_the_previous_ones_browser_is_up(tmp_path: Path) -> None:
    gate = sdk_v0.StartGate()
    first: list[object] = []
    second: list[object] = []
    one = threading.Thread(target=_start, args=(gate, FIRST, tmp_path, tmp_path / "1.log", first))
    one.start()
    while not (tmp_path / "first-started").exists() and one.is_alive():
        time.sleep(0.05)
    two = threading.Thread(target=_start, args=(gate, SECOND, tmp_path, tmp_path / "2.log", second))
    two.start()
    one.join(timeout=60)
    two.join(timeout=60)
    assert (tmp_path / "first-alone").exists(), "the second child started before the first was up"
    assert (tmp_path / "second-started").exists()
    assert first[0] == 0 and second[0] == 0, (
        (tmp_path / "1.log").read_text(),
        (tmp_path / "2.log").read_text(),
    )
    assert isinstance(second[1], float) and second[1] > 0  # seconds the second waited at the gate


def test_a_child_that_ends_before_its_browser_is_up_frees_the_gate(tmp_path: Path) -> None:
    gate = sdk_v0.StartGate()
    with open(tmp_path / "log", "wb") as sink:
        process, _, _ = gate.start([sys.executable, "-c", "import sys; sys.exit(3)"], sink)
        assert process.wait() == 3
        process, _, _ = gate.start([sys.executable, "-c", SECOND, str(tmp_path)], sink)
        assert process.wait() == 0
    assert (tmp_path / "second-started").exists()
