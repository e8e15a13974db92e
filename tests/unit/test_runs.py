"""Runs as a whole: trials, task-first figures, the HTML report's contents, run comparison, and the
``eval`` exit status and wording a CI job reads. Browser-free; the real-browser checks are in
``tests/integration/test_run_report.py``."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.evaluate import session_line
from cdp_integration.evaluate.command import write_viewers
from cdp_integration.evaluate.compare import compare_runs, format_markdown, to_json, write_comparison
from cdp_integration.evaluate.report import build_report, describe_trials, write_report
from cdp_integration.evaluate.report_html import render_run_html, viewer_links
from cdp_integration.evaluate.runs import (
    mcnemar_exact,
    pass_at_k,
    read_run,
    trial_summary,
    unscored_groups,
)
from tests.unit.test_batch import write_spec


def line(
    instance_id: str,
    task_id: int | None,
    score: float | None,
    *,
    template: int | None = None,
    site: str = "shopping",
    error_type: str | None = None,
    error: str | None = None,
    checks: list[dict[str, Any]] | None = None,
    attribution: dict[str, Any] | None = None,
    provenance: str = "recorded",
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "score": score,
        "max_score": score,
        "live_reward": None,
        "live_max": None,
        "answer": f"answer of {instance_id}",
        "error": error if error_type else None,
        "error_type": error_type,
        "provenance": provenance if error_type is None else None,
        "duration_ms": 1.0,
        "partial": False,
    }
    if checks is not None:
        result["checks"] = checks
    if attribution is not None or checks is not None:
        result["attribution"] = attribution
    return {
        "instance_id": instance_id,
        "instance": {
            "task_id": task_id,
            "intent_template_id": template if template is not None else task_id,
            "sites": [site],
            "eval_types": ["string_match"],
        },
        "history": [],
        "test_result": result,
        "metadata": {"session_path": f"{instance_id}.session.jsonl.gz", "scorer": "webarena"},
    }


def write_run(directory: Path, lines: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "output.jsonl").write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in lines))
    return directory


def test_statistics_of_known_cases() -> None:
    assert mcnemar_exact(7, 0) == pytest.approx(2 / 2**7)
    assert mcnemar_exact(3, 0) == pytest.approx(0.25)
    assert mcnemar_exact(5, 2) == pytest.approx(2 * (1 + 7 + 21) / 128)
    assert mcnemar_exact(0, 0) == 1.0
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(3, 0, 2) == 0.0
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)


def test_sessions_of_a_task_are_its_trials_in_every_figure(tmp_path: Path) -> None:
    lines = [
        line("1.a", 1, 1.0),
        line("1.b", 1, 1.0),
        line("1.c", 1, 1.0),  # task 1: three passing trials
        line("2.a", 2, 0.0),  # task 2: one failing trial
    ]
    out = write_run(tmp_path / "run", lines)
    report = build_report(out / "output.jsonl")
    assert report.score.mean == pytest.approx(0.5)  # tasks weigh the same: not 3/4
    assert report.score.per_site["shopping"].sessions == 4
    assert report.score.per_site["shopping"].mean == pytest.approx(0.5)
    assert report.trials == {1: 1, 3: 1} and report.mixed_trials
    assert describe_trials(report.trials) == (
        "4 sessions: 2 tasks with mixed trial counts (1 task with 1 trial, 1 task with 3 trials)"
    )
    assert describe_trials({2: 7}) == "14 sessions: 7 tasks, 2 trials each"
    assert describe_trials({1: 1}) == "1 session: 1 task, 1 trial each"
    write_report(out)
    assert "mixed trial counts" in (out / "report.md").read_text()
    assert orjson.loads((out / "report.json").read_bytes())["mixed_trials"] is True
    run = read_run(out)
    trials = trial_summary(run.tasks().values())
    assert (trials.tasks_with_trials, trials.k, trials.pass1, trials.pass_k) == (1, 3, 1.0, 1.0)
    page = render_run_html(run, report)
    assert 'id="mixed-trials"' in page
    assert "pass@3" in page
    assert 'id="no-viewers"' in page and "<code>--viewers</code>" in page


def test_unscored_sessions_are_grouped_by_the_shape_of_their_error(tmp_path: Path) -> None:
    lines = [line(f"{n}", n, 1.0) for n in range(3)]
    lines += [
        line("10", 10, None, error_type="EvaluationError", error="task 10 is not a WebArena-Verified task"),
        line("11", 11, None, error_type="EvaluationError", error="task 11 is not a WebArena-Verified task"),
        line("12", 12, None, error_type="ReplayMissError", error="content() on 'http://x/' missed"),
    ]
    groups = unscored_groups(read_run(write_run(tmp_path / "r", lines)).episodes)
    assert [group.line() for group in groups] == [
        "2 sessions: EvaluationError: task 10 is not a WebArena-Verified task (10 and 1 other)",
        "1 session: ReplayMissError: content() on 'http://x/' missed (12)",
    ]


def _ten_tasks(changed: set[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    a = [
        line(f"t{n}", n, float(n % 2), template=n // 3, site=("shopping", "gitlab")[n % 2]) for n in range(40)
    ]
    b = [
        line(
            f"t{n}",
            n,
            float(n % 2 == 0) if n in changed else float(n % 2),
            template=n // 3,
            site=("shopping", "gitlab")[n % 2],
        )
        for n in range(40)
    ]
    return a, b


def test_two_runs_that_differ_in_three_tasks_list_exactly_those(tmp_path: Path) -> None:
    a, b = _ten_tasks({4, 17, 31})
    comparison = compare_runs(read_run(write_run(tmp_path / "a", a)), read_run(write_run(tmp_path / "b", b)))
    assert [t.task for t in comparison.flipped] == ["4", "17", "31"]
    assert [t.task for t in comparison.tasks[:3]] == ["4", "17", "31"]  # flipped first
    assert (comparison.gained, comparison.lost) == (1, 2)  # 4 fails in A; 17 and 31 pass in A
    assert comparison.p_value == pytest.approx(mcnemar_exact(2, 1))
    assert comparison.ci is not None and comparison.ci[0] <= comparison.difference <= comparison.ci[1]  # type: ignore[operator]
    assert {g.key: g.flipped for g in comparison.per_site} == {
        "gitlab": 2,
        "shopping": 1,
    }  # odd tasks are gitlab
    data = to_json([comparison])["comparisons"][0]
    assert data["flipped"] == 3 and [t["task"] for t in data["tasks"] if t["flipped"]] == ["4", "17", "31"]
    markdown = format_markdown([comparison])
    assert "3 tasks flipped: 1 to pass, 2 to fail" in markdown
    assert all(f"| {task} | " in markdown for task in ("4", "17", "31"))


def test_identical_runs_show_no_change_and_a_zero_interval(tmp_path: Path) -> None:
    a, _ = _ten_tasks(set())
    comparison = compare_runs(read_run(write_run(tmp_path / "a", a)), read_run(write_run(tmp_path / "b", a)))
    assert comparison.flipped == [] and comparison.difference == 0.0 and comparison.ci == (0.0, 0.0)
    assert comparison.p_value == 1.0


def test_why_names_the_check_that_changed(tmp_path: Path) -> None:
    def check(expected: str, passed: bool) -> dict[str, Any]:
        return {
            "evaluator": "string_match", "target": None, "comparison": "exact_match", "expected": expected,
            "found": "DS-HK-003", "passed": passed, "source": {"kind": "answer"}, "note": None,
        }  # fmt: skip

    wrong = {"class": "answer_wrong", "reason": "the answer differs"}
    a = [line("1", 1, 1.0, checks=[check("DS-HK-003", True)]), line("2", 2, 1.0, checks=[check("x", True)])]
    b = [
        line("1", 1, 0.0, checks=[check("DS-HK-004", False)], attribution=wrong),
        line("2", 2, 1.0, checks=[check("x", True)]),
    ]
    comparison = compare_runs(
        read_run(write_run(tmp_path / "a", a)), read_run(write_run(tmp_path / "b", b)), by="session"
    )
    (flipped,) = comparison.flipped
    assert flipped.why[0] == (
        "check string_match exact_match: passed -> failed; expected 'DS-HK-003' -> 'DS-HK-004'; "
        "found 'DS-HK-003' both"  # an unchanged value is not shown as a change
    )
    run_b = read_run(tmp_path / "b")
    page = render_run_html(run_b, build_report(run_b.path))
    assert "1 session attributed by the scorer" in page and "answer_wrong" in page


def test_a_run_keeps_a_bounded_part_of_each_line_and_still_tells_long_values_apart(tmp_path: Path) -> None:
    """Lines of megabytes (a long answer, a check that found a whole page, thousands of checks) are
    kept as their start plus a digest: memory is bounded per line, and two values that differ only
    far into the text still compare unequal."""
    page = "<p>row</p>" * 200_000

    def check(found: str, passed: bool) -> dict[str, Any]:
        return {
            "evaluator": "program_html", "target": 0, "comparison": "must_include", "expected": "row",
            "found": found, "passed": passed,
        }  # fmt: skip

    many = [check(f"value {i}", True) for i in range(5_000)]
    a = [line("1", 1, 1.0, checks=[check(page, True)]), line("2", 2, 1.0, checks=many)]
    b = [line("1", 1, 0.0, checks=[check(page + "<p>x</p>", False)]), line("2", 2, 1.0, checks=many)]
    a[0]["test_result"]["answer"] = "A" * 3_000_000
    b[0]["test_result"]["answer"] = "A" * 2_999_999 + "B"
    run_a, run_b = read_run(write_run(tmp_path / "a", a)), read_run(write_run(tmp_path / "b", b))
    first, second = run_a.episodes
    assert first.answer is not None and len(first.answer) < 2_200 and first.answer.startswith("AAAA")
    assert first.checks is not None and len(first.checks[0]["found"]) < 2_200
    assert second.checks is not None and len(second.checks) == 200
    (flipped,) = compare_runs(run_a, run_b, by="session").flipped
    changed_check, changed_answer = flipped.why[:2]
    assert "passed -> failed" in changed_check and "' -> '" in changed_check.split("; found ")[1]
    assert changed_answer.startswith("answer 'AAAA") and "' -> 'AAAA" in changed_answer


def test_the_html_report_holds_every_episode_and_fetches_nothing(tmp_path: Path) -> None:
    hostile = "</script><script>alert(1)</script><img src=http://evil/x>"
    lines = [
        line("1", 1, 1.0),
        line(hostile, 2, 0.0, site=hostile),
        line("3", 3, None, error_type="ReplayMissError", error=hostile),
    ]
    run = read_run(write_run(tmp_path / "r", lines))
    page = render_run_html(run, build_report(run.path), links={"1.session.jsonl.gz": "viewers/1.html"})
    assert "<script>alert" not in page and "<img src=http" not in page
    assert "default-src 'none'" in page
    data = json.loads(re.search(r'<script type="application/json" id="rows">(.*?)</script>', page).group(1))  # type: ignore[union-attr]
    assert [row["episode"] for row in data["rows"]] == ["1", hostile, "3"]
    assert data["rows"][0]["episode_href"] == "viewers/1.html"
    assert [row["outcome"] for row in data["rows"]] == ["pass", "fail", "error"]
    markup = re.sub(r"<script\b.*?</script>", "", page, flags=re.S)
    assert re.findall(r'(?:src|href)="(?!viewers/)[^"]+"', markup) == []


def fake_scorer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_line, "SCORER_MODULE", "tests.unit.test_batch")


@pytest.mark.parametrize(
    ("failing", "expected_status", "wording"),
    [
        (0, 0, None),
        (1, 1, "1 session of 3 could not be scored:\n  1 session: SessionFormatError: "),
        (2, 1, "2 sessions of 4 could not be scored:\n  2 sessions: SessionFormatError: "),
    ],
    ids=["all-scored", "one-not", "two-not"],
)
def test_eval_exit_status_and_wording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int, expected_status: int, wording: str | None
) -> None:
    fake_scorer(monkeypatch)
    sessions = tmp_path / "s"
    write_spec(sessions, "a", task_id=1, template=1, score=1.0)
    write_spec(sessions, "b", task_id=2, template=2, score=0.0)
    for n in range(failing):
        write_spec(sessions, f"c{n}", **{"raise": "format"})
    result = CliRunner().invoke(cli, ["eval", str(sessions), "-o", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == expected_status, result.output
    scored = 2 + failing
    assert f"scored {scored} sessions in " in result.stdout
    assert "with 1 worker;" in result.stdout
    if wording is None:
        assert "could not be scored" not in result.stderr
    else:
        assert wording in result.stderr
        assert f"(c0{' and 1 other' if failing == 2 else ''})" in result.stderr
        allowed = CliRunner().invoke(
            cli, ["eval", str(sessions), "-o", str(tmp_path / "out2"), "--no-progress", "--allow-unscored"]
        )
        assert allowed.exit_code == 0, allowed.output
        assert "(allowed by --allow-unscored)" in allowed.stderr
    assert (tmp_path / "out" / "report.html").is_file()


def test_every_flag_an_eval_or_compare_message_names_exists() -> None:
    """The suggestions in the Verified errors and the commands' own messages name real flags."""
    import click

    from cdp_integration.evaluate import command, verified

    flags: set[str] = set()
    for cmd in vars(command).values():  # every command the module defines: eval, compare, export-dataset
        if isinstance(cmd, click.Command):
            for param in cmd.params:
                flags.update(opt for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--"))
    named: set[str] = set()
    for module in (verified, command):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                named.update(re.findall(r"(--[a-z][a-z-]+)", node.value))
    assert "--scorer" in named and "--configs" in named
    assert named <= flags, named - flags


def test_compare_writes_md_json_html(tmp_path: Path) -> None:
    a, b = _ten_tasks({1, 2, 3})
    write_run(tmp_path / "a", a)
    write_run(tmp_path / "b", b)
    result = CliRunner().invoke(
        cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b" / "output.jsonl"), "-o", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert "b vs a: macro score" in result.stdout
    assert [ln.split(":")[0].strip() for ln in result.stdout.splitlines() if ln.startswith("  ")] == [
        "1",
        "2",
        "3",
    ]
    assert {p.name for p in (tmp_path / "c").iterdir()} == {"compare.md", "compare.json", "compare.html"}
    bad = CliRunner().invoke(cli, ["compare", str(tmp_path / "a")])
    assert bad.exit_code == 2 and "give two or more RUNs" in bad.output
    again = write_comparison(
        tmp_path / "d", [compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "b"))]
    )
    assert all(path.is_file() for path in again)


