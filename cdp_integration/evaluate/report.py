"""Summarize an evaluation's ``output.jsonl`` (see ``batch.py``) into ``report.json`` and ``report.md``.

The file is read line by line; memory grows with the number of sites and intent templates, not
sessions. What is reported, and how:

- ``score`` (final-state offline score) and ``max_score`` (max over per-step offline scores, the
  BrowserGym / OpenHands reward): mean over the sessions that have the value, the same with
  unscored sessions counted as 0, per site, and the template-level macro average (mean per
  ``intent_template_id``, then the mean of those) with a bootstrap confidence interval that
  resamples templates. A session without a template id stands for its own template.
- Sites: a session counts under the ``+``-joined list of its sites, so multi-site tasks form their
  own group and every session is counted once.
- Live vs offline agreement: ``live_reward`` against ``score`` and ``live_max`` against ``max_score``,
  over sessions that have both.
- Failure modes: errors by ``error_type``; sessions scored 0 without error, by eval types.
- Why: the most common failed checks (``test_result.checks``, by evaluator, target and comparison)
  and the failure classes (``test_result.attribution``); lines without them are not counted.
- Provenance: sessions by where their answers came from (``recorded``, ``reconstructed``, ``mixed``;
  lines written before provenance existed count as ``unknown``), and per site how many were not
  purely recorded (the ``reconstructed`` column).
"""

from __future__ import annotations

import math
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.errors import EvaluationError
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.untrusted import ascii_int, iter_file_lines, open_input, open_output

__all__ = [
    "REPORT_JSON",
    "REPORT_MD",
    "Agreement",
    "GroupMean",
    "MacroAverage",
    "Metric",
    "Report",
    "bootstrap_ci",
    "build_report",
    "describe_trials",
    "format_markdown",
    "format_summary",
    "plural",
    "score_value",
    "strings",
    "task_key",
    "write_report",
]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
_MISMATCHES_LISTED = 20
_EQUAL_TOLERANCE = 1e-9


@dataclass(frozen=True)
class GroupMean:
    sessions: int
    mean: float | None
    """Mean over the group's tasks of each task's mean over its trials."""


@dataclass(frozen=True)
class MacroAverage:
    """Mean of per-template means, with a bootstrap CI over templates (``None`` when no data)."""

    templates: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Metric:
    sessions: int
    """Sessions that have this value (unscored sessions have none)."""
    mean: float | None
    mean_unscored_as_zero: float | None
    """Over every session in the file: what a success rate with failures-to-score as 0 would say."""
    macro: MacroAverage
    per_site: dict[str, GroupMean]
    tasks: int = 0
    """Tasks with a value; ``mean`` and ``per_site`` average these tasks' means over their trials."""


@dataclass(frozen=True)
class Agreement:
    compared: int
    equal: int
    mismatched: tuple[str, ...] = ()
    """Instance ids of the first disagreements."""

    @property
    def rate(self) -> float | None:
        return self.equal / self.compared if self.compared else None


@dataclass(frozen=True)
class Report:
    sessions: int
    errors: int
    score: Metric
    max_score: Metric
    live_vs_offline: Agreement
    """``live_reward`` vs the final-state ``score``."""
    live_max_vs_offline_max: Agreement
    """``live_max`` vs ``max_score``."""
    errors_by_type: dict[str, int]
    zero_score_by_eval_type: dict[str, int]
    """Sessions scored 0 without an error (a wrong answer, page or state), by their eval types."""
    unreadable_lines: int = 0
    incomplete_sessions: tuple[str, ...] = ()
    partial_sessions: tuple[str, ...] = ()
    """Scored sessions without an end record (``partial`` in output.jsonl): their score is that of
    the last readable step, not necessarily the episode's final state."""
    provenance: dict[str, int] = field(default_factory=dict)
    """Scored sessions by provenance: ``recorded``, ``reconstructed``, ``mixed`` (``unknown``: older lines)."""
    not_recorded_by_site: dict[str, int] = field(default_factory=dict)
    """Per site, scored sessions whose answers were not all recorded live (reconstructed or mixed)."""
    failed_checks: dict[str, int] = field(default_factory=dict)
    """Failed checks of scored sessions by ``check_title`` (``program_html[0] exact_match``), most common first."""
    attribution: dict[str, int] = field(default_factory=dict)
    """Sessions by failure class (``test_result.attribution``), most common first."""
    trials: dict[int, int] = field(default_factory=dict)
    """Sessions per task -> how many tasks have that many (sessions of one task id are its trials)."""
    bootstrap: dict[str, Any] = field(
        default_factory=lambda: {
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
            "confidence": CONFIDENCE,
        }
    )

    @property
    def tasks(self) -> int:
        return sum(self.trials.values())

    @property
    def mixed_trials(self) -> bool:
        """Tasks were not run the same number of times: a task-first mean still weighs them equally."""
        return len(self.trials) > 1

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["trials"] = {str(n): count for n, count in self.trials.items()}
        data["tasks"] = self.tasks
        data["mixed_trials"] = self.mixed_trials
        data["live_vs_offline"]["rate"] = self.live_vs_offline.rate
        data["live_max_vs_offline_max"]["rate"] = self.live_max_vs_offline_max.rate
        return data


