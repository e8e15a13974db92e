"""One session scored into its ``output.jsonl`` line: what every scoring backend runs per session.

``batch`` (this process, or its worker processes) and ``ray_scoring`` (Ray workers) both score a
session through ``score_one``, so a line is the same whoever wrote it; neither backend imports the
other for it. The line's shape is described in ``batch``.
"""

from __future__ import annotations

import importlib
import os
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from cdp_integration.errors import CDPIntegrationError, EvaluationError
from cdp_integration.evaluate.explain import error_attribution
from cdp_integration.session.untrusted import open_input

__all__ = [
    "DEFAULT_SCORER",
    "SCORER_MODULE",
    "WORKER_CRASH",
    "Job",
    "Outcome",
    "ScoreFn",
    "default_score_fn",
    "error_record",
    "score_one",
]


ScoreFn = Callable[..., Mapping[str, Any]]
"""``(path, configs[, scorer=name]) -> result dict``, the contract of ``score_session_file``."""


DEFAULT_SCORER = "webarena"


WORKER_CRASH = "WorkerCrash"
"""``error_type`` of a session whose worker process died while scoring it."""


_SESSION_SUFFIX = ".session.jsonl.gz"


SCORER_MODULE = "cdp_integration.evaluate.scoring"


_INSTANCE_FIELDS = ("task_id", "intent_template_id", "sites", "eval_types")


_RESULT_FIELDS = (
    "score",
    "max_score",
    "live_reward",
    "live_max",
    "answer",
    "error",
    "error_type",
    "provenance",
    "checks",
    "attribution",
)


_TRACEBACK_CHARS = 4000


class Job(NamedTuple):
    path: str
    rel: str
    """Posix path relative to the sessions directory: the resume key."""


def default_score_fn() -> ScoreFn:
    try:
        module = importlib.import_module(SCORER_MODULE)
    except ImportError as exc:
        raise EvaluationError(f"the offline scorer ({SCORER_MODULE}) cannot be imported: {exc}") from None
    score: ScoreFn | None = getattr(module, "score_session_file", None)
    if score is None:
        raise EvaluationError(f"the offline scorer ({SCORER_MODULE}) has no score_session_file")
    return score


class Outcome(NamedTuple):
    line: bytes
    error_type: str | None


def score_one(
    fn: ScoreFn,
    job: Job,
    configs: Mapping[int, dict[str, Any]] | None,
    scorer: str | None,
    options: Mapping[str, bool] | None = None,
) -> Outcome:
    """Score one session into its output line (empty if the scorer skipped it); any exception
    becomes an error line."""
    from cdp_integration import storage

    started = time.perf_counter()
    try:
        if storage.local_path(job.path) is not None:  # a storage URL is read into a bounded temp copy
            _refuse_links(Path(job.path), job.rel)
        kwargs = {**({"scorer": scorer} if scorer is not None else {}), **(options or {})}
        with storage.local_copy(job.path) as path:  # a storage URL: a bounded temp copy
            result = fn(path, configs, **kwargs)
        if not isinstance(result, Mapping):
            raise TypeError(f"the scorer returned {type(result).__name__}, not a dict")
        if result.get("skipped"):
            return Outcome(b"", None)
        record = _result_record(result, job, scorer, elapsed_ms=(time.perf_counter() - started) * 1000)
        return Outcome(orjson.dumps(record) + b"\n", record["test_result"]["error_type"])
    except (Exception, SystemExit) as exc:
        error_type = type(exc).__name__
        trace = None
        if not isinstance(exc, CDPIntegrationError):
            trace = traceback.format_exc()[-_TRACEBACK_CHARS:]
        record = error_record(
            job,
            scorer,
            error=str(exc) or error_type,
            error_type=error_type,
            duration_ms=(time.perf_counter() - started) * 1000,
            trace=trace,
        )
        _add_header_facts(record, Path(job.path))
        return Outcome(orjson.dumps(record) + b"\n", error_type)


def _refuse_links(path: Path, rel: str) -> None:
    """A session found in the sessions folder is read only inside it: a symlink is refused, not followed."""
    depth = len(Path(rel).parts)
    root = path.parents[depth - 1] if depth else path.parent
    os.close(open_input(path, root=root, what="session file"))


def _fallback_instance_id(job: Job) -> str:
    name = Path(job.rel).name
    return name.removesuffix(_SESSION_SUFFIX)


def _result_record(
    result: Mapping[str, Any], job: Job, scorer: str | None, *, elapsed_ms: float
) -> dict[str, Any]:
    instance = {name: result.get(name) for name in _INSTANCE_FIELDS}
    instance["sites"] = list(instance["sites"] or [])
    instance["eval_types"] = list(instance["eval_types"] or [])
    test_result = {name: result.get(name) for name in _RESULT_FIELDS}
    duration = result.get("duration_ms")
    test_result["duration_ms"] = duration if isinstance(duration, int | float) else elapsed_ms
    if test_result["error"] is not None and test_result["error_type"] is None:
        test_result["error_type"] = "Error"
    test_result["partial"] = bool(result.get("partial"))  # no end record: scored on its last readable step
    if test_result["attribution"] is None and test_result["error_type"] is not None:
        test_result["attribution"] = error_attribution(test_result["error_type"], test_result["error"])
    return {
        "instance_id": str(result.get("instance_id") or _fallback_instance_id(job)),
        "instance": instance,
        "history": list(result.get("history") or []),
        "test_result": test_result,
        "metadata": {"session_path": job.rel, "scorer": scorer or DEFAULT_SCORER},
    }


def _add_header_facts(record: dict[str, Any], path: Path) -> None:
    """What the header of a session that failed to score still tells: ``imported:<format>``
    provenance (an imported one's miss still says where it came from) and its task id, template and
    sites, so the failure counts as a trial of its task. A header that cannot be read adds nothing."""
    from cdp_integration.imports.common import imported_provenance
    from cdp_integration.session.store import read_header

    try:
        header = read_header(path)
        record["test_result"]["provenance"] = imported_provenance(header.options)
    except (CDPIntegrationError, OSError, ValueError, RecursionError, MemoryError):
        return
    task = header.task if isinstance(header.task, dict) else {}
    found = task.get("config")
    config: dict[str, Any] = found if isinstance(found, dict) else {}
    task_id = task.get("task_id", config.get("task_id"))
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        record["instance"]["task_id"] = task_id
    template = config.get("intent_template_id")
    if isinstance(template, int | str) and not isinstance(template, bool):
        record["instance"]["intent_template_id"] = template
    sites = config.get("sites")
    if isinstance(sites, list) and all(isinstance(site, str) for site in sites):
        record["instance"]["sites"] = list(sites)


def error_record(
    job: Job,
    scorer: str | None,
    *,
    error: str,
    error_type: str,
    duration_ms: float,
    trace: str | None = None,
) -> dict[str, Any]:
    test_result: dict[str, Any] = dict.fromkeys(_RESULT_FIELDS)
    test_result.update(error=error, error_type=error_type, duration_ms=duration_ms)
    test_result["attribution"] = error_attribution(error_type, error)
    metadata: dict[str, Any] = {"session_path": job.rel, "scorer": scorer or DEFAULT_SCORER}
    if trace is not None:
        metadata["traceback"] = trace
    return {
        "instance_id": _fallback_instance_id(job),
        "instance": {"task_id": None, "intent_template_id": None, "sites": [], "eval_types": []},
        "history": [],
        "test_result": test_result,
        "metadata": metadata,
    }
