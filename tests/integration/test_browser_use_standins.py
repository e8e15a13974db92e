"""browser-use on real WebArena task ids against the stand-ins: plain-HTTP HAR, offline == live, import.

Opt-in (``CDP_TEST_BROWSER_USE_STANDINS=1``, ``make test-browser-use`` in ``.venv-bu013`` with
browser-use 0.13.x; ~70 s a run here): ``browser_use_standins`` plays two url_match tasks (377 on
the map, 269 on the shop) each way in a fresh process. Each session scores offline as the official
evaluator scored the live final state; its HAR holds the agent's plain-HTTP navigations with their wire
headers (browser-use's own HAR keeps HTTPS only); the saved history (browser-use's
``AgentHistoryList`` JSON of the installed release) imports with its screenshots, ending where the run ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.har import session_to_har
from cdp_integration.session.store import load_session

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("CDP_TEST_BROWSER_USE_STANDINS") != "1",
        reason="opt-in: CDP_TEST_BROWSER_USE_STANDINS=1",
    ),
]


def _header(entry: dict[str, object], name: str) -> str | None:
    headers = entry["request"]["headers"]  # type: ignore[index]
    return next((h["value"] for h in headers if h["name"].lower() == name), None)  # type: ignore[union-attr]


@pytest.mark.timeout(1500)
def test_browser_use_on_the_standins_scores_offline_as_live(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.integration.browser_use_standins", str(tmp_path)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=1400,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads((tmp_path / "live.json").read_text())
    assert [row["live"] for row in rows] == [1.0, 0.0, 1.0, 0.0], rows
    for row in rows:
        label = f"{row['task_id']}.{row['trajectory']}"
        session = load_session(row["session"])
        assert evaluate_session(session).score == row["live"], label
        entries = session_to_har(session)["log"]["entries"]
        navigations = [
            e
            for e in entries
            if e["request"]["method"] == "GET" and _header(e, "sec-fetch-mode") == "navigate"
        ]
        assert navigations, f"{label}: no navigation in the HAR"
        last = navigations[-1]
        assert urlsplit(last["request"]["url"]).scheme == "http", label
        assert _header(last, "sec-fetch-dest") == "document", label
        assert (_header(last, "accept") or "").startswith("text/html"), label
        assert last["request"]["url"].startswith(
            row["site_urls"]["MAP" if row["task_id"] == 377 else "SHOPPING"]
        )
        # the history browser-use saved imports (its screenshots with it) and scores the same
        history = tmp_path / "histories" / f"{label}.json"
        imported = CliRunner().invoke(
            cli,
            ["import", "browser-use", str(history), "-o", str(tmp_path / "imported"), "--keep-screenshots"],
        )
        assert imported.exit_code == 0, imported.output
        episode = load_session(imported.output.strip().splitlines()[0])
        shots = [next(t.screenshot_png for t in step.tabs if t.active) for step in episode.steps]
        recorded = [
            bool(item["state"].get("screenshot_path")) for item in json.loads(history.read_text())["history"]
        ]
        assert any(recorded), f"{label}: browser-use recorded no screenshot"
        assert [bool(shot) for shot in shots] == recorded, (
            f"{label}: imported steps without their screenshots"
        )
        assert [step.url for step in episode.steps][-1] == session.final_step.url, label
