"""Score a session with WebArena-Verified, offline: its HAR entries plus its adapted final answer.

WebArena-Verified scores a task from the agent's structured response and the network trace. The
trace is ``session_har_entries(session)``; the response is the session's free-text final answer
turned into the package's schema by ``adapt_answer``. The package's evaluator code runs as shipped.

Task definitions: the package's own 812-task dataset goes through its public facade
``WebArenaVerified``. Any other file in the package's task format (the bundled demo tasks, a user's
own) cannot: the facade insists on exactly 812 tasks. It goes through the same package's data
reader given a task subset, which is how the package itself loads task sets other than the full
dataset (``webarena-verified subsets-create --src custom_tasks.json``). Those two classes live in
``webarena_verified.api.internal`` (pinned at 1.2.3); they are called, never patched or copied.

Site URLs: task definitions say ``__SHOPPING__/...``; the package maps placeholders to URLs with its
config's ``environments``. Ours come from the session header's ``site_urls`` (``{"SHOPPING": url}``,
recorded by the logger), else from ``$SHOPPING`` / ``$WA_SHOPPING``.

``webarena_verified`` takes seconds to import, so it is imported on first use, not with this module.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdp_integration.deployment import known_site_urls
from cdp_integration.environment import PLACEHOLDER_URL
from cdp_integration.errors import EvaluationError, ReplayMissError
from cdp_integration.evaluate.explain import attribute, error_attribution, verified_checks
from cdp_integration.har.export import session_har_entries
from cdp_integration.imports.common import imported_provenance, imported_verified_gap
from cdp_integration.session.store import Session, load_session
from cdp_integration.session.untrusted import ascii_int

if TYPE_CHECKING:
    import pydantic
    from webarena_verified.api import WebArenaVerified
    from webarena_verified.api.internal.data_reader import WebArenaVerifiedDataReader
    from webarena_verified.types.config import EnvironmentConfig
    from webarena_verified.types.eval import TaskEvalResult
    from webarena_verified.types.task import WebArenaSite, WebArenaVerifiedTask
    from webarena_verified.types.tracing import NetworkTrace

__all__ = [
    "DEMO_TASKS_FILE",
    "VerifiedResult",
    "adapt_answer",
    "verified_score",
    "verified_score_file",
    "verified_task",
]

DEMO_TASKS_FILE = Path(__file__).resolve().parents[1] / "demo" / "verified_tasks.json"
"""The demo shop's tasks in WebArena-Verified's task format; ids from 20001, clear of the dataset's.
A data file shipped with the demo, read by path: scoring does not import the demo's code."""

_RESPONSE_FIELDS = frozenset(
    {"task_type", "performed_operation", "status", "retrieved_data", "error_details"}
)
_ERROR_STATUSES = (
    "NOT_FOUND_ERROR",
    "ACTION_NOT_ALLOWED_ERROR",
    "PERMISSION_DENIED_ERROR",
    "DATA_VALIDATION_ERROR",
    "UNKNOWN_ERROR",
)
_CODE_BLOCK = re.compile(r"```(?:json)?\s*\n?(.*?)\n?```", re.DOTALL)
_STRUCTURED_KEY = re.compile(r'"(?:task_type|performed_operation)"\s*:')
_STATUS_PREFIX = re.compile(rf"\s*({'|'.join(_ERROR_STATUSES)})\b[\s:.,;\-]*(?P<details>.*)", re.I | re.S)
_NOT_AVAILABLE = re.compile(r"\s*(?:n\s*/\s*a|na)[\s.!]*", re.I)
_NOT_AVAILABLE_BECAUSE = re.compile(r"\s*n\s*/\s*a\b[\s:.,;\-(]+(?P<details>.+)", re.I | re.S)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_COMMA_SPLIT_FORMATS = (None, "currency", "url")
"""Item formats whose values never hold ``", "`` (dates, durations, places, coordinates can)."""


