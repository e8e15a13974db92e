"""``report.html`` at WebArena's full size: 812 tasks x 3 trials in one file, opened in Chromium.

Run::

    .venv/bin/python benchmarks/run_report_html.py [--tasks 812] [--trials 3] [--rounds 5]

Writes a synthetic ``output.jsonl`` (every field the report reads), builds ``report.md``/``report.json``
and ``report.html`` from it (timed), then opens the page in headless Debian Chromium ``--rounds``
times in a fresh page each and measures from ``goto`` until the episode table is drawn (the page
sets ``body[data-ready]``; the table draws its first 200 rows, the rest on demand), a blank page
beside it for scale, and the time "show all" takes to draw every row. Prints the file size, build
time, open times and PASS/FAIL against the target: the median open under 2 s. Exit status 1 if it
is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdp_integration import environment
from cdp_integration.evaluate.report import write_report
from cdp_integration.evaluate.report_html import write_run_html
from cdp_integration.evaluate.runs import read_run
from tests.synthetic_run import write_synthetic_run

TARGET_OPEN_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=812)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="bench-report-html-") as tmp:
        directory = Path(tmp)
        output = write_synthetic_run(directory, tasks=args.tasks, trials=args.trials)
        started = time.perf_counter()
        report = write_report(directory)
        path = write_run_html(directory, read_run(output), report)
        build_s = time.perf_counter() - started
        size_kib = path.stat().st_size / 1024
        blank = directory / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title><body data-ready='1'>")
        opens: list[float] = []
        blank_opens: list[float] = []
        show_all: list[float] = []
        requests: list[str] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=environment.chromium_executable(), args=list(environment.CHROMIUM_ARGS)
            )
            try:
                for _ in range(args.rounds):
                    for target, times in ((blank, blank_opens), (path, opens)):
                        page = browser.new_page()
                        if target == path:
                            page.on("request", lambda request: requests.append(request.url))
                        began = time.perf_counter()
                        page.goto(target.as_uri())
                        page.wait_for_selector("body[data-ready='1']", state="attached")
                        times.append(time.perf_counter() - began)
                        if target == path:
                            count = page.text_content("#count") or ""
                            began = time.perf_counter()
                            page.click("#pager .all")
                            rows = page.locator("#tbody tr").count()
                            show_all.append(time.perf_counter() - began)
                        page.close()
            finally:
                browser.close()
    sessions = args.tasks * args.trials
    median = statistics.median(opens)
    print(f"{args.tasks} tasks x {args.trials} trials = {sessions} sessions; table on open: {count!r}")
    print(f"report.html: {size_kib:,.0f} KiB; build (report.md/json + report.html): {build_s:.2f} s")
    print(
        f"open in Chromium: median {median:.2f} s, max {max(opens):.2f} s over {len(opens)} rounds "
        f"(a blank page: median {statistics.median(blank_opens):.2f} s)"
    )
    print(f"'show all' ({rows} rows drawn): median {statistics.median(show_all):.2f} s")
    print(f"requests other than the file itself: {sum(url != path.as_uri() for url in requests)}")
    ok = (
        median < TARGET_OPEN_S
        and rows == sessions
        and count.startswith(f"{sessions} of {sessions} rows")
        and all(url == path.as_uri() for url in requests)
    )
    print(
        f"{'PASS' if ok else 'FAIL'}: open < {TARGET_OPEN_S:.0f} s ({median / TARGET_OPEN_S:.2f} of the budget)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
