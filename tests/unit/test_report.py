"""The evaluation report: means, per-site groups, template macro average with bootstrap CI, failure modes."""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdp_integration.evaluate.report import bootstrap_ci, build_report, write_report


def line(
    instance_id: str,
    score: float | None,
    *,
    template: int | None = None,
    task_id: int | None = None,
    sites: tuple[str, ...] = ("shopping",),
    eval_types: tuple[str, ...] = ("string_match",),
    max_score: float | None = None,
    live: float | None = None,
    live_max: float | None = None,
    error_type: str | None = None,
) -> dict[str, Any]:
    return {
        "instance_id": instance_id,
        "instance": {
            "task_id": task_id,
            "intent_template_id": template,
            "sites": list(sites),
            "eval_types": list(eval_types),
        },
        "history": [],
        "test_result": {
            "score": score,
            "max_score": max_score,
            "live_reward": live,
            "live_max": live_max,
            "answer": None,
            "error": f"{error_type}: boom" if error_type else None,
            "error_type": error_type,
            "duration_ms": 2.0,
        },
        "metadata": {"session_path": f"{instance_id}.session.jsonl.gz", "scorer": "webarena"},
    }


def write_output(path: Path, lines: list[dict[str, Any]], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in lines) + tail)
    return path


def test_bootstrap_is_deterministic_and_sane() -> None:
    rng = random.Random(1)
    values = [rng.random() for _ in range(50)]
    ci = bootstrap_ci(values)
    assert ci is not None
    assert ci == bootstrap_ci(list(values))
    assert ci != bootstrap_ci(values, seed=1)
    low, high = ci
    assert min(values) < low < statistics.fmean(values) < high < max(values)
    assert bootstrap_ci([1.0] * 30) == (1.0, 1.0)
    assert bootstrap_ci([0.25]) == (0.25, 0.25)
    assert bootstrap_ci([]) is None


def test_bootstrap_width_matches_the_standard_error() -> None:
    values = [1.0] * 50 + [0.0] * 50  # mean 0.5, standard error 0.05: 95% CI about +-0.098
    low, high = bootstrap_ci(values) or (0.0, 0.0)
    assert 0.38 < low < 0.43 and 0.57 < high < 0.62


def test_macro_average_is_the_mean_of_template_means(tmp_path: Path) -> None:
    lines = [
        line("a", 1.0, template=1),
        line("b", 1.0, template=1),
        line("c", 1.0, template=1),
        line("d", 0.0, template=1),
        line("e", 0.0, template=2),
        line("f", 1.0, task_id=99),  # no template id: stands for its own template
    ]
    report = build_report(write_output(tmp_path / "output.jsonl", lines))
    assert report.score.mean == pytest.approx(4 / 6)
    assert report.score.macro.templates == 3
    macro = report.score.macro
    assert macro.mean == pytest.approx((0.75 + 0.0 + 1.0) / 3)
    assert macro.ci_low is not None and macro.ci_high is not None and macro.mean is not None
    assert 0.0 <= macro.ci_low < macro.mean < macro.ci_high <= 1.0


def test_the_interval_does_not_depend_on_line_order(tmp_path: Path) -> None:
    lines = [line(f"i{n}", float(n % 3 == 0), template=n % 17) for n in range(120)]
    first = build_report(write_output(tmp_path / "a.jsonl", lines))
    random.Random(5).shuffle(lines)
    second = build_report(write_output(tmp_path / "b.jsonl", lines))
    assert first.score.macro == second.score.macro


