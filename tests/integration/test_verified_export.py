"""``cdp-session export-verified``: WebArena-Verified's OWN CLI over our export agrees with our scorer.

Episodes are captured live on the demo shop (BrowserGym, real Chromium, the logger on) and labelled
with real WebArena-Verified task ids (``verified_task_id``); the shop stands at ``__SHOPPING__``.
Each session is scored in process with ``verified_score`` (the package's evaluator over our HAR
entries and adapted answer), then exported and scored by ``webarena-verified eval-tasks`` run as a
subprocess from the package's own entry point. Per task, status and score must be the same. What
Verified's definition of each id should give was worked out by hand from the dataset (``expected``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.demo.agent import Episode, run_episode
from cdp_integration.demo.site import DemoSite
from cdp_integration.evaluate.verified import verified_score
from cdp_integration.evaluate.verified_export import export_verified
from cdp_integration.session.store import load_session

pytestmark = pytest.mark.integration

VERIFIED_CLI = Path(sys.executable).with_name("webarena-verified")


@dataclass(frozen=True)
class Case:
    task_id: int
    steps: tuple[tuple[str, ...], ...]
    expected: float
    why: str


CASES = (
    Case(
        21,
        (
            ("goto", "/search?q=headphones"),
            ("answer", "Catso; Dibbins; Anglebert Dinkherhump; Michelle Davis"),
        ),
        1.0,
        "RETRIEVE: the four reviewer names the definition lists, in one answer",
    ),
    Case(
        22,
        (("goto", "/search?q=camera"), ("answer", "N/A")),
        1.0,
        "RETRIEVE expecting NOT_FOUND_ERROR: 'N/A'",
    ),
    Case(
        23, (("goto", "/search?q=phone"), ("answer", "Rachel")), 0.0, "RETRIEVE: one of the two names missing"
    ),
    Case(
        118,
        (("goto", "/mouth-guard-for-bruxism.html"),),
        0.0,
        "NAVIGATE: the URL matches the pattern but the demo shop answers 404, the definition wants 200",
    ),
    Case(
        431,
        (("goto", "/products/5"), ("answer", "Done.")),
        0.0,
        "MUTATE: no POST to /checkout/cart/add/... was made",
    ),
)


@pytest.fixture(scope="module")
def sessions(demo_site: DemoSite, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = tmp_path_factory.mktemp("verified-export-sessions")
    paths = {}
    for case in CASES:
        episode = Episode(f"verified-export.{case.task_id}", case.why, case.steps)
        task = {"verified_task_id": case.task_id, "site_urls": {"SHOPPING": demo_site.base_url}}
        paths[case.task_id] = run_episode(
            episode, demo_site.base_url, out, logger_options={"task": task}, reset=demo_site.reset
        )
    demo_site.reset()
    return paths


def _verified_cli(*args: str) -> None:
    completed = subprocess.run(
        [str(VERIFIED_CLI), "eval-tasks", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-2000:]


def _cli_results(directory: Path) -> dict[int, tuple[str, float]]:
    results = {}
    for case in CASES:
        result = json.loads((directory / str(case.task_id) / "eval_result.json").read_text())
        assert result["task_id"] == case.task_id
        results[case.task_id] = (result["status"], float(result["score"]))
    return results


def test_verified_cli_on_our_export_equals_our_scorer(sessions: dict[int, Path], tmp_path: Path) -> None:
    ours = {}
    for case in CASES:
        result = verified_score(load_session(sessions[case.task_id]))
        assert result.error is None, result.error
        ours[case.task_id] = (result.status, result.score)
        assert result.score == case.expected, f"{case.task_id}: {case.why}: {result.details}"

    plain = tmp_path / "plain"
    exported = export_verified(list(sessions.values()), plain)
    assert sorted(t.task_id for t in exported) == sorted(sessions)
    for task in exported:
        assert sorted(p.name for p in task.directory.iterdir()) == [
            "agent_response.json",
            "network.har",
            "run_config.json",
        ]
        assert task.navigations >= 1
    config = json.loads((plain / "config.json").read_text())
    assert list(config["environments"]) == ["__SHOPPING__"]
    _verified_cli("--output-dir", str(plain))  # site URLs from each task's run_config.json
    assert _cli_results(plain) == ours

    trimmed = tmp_path / "trimmed"
    export_verified(list(sessions.values()), trimmed, trim=True, redact=True)
    _verified_cli("--output-dir", str(trimmed), "--config", str(trimmed / "config.json"))
    assert _cli_results(trimmed) == ours
    har = json.loads((trimmed / "21" / "network.har").read_text())
    assert not any(e["request"]["url"].endswith((".css", ".js", ".png")) for e in har["log"]["entries"])

    assert sorted({score for _status, score in ours.values()}) == [0.0, 1.0]  # the comparison can tell


def test_export_refuses_a_session_without_navigation(demo_site: DemoSite, tmp_path: Path) -> None:
    """BrowserGym's reset (the start page) is not captured: an episode that only answers has no traffic."""
    episode = Episode("verified-export.no-navigation", "only an answer", (("answer", "N/A"),))
    task = {"verified_task_id": 22, "site_urls": {"SHOPPING": demo_site.base_url}}
    path = run_episode(episode, demo_site.base_url, tmp_path, logger_options={"task": task})

    result = CliRunner().invoke(cli, ["export-verified", str(path), "-o", str(tmp_path / "out")])

    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "the agent made no navigation" in lines[0] and "WebArena-Verified cannot score it" in lines[0]
    assert not (tmp_path / "out").exists()


def test_submission_package_is_verifieds_own_and_scores_as_ours(
    sessions: dict[int, Path], tmp_path: Path
) -> None:
    """``export-verified --submission`` packs with WebArena-Verified's own packager; its CLI, run over
    the unpacked package, gives every task the score our scorer gives."""
    import tarfile

    ours = {case.task_id: verified_score(load_session(sessions[case.task_id])) for case in CASES}
    result = CliRunner().invoke(
        cli,
        [
            "export-verified",
            *map(str, sessions.values()),
            "-o",
            str(tmp_path / "run"),
            "--redact",
            "--submission",
            str(tmp_path / "submissions"),
            "--name",
            "demo-run",
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"packed {len(CASES)} of WebArena-Verified's 812 tasks" in result.output
    package = tmp_path / "submissions" / "demo-run.tar.gz"
    assert package.is_file()
    unpacked = tmp_path / "unpacked"
    with tarfile.open(package) as archive:
        archive.extractall(unpacked, filter="data")
    summaries = list(unpacked.rglob("summary.json"))
    assert len(summaries) == 1, sorted(str(p.relative_to(unpacked)) for p in unpacked.rglob("*"))
    root = summaries[0].parent
    summary = json.loads((root / "summary.json").read_text())
    assert summary, "Verified's summary.json is present"
    for case in CASES:
        assert sorted(p.name for p in (root / str(case.task_id)).iterdir()) == [
            "agent_response.json",
            "network.har",
        ]
    _verified_cli("--output-dir", str(root), "--config", str(tmp_path / "run" / "config.json"))
    assert _cli_results(root) == {task_id: (r.status, r.score) for task_id, r in ours.items()}


def test_submission_refuses_tasks_verified_does_not_know(demo_site: DemoSite, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "99999").mkdir(parents=True)
    (run / "99999" / "agent_response.json").write_text("{}")
    from cdp_integration.errors import EvaluationError
    from cdp_integration.evaluate.verified_export import create_submission

    with pytest.raises(EvaluationError, match="1 not WebArena-Verified task ids"):
        create_submission(run, tmp_path / "out", name="x")
