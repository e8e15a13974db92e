"""Compare runs task by task: two agents, two days, or two evaluator versions over the same sessions.

A run is an evaluation output (``output.jsonl``) or a folder of sessions, scored here first
(``score_folder``). The comparison pairs tasks by task key (sessions of one task id are its trials):

- per task, both scores side by side, the tasks whose verdict flipped first, with why each changed:
  the checks whose outcome differs (``test_result.checks``, when the scorer wrote them), a different
  error, a different task config (an edited config set), a different scorer, a different answer;
- the paired difference of the template-macro score (B - A) with a paired bootstrap CI (templates
  resampled with both runs' tasks) and McNemar's exact test on the flipped verdicts;
- the same difference per site and per template.

Scoring the same sessions with two scorers or two config sets is an evaluator-version comparison:
the same view lists every verdict that changed and why.
"""

from __future__ import annotations

import html
import math
import os
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.errors import CDPIntegrationError, EvaluationError
from cdp_integration.evaluate.batch import score_directory
from cdp_integration.evaluate.report import CONFIDENCE, describe_trials, plural
from cdp_integration.evaluate.runs import (
    Episode,
    Run,
    TaskResult,
    macro_by_template,
    mcnemar_exact,
    natural,
    paired_bootstrap,
    read_run,
)
from cdp_integration.session.untrusted import ascii_int, open_output

__all__ = [
    "COMPARE_HTML",
    "COMPARE_JSON",
    "COMPARE_MD",
    "Comparison",
    "GroupDifference",
    "TaskChange",
    "compare_runs",
    "format_markdown",
    "render_html",
    "score_folder",
    "to_json",
    "write_comparison",
]

COMPARE_MD = "compare.md"
COMPARE_JSON = "compare.json"
COMPARE_HTML = "compare.html"
_REASONS_LISTED = 6
_VALUE_CHARS = 120
_ERROR_CHARS = 400


@dataclass(frozen=True)
class TaskChange:
    """One task in both runs (or one of them): its two results and, when they differ, why."""

    task: str
    site: str
    template: str
    a: TaskResult | None
    b: TaskResult | None
    why: tuple[str, ...] = ()

    @property
    def score_a(self) -> float | None:
        return self.a.score if self.a else None

    @property
    def score_b(self) -> float | None:
        return self.b.score if self.b else None

    @property
    def verdict_a(self) -> str:
        return self.a.verdict if self.a else "absent"

    @property
    def verdict_b(self) -> str:
        return self.b.verdict if self.b else "absent"

    @property
    def flipped(self) -> bool:
        """The verdict changed between pass, fail and could-not-be-scored (in both runs)."""
        return self.a is not None and self.b is not None and self.verdict_a != self.verdict_b

    @property
    def changed(self) -> bool:
        """Flipped, or the same verdict with a different score."""
        if self.a is None or self.b is None:
            return False
        return self.flipped or not _same(self.score_a, self.score_b)


def _same(x: float | None, y: float | None) -> bool:
    return (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-9)


@dataclass(frozen=True)
class GroupDifference:
    key: str
    tasks: int
    mean_a: float | None
    mean_b: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    flipped: int


@dataclass
class Comparison:
    """Run B against run A (the baseline)."""

    a: Run
    b: Run
    tasks: list[TaskChange]
    """Flipped tasks first, then tasks whose score changed, then the rest; each part by task."""
    macro_a: float | None = None
    macro_b: float | None = None
    difference: float | None = None
    ci: tuple[float, float] | None = None
    lost: int = 0
    """Tasks passing in A and failing in B (McNemar's b)."""
    gained: int = 0
    """Tasks failing in A and passing in B (McNemar's c)."""
    p_value: float = 1.0
    per_site: list[GroupDifference] = field(default_factory=list)
    per_template: list[GroupDifference] = field(default_factory=list)
    unit: str = "task"
    """What was paired: ``task`` or ``session``."""

    @property
    def paired(self) -> list[TaskChange]:
        return [t for t in self.tasks if t.a is not None and t.b is not None]

    @property
    def flipped(self) -> list[TaskChange]:
        return [t for t in self.tasks if t.flipped]

    @property
    def only_a(self) -> list[str]:
        return [t.task for t in self.tasks if t.b is None]

    @property
    def only_b(self) -> list[str]:
        return [t.task for t in self.tasks if t.a is None]


