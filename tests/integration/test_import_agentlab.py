"""``cdp-session import agentlab`` on a real AgentLab study: equal to the live reward, or loud.

Opt-in (``CDP_TEST_AGENTLAB=1``, ``make test-imports``): AgentLab 0.4.2 lives in ``.cache/agentlab``
(``scripts/agentlab.sh``), outside the project's locked environment. The study runs in a subprocess
(``tests/integration/agentlab_study.py``): a scripted AgentLab agent plays demo tasks through
BrowserGym with the official evaluator live, and AgentLab's own ``ExpArgs.run`` saves every
``step_N.pkl.gz`` and ``summary_info.json``. Those folders are imported with the allow-list
unpickler and scored offline; the live reward is AgentLab's ``cum_reward``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.evaluate.verified import verified_score
from cdp_integration.session.store import load_session
from tests.integration.import_checks import report, view_and_debug

REPO = Path(__file__).resolve().parents[2]
AGENTLAB = REPO / ".cache" / "agentlab"
TASKS = (10000, 10003, 10014, 10017, 10018, 10021, 10036)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("CDP_TEST_AGENTLAB") != "1", reason="opt-in: CDP_TEST_AGENTLAB=1"),
]


@pytest.mark.timeout(3600)  # 14 BrowserGym episodes, ~1 min each on a loaded machine
def test_an_agentlab_study_scores_as_live(tmp_path: Path) -> None:
    assert (AGENTLAB / ".complete").exists(), "run scripts/agentlab.sh first"
    env = {**os.environ, "PYTHONPATH": f"{AGENTLAB}:{REPO}"}
    study = subprocess.run(
        [sys.executable, "-m", "tests.integration.agentlab_study", str(tmp_path), *map(str, TASKS)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert study.returncode == 0, study.stderr[-3000:]
    rows = json.loads((tmp_path / "live.json").read_text())
    assert all(row["error"] is None for row in rows), [row["error"] for row in rows]
    (tmp_path / "configs.json").write_text(json.dumps([row["config"] for row in rows]))
    result = CliRunner().invoke(
        cli,
        ["import", "agentlab", str(tmp_path / "study"), "-o", str(tmp_path / "sessions"),
         "--configs", str(tmp_path / "configs.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    counts: Counter[str] = Counter()
    for row in rows:
        path = tmp_path / "sessions" / f"{Path(row['exp_dir']).name}.session.jsonl.gz"
        session = load_session(path)
        counts["imported"] += 1
        assert session.header.options["provenance"] == "imported:agentlab"
        assert session.task["task_id"] == row["task_id"]
        label = f"{row['task_id']}.{row['trajectory']} {row['eval_types']}"
        try:
            score = evaluate_session(session, per_step=False)
        except ReplayMissError as exc:
            assert "program_html" in row["eval_types"], f"{label}: {exc}"
            print(f"  loud miss {label}: {str(exc)[:200]}")
            counts["loud miss"] += 1
            continue
        assert score.provenance == "imported:agentlab"
        if score.score != row["live"]:
            print(f"  SILENT {label}: imported {score.score} != live {row['live']}")
            counts["silent"] += 1
            continue
        counts["equal to live"] += 1
    report("agentlab", counts)
    assert counts["silent"] == 0
    assert counts["imported"] >= 10 and counts["equal to live"] >= 10
    first = tmp_path / "sessions" / f"{Path(rows[0]['exp_dir']).name}.session.jsonl.gz"
    view_and_debug(first, tmp_path)
    with pytest.raises(ReplayMissError, match="network log"):  # AgentLab records no traffic
        verified_score(load_session(first), 20002)
