"""No command that did not do its job exits 0: every ``cdp-session`` command (each one the group lists,
the lazily imported ones included), given garbage, an empty file, a truncated session, and for
``compare`` two runs with no task in common, exits non-zero with one line on stderr
(``cdp-session: error: ...`` or click's usage error), never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "v2"
SESSION = GOLDEN / "10000.success.session.jsonl.gz"

Argv = Callable[[Path, Path], list[str]]
"""The command's arguments for an input file (or the folder holding it) and a scratch directory."""

ARGV: dict[str, Argv] = {
    "info": lambda f, t: [str(f)],
    "har": lambda f, t: [str(f), "-o", str(t / "out.har")],
    "har-show": lambda f, t: [str(f)],
    "redact": lambda f, t: [str(f), "-o", str(t / "out.session.jsonl.gz")],
    "export-verified": lambda f, t: [str(f), "-o", str(t / "verified")],
    "eval": lambda f, t: [str(f.parent), "-o", str(t / "eval")],
    "compare": lambda f, t: [str(f), str(f), "-o", str(t / "compare")],
    "import": lambda f, t: ["playwright-trace", str(f), "-o", str(t / "imported")],
    "export-dataset": lambda f, t: [str(f), "-o", str(t / "dataset")],
    "steps": lambda f, t: [str(f)],
    "show": lambda f, t: [str(f), "0"],
    "diff": lambda f, t: [str(f), "0", "1"],
    "debug": lambda f, t: [str(f)],
    "view": lambda f, t: [str(f), "-o", str(t / "view.html")],
    "export-wabe": lambda f, t: [str(f), "-o", str(t / "wabe")],
    "eval-at": lambda f, t: [str(f), "0"],
    "rescore": lambda f, t: [str(f)],
}
NO_INPUT: dict[str, list[str]] = {
    "schema": [],  # prints the schema: no input to be wrong
    "setup": [],  # prepares the machine from what is installed: no input
}
GARBAGE_OPTIONS: dict[str, list[str]] = {
    "demo": ["--task", "1", "-o", "{tmp}"],  # no such demo task: nothing played
    "record": ["--cdp", "not-an-endpoint", "-o", "{tmp}"],
}


def _commands() -> list[str]:
    return sorted(cli.list_commands(None))  # type: ignore[arg-type]


def test_every_command_is_in_the_contract() -> None:
    assert set(_commands()) == {*ARGV, *NO_INPUT, *GARBAGE_OPTIONS}


def _inputs(tmp: Path) -> dict[str, Path]:
    """Garbage, an empty file and a truncated session, each alone in its folder, named like a session."""
    made = {}
    for kind, data in (
        ("garbage", b"hello world\nnot a session \x00\xff\n"),
        ("empty", b""),
        ("truncated", SESSION.read_bytes()[:300]),
    ):
        folder = tmp / kind
        folder.mkdir()
        made[kind] = folder / "x.session.jsonl.gz"
        made[kind].write_bytes(data)
    return made


def _assert_failed_in_one_line(args: list[str], tmp: Path) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0, f"{args}: exit 0\n{result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("cdp-session: error: ", "Error: "))]
    assert len(errors) == 1 and "Traceback" not in result.stderr, f"{args}: stderr {result.stderr!r}"


@pytest.mark.parametrize("command", sorted(ARGV))
@pytest.mark.parametrize("kind", ["garbage", "empty", "truncated"])
def test_a_bad_input_exits_non_zero_with_one_line(command: str, kind: str, tmp_path: Path) -> None:
    path = _inputs(tmp_path)[kind]
    if command in ("compare", "export-dataset"):  # a run: its output.jsonl holds the bad bytes
        path = path.rename(path.with_name("output.jsonl"))
    _assert_failed_in_one_line([command, *ARGV[command](path, tmp_path)], tmp_path)


@pytest.mark.parametrize("command", sorted(GARBAGE_OPTIONS))
def test_garbage_options_exit_non_zero_with_one_line(command: str, tmp_path: Path) -> None:
    args = [a.replace("{tmp}", str(tmp_path / "out")) for a in GARBAGE_OPTIONS[command]]
    _assert_failed_in_one_line([command, *args], tmp_path)


def _run(folder: Path, task_ids: list[int]) -> Path:
    """An eval output with one passing line per task id."""
    folder.mkdir(parents=True)
    lines = [
        f'{{"instance_id": "t{t}", "test_result": {{"task_id": {t}, "score": 1.0, "sites": ["shopping"]}}}}'
        for t in task_ids
    ]
    (folder / "output.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_compare_of_two_runs_with_no_task_in_common_fails(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a", [1, 2, 3]), _run(tmp_path / "b", [7, 8, 9])
    _assert_failed_in_one_line(["compare", str(a), str(b), "-o", str(tmp_path / "out")], tmp_path)
    assert not (tmp_path / "out" / "compare.json").exists()
    shared = _run(tmp_path / "c", [3, 4])
    result = CliRunner().invoke(cli, ["compare", str(a), str(shared), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output  # one task in common is a comparison


def test_har_with_steps_that_select_nothing_fails(tmp_path: Path) -> None:
    for steps in ("5:2", "2:2", "99"):
        _assert_failed_in_one_line(
            ["har", str(SESSION), "-o", str(tmp_path / "x.har"), "--steps", steps], tmp_path
        )
    result = CliRunner().invoke(cli, ["har", str(SESSION), "-o", str(tmp_path / "x.har"), "--steps", "1:3"])
    assert result.exit_code == 0 and "wrote" in result.output


def test_the_messages_say_what_is_wrong(tmp_path: Path) -> None:
    from cdp_integration.evaluate.explain import error_attribution

    answers = tmp_path / "answers.json"
    answers.write_text('{"10000": "DS-HK-003"}')
    result = CliRunner().invoke(cli, ["rescore", str(SESSION), "--config", str(answers)])
    assert result.exit_code == 2 and f"{answers} is not a WebArena task config" in result.stderr
    result = CliRunner().invoke(cli, ["eval-at", str(SESSION), "99"])
    assert result.exit_code == 2 and "Invalid value for STEP: step 99 is out of range" in result.stderr
    assert "the evaluator raised" not in result.stderr
    missing = error_attribution(
        "EvaluationError", "x.gz: the config uses __SHOPPING__ but no SHOPPING URL is known"
    )
    assert missing is not None and missing["class"] == "input_missing"
