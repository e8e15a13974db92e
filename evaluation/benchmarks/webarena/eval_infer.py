"""Score a directory of captured sessions offline (OpenHands-style ``eval_infer``).

    python evaluation/benchmarks/webarena/eval_infer.py SESSIONS_DIR [--output-dir D]
        [--configs FILE_OR_DIR] [--workers N] [--no-resume] [--scorer webarena|verified]

The same command as ``cdp-session eval`` (``cdp_integration.evaluate.command``); ``--help`` for more.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from cdp_integration.evaluate.command import eval_command

if __name__ == "__main__":
    eval_command.main(prog_name="eval_infer.py")