def test_viewer_links_stay_inside_the_runs_viewers_directory(tmp_path: Path) -> None:
    """A crafted ``session_path`` never links (or writes) outside ``OUTPUT_DIR/viewers``."""
    run_dir = write_run(tmp_path / "run", [line("a", 1, 1.0), line("../../outside", 2, 0.0)])
    (run_dir / "viewers").mkdir()
    (run_dir / "viewers" / "a.html").write_text("<title>a</title>")
    (tmp_path / "outside.html").write_text("<title>not the run's</title>")
    run = read_run(run_dir)
    assert viewer_links(run) == {"a.session.jsonl.gz": "viewers/a.html"}
    assert viewer_links(run, relative_to=tmp_path) == {"a.session.jsonl.gz": "run/viewers/a.html"}
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    assert write_viewers(sessions, run_dir, run) == []  # neither session is inside SESSIONS_DIR to view
    assert sorted(p.name for p in (run_dir / "viewers").iterdir()) == ["a.html"]


def test_compare_three_runs_sets_each_against_the_first(tmp_path: Path) -> None:
    a, b = _ten_tasks({1, 2, 3})
    _, c = _ten_tasks({5})
    for name, lines in (("a", a), ("b", b), ("c", c)):
        write_run(tmp_path / name, lines)
    runs = [str(tmp_path / name) for name in "abc"]
    result = CliRunner().invoke(cli, ["compare", *runs, "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    data = orjson.loads((tmp_path / "out" / "compare.json").read_bytes())["comparisons"]
    assert [(item["a"]["name"], item["b"]["name"], item["flipped"]) for item in data] == [
        ("a", "b", 3),
        ("a", "c", 1),
    ]
    page = (tmp_path / "out" / "compare.html").read_text()
    assert '"key":"pair","label":"comparison","filter":true' in page