def bootstrap_ci(
    values: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values``; same inputs, same interval."""
    if not values:
        return None
    rng = random.Random(seed)
    count = len(values)
    means = sorted(math.fsum(rng.choices(values, k=count)) / count for _ in range(resamples))
    tail = (1 - confidence) / 2
    return _quantile(means, tail), _quantile(means, 1 - tail)


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 session``, ``2 sessions``: the count with its noun agreeing."""
    return f"{count} {noun if count == 1 else (plural_form or noun + 's')}"


def describe_trials(trials: dict[int, int]) -> str:
    """``14 sessions: 7 tasks, 2 trials each``, or each count when tasks have different numbers of
    trials (sessions of one task id are its trials)."""
    tasks = sum(trials.values())
    sessions = sum(n * count for n, count in trials.items())
    if not trials:
        return "no sessions"
    if len(trials) == 1:
        (n,) = trials
        each = "1 trial each" if n == 1 else f"{n} trials each"
        return f"{plural(sessions, 'session')}: {plural(tasks, 'task')}, {each}"
    parts = ", ".join(
        f"{plural(count, 'task')} with {plural(n, 'trial')}" for n, count in sorted(trials.items())
    )
    return f"{plural(sessions, 'session')}: {plural(tasks, 'task')} with mixed trial counts ({parts})"


def _quantile(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class _MetricTotals:
    """Running sums for one metric, per task: sessions of one task are its trials, so a task's value
    is the mean over its trials and sites and templates average tasks, not sessions."""

    def __init__(self) -> None:
        self.count = 0
        self.tasks: dict[str, list[Any]] = {}
        """task -> [trials with a value, their total, site, template]"""

    def add(self, value: float, task: str, site: str, template: str) -> None:
        self.count += 1
        sums = self.tasks.setdefault(task, [0, 0.0, site, template])
        sums[0] += 1
        sums[1] += value

    def result(self, trials: dict[str, int]) -> Metric:
        """``trials``: every session of each task, scored or not (for the unscored-as-zero mean)."""
        means: list[float] = []
        sites: dict[str, list[Any]] = {}
        templates: dict[str, list[float]] = {}
        for count, total, site, template in self.tasks.values():
            mean = total / count
            means.append(mean)
            group = sites.setdefault(site, [0, []])
            group[0] += count
            group[1].append(mean)
            templates.setdefault(template, []).append(mean)
        template_means = [math.fsum(values) / len(values) for _, values in sorted(templates.items())]
        ci = bootstrap_ci(template_means)
        with_zero = [
            self.tasks[task][1] / count if task in self.tasks else 0.0 for task, count in trials.items()
        ]
        return Metric(
            sessions=self.count,
            mean=math.fsum(means) / len(means) if means else None,
            mean_unscored_as_zero=math.fsum(with_zero) / len(with_zero) if with_zero else None,
            macro=MacroAverage(
                templates=len(template_means),
                mean=math.fsum(template_means) / len(template_means) if template_means else None,
                ci_low=ci[0] if ci else None,
                ci_high=ci[1] if ci else None,
            ),
            per_site={
                site: GroupMean(count, math.fsum(values) / len(values))
                for site, (count, values) in sorted(sites.items())
            },
            tasks=len(means),
        )


class _AgreementTotals:
    def __init__(self) -> None:
        self.compared = 0
        self.equal = 0
        self.mismatched: list[str] = []

    def add(self, live: Any, offline: Any, instance_id: str) -> None:
        if not _is_number(live) or not _is_number(offline):
            return
        self.compared += 1
        if abs(live - offline) <= _EQUAL_TOLERANCE:
            self.equal += 1
        elif len(self.mismatched) < _MISMATCHES_LISTED:
            self.mismatched.append(instance_id)

    def result(self) -> Agreement:
        return Agreement(self.compared, self.equal, tuple(self.mismatched))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def strings(value: Any) -> list[str]:
    """The strings of a list read from an output line (anything else in it, or no list: none)."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def score_value(value: Any, where: str) -> float | None:
    """A score of an output line: None when absent (not a number), else a finite number in [0, 1].

    Scores are WebArena's 0..1; any other number (``1e308``, ``-5``) is refused in one line rather
    than summed, so no mean, interval or comparison ever meets a value that overflows it."""
    if not _is_number(value):
        return None
    if not 0.0 <= value <= 1.0:  # also refuses inf and nan
        raise EvaluationError(f"{where} {str(value)[:40]} is not a number in [0, 1]")
    return float(value)


def task_key(task_id: Any, where: str) -> str | None:
    """An output line's ``task_id`` as a task key: a whole number, written in ASCII digits when it
    is a string (None when absent); any other id is refused in one line (``"²"``, ``"7a"``)."""
    if task_id is None:
        return None
    if isinstance(task_id, int) and not isinstance(task_id, bool) and task_id >= 0:
        return str(task_id)
    if isinstance(task_id, str) and ascii_int(task_id) is not None:
        return task_id
    raise EvaluationError(f"{where}: task_id {str(task_id)[:40]!r} is not a task id (a whole number)")


def _iter_lines(path: Path, unreadable: list[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    limits = SessionLimits.from_env()
    with os.fdopen(open_input(path, root=path.parent, what="output.jsonl"), "rb") as file:
        lines = iter_file_lines(file, max_line=limits.max_record_bytes, source=str(path))
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                unreadable[0] += 1
                continue
            if isinstance(record, dict) and isinstance(record.get("test_result"), dict):
                yield number, record
            else:
                unreadable[0] += 1


def _template_key(instance: dict[str, Any], instance_id: str) -> str:
    if instance.get("intent_template_id") is not None:
        return f"template:{instance['intent_template_id']}"
    if instance.get("task_id") is not None:
        return f"task:{instance['task_id']}"
    return f"instance:{instance_id}"


def build_report(output_jsonl: str | os.PathLike[str], *, incomplete_sessions: Iterable[str] = ()) -> Report:
    """Read an evaluation's ``output.jsonl`` once and compute every figure of the report."""
    sessions = errors = 0
    unreadable = [0]
    score, max_score = _MetricTotals(), _MetricTotals()
    live, live_max = _AgreementTotals(), _AgreementTotals()
    errors_by_type: Counter[str] = Counter()
    zero_by_eval: Counter[str] = Counter()
    partial: list[str] = []
    provenance: Counter[str] = Counter()
    not_recorded: Counter[str] = Counter()
    failed_checks: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    trials: Counter[str] = Counter()
    for number, record in _iter_lines(Path(output_jsonl), unreadable):
        where = f"{output_jsonl}: line {number}"
        sessions += 1
        result = record["test_result"]
        instance = record.get("instance")
        if not isinstance(instance, dict):
            instance = {}
        instance_id = str(record.get("instance_id"))
        site = "+".join(sorted(strings(instance.get("sites")))) or "(no site)"
        template = _template_key(instance, instance_id)
        task = task_key(instance.get("task_id"), where) or f"instance:{instance_id}"
        score_value(result.get("score"), f"{where}: score")
        score_value(result.get("max_score"), f"{where}: max_score")
        trials[task] += 1
        if result.get("partial") is True:
            partial.append(instance_id)
        if result.get("error") is not None or result.get("error_type") is not None:
            errors += 1
            errors_by_type[_text(result.get("error_type")) or "Error"] += 1
        elif _is_number(result.get("score")) and result["score"] == 0:
            zero_by_eval["+".join(strings(instance.get("eval_types"))) or "(no eval type)"] += 1
        if _is_number(result.get("score")):
            score.add(result["score"], task, site, template)
            kind = _text(result.get("provenance")) or "unknown"
            provenance[kind] += 1
            if kind in ("reconstructed", "mixed"):
                not_recorded[site] += 1
        _count_why(result, failed_checks, classes)
        if _is_number(result.get("max_score")):
            max_score.add(result["max_score"], task, site, template)
        live.add(result.get("live_reward"), result.get("score"), instance_id)
        live_max.add(result.get("live_max"), result.get("max_score"), instance_id)
    return Report(
        sessions=sessions,
        errors=errors,
        score=score.result(trials),
        max_score=max_score.result(trials),
        live_vs_offline=live.result(),
        live_max_vs_offline_max=live_max.result(),
        errors_by_type=dict(errors_by_type.most_common()),
        zero_score_by_eval_type=dict(zero_by_eval.most_common()),
        unreadable_lines=unreadable[0],
        incomplete_sessions=tuple(incomplete_sessions),
        partial_sessions=tuple(partial),
        provenance=dict(provenance.most_common()),
        not_recorded_by_site=dict(not_recorded),
        failed_checks=dict(failed_checks.most_common()),
        attribution=dict(classes.most_common()),
        trials=dict(sorted(Counter(trials.values()).items())),
    )


def _count_why(result: dict[str, Any], failed_checks: Counter[str], classes: Counter[str]) -> None:
    """Count a line's failed checks (once per kind per session) and its failure class, if it has them."""
    from cdp_integration.evaluate.explain import check_title

    checks = result.get("checks")
    if isinstance(checks, list):
        titles = {check_title(c) for c in checks if isinstance(c, dict) and c.get("passed") is False}
        failed_checks.update(titles)
    attribution = result.get("attribution")
    if isinstance(attribution, dict) and isinstance(attribution.get("class"), str):
        classes[attribution["class"]] += 1


def write_report(output_dir: str | os.PathLike[str], *, incomplete_sessions: Iterable[str] = ()) -> Report:
    """Build the report from ``output_dir/output.jsonl``; write ``report.json`` and ``report.md`` beside it."""
    directory = Path(output_dir)
    report = build_report(directory / "output.jsonl", incomplete_sessions=incomplete_sessions)
    with open_output(directory / REPORT_JSON) as out:
        out.write(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    with open_output(directory / REPORT_MD) as out:
        out.write(format_markdown(report).encode("utf-8", "replace"))
    return report


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(macro: MacroAverage) -> str:
    if macro.ci_low is None or macro.ci_high is None:
        return "-"
    return f"[{macro.ci_low:.3f}, {macro.ci_high:.3f}]"


def _agreement(agreement: Agreement) -> str:
    if not agreement.compared:
        return "no session has both values"
    return f"{agreement.equal}/{agreement.compared} equal ({agreement.rate:.1%})"


def format_summary(report: Report) -> str:
    """The plain-text table the ``eval`` command prints."""
    confidence = f"{CONFIDENCE:.0%} CI"
    rows = [
        ("metric", "sessions", "mean", "unscored=0", "templates", "macro", confidence),
    ]
    for name, metric in (("score", report.score), ("max_score", report.max_score)):
        rows.append(
            (
                name,
                str(metric.sessions),
                _num(metric.mean),
                _num(metric.mean_unscored_as_zero),
                str(metric.macro.templates),
                _num(metric.macro.mean),
                _ci(metric.macro),
            )
        )
    lines = [f"{describe_trials(report.trials)}; a task's score is the mean over its trials", *_table(rows)]
    lines.append("")
    lines.append(f"{'site':<32} {'sessions':>8} {'score':>7} {'max_score':>9} {'reconstructed':>13}")
    for site, group in report.score.per_site.items():
        max_group = report.max_score.per_site.get(site)
        lines.append(
            f"{site:<32} {group.sessions:>8} {_num(group.mean):>7} {_num(max_group.mean if max_group else None):>9}"
            f" {report.not_recorded_by_site.get(site, 0):>13}"
        )
    lines.append("")
    lines.append(f"live vs offline score:    {_agreement(report.live_vs_offline)}")
    lines.append(f"live max vs offline max:  {_agreement(report.live_max_vs_offline_max)}")
    lines.append(f"provenance:               {_provenance(report)}")
    failures = [f"{kind} {count}" for kind, count in report.errors_by_type.items()]
    failures += [f"score 0 ({kind}) {count}" for kind, count in report.zero_score_by_eval_type.items()]
    lines.append(f"failure modes:            {', '.join(failures) or 'none'}")
    if report.attribution:
        lines.append(f"why (failure classes):    {_counts(report.attribution)}")
    if report.failed_checks:
        lines.append(f"most failed checks:       {_counts(dict(list(report.failed_checks.items())[:5]))}")
    if report.unreadable_lines:
        lines.append(f"unreadable lines:         {report.unreadable_lines}")
    if report.incomplete_sessions:
        lines.append(f"incomplete (*.partial):   {len(report.incomplete_sessions)} not scored")
    if report.partial_sessions:
        lines.append(
            f"partial (no end record):  {len(report.partial_sessions)} scored on their last readable step, "
            f"e.g. {report.partial_sessions[0]}"
        )
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items())


def _why_markdown(report: Report) -> list[str]:
    """The report.md sections on why sessions failed: their classes and most common failed checks."""
    if not report.attribution and not report.failed_checks:
        return []
    out = ["", "## Why sessions scored 0", "", "| class | sessions |", "|---|---:|"]
    out += [f"| {name} | {count} |" for name, count in report.attribution.items()] or ["| none | 0 |"]
    out += ["", "## Most common failed checks", "", "| check | sessions |", "|---|---:|"]
    out += [f"| `{name}` | {count} |" for name, count in list(report.failed_checks.items())[:_CHECKS_LISTED]]
    return out


_CHECKS_LISTED = 20


def _provenance(report: Report) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in report.provenance.items()) or "no scored session"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def format_markdown(report: Report) -> str:
    confidence = f"{CONFIDENCE:.0%}"
    out = [
        "# Offline evaluation report",
        "",
        f"{plural(report.sessions, 'session')}, {report.errors} could not be scored.",
        "",
        f"Trials: {describe_trials(report.trials)}. Sessions of one task id are trials of that task: a task's "
        "score is the mean over its trials, and every mean below averages tasks."
        + (" Tasks were run a different number of times." if report.mixed_trials else ""),
        "",
        f"| metric | sessions | mean | mean (unscored = 0) | templates | macro mean | {confidence} CI |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, metric in (
        ("score (final state)", report.score),
        ("max_score (max over steps)", report.max_score),
    ):
        out.append(
            f"| {name} | {metric.sessions} | {_num(metric.mean)} | {_num(metric.mean_unscored_as_zero)} | "
            f"{metric.macro.templates} | {_num(metric.macro.mean)} | {_ci(metric.macro)} |"
        )
    out += [
        "",
        "Macro: mean per intent template, then the mean of those; the interval is a percentile bootstrap "
        f"over templates ({report.bootstrap['resamples']} resamples, seed {report.bootstrap['seed']}).",
        "",
        "## Per site",
        "",
        "| site | sessions | score | max_score | reconstructed |",
        "|---|---:|---:|---:|---:|",
    ]
    for site, group in report.score.per_site.items():
        max_group = report.max_score.per_site.get(site)
        out.append(
            f"| {site} | {group.sessions} | {_num(group.mean)} | {_num(max_group.mean if max_group else None)} "
            f"| {report.not_recorded_by_site.get(site, 0)} |"
        )
    out += [
        "",
        "`reconstructed`: sessions whose score used answers reconstructed from captured pages "
        f"(not recorded live). Provenance of all scored sessions: {_provenance(report)}.",
    ]
    out += [
        "",
        "## Live vs offline",
        "",
        f"- live reward vs final-state score: {_agreement(report.live_vs_offline)}",
        f"- live max vs max over steps: {_agreement(report.live_max_vs_offline_max)}",
    ]
    for label, agreement in (("score", report.live_vs_offline), ("max", report.live_max_vs_offline_max)):
        if agreement.mismatched:
            out.append(
                f"- {label} mismatches (first {len(agreement.mismatched)}): {', '.join(agreement.mismatched)}"
            )
    out += ["", "## Failure modes", "", "| failure | sessions |", "|---|---:|"]
    for kind, count in report.errors_by_type.items():
        out.append(f"| error: {kind} | {count} |")
    for kind, count in report.zero_score_by_eval_type.items():
        out.append(f"| score 0, no error: {kind} | {count} |")
    if not report.errors_by_type and not report.zero_score_by_eval_type:
        out.append("| none | 0 |")
    if report.unreadable_lines:
        out += ["", f"{report.unreadable_lines} lines of output.jsonl could not be read and were skipped."]
    if report.incomplete_sessions:
        out += ["", f"## Incomplete sessions ({len(report.incomplete_sessions)}, not scored)", ""]
        out += [f"- `{path}`" for path in report.incomplete_sessions]
    if report.partial_sessions:
        out += [
            "",
            f"## Partial sessions ({len(report.partial_sessions)}, scored on their last readable step)",
            "",
        ]
        out += [f"- `{instance_id}`" for instance_id in report.partial_sessions]
    out += _why_markdown(report)
    return "\n".join(out) + "\n"
