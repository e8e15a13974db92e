"""Real traces of four Playwright producers (``tests/fixtures/traces/<producer>/``, made by
``scripts/make_trace_corpus.py``) imported and scored offline: equal to the live score, or loud.

Each producer recorded demo episodes as WebArena's ``run.py`` does (tracing on before the agent acts,
the official evaluator run on the live page, then tracing stopped), on tasks that check the agent's
page and pages the evaluator opened; ``expected.json`` holds the official evaluator's live score.
Python Playwright 1.32.1 (WebArena's pin) writes trace format 4, 1.45.1 format 7 without page events,
1.50.0 format 7 with them, 1.60.0 format 8, 1.63.0 format 9, 1.65.2 and ``@playwright/test`` 1.65.1
format 10. Scoring runs on the replay mocks: no browser.
"""

from __future__ import annotations

import base64
import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.replay import replay_step
from cdp_integration.session.store import load_session

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
PRODUCERS = {
    "python-1.32.1": 4,
    "python-1.45.1": 7,
    "python-1.50.0": 7,
    "python-1.60.0": 8,
    "python-1.63.0": 9,
    "python-1.65.2": 10,
    "test-1.65.1": 10,
}
"""Producer -> the trace format it writes."""


def _expected(producer: str) -> dict[str, Any]:
    episodes: dict[str, Any] = json.loads((CORPUS / producer / "expected.json").read_text())["episodes"]
    return episodes


def _wall_time(trace: Path) -> float:
    """When tracing started: the browser context's ``context-options`` wall time, in seconds."""
    with zipfile.ZipFile(trace) as archive:
        for name in archive.namelist():
            if name.endswith(".trace") and "/" not in name:
                options = json.loads(archive.read(name).split(b"\n", 1)[0])
                if options.get("browserName"):
                    return float(options["wallTime"]) / 1000
    raise AssertionError(f"{trace}: no browser context")


