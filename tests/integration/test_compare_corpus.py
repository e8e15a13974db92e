"""``cdp-session compare`` on the demo run: its succeeding half against its failing half.

Every demo task has a succeeding and a failing trajectory, played live with the official evaluator
(``make test``: the covering subset; ``CDP_TEST_CORPUS=all``: all 45 tasks). Compared as two runs of
session folders, every task whose two live scores differ must be listed as flipped, first, with a
paired bootstrap interval of the macro difference and McNemar's exact test on the flips.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.demo.job import DemoEpisode

pytestmark = pytest.mark.integration


def test_compare_lists_every_task_the_live_run_flipped(
    demo_corpus: list[DemoEpisode], tmp_path: Path
) -> None:
    halves = {"success": tmp_path / "success", "failure": tmp_path / "failure"}
    live: dict[str, dict[str, float]] = {}
    for episode in demo_corpus:
        halves[episode.trajectory].mkdir(exist_ok=True)
        shutil.copy(episode.session, halves[episode.trajectory] / episode.session.name)
        live.setdefault(str(episode.task_id), {})[episode.trajectory] = episode.live
    flipped_live = sorted(task for task, scores in live.items() if scores["success"] != scores["failure"])
    assert len(flipped_live) == len(live)  # every failing trajectory of the demo fails its task live

    out = tmp_path / "compare"
    result = CliRunner().invoke(
        cli, ["compare", str(halves["success"]), str(halves["failure"]), "-o", str(out), "--workers", "2"]
    )
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads((out / "compare.json").read_text())["comparisons"]
    flipped = [task["task"] for task in comparison["tasks"] if task["flipped"]]
    assert sorted(flipped) == flipped_live
    assert [task["task"] for task in comparison["tasks"]][: len(flipped)] == flipped  # flips first
    assert (comparison["lost"], comparison["gained"]) == (len(flipped_live), 0)
    low, high = comparison["ci"]
    assert low <= comparison["difference"] <= high <= 0
    assert comparison["mcnemar_p"] == pytest.approx(2 / 2 ** len(flipped_live))
    assert f"{len(flipped_live)} tasks flipped: 0 to pass, {len(flipped_live)} to fail" in result.stdout
    print(f"\ncompare on the demo run: {len(flipped)} tasks flipped, paired CI [{low:.3f}, {high:.3f}]")
