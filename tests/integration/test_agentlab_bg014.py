"""A real AgentLab 0.4.2 study on BrowserGym 0.14.3, recorded by the ``WEBARENA_CDP_LOGGING`` switch.

Opt-in (``CDP_TEST_AGENTLAB_BG014=1``, ``make test-agentlab``): the study runs in ``.venv-bg014``
(``scripts/setup_bg014.sh``) as a subprocess with the switch on (``agentlab_bg014_study``): AgentLab's
``make_study`` / ``Study.run`` over six stand-in tasks of the ``webarena`` and ``webarena_verified``
families, one session per episode. Each session is then scored here, offline, and must equal the live
reward AgentLab recorded; each ``webarena_verified`` session's HAR must score with WebArena-Verified as
BrowserGym's own trace did (kept by the study before BrowserGym deleted it), with the agent's raw
answer as BrowserGym handed it over. The study folder then imports (``cdp-session import agentlab``)
with AgentLab's ``screenshot_step_N.png`` as the steps' screenshots, which the viewer shows.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.evaluate.scoring import evaluate_session, score_session_file
from cdp_integration.har.export import session_har_entries
from cdp_integration.session.store import load_session

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv-bg014" / "bin" / "python"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("CDP_TEST_AGENTLAB_BG014") != "1", reason="opt-in: CDP_TEST_AGENTLAB_BG014=1"
    ),
]


def _verified_official(task_id: int, answer: Any, trace: Any, urls: dict[str, str]) -> list[float]:
    """WebArena-Verified's public facade, as BrowserGym's evaluator uses it (the raw answer, a trace):
    Verified's score, then each of its evaluators' scores."""
    from webarena_verified.api import WebArenaVerified
    from webarena_verified.types.config import EnvironmentConfig, WebArenaVerifiedConfig
    from webarena_verified.types.task import WebArenaSite

    environments = {
        WebArenaSite(site): EnvironmentConfig(urls=[urls[f"WA_{site.upper()}"]])
        for site in ("shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map")
    }
    facade = WebArenaVerified(config=WebArenaVerifiedConfig(environments=environments))
    result = facade.evaluate_task(task_id=task_id, agent_response=answer, network_trace=trace)
    return [float(result.score), *(float(e.score) for e in result.evaluators_results)]


@pytest.mark.timeout(1800)
def test_an_agentlab_study_on_browsergym_014_scores_as_live(tmp_path: Path) -> None:
    assert PYTHON.exists(), "run scripts/setup_bg014.sh first"
    sessions = tmp_path / "sessions"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "WEBARENA_CDP_LOGGING": "true",
        "WEBARENA_CDP_SESSION_DIR": str(sessions),
    }
    env.pop("VIRTUAL_ENV", None)
    study = subprocess.run(
        [str(PYTHON), "-m", "tests.integration.agentlab_bg014_study", str(tmp_path / "study")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    assert study.returncode == 0, study.stderr[-3000:]
    rows = json.loads((tmp_path / "study" / "live.json").read_text())
    assert len(rows) == 6, rows
    assert all(row["error"] is None for row in rows), [row["error"] for row in rows]
    paths = {load_session(p).task.get("env_id"): p for p in sessions.glob("*.session.jsonl.gz")}
    assert len(paths) == 6, sorted(map(str, paths))
    lives: dict[str, list[float]] = {"webarena": [], "webarena_verified": []}
    for row in rows:
        path = paths[f"browsergym/{row['task_name']}"]
        session = load_session(path)
        label = f"{row['task_name']} ({row['trajectory']})"
        assert session.final_step.reward == row["live"], label  # the live reward, recorded per step
        # each action's agent_info (the scripted agent thinks the JSON of its step) is beside its step
        assert session.steps[0].reasoning is None, label
        thoughts = [step.reasoning for step in session.steps[1:]]
        assert thoughts and all(r is not None and r.thought for r in thoughts), label
        assert all(isinstance(json.loads(r.thought or "null"), list) for r in thoughts if r), label
        assert {r.source for r in thoughts if r} <= {"agentlab", "browsergym"}, label  # + the chat
        result = score_session_file(path)  # what `cdp-session eval` does with it
        assert result["score"] == row["live"], f"{label}: offline {result['score']} != live {row['live']}"
        assert result["live_reward"] == row["live"], label
        lives[row["family"]].append(row["live"])
        if row["family"] == "webarena":
            assert evaluate_session(session, per_step=False).provenance == "recorded", label
            continue
        assert row["trace"], f"{label}: BrowserGym's Verified trace was not kept"
        evaluation = session.evaluation_at(-1)
        assert evaluation is not None and evaluation.score == row["live"], label  # the live Verified call
        assert evaluation.answer == row["answer"], label
        own = _verified_official(row["task_id"], row["answer"], Path(row["trace"]), row["site_urls"])
        ours = _verified_official(
            row["task_id"], row["answer"], session_har_entries(session), row["site_urls"]
        )
        assert ours == own, f"{label}: Verified on our HAR {ours}, on BrowserGym's trace {own}"
        assert sum(own[1:]) / len(own[1:]) == row["live"], label  # BrowserGym's reward: the evaluators' mean
    # both families hold a passing and a failing episode: the equalities above are not all alike
    assert sorted(lives["webarena"]) == [0.0, 1.0, 1.0], lives
    assert sorted(lives["webarena_verified"]) == [0.5, 1.0, 1.0], lives
    # the study folder imports with AgentLab's screenshots as the steps' screenshots, shown by the viewer
    study_dir = Path(rows[0]["exp_dir"]).parent
    imported = CliRunner().invoke(
        cli, ["import", "agentlab", str(study_dir), "-o", str(tmp_path / "imported"), "--keep-screenshots"]
    )
    assert imported.exit_code == 0, imported.output
    for path in sorted((tmp_path / "imported").glob("*.session.jsonl.gz")):
        session = load_session(path)
        shots = [next(t.screenshot_png for t in step.tabs if t.active) for step in session.steps]
        assert all(shots), f"{path.name}: a step without its screenshot"
        viewed = CliRunner().invoke(cli, ["view", str(path), "-o", str(tmp_path / "view.html")])
        assert viewed.exit_code == 0, viewed.output
        assert (tmp_path / "view.html").read_text().count("data:image/png;base64,") == len(shots)