def _import(trace: Path, configs: Path, out: Path, *extra: str) -> Path:
    result = CliRunner().invoke(
        cli, ["import", "playwright-trace", str(trace), "-o", str(out), "--configs", str(configs), *extra]
    )
    assert result.exit_code == 0, result.output + str(result.exception)
    return Path(result.stdout.strip())


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_every_producers_traces_score_as_live(producer: str, tmp_path: Path) -> None:
    """Imported == live or a loud miss, 0 silent; counts printed per producer."""
    expected = _expected(producer)
    assert len(expected) >= 8 and {e["trajectory"] for e in expected.values()} == {"success", "failure"}
    counts: Counter[str] = Counter()
    for name, episode in sorted(expected.items()):
        assert episode["trace_format"] == PRODUCERS[producer], name
        session = load_session(
            _import(CORPUS / producer / name, CORPUS / producer / "configs.json", tmp_path / name)
        )
        assert session.header.options["provenance"] == "imported:playwright-trace"
        assert f"(trace format {PRODUCERS[producer]})" in str(session.header.options["imported"]["tool"])
        # the pages the evaluator opened after the agent's last action are the end probe's pages (the
        # state it read there), never tabs: the agent's page is the only tab throughout
        assert all(len(step.tabs) == 1 for step in session.steps), name
        assert len({step.tabs[0].tab_id for step in session.steps}) == 1, name
        targets = [t["url"] for t in session.task["config"]["eval"]["program_html"] if t["url"] != "last"]
        assert session.end is not None and session.end.probe is not None, name
        assert [page.url for page in session.end.probe.pages] == targets, name
        # timestamps on the wall clock of the recording (format 4 has no monotonicTime to anchor them)
        times = [step.timestamp for step in session.steps]
        started = _wall_time(CORPUS / producer / name)
        assert times == sorted(times) and all(0 <= t - started < 120 for t in times), (name, times, started)
        counts["imported"] += 1
        try:
            score = evaluate_session(session, per_step=False).score
        except ReplayMissError as exc:
            # only where the trace has no DOM of the page asked about (Playwright takes no snapshot
            # while a page navigates: a click's last navigation can leave the agent's page without one),
            # or where the task reads a page's whole markup (page.content()) and the page had <script>
            # elements, which a snapshot leaves out
            reads_markup = any(t["locator"] == "" for t in session.task["config"]["eval"]["program_html"])
            markup_miss = reads_markup and "leaves out the page's <script> elements" in str(exc)
            assert "no captured page" in str(exc) or markup_miss, f"{producer} {name}: {exc}"
            print(f"  loud miss {producer} {name}: {str(exc)[:160]}")
            counts["loud miss: page.content() of a page with scripts" if markup_miss else "loud miss"] += 1
            continue
        if score != episode["live"]:
            print(f"  SILENT {producer} {name}: imported {score} != live {episode['live']}")
            counts["silent"] += 1
        else:
            counts["equal to live"] += 1
    print(
        f"\ntraces {producer} (format {PRODUCERS[producer]}): "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    assert counts["silent"] == 0
    markup_misses = counts["loud miss: page.content() of a page with scripts"]
    assert markup_misses <= 2, markup_misses  # the one content() task of the corpus, both trajectories
    assert (
        counts["imported"] == len(expected) and counts["equal to live"] >= len(expected) - 1 - markup_misses
    )


def _with_version(source: Path, target: Path, version: object) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename.endswith(".trace"):
                first, rest = data.split(b"\n", 1)
                options = json.loads(first)
                options["version"] = version
                data = json.dumps(options).encode() + b"\n" + rest
            new.writestr(item, data)
    return target


@pytest.mark.parametrize(("version", "message"), [(11, "newer Playwright"), ("x", "missing or not a number")])
def test_an_unknown_format_is_refused_in_one_line(tmp_path: Path, version: object, message: str) -> None:
    trace = _with_version(CORPUS / "python-1.65.2" / "success" / "10039.zip", tmp_path / "10039.zip", version)
    result = CliRunner().invoke(cli, ["import", "playwright-trace", str(trace), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr
    assert not list((tmp_path / "out").glob("*.session.jsonl.gz")) if (tmp_path / "out").exists() else True


def test_screencast_frames_become_step_screenshots(tmp_path: Path) -> None:
    """A trace recorded with screenshots (format 4 and format 10): each step's tab carries the page's
    last screencast frame before the next action, as PNG, and the viewer shows it with its size.
    Redaction (on by default) drops pixels unless ``--keep-screenshots``."""
    from cdp_integration.debug.viewer import episode_data, render_viewer

    for producer in ("python-1.32.1", "test-1.65.1"):
        trace = CORPUS / producer / "success" / "10039.zip"
        configs = CORPUS / producer / "configs.json"
        redacted = load_session(_import(trace, configs, tmp_path / producer / "redacted"))
        assert not any(tab.screenshot_png for step in redacted.steps for tab in step.tabs)
        session = load_session(_import(trace, configs, tmp_path / producer, "--keep-screenshots"))
        shots = [tab.screenshot_png for step in session.steps for tab in step.tabs if tab.screenshot_png]
        assert len(shots) >= 2, producer
        assert all(base64.b64decode(shot)[:8] == b"\x89PNG\r\n\x1a\n" for shot in shots)
        data = episode_data(session)
        shown = [step for step in data["steps"] if step["screenshot"]]
        assert len(shown) >= 2 and all(step["viewport"] for step in shown), producer
        assert shown[-1]["screenshot"].removeprefix("data:image/png;base64,")[:40] in render_viewer(session)


def test_a_trace_without_screencast_has_no_screenshots(tmp_path: Path) -> None:
    trace = CORPUS / "python-1.45.1" / "success" / "10039.zip"
    session = load_session(_import(trace, CORPUS / "python-1.45.1" / "configs.json", tmp_path, "--no-redact"))
    assert not any(tab.screenshot_png for step in session.steps for tab in step.tabs)


def test_a_page_rebuilt_from_a_snapshot_refuses_what_its_left_out_elements_change(tmp_path: Path) -> None:
    """The demo shop's pages load ``/static/app.js`` with a ``<script>`` element, which a snapshot leaves
    out: the page's whole markup, ``textContent``, children and siblings and selectors counting them
    would answer from another tree than live, so they are loud; rendered text and values answer."""
    producer = "python-1.65.2"
    session = load_session(
        _import(
            CORPUS / producer / "success" / "10036.zip", CORPUS / producer / "configs.json", tmp_path / "s"
        )
    )
    page = replay_step(session, -1)
    html = next(tab.html for tab in session.steps[-1].tabs if tab.html)
    assert "<BASE" not in html.upper()  # the snapshotter's own <base> is gone (the shop has none)
    assert page.evaluate("() => document.querySelector('h1').outerText")
    assert page.evaluate("() => document.title") == session.steps[-1].tabs[0].title
    for question in (
        "() => document.body.textContent",
        "() => document.body.innerHTML.length",
        "() => document.body.children.length",
        "() => document.querySelectorAll('body > *:last-child').length",
        "() => document.scripts.length",
        "() => document.querySelector('h1').nextElementSibling.tagName",
    ):
        with pytest.raises(ReplayMissError, match="leaves out the page's <script> elements"):
            page.evaluate(question)
    with pytest.raises(ReplayMissError, match="leaves out the page's <script> elements"):
        page.content()
    with pytest.raises(ReplayMissError, match="reads markup or <script> text"):
        page.locator("h1").text_content()
    with pytest.raises(ReplayMissError, match="counts siblings"):
        page.locator("li:first-child").count()
    assert page.locator("h1").count() == 1
