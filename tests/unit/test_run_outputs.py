"""Run outputs read as someone else's file: exact statistics at any size, task ids and scores
checked, one line for what is no run, and comparisons linear in the trials of a task."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.errors import EvaluationError
from cdp_integration.evaluate import runs
from cdp_integration.evaluate.batch import load_configs, score_directory
from cdp_integration.evaluate.runs import mcnemar_exact, read_run
from tests.unit.test_batch import fake_score, write_spec
from tests.unit.test_runs import line, write_run


def _exact(b: int, c: int) -> float:
    n = b + c
    tail = Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


@pytest.mark.parametrize(("b", "c"), [(550, 550), (520, 580), (3, 1097), (0, 1100), (700, 2000)])
def test_mcnemar_is_exact_past_where_floats_overflow(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == _exact(b, c)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)


def test_mcnemar_in_log_space_agrees_with_the_exact_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "_EXACT_PAIRS", 0)  # the branch taken beyond 50,000 discordant pairs
    for b, c in ((520, 580), (3, 1097), (700, 2000)):
        assert mcnemar_exact(b, c) == pytest.approx(_exact(b, c), rel=1e-9, abs=1e-300)


def test_compare_of_1100_flipped_tasks_completes(tmp_path: Path) -> None:
    a = [line(f"{n}", n, float(n < 550)) for n in range(1100)]
    b = [line(f"{n}", n, float(n >= 550)) for n in range(1100)]
    write_run(tmp_path / "a", a)
    write_run(tmp_path / "b", b)
    result = CliRunner().invoke(
        cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    data = orjson.loads((tmp_path / "c" / "compare.json").read_bytes())["comparisons"][0]
    assert (data["lost"], data["gained"], data["mcnemar_p"]) == (550, 550, 1.0)


def _with(field: str, value: Any) -> dict[str, Any]:
    item = line("x", 7, 1.0)
    if field == "task_id":
        item["instance"]["task_id"] = value
    else:
        item["test_result"][field] = value
    return item


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ([_with("score", 1e308), _with("score", 1e308)], "score 1e+308 is not a number in [0, 1]"),
        ([_with("max_score", -2.0)], "max_score -2.0 is not a number in [0, 1]"),
        ([_with("task_id", "²")], "task_id '²' is not a task id"),
        ([_with("task_id", "7a")], "task_id '7a' is not a task id"),
        (b"hello world\n", "line 1 is not an eval output record"),
        (orjson.dumps(line("x", 7, 1.0))[:40], "line 1 is not an eval output record"),
    ],
    ids=["huge-score", "negative-max", "superscript-id", "letters-id", "text", "cut-short"],
)
def test_what_is_no_run_is_one_line_and_exit_2(tmp_path: Path, content: Any, message: str) -> None:
    write_run(tmp_path / "a", [line("x", 7, 1.0)])
    bad = tmp_path / "b"
    if isinstance(content, bytes):
        bad.mkdir()
        (bad / "output.jsonl").write_bytes(content)
    else:
        write_run(bad, content)
    result = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(bad), "-o", str(tmp_path / "c")])
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("cdp-session: error: ") and message in lines[0], lines


def test_a_session_path_with_a_nul_byte_is_refused_on_reading_and_resuming(tmp_path: Path) -> None:
    item = line("x", 7, 1.0)
    item["metadata"]["session_path"] = "a\x00b.session.jsonl.gz"
    out = write_run(tmp_path / "out", [item])
    with pytest.raises(EvaluationError, match="NUL byte"):
        read_run(out)
    write_spec(tmp_path / "sessions", "a", score=1.0)
    with pytest.raises(EvaluationError, match=r"line 1: metadata\.session_path holds a NUL byte"):
        score_directory(tmp_path / "sessions", out, score_fn=fake_score)


def test_config_files_are_named_in_ascii_digits(tmp_path: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    config = {"task_id": 7, "eval": {"eval_types": ["string_match"]}}
    (folder / "7.json").write_bytes(orjson.dumps(config))
    (folder / "¹.json").write_bytes(orjson.dumps({**config, "task_id": 1}))
    assert list(load_configs(folder)) == [7]
    (folder / "7.json").unlink()
    with pytest.raises(EvaluationError, match=r"no <task_id>\.json config files"):
        load_configs(folder)
