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
    parser.add_argument("--matching", default="", help="only episodes whose label matches this regex")
    parser.add_argument("--show", type=int, default=200, help="print at most this many silent differences")
    parser.add_argument("--keep", type=Path, default=None, help="keep the session files in this directory")
    parser.add_argument(
        "--no-order-check",
        action="store_true",
        help="skip scoring the sessions with `cdp-session eval` forward, reversed and shuffled",
    )
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
    sessions: list[Path] = []
    configs: list[dict[str, object]] = []
    order_problems: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cdp-differential-") as scratch:
        out = args.keep or Path(scratch) / "sessions"
        for name in wanted:
            source = known[name]
            reason = source.missing()
            if reason:
                print(f"{name}: skipped ({reason})", flush=True)
                continue
            run = check_source(
                source,
                Path(scratch),
                out,
                seed=args.seed,
                per_step=args.questions_per_step,
                fresh_per_url=args.fresh_per_url,
                max_episodes=args.episodes or None,
                matching=args.matching,
                log=lambda line: print(line, flush=True),
            )
            outcomes[name] = run.outcomes
            sessions += run.sessions
            configs += run.configs
        if not args.no_order_check and sessions:
            order_problems = order_check(sessions, configs, Path(scratch) / "order", seed=args.seed)
    print()
    print(differential.format_report({app: [o for _, o in rows] for app, rows in outcomes.items()}))
    silent = [(label, o) for rows in outcomes.values() for label, o in rows if o.verdict == "silent"]
    print(f"\n{len(silent)} silent difference(s) in {time.perf_counter() - started:.0f} s (seed {args.seed})")
    for label, outcome in silent[: args.show]:
        print(differential.format_silent(label, outcome))
    if len(silent) > args.show:
        print(f"... {len(silent) - args.show} more (--show)")
    for problem in order_problems:
        print(problem)
    return 1 if silent or order_problems else 0


def order_check(
    sessions: list[Path], configs: list[dict[str, object]], work: Path, *, seed: int
) -> list[str]:
    """Score the same sessions with ``cdp-session eval`` (one worker) forward, reversed and shuffled;
    every session must get the same score (or the same error) in all three: no question's sandbox state
    may reach another session's. Returns the differences found (empty: identical)."""
    import json
    import random
    import shutil
    import subprocess
    from collections import Counter

    work.mkdir(parents=True)
    config_file = work / "configs.json"
    config_file.write_text(json.dumps(configs))
    shuffled = list(sessions)
    random.Random(seed).shuffle(shuffled)
    orders = {"forward": list(sessions), "reversed": list(reversed(sessions)), "shuffled": shuffled}
    scores: dict[str, dict[str, object]] = {}
    for name, order in orders.items():
        directory = work / name
        directory.mkdir()
        for rank, path in enumerate(order):  # eval walks a directory in name order
            shutil.copy(path, directory / f"{rank:05d}-{path.name}")
        started = time.perf_counter()
        done = subprocess.run(
            [
                str(ROOT / ".venv" / "bin" / "cdp-session"),
                "eval",
                str(directory),
                "--configs",
                str(config_file),
                "--no-progress",
                "--no-resume",
                "-o",
                str(work / f"{name}-out"),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return [
                f"order check: cdp-session eval ({name}) exited {done.returncode}: {done.stderr.strip()[-2000:]}"
            ]
        scores[name] = {}
        for line in (work / f"{name}-out" / "output.jsonl").read_text().splitlines():
            row = json.loads(line)
            session = row["metadata"]["session_path"].split("-", 1)[1]
            result = row["test_result"]
            scores[name][session] = (
                result["score"] if result.get("error") is None else result.get("error_type")
            )
        tally = Counter(map(str, scores[name].values()))
        print(f"order check: {name}: scores {dict(sorted(tally.items()))}", flush=True)
        print(
            f"order check: {name}: {len(scores[name])} sessions scored in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    problems = []
    for session in sorted(scores["forward"]):
        seen = {name: scores[name].get(session) for name in orders}
        if len(set(map(str, seen.values()))) > 1:
            problems.append(f"order check: {session} scored differently: {seen}")
    outcome = "identical" if not problems else f"{len(problems)} session(s) differ"
    print(
        f"order check: {len(sessions)} sessions scored forward, reversed and shuffled: {outcome}", flush=True
    )
    return problems


if __name__ == "__main__":
    sys.exit(main())