def _paired_groups(changes: Sequence[TaskChange], key: Callable[[TaskChange], str]) -> list[GroupDifference]:
    grouped: dict[str, list[TaskChange]] = defaultdict(list)
    for change in changes:
        grouped[key(change)].append(change)
    groups = []
    for name, members in sorted(grouped.items(), key=lambda item: natural(item[0])):
        both = [(m.score_a, m.score_b) for m in members if m.score_a is not None and m.score_b is not None]
        differences = {str(i): (str(i), b - a) for i, (a, b) in enumerate(both)}
        mean, ci = paired_bootstrap(differences)
        groups.append(
            GroupDifference(
                key=name,
                tasks=len(members),
                mean_a=_mean([a for a, _ in both]),
                mean_b=_mean([b for _, b in both]),
                difference=mean,
                ci_low=ci[0] if ci else None,
                ci_high=ci[1] if ci else None,
                flipped=sum(m.flipped for m in members),
            )
        )
    return groups


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _units(run: Run, by: str) -> dict[str, TaskResult]:
    if by == "task":
        return run.tasks()
    units = {}
    for episode in run.episodes:
        key = episode.session_path or episode.instance_id
        units[key] = TaskResult(key, (episode,))
    return units


def compare_runs(a: Run, b: Run, *, by: str = "task") -> Comparison:
    """Pair ``a`` and ``b`` and compute every figure of the comparison.

    ``by="task"`` pairs tasks (a task's trials are averaged: runs of different agents or days);
    ``by="session"`` pairs each session with itself (the same sessions scored two ways: an
    evaluator-version comparison, where a task's trials must not cancel out).
    """
    if by not in ("task", "session"):
        raise EvaluationError(f"pair by task or session, not {by!r}")
    tasks_a, tasks_b = _units(a, by), _units(b, by)
    changes = []
    for task in sorted(set(tasks_a) | set(tasks_b), key=natural):
        ta, tb = tasks_a.get(task), tasks_b.get(task)
        first = (ta or tb).first  # type: ignore[union-attr]
        change = TaskChange(task, first.site, first.template, ta, tb)
        if change.changed and ta is not None and tb is not None:
            change = TaskChange(task, first.site, first.template, ta, tb, tuple(_why(a, b, ta, tb)))
        changes.append(change)
    changes.sort(key=lambda c: (not c.flipped, not c.changed, natural(c.task)))
    paired = [c for c in changes if c.score_a is not None and c.score_b is not None]
    macro_a = macro_by_template({c.task: (c.template, c.score_a) for c in paired if c.score_a is not None})[0]
    macro_b = macro_by_template({c.task: (c.template, c.score_b) for c in paired if c.score_b is not None})[0]
    difference, ci = paired_bootstrap(
        {
            c.task: (c.template, c.score_b - c.score_a)
            for c in paired
            if c.score_a is not None and c.score_b is not None
        }
    )
    lost = sum(c.verdict_a == "pass" and c.verdict_b == "fail" for c in changes)
    gained = sum(c.verdict_a == "fail" and c.verdict_b == "pass" for c in changes)
    return Comparison(
        a=a,
        b=b,
        tasks=changes,
        macro_a=macro_a,
        macro_b=macro_b,
        difference=difference,
        ci=ci,
        lost=lost,
        gained=gained,
        p_value=mcnemar_exact(lost, gained),
        per_site=_paired_groups(changes, lambda c: c.site),
        per_template=_paired_groups(changes, lambda c: c.template),
        unit=by,
    )


def _by_task_macro(
    paired: Sequence[TaskChange],
) -> tuple[float | None, float | None, float | None, tuple[float, float] | None]:
    per_task: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for c in paired:
        if c.a is not None and c.score_a is not None and c.score_b is not None:
            per_task[c.a.first.task].append((c.template, c.score_a, c.score_b))
    a_values = {t: (v[0][0], _mean([x[1] for x in v]) or 0.0) for t, v in per_task.items()}
    b_values = {t: (v[0][0], _mean([x[2] for x in v]) or 0.0) for t, v in per_task.items()}
    differences = {t: (a_values[t][0], b_values[t][1] - a_values[t][1]) for t in per_task}
    difference, ci = paired_bootstrap(differences)
    return macro_by_template(a_values)[0], macro_by_template(b_values)[0], difference, ci


