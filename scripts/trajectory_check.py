"""Generated trajectories at full size: random agent behaviour, scored live and offline, per app.

Plays seeded random episodes (``tests/trajectories.py``: tabs opened every way, switched and closed,
back/forward/reload, hash and pushState routes, POST-redirect-GET, unsaved forms, an iframe's form) on the
bundled trajectory site (plain pages, a BrowserGym env, and a Chromium the logger follows by its
DevTools endpoint only), the demo shop and every available conformance
app. At each episode's end the official evaluator scores url_match and program_html live on the agent's
current tab, and the differential checker's questions are asked there; with the app stopped, the same
are asked of the session with its recorded probe and reconstructed. Prints per app and per behaviour:
episodes, questions, equal, loud misses (reasons grouped), silent differences (each, with the episode's
seed and behaviours).

    .venv/bin/python scripts/trajectory_check.py [--episodes 300] [--apps bundled,browsergym,cdp_attach,demo,trac]
        [--seed 0] [--questions 40] [--keep DIR]

Exit status: 0 with no silent difference, 1 with any (or an episode that could not be played), 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WEIGHTS = {"bundled": 3.0, "browsergym": 1.0, "cdp_attach": 1.0, "demo": 1.5}
"""Each app's share of the episodes (a conformance app: 1)."""


BROWSER_USE = {"browser_use": "bundled", "browser_use_demo": "demo"}
"""Apps played by a real ``browser_use.Agent`` (browser-use 0.13, ``make check-fidelity-browser-use``),
and the site each plays on."""


