"""Sessions -> WebArena-Verified's own run layout, for its CLI (``webarena-verified eval-tasks``).

    DIR/<task_id>/agent_response.json   the final answer in Verified's response schema (``adapt_answer``)
    DIR/<task_id>/network.har           the agent's traffic (the live evaluator's own tabs left out)
    DIR/<task_id>/run_config.json       the site URLs of that session (the CLI reads it per task)
    DIR/config.json                     every session's site URLs, for ``--config``

Both ``webarena-verified eval-tasks --output-dir DIR`` and ``... --config DIR/config.json`` then score
the same files our in-process ``verified_score`` scores. The CLI evaluates only the 812 tasks of
the package's dataset, so a session must carry one of those ids (``verified_task_id`` or
``task_id``). Verified raises on a HAR with no entries; here a session whose HAR has no agent
navigation at all is refused up front with one line (``EvaluationError``).

``trim=True`` runs the package's own ``trim_har_file`` (what ``webarena-verified trim-network-logs``
does: static assets dropped, auth-like headers sanitized); ``redact=True`` first applies our
``redact_session`` (cookies, credentials, passwords, tokens).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdp_integration.errors import EvaluationError
from cdp_integration.evaluate.batch import discover_sessions
from cdp_integration.evaluate.verified import (
    _environments,
    _official_catalog,
    _session_task_id,
    adapt_answer,
)
from cdp_integration.har.export import session_to_har
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.output import BoundedOutput, iter_json, output_file
from cdp_integration.session.store import Session, load_session

__all__ = [
    "AGENT_RESPONSE_FILE",
    "CONFIG_FILE",
    "HAR_FILE",
    "RUN_CONFIG_FILE",
    "ExportedTask",
    "Submission",
    "create_submission",
    "export_verified",
]

AGENT_RESPONSE_FILE = "agent_response.json"
HAR_FILE = "network.har"
RUN_CONFIG_FILE = "run_config.json"
CONFIG_FILE = "config.json"
_STALE = ("eval_result.json",)
"""A result the CLI wrote for an earlier export of the task: no longer about these files."""


@dataclass(frozen=True)
class ExportedTask:
    """One session written as one task directory."""

    task_id: int
    session: Path
    directory: Path
    entries: int
    navigations: int


def _session_paths(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            sessions, _partial = discover_sessions(path)
            if not sessions:
                raise EvaluationError(f"{path}: no session files (*.session.jsonl.gz) found")
            found.extend(sessions)
        elif path.exists():
            found.append(path)
        else:
            raise EvaluationError(f"{path}: no such file or directory")
    return found


def _navigations(entries: list[dict[str, Any]]) -> int:
    """How many entries WebArena-Verified's own ``NetworkEvent`` takes for navigations."""
    if not entries:
        return 0
    from webarena_verified.types.tracing import NetworkTrace

    return sum(1 for event in NetworkTrace.from_content(entries).events if event.is_navigation_event)


def _prepared(
    path: Path, redact: bool
) -> tuple[int, Session, dict[str, Any], dict[str, Any], dict[str, str]]:
    """(task id, session, agent response, HAR, {placeholder: url}) for one session, or an error."""
    session = load_session(path)
    if redact:
        from cdp_integration.session.redact import redact_session

        session = redact_session(session)
    task_id = _session_task_id(session)
    task = _official_catalog().tasks.get(task_id)
    if task is None:
        raise EvaluationError(
            f"{path}: task {task_id} is not one of WebArena-Verified's 812 tasks, which its CLI scores"
        )
    response = adapt_answer(session.final_answer, task)
    har = session_to_har(session)
    entries = har["log"]["entries"]
    if _navigations(entries) == 0:
        raise EvaluationError(
            f"{path}: the agent made no navigation ({len(entries)} requests in its network log, none a "
            "document navigation): WebArena-Verified cannot score it"
        )
    urls = {f"__{site.value.upper()}__": env.urls[0] for site, env in _environments(task, session).items()}
    return task_id, session, response, har, urls


def _environments_json(urls: Iterable[tuple[str, str]]) -> dict[str, Any]:
    environments: dict[str, dict[str, list[str]]] = {}
    for placeholder, url in urls:
        listed = environments.setdefault(placeholder, {"urls": []})["urls"]
        if url not in listed:
            listed.append(url)
    return {"environments": environments}


def _write_json(path: Path, value: Any, budget: BoundedOutput | None = None) -> None:
    """``value`` as indented JSON, written member by member and counted against ``budget`` (the
    whole export's output budget): a HAR of shared bodies is never one multi-GB string."""
    with output_file(path) as output:
        if budget is not None:
            output.limit, output.what = budget.limit, budget.what
            output.count(budget.written)
        for piece in iter_json(value, stream_depth=3):
            output.write(piece)
        output.write(b"\n")
        if budget is not None:
            budget.written = output.written


