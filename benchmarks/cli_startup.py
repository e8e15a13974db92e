"""Start-up cost of ``cdp-session --help`` and ``import cdp_integration``, next to a bare interpreter.

Run::

    .venv/bin/python benchmarks/cli_startup.py [--runs 15]

Each command runs ``--runs`` times, interleaved (so machine load hits all alike), in fresh
processes. Printed per command: median wall time, median CPU time (user + sys of the child), and the
ratio to ``python -c pass``. Target: ``cdp-session --help`` median wall under 0.25 s. On a loaded
machine the wall time grows for every row; the ratio column and the CPU times stay comparable.
Also checked: ``import cdp_integration`` loads no Playwright, BrowserGym or WebArena module.
Exit status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.25
HEAVY = ("playwright", "browsergym", "webarena", "webarena_verified", "openhands")


def _run(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    python = sys.executable
    script = Path(python).with_name("cdp-session")
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "import cdp_integration": [python, "-c", "import cdp_integration"],
        "cdp-session --help": [str(script), "--help"],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(_run(argv))
    base = statistics.median(wall for wall, _ in times["python -c pass"])
    print(
        f"{'command':<24} {'wall median':>12} {'cpu median':>11} {'x python':>9}   (load {os.getloadavg()[0]:.1f})"
    )
    for name, rows in times.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{name:<24} {wall:>10.3f} s {cpu:>9.3f} s {wall / base:>8.1f}x")
    help_wall = statistics.median(w for w, _ in times["cdp-session --help"])
    ok = help_wall < TARGET_S
    print(f"{'PASS' if ok else 'FAIL'}  cdp-session --help median {help_wall:.3f} s (target < {TARGET_S} s)")
    probe = "import sys, cdp_integration; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    heavy = [name for name in HEAVY if name in loaded]
    print(
        f"{'PASS' if not heavy else 'FAIL'}  import cdp_integration loads {', '.join(heavy) or 'no'} heavy module"
    )
    return 0 if ok and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())