@dataclass(frozen=True)
class VerifiedResult:
    """One WebArena-Verified evaluation of a session."""

    task_id: int
    score: float
    status: str
    """The package's evaluation status: ``success``, ``failure`` or ``error``."""
    details: dict[str, Any]
    """JSON-able: ``evaluators_results`` (one entry per evaluator: status, score, expected, actual,
    assertions), ``error_msg``, ``intent_template_id``, ``sites``, package version and checksums."""
    agent_response: dict[str, Any]
    """The response that was scored, in the package's schema (see ``adapt_answer``)."""

    @property
    def error(self) -> str | None:
        message = self.details.get("error_msg")
        return str(message) if message else None


# -- the answer adapter -----------------------------------------------------------------------


def adapt_answer(final_answer: str | None, task: WebArenaVerifiedTask) -> dict[str, Any]:
    """The agent response WebArena-Verified expects, from a free-text final answer.

    Rules, in order:

    1. Structured: the answer (or a fenced code block in it) is a JSON object with ``task_type``
       (or only fields of the response schema) -> validated as given; invalid -> ``EvaluationError``.
    2. No answer (``None`` or blank): NAVIGATE / MUTATE -> ``SUCCESS`` (the trace decides);
       RETRIEVE -> ``UNKNOWN_ERROR`` (nothing was retrieved).
    3. An error status named first (``NOT_FOUND_ERROR: no such order``) -> that status, the rest as
       ``error_details``.
    4. ``N/A`` (WebArena's "unachievable" answer, optionally followed by a reason, the details) ->
       the error status the task expects if it expects one, else ``NOT_FOUND_ERROR``: free text
       cannot say which kind of unachievable it is, and WebArena scored ``N/A`` right for all kinds.
    5. Anything else -> ``SUCCESS``. The task type is the task's own. RETRIEVE answers become
       ``retrieved_data`` items by the task's ``results_schema``: a JSON array gives its items and
       a JSON object is one item; otherwise bulleted or numbered lines (or all lines) are one item
       each; a single line splits on ``;``, and on ``", "`` outside brackets when the items are
       plain strings, numbers, currency, booleans or URLs. Bullets, wrapping quotes, ``**`` and a
       final period are dropped. No natural-language extraction: a sentence stays one item.
    """
    from webarena_verified.types.agent_response import MainObjectiveType, Status

    expected = task.expected_agent_response
    task_type = str(expected.task_type).upper()
    retrieve = task_type == MainObjectiveType.RETRIEVE
    text = (final_answer or "").strip()
    parsed, is_json = _json_value(text)
    if is_json and isinstance(parsed, dict) and _is_structured(parsed):
        return _validated(parsed)
    if not text:
        if retrieve:
            return _validated(
                {"task_type": task_type, "status": Status.UNKNOWN_ERROR, "error_details": "no final answer"}
            )
        return _validated({"task_type": task_type, "status": Status.SUCCESS})
    error = _error_status(text, str(expected.status).upper())
    if error is not None:
        status, details = error
        return _validated({"task_type": task_type, "status": status, "error_details": details})
    if not retrieve:
        return _validated({"task_type": task_type, "status": Status.SUCCESS})
    if is_json:
        items = list(parsed) if isinstance(parsed, list) else [parsed]
    else:
        items = _text_items(text, _item_schema(task))
    return _validated({"task_type": task_type, "status": Status.SUCCESS, "retrieved_data": items})


def _item_schema(task: WebArenaVerifiedTask) -> Mapping[str, Any]:
    """The JSON schema of one ``retrieved_data`` item (``{}`` when the task gives none)."""
    from webarena_verified.types.task import AgentResponseEvaluatorCfg

    for cfg in task.eval:
        if isinstance(cfg, AgentResponseEvaluatorCfg):
            items = cfg.results_schema.get("items")
            return items if isinstance(items, Mapping) else {}
    return {}