def export_verified(
    sessions: Sequence[Path], output_dir: Path, *, trim: bool = False, redact: bool = False
) -> list[ExportedTask]:
    """Write ``sessions`` (files, or directories searched for them) in WebArena-Verified's layout.

    Every session is checked before anything is written: one ``EvaluationError`` for the first that
    cannot be exported (not a session, no Verified task id, no agent navigation, a task id that
    two sessions share: one directory per task).
    """
    prepared = [(path, *_prepared(path, redact)) for path in _session_paths(sessions)]
    owners: dict[int, Path] = {}
    for path, task_id, *_rest in prepared:
        if task_id in owners:
            raise EvaluationError(
                f"task {task_id} is in two sessions ({owners[task_id]}, {path}); WebArena-Verified's layout "
                "holds one run per task: export them to separate directories"
            )
        owners[task_id] = path
    output_dir.mkdir(parents=True, exist_ok=True)
    budget = BoundedOutput(None, SessionLimits.from_env().max_output_bytes, f"the export to {output_dir}")
    for *_, har, _urls in prepared:  # sized before anything is written: a refusal leaves no half export
        for piece in iter_json(har, stream_depth=3):
            budget.count(len(piece))
    budget.written = 0
    exported = []
    all_urls: list[tuple[str, str]] = []
    for path, task_id, _session, response, har, urls in prepared:
        directory = output_dir / str(task_id)
        directory.mkdir(exist_ok=True)
        for name in _STALE:
            (directory / name).unlink(missing_ok=True)
        _write_json(directory / AGENT_RESPONSE_FILE, response, budget)
        _write_har(directory / HAR_FILE, har, trim=trim, budget=budget)
        _write_json(directory / RUN_CONFIG_FILE, _environments_json(urls.items()), budget)
        all_urls.extend(urls.items())
        entries = har["log"]["entries"]
        exported.append(ExportedTask(task_id, path, directory, len(entries), _navigations(entries)))
    _write_json(output_dir / CONFIG_FILE, _environments_json(all_urls))
    return exported


def _write_har(path: Path, har: dict[str, Any], *, trim: bool, budget: BoundedOutput) -> None:
    if not trim:
        _write_json(path, har, budget)
        return
    from webarena_verified.core.utils.trim_network_logs import trim_har_file

    with tempfile.TemporaryDirectory(prefix="cdp-verified-export-") as tmp:
        full = Path(tmp) / HAR_FILE
        _write_json(full, har, budget)
        trim_har_file(full, path)


@dataclass(frozen=True)
class Submission:
    """What WebArena-Verified's own packager made of an exported run."""

    path: Path
    packaged: list[int]
    dataset_size: int
    """How many tasks Verified's dataset holds (a run of a subset leaves the rest missing)."""
    summary_file: Path


def create_submission(
    run_dir: Path, output_root: Path, *, name: str | None = None, tar: bool = True
) -> Submission:
    """Pack an ``export_verified`` run with WebArena-Verified's own submission packager (its layout,
    its HAR trimming, its ``summary.json``). Verified's packager never fails; here a run with no
    packageable task, or with tasks Verified does not know or could not read, is an ``EvaluationError``
    naming them (such a package would silently lose episodes)."""
    from webarena_verified.api import WebArenaVerified

    verified = WebArenaVerified()
    output_root.mkdir(parents=True, exist_ok=True)
    try:
        result = verified.create_submission([run_dir], output_root, no_tar=not tar, custom_name=name)
    except (ValueError, FileExistsError) as exc:
        raise EvaluationError(f"WebArena-Verified could not pack {run_dir}: {exc}") from None
    left_out = {
        "not WebArena-Verified task ids": result.unknown_task_ids,
        "without agent_response.json": result.missing_agent_response + result.missing_both_files,
        "without network.har": result.missing_network_har,
        "with an invalid or empty HAR": result.invalid_har_files,
        "with an empty agent response": result.empty_agent_response,
    }
    problems = [
        f"{len(ids)} {what} ({', '.join(map(str, sorted(ids)[:5]))})" for what, ids in left_out.items() if ids
    ]
    if problems or not result.tasks_packaged:
        raise EvaluationError(
            f"WebArena-Verified's packager left tasks out of {result.output_path}: "
            + ("; ".join(problems) if problems else "no task could be packaged")
        )
    return Submission(
        path=Path(result.output_path),
        packaged=sorted(result.tasks_packaged),
        dataset_size=len(verified.get_tasks()),
        summary_file=Path(result.summary_file),
    )
