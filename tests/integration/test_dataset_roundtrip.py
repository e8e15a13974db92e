"""The demo run as one shareable artifact, end to end on live-recorded episodes.

The demo corpus (every episode captured live, with the live evaluator's rewards) goes through
``cdp-session export-dataset`` (redaction on) -> Hugging Face ``datasets.load_dataset`` (offline, in a
child process) -> ``cdp-session import dataset`` -> ``cdp-session eval``. Every row scores as the
episode did live, and the sessions taken back score as the rows; the one allowed difference is a loud ``ReplayMissError``
where the evaluator itself signed in with the password that redaction removed. No secret of the
originals (cookie values, passwords, tokens) is in any file of the folder.
"""

from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.demo.job import DemoEpisode
from cdp_integration.session.store import Session, load_session
from tests.unit.test_dataset import _load_dataset, _scores
from tests.unit.test_redact import original_secrets

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(  # make test checks each step on the canary session (tests/unit/test_redaction_canaries.py)
        os.environ.get("CDP_TEST_IMPORTS_FULL") != "1", reason="make test-imports (CDP_TEST_IMPORTS_FULL=1)"
    ),
]


def _evaluator_signs_in(session: Session) -> bool:
    evaluations = [step.evaluation for step in session.steps] + [session.end.probe if session.end else None]
    return any(
        "password" in (call.request_body or "") for e in evaluations if e is not None for call in e.http
    )


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_demo_run_round_trips_through_a_dataset_with_the_same_scores_and_no_secret(
    demo_corpus: list[DemoEpisode], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    live: dict[str, DemoEpisode] = {}
    for episode in demo_corpus:
        shutil.copy(episode.session, run / episode.session.name)
        live[episode.session.name] = episode
    dataset = tmp_path / "dataset"
    output = _run(["export-dataset", str(run), "-o", str(dataset), "--workers", "2"])
    assert f"{len(demo_corpus)} episodes" in output
    rows = {Path(row["session_file"]).name: row for row in _load_dataset(dataset, tmp_path / "hf")}
    _run(["import", "dataset", str(dataset), "-o", str(tmp_path / "taken")])
    _run(["eval", str(tmp_path / "taken"), "-o", str(tmp_path / "again"), "--workers", "2"])
    again = _scores(tmp_path / "again")

    assert set(rows) == set(again) == set(live)
    loud = []
    for name, row in rows.items():
        assert (again[name]["score"], again[name]["error_type"]) == (row["score"], row["error_type"]), name
        if row["score"] is None:
            assert row["error_type"] == "ReplayMissError", (name, row)
            assert _evaluator_signs_in(load_session(run / name)), (name, row["error"])
            loud.append(name)
        else:  # the live evaluator's final-state score and its per-step best
            assert row["score"] == live[name].live and row["max_score"] == live[name].live_max, (name, row)
    print(f"\ndataset round trip: {len(rows)} episodes, {len(rows) - len(loud)} same score, {len(loud)} loud")

    secrets: set[str] = set()
    for name in live:
        secrets |= original_secrets(load_session(run / name))
    texts = [orjson.dumps(list(rows.values()))]
    for path in dataset.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            texts.append(raw)
            if raw[:2] == b"\x1f\x8b":
                texts.append(zlib.decompressobj(47).decompress(raw))
    assert secrets
    leaked = sorted(secret for secret in secrets if any(secret.encode() in text for text in texts))
    assert not leaked