# -- why a verdict changed ---------------------------------------------------------------------------


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    text = " ".join(text.split())
    return repr(text) if len(text) <= _VALUE_CHARS else repr(text[: _VALUE_CHARS - 3] + "...")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _why(run_a: Run, run_b: Run, a: TaskResult, b: TaskResult) -> list[str]:
    """Reasons the task's result differs, most specific first, at most a handful."""
    ea, eb = _matching_episodes(a, b)
    reasons: list[str] = []
    if ea.checks is not None and eb.checks is not None:
        reasons += _check_changes(ea.checks, eb.checks)
    if ea.error_type != eb.error_type or (ea.error_type and ea.error != eb.error):
        for label, episode in (("A", ea), ("B", eb)):
            if not episode.scored:
                reasons.append(
                    f"{label} could not be scored: {episode.error_type}: {_clip(episode.error or '', _ERROR_CHARS)}"
                )
    if ea.scorer != eb.scorer:
        reasons.append(f"scorer {ea.scorer} -> {eb.scorer}")
    reasons += _config_changes(run_a, run_b, ea, eb)
    if ea.answer != eb.answer and ea.scored and eb.scored:
        reasons.append(f"answer {_short(ea.answer)} -> {_short(eb.answer)}")
    if (a.trials != b.trials or a.passes != b.passes) and (a.trials > 1 or b.trials > 1):
        reasons.append(f"trials passed {a.passes}/{a.trials} -> {b.passes}/{b.trials}")
    if not reasons:
        reasons.append(f"score {_num(a.score)} -> {_num(b.score)} ({ea.eval_type})")
    return reasons[:_REASONS_LISTED]


def _matching_episodes(a: TaskResult, b: TaskResult) -> tuple[Episode, Episode]:
    """The same session in both runs when there is one (an evaluator comparison), else the first
    trial whose verdict differs, else the first trials."""
    by_path = {e.session_path: e for e in b.episodes if e.session_path}
    for episode in a.episodes:
        other = by_path.get(episode.session_path or "")
        if other is not None and (episode.outcome != other.outcome or not _same(episode.score, other.score)):
            return episode, other
    first_of: dict[str, Episode] = {}  # B's first trial of each outcome: one pass, not one per A trial
    for eb in b.episodes:
        first_of.setdefault(eb.outcome, eb)
    position = {id(e): i for i, e in enumerate(b.episodes)}
    for ea in a.episodes:
        others = [eb for outcome, eb in first_of.items() if outcome != ea.outcome]
        if others:
            return ea, min(others, key=lambda e: position[id(e)])
    return a.first, b.first


def _check_key(check: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(check.get("evaluator")), str(check.get("target")), str(check.get("comparison")))


def _check_label(check: Mapping[str, Any]) -> str:
    target = check.get("target")
    where = f"[{target}]" if target is not None else ""
    return f"{check.get('evaluator')}{where} {check.get('comparison')}"


