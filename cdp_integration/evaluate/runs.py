"""A run as a whole: the episodes of one ``output.jsonl``, grouped into tasks and their trials.

Sessions of the same task id are trials of that task. Every figure here is task-first: a task's score
is the mean over its scored trials (its pass@1), and sites, templates and eval types average tasks,
so a task run three times weighs as much as a task run once. Intervals are percentile bootstraps
over tasks (groups) or intent templates (the headline macro score), with the seed of ``report.py``.

The file is someone else's output: every field is checked for its type and a line that is not a
record is counted, not trusted.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.errors import EvaluationError
from cdp_integration.evaluate.report import (
    bootstrap_ci,
    describe_trials,
    plural,
    score_value,
    strings,
    task_key,
)
from cdp_integration.session.untrusted import ascii_int, iter_file_lines, open_input

__all__ = [
    "OUTPUT_NAME",
    "Episode",
    "Group",
    "Run",
    "TaskResult",
    "TrialSummary",
    "UnscoredGroup",
    "find_output",
    "group_by",
    "macro_by_template",
    "mcnemar_exact",
    "paired_bootstrap",
    "pass_at_k",
    "plural",
    "read_run",
    "trial_summary",
    "trials_sentence",
    "unscored_groups",
]

PASS_THRESHOLD = 1.0 - 1e-9
"""A trial passes when its score is 1 (WebArena's scores are 0 or 1; a partial credit is a fail)."""
OUTPUT_NAME = "output.jsonl"
_MAX_LINE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Episode:
    """One line of ``output.jsonl``: one session (one trial of its task)."""

    instance_id: str
    task: str
    """The task key: ``task_id`` when the line has one, else the instance id."""
    template: str
    site: str
    eval_type: str
    score: float | None
    max_score: float | None
    error: str | None
    error_type: str | None
    provenance: str
    session_path: str | None
    answer: str | None = None
    attribution_class: str | None = None
    attribution_reason: str | None = None
    check_timeline: str | None = None
    """The failed checks asked at every step, in words: where each first and last passed."""
    checks: tuple[Mapping[str, Any], ...] | None = None
    scorer: str | None = None

    @property
    def scored(self) -> bool:
        return self.score is not None and self.error_type is None

    @property
    def passed(self) -> bool:
        return self.scored and self.score is not None and self.score >= PASS_THRESHOLD

    @property
    def outcome(self) -> str:
        """``pass``, ``fail`` or ``error`` (could not be scored)."""
        return "error" if not self.scored else "pass" if self.passed else "fail"

    @property
    def failure_class(self) -> str | None:
        """Why a trial did not pass: the attribution class when the scorer gave one, else
        ``error:<type>`` for an unscored trial and ``score 0: <eval types>`` for a failed one."""
        if self.passed:
            return None
        if self.attribution_class:
            return self.attribution_class
        if not self.scored:
            return f"error: {self.error_type or 'Error'}"
        return f"score 0: {self.eval_type}"


@dataclass(frozen=True)
class TaskResult:
    """A task's trials and what they add up to."""

    task: str
    episodes: tuple[Episode, ...]

    @property
    def first(self) -> Episode:
        return self.episodes[0]

    @property
    def trials(self) -> int:
        return len(self.episodes)

    @property
    def scored(self) -> tuple[Episode, ...]:
        return tuple(e for e in self.episodes if e.scored)

    @property
    def passes(self) -> int:
        return sum(e.passed for e in self.episodes)

    @property
    def score(self) -> float | None:
        """pass@1 of the task: the mean score over its scored trials (None: none scored)."""
        values = [e.score for e in self.scored if e.score is not None]
        return math.fsum(values) / len(values) if values else None

    @property
    def spread(self) -> float | None:
        """Max minus min score over the scored trials: 0 when the trials agree."""
        values = [e.score for e in self.scored if e.score is not None]
        return max(values) - min(values) if len(values) > 1 else None

    @property
    def verdict(self) -> str:
        """``pass`` (at least half the scored trials pass), ``fail``, or ``error`` (none scored)."""
        scored = self.scored
        if not scored:
            return "error"
        return "pass" if 2 * self.passes >= len(scored) else "fail"


@dataclass
class Run:
    """The episodes of one evaluation output, in file order."""

    name: str
    path: Path
    episodes: list[Episode] = field(default_factory=list)
    sessions_dir: Path | None = None
    """The sessions scored, when known (a run that ``compare`` scored itself)."""
    configs: Mapping[int, Mapping[str, Any]] | None = None
    """The configs they were scored with, when given (None: the config each session carries)."""

    def tasks(self) -> dict[str, TaskResult]:
        grouped: dict[str, list[Episode]] = defaultdict(list)
        for episode in self.episodes:
            grouped[episode.task].append(episode)
        return {
            task: TaskResult(task, tuple(sorted(episodes, key=lambda e: e.instance_id)))
            for task, episodes in sorted(grouped.items(), key=lambda item: natural(item[0]))
        }

    @property
    def output_dir(self) -> Path:
        return self.path.parent


def natural(text: str) -> tuple[int, int | str]:
    """Sort key: task ids written in ASCII digits by number, first; any other text after them."""
    number = ascii_int(text)
    return (0, number) if number is not None else (1, text)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _episode(record: Mapping[str, Any], scorer_default: str | None, where: str) -> Episode:
    result = record["test_result"]
    instance = record.get("instance")
    instance = instance if isinstance(instance, dict) else {}
    metadata = record.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    instance_id = _kept(str(record.get("instance_id")))
    task = task_key(instance.get("task_id"), where) or instance_id
    session_path = _text(metadata.get("session_path"))
    if session_path is not None and "\0" in session_path:
        raise EvaluationError(f"{where}: metadata.session_path holds a NUL byte; not a path")
    template_id = instance.get("intent_template_id")
    template = (
        str(template_id)
        if isinstance(template_id, int | str) and not isinstance(template_id, bool)
        else f"task {task}"
    )
    sites = strings(instance.get("sites"))
    eval_types = strings(instance.get("eval_types"))
    attribution = result.get("attribution")
    attribution = attribution if isinstance(attribution, dict) else {}
    checks = result.get("checks")
    error_type = _text(result.get("error_type"))
    error = _kept_text(result.get("error"))
    if error is not None and error_type is None:
        error_type = "Error"
    return Episode(
        instance_id=instance_id,
        task=task,
        template=template,
        site="+".join(sorted(sites)) or "(no site)",
        eval_type="+".join(eval_types) or "(no eval type)",
        score=score_value(result.get("score"), f"{where}: score"),
        max_score=score_value(result.get("max_score"), f"{where}: max_score"),
        error=error,
        error_type=error_type,
        provenance=_kept_text(result.get("provenance")) or "unknown",
        session_path=session_path,
        answer=_kept_text(result.get("answer")),
        attribution_class=_kept_text(attribution.get("class")),
        attribution_reason=_kept_text(attribution.get("reason")),
        check_timeline=_kept_text(_timeline_text(attribution.get("timeline"))),
        checks=tuple(itertools.islice((_kept_check(c) for c in checks if isinstance(c, dict)), _KEPT_CHECKS))
        if isinstance(checks, list)
        else None,
        scorer=_text(metadata.get("scorer")) or scorer_default,
    )


_KEPT_CHARS = 2_000
"""Characters a run keeps of each text of a line (answer, error, reason, a check's values): what a
report or comparison shows, never more. A longer text is kept as its start and a digest of the whole,
so two texts that differ anywhere still compare unequal."""
_KEPT_CHECKS = 200
"""Checks a run keeps of each line (a scorer writes a handful)."""


def _kept(value: Any) -> Any:
    """``value`` as a run keeps it: a long text (or a structure that serializes long) becomes its start
    plus a digest of the whole, so memory is bounded per line whatever the line holds."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    if len(text) <= _KEPT_CHARS:
        return value
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{text[:_KEPT_CHARS]}… [{len(text)} characters, digest {digest}]"


def _kept_text(value: Any) -> str | None:
    text = _text(value)
    return None if text is None else _kept(text)


def _kept_check(check: Mapping[str, Any]) -> dict[str, Any]:
    return {str(key)[:200]: _kept(item) for key, item in list(check.items())[:32]}


def _timeline_text(timeline: Any) -> str | None:
    """``program_html[0] exact_match: passed at steps 2-3 (first 2, last 3), failed at 0, 1, 4``: one
    line per failed check of an attribution's timeline; None when it has none (or it is malformed)."""
    if not isinstance(timeline, list):
        return None
    lines = []
    for row in timeline[:20]:
        if not isinstance(row, dict) or not isinstance(row.get("check"), str):
            continue
        steps = {
            key: [s for s in row.get(key) or [] if isinstance(s, int) and not isinstance(s, bool)]
            if isinstance(row.get(key), list)
            else []
            for key in ("passed", "failed", "unknown")
        }
        said = (
            f"first passed at step {steps['passed'][0]}, last at {steps['passed'][-1]}"
            if steps["passed"]
            else "passed at no step"
        )
        if steps["failed"]:
            said += f"; failed at {', '.join(map(str, steps['failed'][:30]))}"
        if steps["unknown"]:
            said += f"; could not be asked at {', '.join(map(str, steps['unknown'][:30]))}"
        lines.append(f"{row['check'][:80]}: {said}")
    return "\n".join(lines) or None


def find_output(path: str | os.PathLike[str]) -> Path | None:
    """The ``output.jsonl`` a path names: the file itself, or one in the directory or its
    ``eval_output`` subdirectory; None when there is none (then it may be a sessions folder)."""
    path = Path(path)
    if path.is_file():
        return path
    for candidate in (path / OUTPUT_NAME, path / "eval_output" / OUTPUT_NAME):
        if candidate.is_file():
            return candidate
    return None


def read_run(path: str | os.PathLike[str], *, name: str | None = None) -> Run:
    """Read an evaluation output (``output.jsonl`` or a directory holding one) into a ``Run``."""
    output = find_output(path)
    if output is None:
        raise EvaluationError(f"{path}: no {OUTPUT_NAME} here (an eval output directory or file)")
    run = Run(name=name or _run_name(Path(path)), path=output)
    for number, record in _output_records(output, None):
        run.episodes.append(_episode(record, None, f"{output}: line {number}"))
    return run


def read_output_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of an ``output.jsonl`` (``untrusted``'s bounded line reader; unreadable lines left out)."""
    return [record for _, record in _output_records(Path(path), [0])]


def _output_records(output: Path, unreadable: list[int] | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each line; a line that is no record is counted in ``unreadable``, or
    refused in one line when it is None (a file that is not an eval output, or one cut short)."""
    with os.fdopen(open_input(output, root=output.parent, what=OUTPUT_NAME), "rb") as file:
        for number, line in enumerate(iter_file_lines(file, max_line=_MAX_LINE_BYTES, source=str(output)), 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                record = None
            if isinstance(record, dict) and isinstance(record.get("test_result"), dict):
                yield number, record
            elif unreadable is not None:
                unreadable[0] += 1
            else:
                raise EvaluationError(
                    f"{output}: line {number} is not an eval output record "
                    "(a JSON object with a test_result): not a run, or cut short"
                )


def _run_name(path: Path) -> str:
    path = path.resolve()
    if path.name == OUTPUT_NAME:
        path = path.parent
    if path.name == "eval_output":
        path = path.parent
    return path.name or str(path)


# -- statistics -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Tasks sharing a site, template or eval type: their mean task score and its interval."""

    key: str
    tasks: int
    sessions: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    passed: int
    """Sessions (trials) that passed."""


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def group_by(tasks: Iterable[TaskResult], key: Callable[[TaskResult], str]) -> list[Group]:
    """One ``Group`` per key value, ordered by key; the interval resamples the group's tasks."""
    grouped: dict[str, list[TaskResult]] = defaultdict(list)
    for task in tasks:
        grouped[key(task)].append(task)
    groups = []
    for name, members in sorted(grouped.items(), key=lambda item: natural(item[0])):
        values = [s for t in members if (s := t.score) is not None]
        ci = bootstrap_ci(values)
        groups.append(
            Group(
                key=name,
                tasks=len(members),
                sessions=sum(t.trials for t in members),
                mean=_mean(values),
                ci_low=ci[0] if ci else None,
                ci_high=ci[1] if ci else None,
                passed=sum(t.passes for t in members),
            )
        )
    return groups


def macro_by_template(
    task_values: Mapping[str, tuple[str, float]],
) -> tuple[float | None, tuple[float, float] | None, int]:
    """(macro mean, bootstrap CI over templates, number of templates) of ``task -> (template, value)``."""
    templates: dict[str, list[float]] = defaultdict(list)
    for template, value in task_values.values():
        templates[template].append(value)
    means = [math.fsum(v) / len(v) for _, v in sorted(templates.items())]
    return _mean(means), bootstrap_ci(means), len(means)


def paired_bootstrap(
    differences: Mapping[str, tuple[str, float]],
) -> tuple[float | None, tuple[float, float] | None]:
    """Macro mean of per-task differences (B - A) and its percentile bootstrap CI.

    Templates are resampled with their tasks' paired differences, so both runs are resampled
    together: the interval is that of the difference, not of two independent scores.
    """
    mean, ci, _ = macro_by_template(differences)
    return mean, ci


_EXACT_PAIRS = 50_000
"""Discordant pairs up to which the McNemar tail is summed in integers (beyond: in log space)."""


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` A-pass/B-fail and ``c`` A-fail/B-pass tasks.

    The binomial tail is summed exactly in integers (each term from the one before), divided once:
    no float ever holds ``C(n, i)``, which overflows from n = 1,030. Beyond ``_EXACT_PAIRS`` it is
    summed in log space (``lgamma``), to the last digits a float can hold of such a p-value.
    """
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    if n <= _EXACT_PAIRS:
        term = total = 1
        for i in range(k):
            term = term * (n - i) // (i + 1)
            total += term
        return min(1.0, 2 * total / 2**n)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(k + 1)]
    top = max(logs)
    log_tail = top + math.log(math.fsum(math.exp(value - top) for value in logs)) - n * math.log(2)
    return min(1.0, 2 * math.exp(log_tail))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate for a task with ``c`` passing trials out of ``n`` (``k <= n``)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class TrialSummary:
    """How many trials the tasks have, and what several trials say."""

    trial_counts: dict[int, int]
    """Trials per task -> number of tasks with that many."""
    k: int
    """The smallest trial count among tasks with several trials (0 when none has)."""
    tasks_with_trials: int
    pass1: float | None
    """Mean pass@1 over the tasks with several trials."""
    pass_k: float | None
    """Mean unbiased pass@k over those tasks."""
    pass_all_k: float | None
    """Mean chance that k trials all pass (pass^k): how consistent the agent is."""
    mean_spread: float | None
    inconsistent: int
    """Tasks whose trials disagree (some pass, some fail)."""

    @property
    def mixed(self) -> bool:
        return len(self.trial_counts) > 1


def trial_summary(tasks: Iterable[TaskResult]) -> TrialSummary:
    tasks = list(tasks)
    counts = Counter(t.trials for t in tasks)
    several = [t for t in tasks if len(t.scored) > 1]
    k = min((len(t.scored) for t in several), default=0)
    pass1 = [t.passes / len(t.scored) for t in several]
    pass_k = [pass_at_k(len(t.scored), t.passes, k) for t in several]
    pass_all = [math.comb(t.passes, k) / math.comb(len(t.scored), k) for t in several]
    spreads = [s for t in several if (s := t.spread) is not None]
    return TrialSummary(
        trial_counts=dict(sorted(counts.items())),
        k=k,
        tasks_with_trials=len(several),
        pass1=_mean(pass1),
        pass_k=_mean(pass_k),
        pass_all_k=_mean(pass_all),
        mean_spread=_mean(spreads),
        inconsistent=sum(0 < t.passes < len(t.scored) for t in several),
    )


def trials_sentence(summary: TrialSummary) -> str:
    """``14 sessions: 7 tasks, 2 trials each``, or the counts when they are mixed, said plainly."""
    return describe_trials(summary.trial_counts)


# -- sessions that could not be scored ---------------------------------------------------------------


@dataclass(frozen=True)
class UnscoredGroup:
    """Unscored sessions that failed the same way: one line of the ``eval`` summary."""

    error_type: str
    message: str
    """The first such session's error, the shape the others share."""
    instances: tuple[str, ...]

    def line(self) -> str:
        first = self.instances[0]
        more = len(self.instances) - 1
        which = first if not more else f"{first} and {plural(more, 'other')}"
        return f"{plural(len(self.instances), 'session')}: {self.error_type}: {self.message} ({which})"


_VARIABLE = re.compile(r"\d+|'[^']*'|\"[^\"]*\"|\S+\.session\.jsonl\.gz\S*")


def unscored_groups(episodes: Iterable[Episode], *, message_chars: int = 400) -> list[UnscoredGroup]:
    """Unscored sessions grouped by error type and message shape (ids, numbers, paths and quoted
    values masked), largest group first."""
    groups: dict[tuple[str, str], list[Episode]] = {}
    for episode in episodes:
        if episode.scored:
            continue
        kind = episode.error_type or "Error"
        message = " ".join((episode.error or kind).split())
        groups.setdefault((kind, _VARIABLE.sub("#", message)), []).append(episode)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    result = []
    for (kind, _), members in ordered:
        message = " ".join((members[0].error or kind).split())
        if len(message) > message_chars:
            message = message[: message_chars - 3] + "..."
        result.append(UnscoredGroup(kind, message, tuple(e.instance_id for e in members)))
    return result