def _json_value(text: str) -> tuple[Any, bool]:
    """``(value, True)`` when the answer is a JSON array or object (fenced or not)."""
    block = _CODE_BLOCK.search(text)
    candidate = block.group(1).strip() if block else text
    if not candidate.startswith(("{", "[")):
        return None, False
    try:
        return json.loads(candidate), True
    except ValueError as exc:
        if _STRUCTURED_KEY.search(candidate):
            raise EvaluationError(
                f"final answer looks like a WebArena-Verified response but is not valid JSON ({exc})"
            ) from None
        return None, False


def _is_structured(value: dict[str, Any]) -> bool:
    return bool(value) and (
        "task_type" in value or "performed_operation" in value or set(value) <= _RESPONSE_FIELDS
    )


def _validated(response: Mapping[str, Any]) -> dict[str, Any]:
    import pydantic
    from webarena_verified.types.agent_response import FinalAgentResponse

    try:
        model = FinalAgentResponse.model_validate(dict(response))
    except pydantic.ValidationError as exc:
        raise EvaluationError(
            f"final answer is not a valid WebArena-Verified response: {_one_line(exc)}"
        ) from None
    return model.model_dump(mode="json")


def _one_line(exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "response"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _error_status(text: str, expected_status: str) -> tuple[str, str | None] | None:
    """``(status, details)`` when the answer reports failure (rules 3 and 4), else None."""
    named = _STATUS_PREFIX.fullmatch(text)
    if named:
        return named.group(1).upper(), named.group("details").strip() or None
    if _NOT_AVAILABLE.fullmatch(text):
        details = None
    elif because := _NOT_AVAILABLE_BECAUSE.fullmatch(text):
        details = because.group("details").strip().rstrip(")").strip() or None
    else:
        return None
    return (expected_status if expected_status in _ERROR_STATUSES else "NOT_FOUND_ERROR"), details


def _text_items(text: str, item_schema: Mapping[str, Any]) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    bulleted = [line for line in lines if _BULLET.match(line)]
    if bulleted:
        parts = bulleted
    elif len(lines) > 1:
        parts = lines
    elif ";" in text:
        parts = text.split(";")
    elif item_schema.get("type") in ("string", "number", "integer", "boolean") and (
        item_schema.get("format") in _COMMA_SPLIT_FORMATS
    ):
        parts = _split_top_level_commas(text)
    else:
        parts = [text]
    return [item for item in (_clean_item(part) for part in parts) if item]


def _split_top_level_commas(text: str) -> list[str]:
    """Split on ``", "`` outside brackets: ``"A (2 Pack, 4'), B"`` -> ``["A (2 Pack, 4')", "B"]``."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0 and text[i + 1 : i + 2].isspace():
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _clean_item(item: str) -> str:
    item = _BULLET.sub("", item).strip()
    while True:
        before = item
        item = item.strip().strip("*`").strip()
        if item.endswith(".") and not item.endswith(".."):
            item = item[:-1]
        if len(item) >= 2 and item[0] == item[-1] and item[0] in "\"'":
            item = item[1:-1]
        if item == before:
            return item


# -- task definitions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Catalog:
    """A set of task definitions and how to evaluate against them."""

    dataset: Path | None
    """None: the package's own dataset (through the public facade)."""
    tasks: Mapping[int, WebArenaVerifiedTask]
    reader: WebArenaVerifiedDataReader | None = None

    def evaluate(
        self,
        task_id: int,
        response: dict[str, Any],
        trace: NetworkTrace,
        environments: dict[WebArenaSite, EnvironmentConfig],
    ) -> TaskEvalResult:
        from webarena_verified.api.internal.evaluator import WebArenaVerifiedEvaluator
        from webarena_verified.types.config import WebArenaVerifiedConfig

        if self.reader is None:
            facade = _facade(tuple(sorted((site.value, env.urls[0]) for site, env in environments.items())))
            return facade.evaluate_task(task_id=task_id, agent_response=response, network_trace=trace)
        config = WebArenaVerifiedConfig(test_data_file=self.dataset, environments=environments)
        evaluator = WebArenaVerifiedEvaluator(config=config, reader=self.reader)
        return evaluator.evaluate_task(task_id=task_id, agent_response=response, network_trace=trace)


@functools.lru_cache(maxsize=16)
def _facade(site_urls: tuple[tuple[str, str], ...]) -> WebArenaVerified:
    """The public facade over the package's dataset, per set of site URLs (it loads the dataset)."""
    from webarena_verified.api import WebArenaVerified
    from webarena_verified.types.config import EnvironmentConfig, WebArenaVerifiedConfig
    from webarena_verified.types.task import WebArenaSite

    environments = {WebArenaSite(site): EnvironmentConfig(urls=[url]) for site, url in site_urls}
    return WebArenaVerified(config=WebArenaVerifiedConfig(environments=environments))


@functools.lru_cache(maxsize=1)
def _official_catalog() -> _Catalog:
    from webarena_verified.api import WebArenaVerified

    return _Catalog(None, {task.task_id: task for task in WebArenaVerified().get_tasks()})


def _custom_catalog(tasks_file: Path) -> _Catalog:
    path = Path(tasks_file).resolve()
    try:
        stat = path.stat()
    except OSError as exc:
        raise EvaluationError(f"{tasks_file}: cannot read tasks file ({exc.strerror or exc})") from None
    if not path.is_file():
        raise EvaluationError(f"{tasks_file}: is not a file")
    return _load_custom_catalog(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load_custom_catalog(path_text: str, _mtime_ns: int, _size: int) -> _Catalog:
    """Load a task file with the package's reader; cached per file version (path, mtime, size)."""
    from webarena_verified.api.internal.data_reader import WebArenaVerifiedDataReader
    from webarena_verified.types.config import WebArenaVerifiedConfig
    from webarena_verified.types.data import TaskSubset

    from cdp_integration.session.limits import SessionLimits
    from cdp_integration.session.untrusted import read_json

    path = Path(path_text)
    limits = SessionLimits.from_env()
    try:
        raw = read_json(path, limits=limits, max_bytes=limits.max_input_bytes, what="task file")
    except ValueError as exc:
        raise EvaluationError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(raw, list) or not raw or not all(isinstance(task, dict) for task in raw):
        raise EvaluationError(f"{path}: expected a non-empty JSON list of WebArena-Verified tasks")
    ids = [task.get("task_id") for task in raw]
    if not all(isinstance(task_id, int) and not isinstance(task_id, bool) for task_id in ids):
        raise EvaluationError(f"{path}: every task needs an integer task_id")
    if len(set(ids)) != len(ids):
        duplicate = next(task_id for task_id, n in Counter(ids).items() if n > 1)
        raise EvaluationError(f"{path}: duplicate task_id {duplicate}")
    subset = TaskSubset(task_ids=ids, checksum=TaskSubset.compute_checksum(ids))
    try:
        reader = WebArenaVerifiedDataReader(WebArenaVerifiedConfig(test_data_file=path), subset=subset)
    except ValueError as exc:
        raise EvaluationError(f"{path}: {_squeeze(exc)}") from None
    return _Catalog(path, dict(reader.task_id_map), reader)


def _squeeze(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _catalog_for(task_id: int, tasks_file: Path | None) -> _Catalog:
    if tasks_file is not None:
        catalog = _custom_catalog(tasks_file)
        if task_id not in catalog.tasks:
            raise EvaluationError(f"task {task_id} is not in {tasks_file}")
        return catalog
    for catalog in (_official_catalog(), _custom_catalog(DEMO_TASKS_FILE)):
        if task_id in catalog.tasks:
            return catalog
    demo = ", ".join(str(known) for known in sorted(_custom_catalog(DEMO_TASKS_FILE).tasks))
    raise EvaluationError(
        f"task {task_id} is not a WebArena-Verified task (neither in its 812-task dataset nor in the demo's "
        f"Verified tasks {demo}): score it with --scorer webarena, or give its definition in "
        "WebArena-Verified's format with --configs FILE (tasks_file= in Python)"
    )


def verified_task(task_id: int, *, tasks_file: Path | None = None) -> WebArenaVerifiedTask:
    """A task definition: from ``tasks_file`` when given, else the dataset, else the demo tasks."""
    return _catalog_for(task_id, tasks_file).tasks[task_id]


# -- scoring a session ------------------------------------------------------------------------


def _session_task_id(session: Session) -> int:
    for key in ("verified_task_id", "task_id"):
        value = session.task.get(key)
        if value is None:
            continue
        number = value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        if isinstance(value, str):
            number = ascii_int(value.strip())
        if number is None:
            raise EvaluationError(
                f"{session.path or 'session'}: task {key}={str(value)[:40]!r} is not a task id"
            )
        return number
    raise EvaluationError(
        f"{session.path or 'session'}: no WebArena-Verified task id (the session's task has no "
        "verified_task_id or task_id; task_id= in Python names one)"
    )


def _environments(task: WebArenaVerifiedTask, session: Session) -> dict[WebArenaSite, EnvironmentConfig]:
    """Placeholder -> URL for each of the task's sites: the session's ``site_urls``, else ``WA_<SITE>`` /
    ``WEBARENA_BASE_URL`` (``--site-url`` sets ``WA_<SITE>``), else ``$SITE``."""
    from webarena_verified.types.config import EnvironmentConfig

    recorded = session.task.get("site_urls")
    urls = {str(k).upper(): str(v) for k, v in recorded.items() if v} if isinstance(recorded, dict) else {}
    given = known_site_urls()
    environments = {}
    missing = []
    for site in task.sites:
        name = site.value.upper()
        plain = os.environ.get(name, "")
        url = urls.get(name) or given.get(name) or (plain if plain != PLACEHOLDER_URL else "")
        if not url:
            missing.append(site.value)
            continue
        environments[site] = EnvironmentConfig(urls=[url.rstrip("/")])
    if missing:
        names = ", ".join(missing)
        raise EvaluationError(
            f"no URL for site{'s' if len(missing) > 1 else ''} {names}: the session records none in its "
            f"site_urls; give {'them' if len(missing) > 1 else 'it'} with "
            + " ".join(f"--site-url {m}=URL" for m in missing)
            + f" (or {', '.join('WA_' + m.upper() for m in missing)})"
        )
    return environments


def _trace(session: Session, include_evaluator: bool) -> NetworkTrace:
    from webarena_verified.types.tracing import NetworkTrace

    entries = session_har_entries(session, include_evaluator=include_evaluator)
    if entries:
        return NetworkTrace.from_content(entries)
    # The package refuses an empty entry list; an episode without traffic is still scoreable.
    return NetworkTrace.model_construct(is_playwright=False, src_file=Path("<session>"), events=())


def verified_score(
    session: Session,
    task_id: int | None = None,
    *,
    tasks_file: Path | None = None,
    include_evaluator_traffic: bool = False,
) -> VerifiedResult:
    """Score ``session`` with WebArena-Verified's ``evaluate_task``, offline.

    ``task_id``: default ``verified_task_id`` (else ``task_id``) of the session header's task.
    ``tasks_file``: task definitions in the package's format, instead of its dataset and the demo
    tasks. ``include_evaluator_traffic``: also count the live evaluator's own requests (off: they
    would be taken for the agent's last navigation). Raises ``EvaluationError`` when the session
    cannot be scored (no or unknown task id, no site URL, invalid structured answer) and
    ``ReplayMissError`` when an imported session lacks what Verified scores (``imported_verified_gap``);
    an error inside the package's evaluators is a result with status ``error``.
    """
    task_id = _session_task_id(session) if task_id is None else task_id
    gap = imported_verified_gap(session)
    if gap is not None:
        raise ReplayMissError(gap)
    catalog = _catalog_for(task_id, tasks_file)
    task = catalog.tasks[task_id]
    response = adapt_answer(session.final_answer, task)
    result = catalog.evaluate(
        task_id, response, _trace(session, include_evaluator_traffic), _environments(task, session)
    )
    details = json.loads(result.model_dump_json())
    for key in ("task_id", "status", "score"):
        details.pop(key, None)
    return VerifiedResult(
        task_id=task_id,
        score=float(result.score),
        status=str(result.status),
        details=details,
        agent_response=response,
    )


def _is_verified_task(config: Any) -> bool:
    evals = config.get("eval") if isinstance(config, Mapping) else None
    return (
        isinstance(evals, list)
        and bool(evals)
        and all(isinstance(e, dict) and "evaluator" in e for e in evals)
    )


def _live_rewards(session: Session) -> tuple[float | None, float | None]:
    """(final step's live reward, max live reward over the steps), None where none was recorded."""
    rewards = [step.reward for step in session.steps if step.reward is not None]
    if not rewards and session.end is not None:
        rewards = list(session.end.rewards)
    final = session.steps[-1].reward if session.steps else None
    if final is None and session.end is not None and session.end.rewards:
        final = session.end.rewards[-1]
    finite = [r for r in rewards if not math.isnan(r)]
    return final, (max(finite) if finite else None)


def _recorded_in_browsergym(session: Session) -> bool:
    """Captured in a BrowserGym ``webarena_verified`` env, whose live reward is ``browsergym_reward``."""
    return str(session.task.get("env_id") or "").startswith("browsergym/webarena_verified.")


def browsergym_reward(result: VerifiedResult) -> float:
    """The reward BrowserGym 0.14's ``webarena_verified`` tasks give for a Verified result: the mean of
    the evaluators' scores (Verified's own score is all-or-nothing), its score when it has none."""
    scores = [
        float(entry["score"])
        for entry in result.details.get("evaluators_results") or []
        if isinstance(entry, dict) and isinstance(entry.get("score"), int | float)
    ]
    return sum(scores) / len(scores) if scores else result.score


def verified_score_file(path: Path, configs: Mapping[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Score one session file; the result dict of ``score_session_file`` (``batch.py`` writes it).

    A session recorded in a BrowserGym ``webarena_verified`` env scores as BrowserGym rewards
    (``browsergym_reward``), so that it compares with the live reward it recorded.

    ``configs``: task definitions by id. One in WebArena-Verified's format (its ``eval`` lists
    evaluators) is scored against as given; WebArena configs do not apply and are ignored. Raises
    ``EvaluationError`` (or ``SessionFormatError``) for a session that cannot be scored.
    """
    started = time.perf_counter()
    session = load_session(path)
    task_id = _session_task_id(session)
    definition = configs.get(task_id) if configs else None
    if _is_verified_task(definition):
        with tempfile.TemporaryDirectory(prefix="cdp-verified-") as tmp:
            tasks_file = Path(tmp) / "tasks.json"
            tasks_file.write_text(json.dumps([definition]))
            result = verified_score(session, task_id, tasks_file=tasks_file)
    else:
        result = verified_score(session, task_id)
    live_reward, live_max = _live_rewards(session)
    errored = result.status == "error"
    provenance = imported_provenance(session.header.options)
    checks = [check.to_dict() for check in verified_checks(result.details, session, provenance)]
    score = (
        None if errored else (browsergym_reward(result) if _recorded_in_browsergym(session) else result.score)
    )
    error = (result.error or "WebArena-Verified evaluation error") if errored else None
    return {
        "instance_id": session.instance_id,
        "task_id": task_id,
        "intent_template_id": result.details.get("intent_template_id"),
        "sites": list(result.details.get("sites") or []),
        "eval_types": ["webarena-verified"],
        "score": score,
        "max_score": None,
        "live_reward": live_reward,
        "live_max": live_max,
        "answer": session.final_answer,
        "history": [{"index": step.index, "action": step.action, "url": step.url} for step in session.steps],
        "error": error,
        "error_type": "EvaluationError" if errored else None,
        "duration_ms": (time.perf_counter() - started) * 1000,
        "partial": not session.complete,
        "provenance": provenance,
        "checks": checks,
        "attribution": error_attribution("EvaluationError", error)
        if errored
        else attribute(session, score, checks),
    }