def _check_changes(checks_a: Sequence[Mapping[str, Any]], checks_b: Sequence[Mapping[str, Any]]) -> list[str]:
    """The checks whose outcome, expectation or finding differs between the two scorings."""
    index_b: dict[tuple[str, str, str], deque[Mapping[str, Any]]] = defaultdict(deque)
    for check in checks_b:
        index_b[_check_key(check)].append(check)
    reasons = []
    for check in checks_a:
        candidates = index_b.get(_check_key(check))
        if not candidates:
            reasons.append(f"check {_check_label(check)} only in A ({_outcome(check)})")
            continue
        other = candidates.popleft()
        if check.get("passed") != other.get("passed") or check.get("expected") != other.get("expected"):
            reasons.append(f"check {_check_label(check)}: " + "; ".join(_changed(check, other)))
    for remaining in index_b.values():
        for check in remaining:
            reasons.append(f"check {_check_label(check)} only in B ({_outcome(check)})")
    return reasons


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two scorings of one check: each value that changed as ``A -> B``, each
    that did not once (``expected 'x' both``), so an unchanged value is never shown as a change."""
    parts = [
        f"{_outcome(a)} -> {_outcome(b)}" if a.get("passed") != b.get("passed") else f"{_outcome(a)} both"
    ]
    for name in ("expected", "found"):
        x, y = a.get(name), b.get(name)
        parts.append(f"{name} {_short(x)} -> {_short(y)}" if x != y else f"{name} {_short(x)} both")
    return parts


def _outcome(check: Mapping[str, Any]) -> str:
    return "passed" if check.get("passed") is True else "failed"


def _task_config(run: Run, episode: Episode) -> Mapping[str, Any] | None:
    """The config ``episode`` was scored with: from the run's configs, else its session's own."""
    number = ascii_int(episode.task)
    if run.configs is not None and number is not None:
        config = run.configs.get(number)
        if config is not None:
            return config
    if run.sessions_dir is None or episode.session_path is None:
        return None
    from cdp_integration.session.store import read_header

    root = run.sessions_dir.resolve()
    path = (root / episode.session_path).resolve()
    if not path.is_relative_to(root):
        return None
    try:
        task = read_header(path).task
    except (CDPIntegrationError, OSError, ValueError, RecursionError, MemoryError):
        return None
    config = task.get("config") if isinstance(task, dict) else None
    return config if isinstance(config, dict) else None


def _config_changes(run_a: Run, run_b: Run, ea: Episode, eb: Episode) -> list[str]:
    if run_a.configs is None and run_b.configs is None:
        return []
    ca, cb = _task_config(run_a, ea), _task_config(run_b, eb)
    if ca is None or cb is None or ca == cb:
        return []
    return [
        f"config {path}: {_short(x)} -> {_short(y)}"
        for path, x, y in _differences(ca.get("eval"), cb.get("eval"), "eval")
    ]


def _differences(x: Any, y: Any, path: str) -> Iterable[tuple[str, Any, Any]]:
    if isinstance(x, dict) and isinstance(y, dict):
        for key in sorted(set(x) | set(y), key=str):
            yield from _differences(x.get(key), y.get(key), f"{path}.{key}")
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            yield from _differences(u, v, f"{path}[{i}]")
    elif x != y:
        yield path, x, y


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:+.3f}, {high:+.3f}]"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


# -- scoring a folder ---------------------------------------------------------------------------------


def score_folder(
    sessions_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    name: str,
    scorer: str | None = None,
    configs: Mapping[int, dict[str, Any]] | None = None,
    trust_configs: bool = False,
    workers: int = 1,
) -> Run:
    """Score every session under ``sessions_dir`` into ``output_dir`` (a fresh ``output.jsonl``) and
    read the result back as a run that remembers its sessions and configs."""
    score_directory(
        sessions_dir,
        output_dir,
        configs=configs,
        workers=workers,
        resume=False,
        scorer=scorer,
        trust_configs=trust_configs,
    )
    run = read_run(output_dir, name=name)
    run.sessions_dir = Path(sessions_dir)
    run.configs = configs
    return run


# -- output -------------------------------------------------------------------------------------------


def _task_json(change: TaskChange) -> dict[str, Any]:
    return {
        "task": change.task,
        "site": change.site,
        "template": change.template,
        "a": {
            "score": change.score_a,
            "verdict": change.verdict_a,
            "trials": change.a.trials if change.a else 0,
        },
        "b": {
            "score": change.score_b,
            "verdict": change.verdict_b,
            "trials": change.b.trials if change.b else 0,
        },
        "flipped": change.flipped,
        "changed": change.changed,
        "why": list(change.why),
    }


def to_json(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    """Every figure of every comparison, as written to ``compare.json``."""
    items = []
    for c in comparisons:
        items.append(
            {
                "a": {
                    "name": c.a.name,
                    "output": str(c.a.path),
                    "macro": c.macro_a,
                    "tasks": len(c.a.tasks()),
                },
                "b": {
                    "name": c.b.name,
                    "output": str(c.b.path),
                    "macro": c.macro_b,
                    "tasks": len(c.b.tasks()),
                },
                "paired_by": c.unit,
                "paired": len(c.paired),
                "difference": c.difference,
                "ci": list(c.ci) if c.ci else None,
                "confidence": CONFIDENCE,
                "flipped": len(c.flipped),
                "lost": c.lost,
                "gained": c.gained,
                "mcnemar_p": c.p_value,
                "only_a": c.only_a,
                "only_b": c.only_b,
                "per_site": [vars(g) for g in c.per_site],
                "per_template": [vars(g) for g in c.per_template],
                "tasks": [_task_json(t) for t in c.tasks],
            }
        )
    return {"comparisons": items}


def headline(c: Comparison) -> str:
    """One paragraph: both macro scores, the paired difference and its interval, the flips and p."""
    return (
        f"{c.b.name} vs {c.a.name}: macro score {_num(c.macro_b)} vs {_num(c.macro_a)} over "
        f"{plural(len(c.paired), f'paired {c.unit}')}; difference {_signed(c.difference)}, "
        f"{CONFIDENCE:.0%} CI {_interval(*(c.ci or (None, None)))} (paired bootstrap over templates). "
        f"{plural(len(c.flipped), c.unit)} flipped: {c.gained} to pass, {c.lost} to fail"
        f"{'' if len(c.flipped) == c.gained + c.lost else ' (others to or from could-not-be-scored)'}; "
        f"McNemar exact p = {c.p_value:.3g}."
    )


def trials_line(c: Comparison) -> str:
    """How many trials each run has per task: said, since the two may differ."""
    return (
        "Trials: "
        + "; ".join(
            f"{run.name}: {describe_trials(dict(Counter(t.trials for t in run.tasks().values())))}"
            for run in (c.a, c.b)
        )
        + "."
    )


def format_markdown(comparisons: Sequence[Comparison]) -> str:
    out = ["# Run comparison", ""]
    for c in comparisons:
        out += [f"## {c.b.name} vs {c.a.name}", "", headline(c), "", trials_line(c), ""]
        if c.only_a or c.only_b:
            out += [
                f"Not paired: {plural(len(c.only_a), 'task')} only in {c.a.name}, "
                f"{plural(len(c.only_b), 'task')} only in {c.b.name}.",
                "",
            ]
        changed = [t for t in c.tasks if t.changed]
        out += [
            f"### {c.unit.capitalize()}s that changed ({len(changed)}; flipped first)",
            "",
            f"| {c.unit} | site | {c.a.name} | {c.b.name} | flipped | why |",
            "|---|---|---:|---:|---|---|",
        ]
        for t in changed:
            why = "; ".join(t.why).replace("|", "\\|")
            out.append(
                f"| {t.task} | {t.site} | {_num(t.score_a)} ({t.verdict_a}) | {_num(t.score_b)} ({t.verdict_b}) "
                f"| {'yes' if t.flipped else ''} | {why} |"
            )
        if not changed:
            out.append("| - | | | | | no task changed |")
        for title, groups in (("Per site", c.per_site), ("Per template", c.per_template)):
            out += [
                "",
                f"### {title}",
                "",
                f"| {title.split()[-1]} | {c.unit}s | {c.a.name} | {c.b.name} | difference | {CONFIDENCE:.0%} CI | flipped |",
                "|---|---:|---:|---:|---:|---|---:|",
            ]
            for g in groups:
                out.append(
                    f"| {g.key} | {g.tasks} | {_num(g.mean_a)} | {_num(g.mean_b)} | {_signed(g.difference)} "
                    f"| {_interval(g.ci_low, g.ci_high)} | {g.flipped} |"
                )
        out.append("")
    return "\n".join(out)


def render_html(
    comparisons: Sequence[Comparison], links: Sequence[tuple[Mapping[str, str], Mapping[str, str]]]
) -> str:
    """The comparison page; ``links[i]`` maps each run's session paths to viewer hrefs."""
    from cdp_integration.evaluate.report_html import bar_chart, page, table_section

    body = ["<h1>Run comparison</h1>"]
    rows: list[dict[str, Any]] = []
    for c, (links_a, links_b) in zip(comparisons, links, strict=True):
        pair = f"{c.b.name} vs {c.a.name}"
        body.append(
            f'<h2>{_e(pair)}</h2><p class="muted">A (baseline): {_e(c.a.name)} ({_e(c.a.path)}); '
            f'B: {_e(c.b.name)} ({_e(c.b.path)})</p><p class="headline-text">{_e(headline(c))}</p>'
            f'<p class="muted">{_e(trials_line(c))}</p>'
        )
        body.append(
            bar_chart(
                [
                    bar
                    for g in c.per_site
                    for bar in (
                        (f"{g.key}: {c.a.name}", g.mean_a, None, None, _num(g.mean_a)),
                        (
                            f"{g.key}: {c.b.name}",
                            g.mean_b,
                            None,
                            None,
                            f"{_num(g.mean_b)} ({_signed(g.difference)})",
                        ),
                    )
                ],
                title=f"Per site, {pair}",
            )
        )
        site_rows = "".join(
            f'<tr><td>{_e(g.key)}</td><td class="n">{g.tasks}</td><td class="n">{_num(g.mean_a)}</td>'
            f'<td class="n">{_num(g.mean_b)}</td><td class="n">{_signed(g.difference)}</td>'
            f'<td class="n">{_interval(g.ci_low, g.ci_high)}</td><td class="n">{g.flipped}</td></tr>'
            for g in c.per_site
        )
        body.append(
            f'<table><thead><tr><th>site</th><th class="n">{c.unit}s</th><th class="n">{_e(c.a.name)}</th>'
            f'<th class="n">{_e(c.b.name)}</th><th class="n">difference</th><th class="n">{CONFIDENCE:.0%} CI</th>'
            f'<th class="n">flipped</th></tr></thead><tbody>{site_rows}</tbody></table>'
        )
        for t in c.tasks:
            rows.append(
                {
                    "pair": pair,
                    "task": t.task,
                    "site": t.site,
                    "template": t.template,
                    "score_a": t.score_a,
                    "verdict_a": t.verdict_a,
                    "a": _episodes_label(t.a),
                    "a_href": _first_link(t.a, links_a),
                    "score_b": t.score_b,
                    "verdict_b": t.verdict_b,
                    "b": _episodes_label(t.b),
                    "b_href": _first_link(t.b, links_b),
                    "change": "flipped" if t.flipped else "score changed" if t.changed else "same",
                    "flip": t.flipped,
                    "why": "; ".join(t.why),
                }
            )
    units = {c.unit for c in comparisons}
    columns: list[dict[str, Any]] = [
        {"key": "pair", "label": "comparison", "filter": len(comparisons) > 1},
        {"key": "task", "label": "session" if units == {"session"} else "task"},
        {"key": "site", "label": "site", "filter": True},
        {"key": "template", "label": "template"},
        {"key": "a", "label": "A episode", "type": "link"},
        {"key": "score_a", "label": "A score", "type": "num"},
        {"key": "verdict_a", "label": "A", "type": "outcome", "filter": True},
        {"key": "b", "label": "B episode", "type": "link"},
        {"key": "score_b", "label": "B score", "type": "num"},
        {"key": "verdict_b", "label": "B", "type": "outcome", "filter": True},
        {"key": "change", "label": "change", "filter": True},
        {"key": "why", "label": "why", "type": "long"},
    ]
    title = "Sessions" if units == {"session"} else "Tasks"
    body.append(table_section(f"{title} (flipped first)", columns, rows))
    return page("Run comparison", "".join(body))


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _episodes_label(task: TaskResult | None) -> str:
    if task is None:
        return "absent"
    return task.first.instance_id + (f" (+{task.trials - 1})" if task.trials > 1 else "")


def _first_link(task: TaskResult | None, links: Mapping[str, str]) -> str | None:
    if task is None:
        return None
    for episode in task.episodes:
        href = links.get(episode.session_path or "")
        if href:
            return href
    return None


def write_comparison(
    output_dir: str | os.PathLike[str],
    comparisons: Sequence[Comparison],
    links: Sequence[tuple[Mapping[str, str], Mapping[str, str]]] | None = None,
) -> tuple[Path, Path, Path]:
    """Write ``compare.md``, ``compare.json`` and ``compare.html`` into ``output_dir``."""
    if not comparisons:
        raise EvaluationError("nothing to compare: give at least two runs")
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    md, js, page_path = directory / COMPARE_MD, directory / COMPARE_JSON, directory / COMPARE_HTML
    for path, data in (
        (md, format_markdown(comparisons).encode()),
        (js, orjson.dumps(to_json(comparisons), option=orjson.OPT_INDENT_2) + b"\n"),
        (page_path, render_html(comparisons, links or [({}, {})] * len(comparisons)).encode()),
    ):
        with open_output(path) as output:  # never through a symlink planted where a report goes
            output.write(data)
    return md, js, page_path
