"""The differential fidelity checker at full size: live answers against offline ones, per app.

Plays every episode of the chosen apps (the conformance apps of ``tests/conformance`` and the demo
shop) live with a ``CDPSessionLogger`` that knows nothing of any task, asks each step's questions live
before the next action (``tests/conformance/differential.py``), stops the app, then asks the same
questions of each saved session through the replay API. Prints per app: questions, equal, loud
misses, silent differences, and then every silent difference with the question and both answers.

    .venv/bin/python scripts/differential_check.py [--apps dokuwiki,trac,demo] [--questions-per-step 120]
        [--seed 0] [--episodes N] [--show N] [--keep DIR]

Exit status: 0 with no silent difference, 1 with any, 2 on bad arguments or an app that cannot start.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", default="", help="comma-separated app names (default: every available app)")
    parser.add_argument(
        "--questions-per-step", type=int, default=120, help="sampled questions per tab and step"
    )
    parser.add_argument(
        "--fresh-per-url", type=int, default=10, help="questions per fresh load of a seen URL"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=0, help="at most this many episodes per app (0: all)")
    parser.add_argument("--show", type=int, default=200, help="print at most this many silent differences")
    parser.add_argument("--keep", type=Path, default=None, help="keep the session files in this directory")
    args = parser.parse_args(argv)

    from cdp_integration import environment

    environment.prepare()
    from tests.conformance import differential, sources
    from tests.conformance.sources import check_source

    known = {source.name: source for source in sources.all_sources()}
    wanted = [name for name in args.apps.split(",") if name] or list(known)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        print(
            f"differential_check: error: unknown app(s) {', '.join(unknown)} (known: {', '.join(known)})",
            file=sys.stderr,
        )
        return 2
    outcomes: dict[str, list[tuple[str, differential.Outcome]]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cdp-differential-") as scratch:
        out = args.keep or Path(scratch) / "sessions"
        for name in wanted:
            source = known[name]
            reason = source.missing()
            if reason:
                print(f"{name}: skipped ({reason})", flush=True)
                continue
            outcomes[name] = check_source(
                source,
                Path(scratch),
                out,
                seed=args.seed,
                per_step=args.questions_per_step,
                fresh_per_url=args.fresh_per_url,
                max_episodes=args.episodes or None,
                log=lambda line: print(line, flush=True),
            )
    print()
    print(differential.format_report({app: [o for _, o in rows] for app, rows in outcomes.items()}))
    silent = [(label, o) for rows in outcomes.values() for label, o in rows if o.verdict == "silent"]
    print(f"\n{len(silent)} silent difference(s) in {time.perf_counter() - started:.0f} s (seed {args.seed})")
    for label, outcome in silent[: args.show]:
        print(differential.format_silent(label, outcome))
    if len(silent) > args.show:
        print(f"... {len(silent) - args.show} more (--show)")
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())
