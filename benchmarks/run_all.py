"""``make bench``: run every benchmark, print its output as it comes, and write the results page.

Run::

    .venv/bin/python benchmarks/run_all.py [--only NAME ...] [--output docs/benchmarks/latest.md]

Every benchmark runs even when an earlier one misses a target; the exit status says whether any did
(1) or all met theirs (0). The page (included by docs/benchmarks.md) has a summary table (benchmark,
verdict, wall time) and each benchmark's full output. The results are also kept as JSON beside the page
(``latest.json``): with ``--only``, the other benchmarks keep the results of the last run that ran them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = str(REPO / ".venv" / "bin" / "python")


@dataclass(frozen=True)
class Benchmark:
    name: str
    argv: tuple[str, ...]
    what: str
    default: bool = True
    """Run by ``make bench``; otherwise only when named with ``--only`` (its own make target)."""


BENCHMARKS = (
    Benchmark(
        "cli_startup",
        ("benchmarks/cli_startup.py",),
        "`cdp-session --help` start-up; `import cdp_integration` stays light",
    ),
    Benchmark(
        "capture_overhead",
        ("benchmarks/capture_overhead.py", "--quiet"),
        "what capture adds to an episode's steps",
    ),
    Benchmark(
        "real_spa",
        ("benchmarks/real_spa.py",),
        "capture on a real single-page app (TiddlyWiki): full-page loads and in-app route changes",
    ),
    Benchmark(
        "inline_data_page",
        ("benchmarks/inline_data_page.py", "--quiet"),
        "capture of a page with megabytes of inline data",
    ),
    Benchmark(
        "run_report_html",
        ("benchmarks/run_report_html.py",),
        "report.html of a synthetic 812 tasks x 3 trials run: size, render time",
    ),
    Benchmark(
        "offline_vs_live",
        ("benchmarks/offline_vs_live.py",),
        "the official evaluator live vs offline on the program_html demo tasks",
    ),
    Benchmark(
        "eval_throughput",
        ("benchmarks/eval_throughput.py", "--sessions", "tests/fixtures/sessions/v2", "--count", "2000"),
        "batch scoring: sessions/s, memory, resume after a kill",
    ),
    Benchmark(
        "explain_overhead",
        ("benchmarks/explain_overhead.py",),
        "scoring with the evaluators' checks recorded vs without",
    ),
    Benchmark(
        "ray_pool",
        ("benchmarks/ray_pool.py",),
        "`make bench-ray`: run_infer on 1 vs 2 deployments on Ray; eval local vs Ray on 2000 sessions",
        default=False,
    ),
)


def _run(benchmark: Benchmark) -> tuple[int, float, str]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [PYTHON, *benchmark.argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    status = process.wait()
    return status, time.perf_counter() - started, "".join(lines)


def _verdict(status: int | None) -> str:
    if status is None:
        return "not run"
    return "PASS" if status == 0 else f"MISS (exit {status})"


def page(results: dict[str, tuple[int, float, str] | None]) -> str:
    """The Markdown of the results page (no dates: the page is what the last run measured)."""
    out = [
        "<!-- Written by `make bench` (benchmarks/run_all.py); do not edit by hand. -->",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}.",
        "",
        "| benchmark | what it measures | verdict | wall time |",
        "|---|---|---|---|",
    ]
    for benchmark in BENCHMARKS:
        result = results.get(benchmark.name)
        wall = f"{result[1]:.0f} s" if result else ""
        out.append(
            f"| `{benchmark.name}` | {benchmark.what} | {_verdict(result[0] if result else None)} | {wall} |"
        )
    for benchmark in BENCHMARKS:
        result = results.get(benchmark.name)
        if not result:
            continue
        out += ["", f"### `{benchmark.name}`", "", "```text", result[2].rstrip("\n"), "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    names = [benchmark.name for benchmark in BENCHMARKS]
    defaults = [benchmark.name for benchmark in BENCHMARKS if benchmark.default]
    parser.add_argument("--only", nargs="+", choices=names, default=defaults, help="run only these")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks" / "latest.md")
    args = parser.parse_args(argv)
    store = args.output.with_suffix(".json")
    results: dict[str, tuple[int, float, str] | None] = {}
    if store.is_file():
        for name, (status, wall, output) in json.loads(store.read_text()).items():
            if name in names:  # replaced as each benchmark of this run finishes
                results[name] = (status, wall, output)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    for benchmark in BENCHMARKS:
        if benchmark.name not in args.only:
            continue
        print(f"== {benchmark.name}", flush=True)
        results[benchmark.name] = _run(benchmark)
        # written after each benchmark: a run stopped halfway still leaves what it measured
        args.output.write_text(page(results))
        store.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.output}")
    ran = [results[name] for name in args.only if results.get(name)]
    return 1 if any(result and result[0] != 0 for result in ran) else 0


if __name__ == "__main__":
    sys.exit(main())
