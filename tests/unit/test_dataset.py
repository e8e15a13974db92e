"""A run as a dataset folder: export -> ``datasets.load_dataset`` -> ``import dataset`` -> ``eval``.

The golden sessions (seven demo tasks, success and failure each, scored live when they were
recorded) are exported with redaction on; Hugging Face ``datasets`` loads the folder offline; the
sessions taken back score exactly as the rows say, and as the originals did, except where the
evaluator itself signed in with a password (task 10027's REST login): there the redacted session
must refuse loudly, never give another score. No secret of the originals reaches any file of the folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.errors import EvaluationError, SessionFormatError
from cdp_integration.evaluate.dataset import COLUMNS, DATA_FILE, export_dataset, import_dataset
from cdp_integration.session.store import load_session
from tests.unit.test_redact import original_secrets

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "v2"

EVALUATOR_SIGNS_IN = {10027}
"""Tasks whose evaluator logs in to the shop's REST API with a password: redacting it is correct, and
replaying that login from a redacted session is a loud miss."""


def _scores(output_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (output_dir / "output.jsonl").read_bytes().splitlines()
    return {
        Path(record["metadata"]["session_path"]).name: record["test_result"]
        for record in map(orjson.loads, lines)
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("run")
    for path in GOLDEN.glob("*.session.jsonl.gz"):
        shutil.copy(path, directory / path.name)
    return directory


@pytest.fixture
def small_run(tmp_path: Path) -> Path:
    directory = tmp_path / "small-run"
    directory.mkdir()
    shutil.copy(GOLDEN / "10039.success.session.jsonl.gz", directory)
    return directory


@pytest.fixture(scope="module")
def original_scores(run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("original-eval")
    result = CliRunner().invoke(cli, ["eval", str(run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return _scores(out)


@pytest.fixture(scope="module")
def dataset(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("parent") / "dataset"
    result = CliRunner().invoke(cli, ["export-dataset", str(run), "-o", str(out), "--agent", "scripted-demo"])
    assert result.exit_code == 0, result.output
    assert "14 episodes of 7 tasks, 14 scored" in result.output
    return out


def _load_dataset(folder: Path, hf_home: Path) -> list[dict[str, Any]]:
    """``datasets.load_dataset(folder)`` in a child process, offline, with its caches in a temp dir."""
    program = (
        "import json, sys, datasets\n"
        "rows = datasets.load_dataset(sys.argv[1], split='train').to_list()\n"
        "print(json.dumps(rows))\n"
    )
    hf_home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", program, str(folder)], capture_output=True, text=True, env=env, cwd=hf_home
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(orjson.loads(done.stdout.splitlines()[-1]))


def test_load_dataset_reads_one_row_per_episode_with_trials_and_scores(
    dataset: Path, original_scores: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    rows = _load_dataset(dataset, tmp_path)
    assert len(rows) == 14
    assert set(rows[0]) == set(COLUMNS)
    by_file = {Path(row["session_file"]).name: row for row in rows}
    assert set(by_file) == set(original_scores)
    for name, row in by_file.items():
        assert (dataset / row["session_file"]).is_file()
        assert row["agent"] == "scripted-demo" and row["redacted"] is True
        assert row["trials"] == 2 and row["trial"] in (1, 2)  # success and failure: two trials of a task
        assert row["n_steps"] == len(row["history"]) > 0
        original = original_scores[name]
        same = (row["score"], row["max_score"]) == (original["score"], original["max_score"])
        loud = row["score"] is None and row["error_type"] == "ReplayMissError"
        assert same or (loud and row["task_id"] in EVALUATOR_SIGNS_IN), (name, row, original)
    card = (dataset / "README.md").read_text()
    assert f"path: {DATA_FILE}" in card and "libwebarena" in card and "| episodes | 14 |" in card


def test_import_dataset_then_eval_scores_as_the_rows(dataset: Path, tmp_path: Path) -> None:
    taken = CliRunner().invoke(cli, ["import", "dataset", str(dataset), "-o", str(tmp_path / "sessions")])
    assert taken.exit_code == 0, taken.output
    scored = CliRunner().invoke(cli, ["eval", str(tmp_path / "sessions"), "-o", str(tmp_path / "eval")])
    assert scored.exit_code == 0, scored.output
    again = _scores(tmp_path / "eval")
    rows = _load_dataset(dataset, tmp_path / "hf")
    assert len(again) == len(rows) == 14
    for row in rows:
        result = again[Path(row["session_file"]).name]
        assert (result["score"], result["max_score"], result["error_type"]) == (
            row["score"],
            row["max_score"],
            row["error_type"],
        )


def test_no_secret_of_the_run_reaches_the_folder(run: Path, dataset: Path, tmp_path: Path) -> None:
    secrets: set[str] = set()
    for path in run.glob("*.session.jsonl.gz"):
        secrets |= original_secrets(load_session(path))
    assert len(secrets) >= 3  # the demo's session cookies and the shop password, at least
    texts: list[bytes] = []
    for path in dataset.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            texts.append(raw)
            if raw[:2] == b"\x1f\x8b":
                texts.append(zlib.decompressobj(47).decompress(raw))
    texts.append(orjson.dumps(_load_dataset(dataset, tmp_path)))  # the Parquet file's values, uncompressed
    for secret in secrets:
        assert not any(secret.encode() in text for text in texts), secret


def test_no_redact_keeps_the_sessions_as_they_were(small_run: Path, tmp_path: Path) -> None:
    exported = export_dataset(small_run, tmp_path / "plain", redact=False)
    assert (exported.episodes, exported.redacted, exported.secrets_replaced) == (1, False, 0)
    original = load_session(small_run / "10039.success.session.jsonl.gz")
    copy = load_session(tmp_path / "plain" / "sessions" / "10039.success.session.jsonl.gz")
    assert copy.header == original.header and copy.steps == original.steps and copy.end == original.end


def test_export_refuses_a_folder_that_is_not_empty_and_a_symlinked_one(
    small_run: Path, tmp_path: Path
) -> None:
    run = small_run
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    with pytest.raises(EvaluationError, match="not empty"):
        export_dataset(run, tmp_path / "used")
    assert (tmp_path / "used" / "keep.txt").read_text() == "mine"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    result = CliRunner().invoke(cli, ["export-dataset", str(run), "-o", str(tmp_path / "link")])
    assert result.exit_code == 2 and "symbolic link" in result.output
    assert not any((tmp_path / "elsewhere").iterdir())


def test_import_refuses_symlinks_inside_the_dataset(tmp_path: Path) -> None:
    folder = tmp_path / "dataset"
    (folder / "sessions").mkdir(parents=True)
    shutil.copy(GOLDEN / "10000.success.session.jsonl.gz", folder / "sessions" / "a.session.jsonl.gz")
    outside = tmp_path / "outside.session.jsonl.gz"
    shutil.copy(GOLDEN / "10000.failure.session.jsonl.gz", outside)
    (folder / "sessions" / "b.session.jsonl.gz").symlink_to(outside)
    with pytest.raises(SessionFormatError, match="symbolic link"):
        import_dataset(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (folder / "sessions" / "b.session.jsonl.gz").unlink()
    (folder / "sessions" / "sub").symlink_to(tmp_path, target_is_directory=True)
    result = CliRunner().invoke(cli, ["import", "dataset", str(folder), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "symbolic link" in result.output


def test_import_takes_only_valid_sessions(tmp_path: Path) -> None:
    folder = tmp_path / "dataset"
    (folder / "sessions").mkdir(parents=True)
    (folder / "sessions" / "bad.session.jsonl.gz").write_bytes(b"not a session")
    result = CliRunner().invoke(cli, ["import", "dataset", str(folder), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "bad.session.jsonl.gz" in result.output
    assert not list((tmp_path / "out").rglob("*.session.jsonl.gz")) if (tmp_path / "out").exists() else True


def test_push_to_hub_without_the_hub_is_one_line_exit_2(
    small_run: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    run = small_run
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    result = CliRunner().invoke(
        cli, ["export-dataset", str(run), "-o", str(tmp_path / "ds"), "--push-to-hub", "someone/run"]
    )
    assert result.exit_code == 2
    assert "could not push to the hub repository someone/run" in result.output
    assert (tmp_path / "ds" / DATA_FILE).is_file()  # the folder is written before the upload is tried