def _browser_use_missing() -> str | None:
    """Why browser-use cannot play here (None: it can)."""
    from importlib import metadata

    try:
        version = metadata.version("browser-use")
    except metadata.PackageNotFoundError:
        return "browser-use is not installed (make check-fidelity-browser-use)"
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) < (0, 13):
        return f"needs browser-use 0.13, this environment has {version} (make check-fidelity-browser-use)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--episodes", type=int, default=300, help="episodes in all, shared out among the apps"
    )
    parser.add_argument("--apps", default="", help="comma-separated app names (default: every available app)")
    parser.add_argument("--seed", default="0", help="the run's seed (each episode's is derived from it)")
    parser.add_argument("--questions", type=int, default=40, help="differential questions per episode")
    parser.add_argument("--keep", type=Path, default=None, help="keep the session files in this directory")
    parser.add_argument(
        "--traces",
        action="store_true",
        help="also record each plain-page episode as a Playwright trace, import it and ask it the same "
        "questions (mode 'trace')",
    )
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.questions < 0:
        print("trajectory_check: error: --episodes must be >= 1 and --questions >= 0", file=sys.stderr)
        return 2

    from cdp_integration import environment

    environment.prepare()
    from tests.conformance import sources

    conformance = {source.name: source for source in sources.conformance_sources()}
    known = ["bundled", "browsergym", "cdp_attach", "demo", *BROWSER_USE, *conformance]
    wanted = [name for name in args.apps.split(",") if name] or known
    unknown = [name for name in wanted if name not in known]
    if unknown:
        print(
            f"trajectory_check: error: unknown app(s) {', '.join(unknown)} (known: {', '.join(known)})",
            file=sys.stderr,
        )
        return 2
    available = []
    for name in wanted:
        reason = conformance[name].missing() if name in conformance else None
        if name in BROWSER_USE:
            reason = _browser_use_missing()
        if reason:
            print(f"{name}: skipped ({reason})", flush=True)
        else:
            available.append(name)
    if not available:
        print("trajectory_check: error: no app can run here", file=sys.stderr)
        return 2
    total_weight = sum(WEIGHTS.get(name, 1.0) for name in available)
    shares = {name: math.ceil(args.episodes * WEIGHTS.get(name, 1.0) / total_weight) for name in available}

    from tests import trajectories

    ends: list[trajectories.LiveEnd] = []
    checks: list[trajectories.Check] = []
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cdp-trajectories-") as scratch:
        out = args.keep or Path(scratch) / "sessions"
        for name in available:
            played: list[trajectories.LiveEnd] = []
            with _site(name, conformance, Path(scratch), traces=args.traces) as (site, play):
                for index in range(shares[name]):
                    seed = f"{args.seed}:{name}:{index}"
                    try:
                        end = play(site, out, seed, args.questions)
                    except Exception as exc:  # the generator's own failure: reported, and the run fails
                        failed.append(
                            f"{name} seed {seed!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                        )
                        print(f"{name} {seed}: COULD NOT PLAY\n{traceback.format_exc()}", flush=True)
                        continue
                    played.append(end)
                    print(
                        f"{name} {seed}: {' '.join(end.behaviours)} "
                        f"({len(end.questions)} questions, {time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
            for end in played:  # the app is stopped: nothing offline can reach it
                found = trajectories.judge_episode(end)
                if end.trace_path is not None:
                    found += trajectories.judge_trace(end, out / "imported")
                checks += found
                for check in found:
                    if check.verdict == "silent":
                        print(
                            f"  SILENT {check.label} [{check.mode}] {check.what}: {check.detail}", flush=True
                        )
            ends += played
    print()
    print(trajectories.format_report(ends, checks))
    silent = sum(check.verdict == "silent" for check in checks)
    print(
        f"\n{len(ends)} episodes, {len(checks)} questions, {silent} silent difference(s), "
        f"{len(failed)} episode(s) not played, in {time.perf_counter() - started:.0f} s (seed {args.seed})"
    )
    for line in failed:
        print(f"NOT PLAYED {line}")
    return 1 if silent or failed else 0


Player = Callable[[Any, Path, str, int], Any]


@contextlib.contextmanager
def _site(
    name: str, conformance: dict[str, Any], workdir: Path, *, traces: bool = False
) -> Iterator[tuple[Any, Player]]:
    """The running app ``name`` as a ``Site``, and how one episode is played on it."""
    import browsergym.core

    from cdp_integration import environment
    from tests import trajectories
    from tests.conformance import apps, sources
    from tests.trajectory_site import bundled_site

    if name == "browsergym":
        with bundled_site() as base:
            yield (
                trajectories.Site(name, base, bundled=True, start="/"),
                lambda site, out, seed, questions: trajectories.play_browsergym_episode(
                    site.url, out, seed=seed, questions_per_episode=questions
                ),
            )
        return
    if name in BROWSER_USE:
        from tests.trajectories_browser_use import browser_use_environment, play_browser_use_episode

        playwright = browsergym.core._get_global_playwright()
        with browser_use_environment(), contextlib.ExitStack() as stack:
            if BROWSER_USE[name] == "bundled":
                site = trajectories.Site(name, stack.enter_context(bundled_site()), bundled=True, start="/")
            else:
                app = stack.enter_context(sources.demo_source().running(workdir))
                site = trajectories.Site(name, app.url, start="/")
            yield (
                site,
                lambda site, out, seed, questions: play_browser_use_episode(
                    playwright, site, out, seed=seed, questions_per_episode=questions
                ),
            )
        return
    if name == "cdp_attach":
        playwright = browsergym.core._get_global_playwright()
        with bundled_site() as base:
            yield (
                trajectories.Site(name, base, bundled=True, start="/"),
                lambda site, out, seed, questions: trajectories.play_cdp_attach_episode(
                    playwright, site, out, seed=seed, questions_per_episode=questions
                ),
            )
        return
    browser = browsergym.core._get_global_playwright().chromium.launch(
        executable_path=environment.headless_executable(), args=list(environment.CHROMIUM_ARGS), headless=True
    )

    def play(site: Any, out: Path, seed: str, questions: int) -> Any:
        return trajectories.play_episode(
            browser, site, out, seed=seed, questions_per_episode=questions, trace=traces
        )

    try:
        if name == "bundled":
            with bundled_site() as base:
                yield trajectories.Site(name, base, bundled=True, start="/"), play
        elif name == "demo":
            with sources.demo_source().running(workdir) as app:
                yield trajectories.Site(name, app.url, start="/"), play
        else:
            source = conformance[name]
            with source.running(workdir) as app:
                site = trajectories.Site(
                    name,
                    app.url,
                    context_options=source.context_options(app),
                    sign_in=lambda page: apps.sign_in(page, app),
                )
                yield site, play
    finally:
        browser.close()


if __name__ == "__main__":
    sys.exit(main())
