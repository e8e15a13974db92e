"""Batch scoring of a sessions directory: streaming lines, resume after a kill, workers, crashes, configs.

The scorer is a fake (``fake_score``): each "session" file holds a JSON spec of what to return or
how to fail, so these tests exercise the batch runner alone. It is module-level so spawned workers
can import it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.errors import EvaluationError, ReconstructedAnswerError, SessionFormatError
from cdp_integration.evaluate import session_line
from cdp_integration.evaluate.batch import WORKER_CRASH, load_configs, score_directory

REPO = Path(__file__).resolve().parents[2]


def fake_score(path: Path, configs: Mapping[int, dict[str, Any]] | None = None, **kwargs: Any) -> Any:
    spec = orjson.loads(Path(path).read_bytes())
    if "count_lines_of" in spec:  # how many results were on disk when this session was scored
        spec["answer"] = str(Path(spec["count_lines_of"]).read_bytes().count(b"\n"))
    if spec.get("exit") is not None:
        os._exit(spec["exit"])
    if spec.get("kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    if spec.get("raise") == "format":
        raise SessionFormatError(f"{path}: line 3 is not JSON")
    if spec.get("raise") == "bug":
        raise KeyError("oops")
    if spec.get("return_none"):
        return None
    task_id = spec.get("task_id")
    answer = spec.get("answer")
    if configs is not None and task_id in configs:
        answer = configs[task_id]["intent"]
    return {
        "instance_id": spec.get("instance_id", Path(path).name.split(".session")[0]),
        "task_id": task_id,
        "intent_template_id": spec.get("template"),
        "sites": spec.get("sites", ["shopping"]),
        "eval_types": ["string_match"],
        "score": spec.get("score", 1.0),
        "max_score": spec.get("score", 1.0),
        "live_reward": spec.get("live"),
        "live_max": None,
        "answer": answer,
        "history": [{"index": 0, "action": None, "url": "http://shop/"}],
        "error": spec.get("error"),
        "error_type": spec.get("error_type"),
        "duration_ms": 1.5,
        "scorer": kwargs.get("scorer"),
    }


score_session_file = fake_score  # so ``batch``'s default-scorer import can be pointed at this module


def write_spec(directory: Path, name: str, **spec: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.session.jsonl.gz"
    path.write_bytes(orjson.dumps(spec))
    return path


def read_lines(output_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (output_dir / "output.jsonl").read_bytes().splitlines()]


def by_path(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["metadata"]["session_path"]: line for line in lines}


def test_every_session_becomes_one_openhands_style_line(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    write_spec(sessions, "a", task_id=1, template=10, score=1.0, live=1.0)
    write_spec(sessions / "run2", "b", task_id=2, template=10, score=0.0)
    (sessions / "c.session.jsonl.gz.partial").write_bytes(b"cut short")
    summary = score_directory(sessions, tmp_path / "out", workers=1, scorer="verified", score_fn=fake_score)
    assert (summary.found, summary.skipped, summary.scored, summary.failed) == (2, 0, 2, 0)
    assert summary.incomplete == (sessions / "c.session.jsonl.gz.partial",)
    lines = by_path(read_lines(tmp_path / "out"))
    assert set(lines) == {"a.session.jsonl.gz", "run2/b.session.jsonl.gz"}
    a = lines["a.session.jsonl.gz"]
    assert set(a) == {"instance_id", "instance", "history", "test_result", "metadata"}
    assert a["instance_id"] == "a"
    assert a["instance"] == {
        "task_id": 1,
        "intent_template_id": 10,
        "sites": ["shopping"],
        "eval_types": ["string_match"],
    }
    assert a["history"] == [{"index": 0, "action": None, "url": "http://shop/"}]
    assert a["test_result"] == {
        "score": 1.0,
        "max_score": 1.0,
        "live_reward": 1.0,
        "live_max": None,
        "answer": None,
        "error": None,
        "error_type": None,
        "duration_ms": 1.5,
        "partial": False,
        "provenance": None,
        "checks": None,  # the fake scorer gives none; the real ones do (test_explain.py)
        "attribution": None,
    }
    assert a["metadata"] == {"session_path": "a.session.jsonl.gz", "scorer": "verified"}


def test_each_line_is_on_disk_before_the_next_session_is_scored(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for i in range(4):
        write_spec(tmp_path / "s", f"s{i}", count_lines_of=str(out / "output.jsonl"))
    score_directory(tmp_path / "s", out, score_fn=fake_score)
    answers = {line["instance_id"]: line["test_result"]["answer"] for line in read_lines(out)}
    assert answers == {"s0": "0", "s1": "1", "s2": "2", "s3": "3"}


def test_failures_are_recorded_as_lines_and_the_run_goes_on(tmp_path: Path) -> None:
    sessions = tmp_path / "s"
    write_spec(sessions, "bad-format", **{"raise": "format"})
    write_spec(sessions, "bug", **{"raise": "bug"})
    write_spec(sessions, "not-a-dict", return_none=True)
    write_spec(sessions, "no-config", error="task 9 has no config", error_type="MissingConfig", score=None)
    write_spec(sessions, "untyped-error", error="something", score=None)
    write_spec(sessions, "good")
    summary = score_directory(sessions, tmp_path / "out", score_fn=fake_score)
    assert (summary.scored, summary.failed) == (6, 5)
    assert summary.error_types == {
        "SessionFormatError": 1,
        "KeyError": 1,
        "TypeError": 1,
        "MissingConfig": 1,
        "Error": 1,
    }
    lines = {line["instance_id"]: line for line in read_lines(tmp_path / "out")}
    bad = lines["bad-format"]
    assert bad["test_result"]["error_type"] == "SessionFormatError"
    assert "line 3 is not JSON" in bad["test_result"]["error"]
    assert bad["test_result"]["score"] is None
    assert "traceback" not in bad["metadata"]  # a known, explained failure
    assert "KeyError" in lines["bug"]["metadata"]["traceback"]  # a bug: keep where it happened
    assert "not a dict" in lines["not-a-dict"]["test_result"]["error"]
    assert lines["no-config"]["instance"]["task_id"] is None
    assert lines["good"]["test_result"]["error"] is None


def test_resume_after_a_kill_skips_scored_sessions_and_rescores_the_cut_line(tmp_path: Path) -> None:
    sessions, out = tmp_path / "s", tmp_path / "out"
    for i in range(4):
        write_spec(sessions, f"s{i}")
    score_directory(sessions, out, score_fn=fake_score)
    output = out / "output.jsonl"
    content = output.read_bytes()
    output.write_bytes(content[: len(content) - 25])  # killed while writing the last line
    write_spec(sessions, "s4")
    summary = score_directory(sessions, out, score_fn=fake_score)
    assert (summary.found, summary.skipped, summary.scored) == (5, 3, 2)
    lines = read_lines(out)
    assert sorted(line["instance_id"] for line in lines) == ["s0", "s1", "s2", "s3", "s4"]
    again = score_directory(sessions, out, score_fn=fake_score)
    assert (again.skipped, again.scored) == (5, 0)
    fresh = score_directory(sessions, out, resume=False, score_fn=fake_score)
    assert (fresh.skipped, fresh.scored) == (0, 5)
    assert len(read_lines(out)) == 5


def test_an_output_jsonl_not_written_by_eval_is_never_touched(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_spec(run_dir / "sessions", "webarena.3")
    foreign = b'{"instance_id": "webarena.3", "test_result": {"reward": 1.0}}\n'
    (run_dir / "output.jsonl").write_bytes(foreign)
    for resume in (True, False):
        with pytest.raises(EvaluationError, match="not written by eval_infer"):
            score_directory(run_dir, run_dir, resume=resume, score_fn=fake_score)
    assert (run_dir / "output.jsonl").read_bytes() == foreign
    summary = score_directory(run_dir, run_dir / "eval_output", score_fn=fake_score)
    assert summary.scored == 1
    assert (
        read_lines(run_dir / "eval_output")[0]["metadata"]["session_path"]
        == "sessions/webarena.3.session.jsonl.gz"
    )


def test_workers_score_like_one_process_and_get_the_configs(tmp_path: Path) -> None:
    sessions = tmp_path / "s"
    for i in range(6):
        write_spec(sessions, f"s{i}", task_id=i % 3, score=float(i % 2))
    configs = {i: {"task_id": i, "intent": f"intent {i}", "eval": {}} for i in range(3)}
    results = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        summary = score_directory(
            sessions,
            out,
            configs=configs,
            workers=workers,
            scorer="webarena",
            score_fn=fake_score,
        )
        assert (summary.scored, summary.failed, summary.workers) == (6, 0, workers)
        results.append(sorted(orjson.dumps(line) for line in read_lines(out)))
    assert results[0] == results[1]
    assert b'"answer":"intent 2"' in results[0][2]


def test_a_worker_that_dies_costs_only_its_session(tmp_path: Path) -> None:
    sessions = tmp_path / "s"
    for i in range(6):
        write_spec(sessions, f"s{i}")
    write_spec(sessions, "s2", exit=3)
    write_spec(sessions, "s4", kill=True)
    summary = score_directory(sessions, tmp_path / "out", workers=2, score_fn=fake_score)
    assert (summary.scored, summary.failed) == (6, 2)
    assert summary.error_types == {WORKER_CRASH: 2}
    lines = {line["instance_id"]: line["test_result"] for line in read_lines(tmp_path / "out")}
    assert "exited with code 3" in lines["s2"]["error"]
    assert "killed by SIGKILL" in lines["s4"]["error"]
    assert all(lines[f"s{i}"]["score"] == 1.0 for i in (0, 1, 3, 5))


def test_a_score_fn_workers_cannot_import_is_refused(tmp_path: Path) -> None:
    write_spec(tmp_path / "s", "a")
    with pytest.raises(TypeError, match="module-level function"):
        score_directory(tmp_path / "s", tmp_path / "out", workers=2, score_fn=lambda p, c: {})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing", "sessions directory not found"),
        (lambda d: d, "no session files"),
    ],
    ids=["missing-dir", "empty-dir"],
)
def test_unusable_sessions_dir_is_a_clear_error(tmp_path: Path, make: Any, message: str) -> None:
    with pytest.raises(EvaluationError, match=message):
        score_directory(make(tmp_path), tmp_path / "out", score_fn=fake_score)


def test_memory_does_not_grow_with_the_number_of_sessions(tmp_path: Path) -> None:
    big_history = [
        {"index": i, "action": "click('x')", "url": "http://shop/" + "p" * 80} for i in range(1000)
    ]
    peaks = []
    for count in (20, 200):
        sessions = tmp_path / f"s{count}"
        for i in range(count):
            write_spec(sessions, f"s{i}")
        (tmp_path / "history.json").write_bytes(orjson.dumps(big_history))
        tracemalloc.start()
        score_directory(sessions, tmp_path / f"out{count}", score_fn=_score_with_big_history)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # each result is ~110 KB: holding 180 more would add ~20 MB
    assert peaks[1] - peaks[0] < 2_000_000, peaks


def _score_with_big_history(path: Path, configs: Any = None) -> Any:
    result = fake_score(path, configs)
    result["history"] = orjson.loads((path.parent.parent / "history.json").read_bytes())
    return result


@pytest.mark.parametrize("form", ["raw-list", "demo-tasks", "directory", "single"])
def test_configs_load_from_each_form(tmp_path: Path, form: str) -> None:
    configs = [
        {"task_id": i, "intent_template_id": 7, "eval": {"eval_types": ["url_match"]}} for i in (3, 12)
    ]
    if form == "raw-list":
        path = tmp_path / "test.raw.json"
        path.write_bytes(orjson.dumps(configs))
    elif form == "demo-tasks":
        path = tmp_path / "tasks.json"
        path.write_bytes(orjson.dumps([{"id": f"demo.{c['task_id']}", "config": c} for c in configs]))
    elif form == "directory":
        path = tmp_path / "configs"
        path.mkdir()
        for config in configs:
            (path / f"{config['task_id']}.json").write_bytes(orjson.dumps(config))
        (path / "test.raw.json").write_bytes(b"[]")  # not a <task_id>.json: not read
    else:
        path = tmp_path / "3.json"
        path.write_bytes(orjson.dumps(configs[0]))
        configs = configs[:1]
    assert load_configs(path) == {c["task_id"]: c for c in configs}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[{", "not valid JSON"),
        (b'[{"intent": "no eval"}]', "not a WebArena task config"),
        (b'[{"eval": {}}]', "no integer 'task_id'"),
        (b"[]", "holds no task configs"),
        (b'[{"task_id": 1, "eval": {}}, {"task_id": 1, "eval": {"x": 1}}]', "appears twice"),
        (None, "configs file not found"),
    ],
    ids=["json", "shape", "task-id", "empty", "duplicate", "missing"],
)
def test_bad_configs_are_one_clear_error(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "configs.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(EvaluationError, match=message):
        load_configs(path)


def test_a_configs_dir_without_task_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_bytes(b"{}")
    with pytest.raises(EvaluationError, match=r"no <task_id>\.json"):
        load_configs(tmp_path)


def test_eval_command_scores_and_writes_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_line, "SCORER_MODULE", __name__)
    sessions = tmp_path / "s"
    write_spec(sessions, "a", task_id=1, template=1, score=1.0, live=1.0)
    write_spec(sessions, "b", task_id=2, template=2, score=0.0, live=1.0)
    write_spec(sessions, "c", **{"raise": "format"})
    (sessions / "d.session.jsonl.gz.partial").write_bytes(b"")
    configs = tmp_path / "tasks.json"
    configs.write_bytes(orjson.dumps([{"config": {"task_id": 1, "intent": "buy", "eval": {}}}]))
    result = CliRunner().invoke(cli, ["eval", str(sessions), "--configs", str(configs), "--no-progress"])
    assert result.exit_code == 1, result.output  # one session could not be scored
    out = sessions / "eval_output"
    assert {p.name for p in out.iterdir()} == {"output.jsonl", "report.json", "report.md", "report.html"}
    assert "scored 3 sessions in" in result.output
    assert "1 session of 3 could not be scored:\n  1 session: SessionFormatError: " in result.stderr
    assert "1 incomplete session (*.partial)" in result.output
    assert "live vs offline score:    1/2 equal" in result.output
    assert "SessionFormatError 1" in result.output
    lines = {line["instance_id"]: line for line in read_lines(out)}
    assert lines["a"]["test_result"]["answer"] == "buy"
    assert lines["a"]["metadata"]["scorer"] == "webarena"
    report = orjson.loads((out / "report.json").read_bytes())
    assert report["incomplete_sessions"] == ["d.session.jsonl.gz.partial"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/missing"], "sessions directory not found"),
        (["{tmp}/s", "--configs", "{tmp}/nope.json"], "configs file not found"),
        (["{tmp}/s", "--configs", "{tmp}/s/a.session.jsonl.gz"], "not a WebArena task config"),
        (["{tmp}/s", "--workers", "0"], "workers must be at least 1"),
    ],
    ids=["missing-dir", "missing-configs", "bad-configs", "workers"],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    write_spec(tmp_path / "s", "a")
    argv = ["eval", *(arg.format(tmp=tmp_path) for arg in args)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("cdp-session: error: ") and message in result.stderr


def test_eval_infer_script_runs_the_same_command(tmp_path: Path) -> None:
    script = REPO / "evaluation/benchmarks/webarena/eval_infer.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "missing")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr == f"eval_infer.py: error: {tmp_path / 'missing'}: sessions directory not found\n"


def provenance_score(path: Path, configs: Mapping[int, dict[str, Any]] | None = None, **kwargs: Any) -> Any:
    """A scorer whose sessions say where their answers came from; refuses reconstructed ones on request."""
    spec = orjson.loads(Path(path).read_bytes())
    if kwargs.get("recorded_only") and spec["provenance"] != "recorded":
        raise ReconstructedAnswerError(f"{path}: evaluate('x') on http://shop/ was not recorded")
    return {"task_id": spec.get("task_id"), "score": 1.0, "provenance": spec["provenance"]}


@pytest.mark.parametrize("workers", [1, 2])
def test_provenance_is_written_and_recorded_only_reaches_the_scorer(tmp_path: Path, workers: int) -> None:
    sessions = tmp_path / "sessions"
    write_spec(sessions, "rec", task_id=1, provenance="recorded")
    write_spec(sessions, "recon", task_id=2, provenance="reconstructed")
    score_directory(sessions, tmp_path / "all", score_fn=provenance_score, workers=workers)
    lines = by_path(read_lines(tmp_path / "all"))
    assert lines["recon.session.jsonl.gz"]["test_result"]["provenance"] == "reconstructed"
    summary = score_directory(
        sessions,
        tmp_path / "strict",
        score_fn=provenance_score,
        workers=workers,
        recorded_only=True,
    )
    assert summary.error_types == {"ReconstructedAnswerError": 1}
    strict = by_path(read_lines(tmp_path / "strict"))
    assert strict["rec.session.jsonl.gz"]["test_result"]["provenance"] == "recorded"
    assert "was not recorded" in strict["recon.session.jsonl.gz"]["test_result"]["error"]