def test_report_contents(tmp_path: Path) -> None:
    lines = [
        line("s1", 1.0, template=1, max_score=1.0, live=1.0, live_max=1.0),
        line("s2", 0.0, template=1, max_score=1.0, live=1.0, live_max=1.0, eval_types=("url_match",)),
        line("s3", 0.0, template=2, live=0.0, sites=("reddit", "gitlab")),
        line("s4", 0.0, template=3, eval_types=("url_match", "program_html")),
        line("s5", None, error_type="ReplayMissError"),
        line("s6", None, error_type="ReplayMissError"),
        line("s7", None, error_type="SessionFormatError", sites=()),
    ]
    report = build_report(write_output(tmp_path / "output.jsonl", lines, tail=b'{"instance_id": "s8", "te'))
    assert (report.sessions, report.errors, report.unreadable_lines) == (7, 3, 1)
    assert report.score.sessions == 4
    assert report.score.mean == pytest.approx(0.25)
    assert report.score.mean_unscored_as_zero == pytest.approx(1 / 7)
    assert {site: (g.sessions, g.mean) for site, g in report.score.per_site.items()} == {
        "gitlab+reddit": (1, 0.0),
        "shopping": (3, pytest.approx(1 / 3)),
    }
    assert report.max_score.sessions == 2 and report.max_score.mean == 1.0
    assert report.max_score.macro.templates == 1
    assert (report.live_vs_offline.compared, report.live_vs_offline.equal) == (3, 2)
    assert report.live_vs_offline.mismatched == ("s2",)
    assert (report.live_max_vs_offline_max.compared, report.live_max_vs_offline_max.equal) == (2, 2)
    assert report.errors_by_type == {"ReplayMissError": 2, "SessionFormatError": 1}
    assert report.zero_score_by_eval_type == {"url_match": 1, "string_match": 1, "url_match+program_html": 1}


def test_write_report_writes_json_and_markdown(tmp_path: Path) -> None:
    lines = [line("s1", 1.0, template=1, live=0.0), line("s2", None, error_type="MissingConfig")]
    write_output(tmp_path / "output.jsonl", lines)
    report = write_report(tmp_path, incomplete_sessions=["x.session.jsonl.gz.partial"])
    saved = orjson.loads((tmp_path / "report.json").read_bytes())
    assert saved["score"]["mean"] == 1.0
    assert saved["score"]["macro"] == {"templates": 1, "mean": 1.0, "ci_low": 1.0, "ci_high": 1.0}
    assert saved["live_vs_offline"] == {"compared": 1, "equal": 0, "mismatched": ["s1"], "rate": 0.0}
    assert saved["errors_by_type"] == {"MissingConfig": 1}
    assert saved["incomplete_sessions"] == ["x.session.jsonl.gz.partial"]
    assert saved["bootstrap"] == {"resamples": 2000, "seed": 0, "confidence": 0.95}
    assert saved == orjson.loads(orjson.dumps(report.to_dict()))
    markdown = (tmp_path / "report.md").read_text()
    assert "| score (final state) | 1 | 1.000 | 0.500 | 1 | 1.000 | [1.000, 1.000] |" in markdown
    assert "| error: MissingConfig | 1 |" in markdown
    assert "x.session.jsonl.gz.partial" in markdown
    assert "0/1 equal" in markdown


def test_provenance_is_counted_and_shown_per_site(tmp_path: Path) -> None:
    lines = [line("s1", 1.0), line("s2", 0.0), line("s3", 1.0, sites=("gitlab",)), line("s4", 1.0)]
    for item, provenance in zip(lines, ("recorded", "reconstructed", "mixed", None), strict=True):
        if provenance is not None:  # s4: a line written before provenance existed
            item["test_result"]["provenance"] = provenance
    write_output(tmp_path / "output.jsonl", [*lines, line("s5", None, error_type="ReconstructedAnswerError")])
    report = write_report(tmp_path)
    assert report.provenance == {"recorded": 1, "reconstructed": 1, "mixed": 1, "unknown": 1}
    assert report.not_recorded_by_site == {"shopping": 1, "gitlab": 1}
    markdown = (tmp_path / "report.md").read_text()
    assert "| site | sessions | score | max_score | reconstructed |" in markdown
    assert "| shopping | 3 | 0.667 | - | 1 |" in markdown
    assert "recorded 1, reconstructed 1, mixed 1, unknown 1" in markdown
    assert report.errors_by_type == {"ReconstructedAnswerError": 1}
