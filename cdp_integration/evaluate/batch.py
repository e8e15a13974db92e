"""Score a directory of sessions offline, one OpenHands-style line per session, streaming.

A scale run is 1,000+ sessions, so nothing here holds more than one session per worker: each result
is appended to ``output.jsonl`` and flushed as it arrives. A killed run therefore resumes where it
stopped (sessions whose path is already in ``output.jsonl`` are skipped; a line cut short by the
kill is dropped and its session scored again). Every exception the scorer raises, and a worker
process dying, becomes a line with ``error`` / ``error_type``; one bad session never ends the run.

One line of ``output.jsonl`` (``report.py`` reads these back)::

    {"instance_id": str,
     "instance": {"task_id", "intent_template_id", "sites", "eval_types"},
     "history": [{"index", "action", "url"}, ...],
     "test_result": {"score", "max_score", "live_reward", "live_max", "answer",
                     "error", "error_type", "duration_ms", "partial",
                     "provenance": "recorded" | "reconstructed" | "mixed" | null,
                     "checks": [<check>, ...] | null, "attribution": {"class", "reason"} | null},
     "metadata": {"session_path": <relative to the sessions dir>, "scorer": str}}

The per-session scorer is ``cdp_integration.evaluate.scoring.score_session_file`` unless another is
injected (``score_fn``); with ``workers > 1`` it must be a module-level function, since workers are
separate processes (forked from a fork server that has imported the evaluators once) that receive it
by reference.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

import orjson

from cdp_integration.errors import EvaluationError, SessionFormatError
from cdp_integration.evaluate import session_line
from cdp_integration.evaluate.session_line import (
    DEFAULT_SCORER,
    WORKER_CRASH,
    Job,
    Outcome,
    ScoreFn,
    default_score_fn,
    error_record,
    score_one,
)
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.store import SESSION_SUFFIX as _SESSION_SUFFIX
from cdp_integration.session.untrusted import (
    ascii_int,
    is_within,
    iter_file_lines,
    make_output_dir,
    open_output,
    read_json,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_SCORER",
    "OUTPUT_NAME",
    "SCORERS",
    "WORKER_CRASH",
    "BatchSummary",
    "Progress",
    "ProgressFactory",
    "ScoreFn",
    "discover_sessions",
    "load_configs",
    "score_directory",
]


class Progress(Protocol):
    def update(self, n_steps: int) -> None: ...


ProgressFactory = Callable[[int], AbstractContextManager[Progress]]
"""``(number of sessions to score) -> a context whose ``update(1)`` is called per scored session``;
the command layer passes a progress bar, the library draws none itself."""

OUTPUT_NAME = "output.jsonl"
SCORERS = ("webarena", "verified")
BACKENDS = ("local", "ray")

_PARTIAL_SUFFIX = _SESSION_SUFFIX + ".partial"


@dataclass(frozen=True)
class BatchSummary:
    """What one ``score_directory`` run did. Scores themselves are in ``output.jsonl`` / the report."""

    output_path: Path
    found: int
    """Finished session files under the sessions directory."""
    skipped: int
    """Of those, already in ``output.jsonl`` (resumed run)."""
    scored: int
    """Lines written by this run, errors included."""
    failed: int
    """Of those, lines with an ``error``."""
    error_types: Mapping[str, int] = field(default_factory=dict)
    incomplete: tuple[Path, ...] = ()
    """``*.partial`` files: episodes that never finished saving; not scored."""
    skipped_partial: int = 0
    """Session files without an end record that ``complete_only`` left unscored (no line)."""
    workers: int = 1
    elapsed_s: float = 0.0

    @property
    def sessions_per_s(self) -> float:
        return self.scored / self.elapsed_s if self.elapsed_s > 0 else 0.0


def discover_sessions(root: Path) -> tuple[list[Path], list[Path]]:
    """Finished session files and ``*.partial`` ones under ``root``, recursively, in a stable order.

    An OpenHands ``run_infer`` output directory (``output.jsonl`` beside a sessions subdirectory) is
    just another tree to walk.
    """
    sessions: list[Path] = []
    partials: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        for name in sorted(files):
            if name.endswith(_SESSION_SUFFIX):
                sessions.append(Path(directory, name))
            elif name.endswith(_PARTIAL_SUFFIX):
                partials.append(Path(directory, name))
    return sessions, partials


def load_configs(path: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """WebArena task configs by ``task_id`` from a JSON file or a directory of ``<task_id>.json``.

    A file holds a list of configs (like WebArena's ``test.raw.json``), a list of
    ``{"config": {...}, ...}`` items (the demo ``tasks.json``), or one config. A directory is read for
    files named ``<digits>.json`` only, so a ``test.raw.json`` beside them is not read twice.
    """
    path = Path(path)
    if path.is_dir():
        numbered = (
            (number, p)
            for p in path.iterdir()
            if p.suffix == ".json" and (number := ascii_int(p.stem)) is not None
        )
        files = [p for _, p in sorted(numbered)]
        if not files:
            raise EvaluationError(f"{path}: no <task_id>.json config files in this directory")
        configs: dict[int, dict[str, Any]] = {}
        for file in files:
            document = _read_json(file)
            item = _config_of(document, f"{file}")
            task_id = item.get("task_id", ascii_int(file.stem))
            _add_config(configs, task_id, item, f"{file}")
        return configs
    if not path.exists():
        raise EvaluationError(f"{path}: configs file not found")
    document = _read_json(path)
    items = document if isinstance(document, list) else [document]
    configs = {}
    for number, entry in enumerate(items):
        where = f"{path}: item {number}"
        item = _config_of(entry, where)
        _add_config(configs, item.get("task_id"), item, where)
    if not configs:
        raise EvaluationError(f"{path}: holds no task configs")
    return configs


def _read_json(path: Path) -> Any:
    limits = SessionLimits.from_env()
    try:
        return read_json(path, limits=limits, max_bytes=limits.max_input_bytes, what="configs file")
    except SessionFormatError as exc:
        raise EvaluationError(str(exc)) from None


def _config_of(entry: Any, where: str) -> dict[str, Any]:
    if isinstance(entry, dict) and isinstance(entry.get("config"), dict):
        entry = entry["config"]
    if not isinstance(entry, dict) or "eval" not in entry:
        raise EvaluationError(f"{where}: not a WebArena task config (an object with 'task_id' and 'eval')")
    return entry


def _add_config(configs: dict[int, dict[str, Any]], task_id: Any, config: dict[str, Any], where: str) -> None:
    if not isinstance(task_id, int) or isinstance(task_id, bool):
        raise EvaluationError(f"{where}: config has no integer 'task_id'")
    if task_id in configs and configs[task_id] != config:
        raise EvaluationError(f"{where}: task_id {task_id} appears twice with different configs")
    configs[task_id] = config


def score_directory(
    sessions_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    configs: Mapping[int, dict[str, Any]] | None = None,
    workers: int = 1,
    resume: bool = True,
    scorer: str | None = None,
    progress: ProgressFactory | None = None,
    score_fn: ScoreFn | None = None,
    trust_configs: bool = False,
    complete_only: bool = False,
    recorded_only: bool = False,
    backend: str = "local",
    ray_address: str | None = None,
) -> BatchSummary:
    """Score every finished session under ``sessions_dir`` into ``output_dir/output.jsonl``.

    ``workers == 1`` scores in this process; more uses that many worker processes, each loading
    the scorer once and holding one session at a time (only there does a scorer that kills its
    process cost just its session). ``scorer`` is passed to the scorer as
    ``scorer=`` when given (``webarena`` or ``verified``). ``resume=False`` starts a new
    ``output.jsonl``. ``progress``: a progress bar factory (none by default). ``trust_configs``,
    ``complete_only`` and ``recorded_only`` are passed to the scorer as keywords when set (see
    ``score_session_file``): a session the scorer skips gets no line; with ``recorded_only`` a session
    needing an answer the live evaluator did not record becomes an error line
    (``ReconstructedAnswerError``). Raises
    ``EvaluationError`` for unusable arguments or a directory without sessions, never for a bad session.

    ``sessions_dir`` may be a storage URL (``s3://bucket/run``): each session is read into a bounded
    local temp copy (``cdp_integration.storage``) by whoever scores it. ``backend="ray"`` scores in Ray
    workers (``ray_scoring``; ``ray_address`` as ``run_infer.py --ray-address``), ``workers`` of them.
    """
    from cdp_integration import storage

    started = time.perf_counter()
    if backend not in BACKENDS:
        raise EvaluationError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    remote = storage.is_url(str(sessions_dir)) and storage.local_path(str(sessions_dir)) is None
    sessions_root = Path(sessions_dir) if not remote else Path()
    if not remote:
        sessions_root = storage.local_path(str(sessions_dir)) or Path(sessions_dir)
        if not sessions_root.is_dir():
            raise EvaluationError(f"{sessions_root}: sessions directory not found")
    if workers < 1:
        raise EvaluationError(f"workers must be at least 1, not {workers}")
    if scorer is not None and scorer not in SCORERS:
        raise EvaluationError(f"unknown scorer {scorer!r}; choose one of {', '.join(SCORERS)}")
    if score_fn is None:
        _check_default_scorer(import_it=workers == 1 and backend == "local")
    elif workers > 1 or backend != "local":
        _check_picklable(score_fn)
    if remote:
        location = str(sessions_dir).rstrip("/")
        names = storage.find(location, (_SESSION_SUFFIX, _PARTIAL_SUFFIX))
        sessions = [Path(name) for name in names if name.endswith(_SESSION_SUFFIX)]
        partials = [Path(name) for name in names if name.endswith(_PARTIAL_SUFFIX)]
    else:
        sessions, partials = discover_sessions(sessions_root)
    if not sessions and not partials:
        raise EvaluationError(f"{sessions_dir}: no session files (*{_SESSION_SUFFIX}) found")
    output_root = Path(output_dir)
    # inside the sessions folder (the default SESSIONS/eval_output), no symlink there is followed
    make_output_dir(output_root, root=sessions_root if is_within(output_root, sessions_root) else None)
    output_path = output_root / OUTPUT_NAME
    done = _prepare_output(output_path, resume=resume)
    jobs = [
        Job(storage.join(location, rel) if remote else str(path), rel)
        for path in sessions
        if (rel := path.relative_to(sessions_root).as_posix()) not in done
    ]
    del done
    errors: Counter[str] = Counter()
    written = not_scored = 0
    flags = {"trust_configs": trust_configs, "complete_only": complete_only, "recorded_only": recorded_only}
    options = {name: True for name, on in flags.items() if on}  # a scorer gets only the flags that are set
    with ExitStack() as stack:
        out = stack.enter_context(open_output(output_path, append=True))
        bar: Progress = stack.enter_context(progress(len(jobs)) if progress and jobs else _NoProgress())
        outcomes: Iterator[Outcome]
        if not jobs:
            outcomes = iter(())
        elif backend == "ray":
            from cdp_integration.evaluate.ray_scoring import ray_outcomes

            ray_jobs = [(job.path, job.rel) for job in jobs]
            outcomes = stack.enter_context(
                ray_outcomes(
                    ray_jobs, score_fn, configs, scorer, options, address=ray_address, workers=workers
                )
            )
        elif workers == 1:
            fn = score_fn or default_score_fn()
            outcomes = (score_one(fn, job, configs, scorer, options) for job in jobs)
        else:
            pool = stack.enter_context(
                _WorkerPool(min(workers, len(jobs)), score_fn, configs, scorer, options)
            )
            outcomes = pool.run(iter(jobs))
        for outcome in outcomes:
            if not outcome.line:  # skipped by the scorer (complete_only and a partial session)
                not_scored += 1
                bar.update(1)
                continue
            out.write(outcome.line)
            out.flush()
            written += 1
            if outcome.error_type is not None:
                errors[outcome.error_type] += 1
            bar.update(1)
    return BatchSummary(
        output_path=output_path,
        found=len(sessions),
        skipped=len(sessions) - len(jobs),
        scored=written,
        failed=sum(errors.values()),
        error_types=dict(errors),
        incomplete=tuple(partials),
        skipped_partial=not_scored,
        workers=workers,
        elapsed_s=time.perf_counter() - started,
    )


def _check_default_scorer(*, import_it: bool) -> None:
    """Fail before any output if the real scorer is missing (workers re-import it themselves)."""
    if import_it:
        default_score_fn()
    elif importlib.util.find_spec(session_line.SCORER_MODULE) is None:
        raise EvaluationError(f"the offline scorer ({session_line.SCORER_MODULE}) is not installed")


def _check_picklable(score_fn: ScoreFn) -> None:
    import pickle

    try:
        pickle.dumps(score_fn)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(
            f"score_fn {score_fn!r} cannot be sent to worker processes ({exc}); "
            "use a module-level function or workers=1"
        ) from None


def _prepare_output(path: Path, *, resume: bool) -> set[str]:
    """Session paths already scored in ``path``; drops a last line cut short by a kill.

    Refuses an ``output.jsonl`` this module did not write (e.g. OpenHands ``run_infer``'s own), so
    an evaluation never overwrites or extends it.
    """
    done: set[str] = set()
    with open_output(path, read=True) as file:
        complete_bytes = 0
        lines = iter_file_lines(file, max_line=SessionLimits.from_env().max_record_bytes, source=str(path))
        for number, line in enumerate(lines, 1):
            if not line.endswith(b"\n"):
                break
            complete_bytes += len(line)
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            metadata = record.get("metadata") if isinstance(record, dict) else None
            rel = metadata.get("session_path") if isinstance(metadata, dict) else None
            if not isinstance(rel, str):
                raise EvaluationError(
                    f"{path}: line {number} was not written by eval_infer (no metadata.session_path); "
                    "choose another output directory"
                )
            if "\0" in rel:
                raise EvaluationError(
                    f"{path}: line {number}: metadata.session_path holds a NUL byte; not a path"
                )
            done.add(rel)
        file.seek(0, os.SEEK_END)
        if not resume:
            file.truncate(0)
            return set()
        if file.tell() > complete_bytes:
            file.truncate(complete_bytes)
    return done


class _NoProgress(AbstractContextManager[Progress]):
    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n_steps: int) -> None:
        return None


def _worker_main(
    conn: Connection,
    score_fn: ScoreFn | None,
    configs: Mapping[int, dict[str, Any]] | None,
    scorer: str | None,
    options: Mapping[str, bool] | None = None,
) -> None:
    """A worker process: import the scorer once, then score one job at a time until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    fn = score_fn
    if fn is None:
        try:
            fn = default_score_fn()
        except EvaluationError as exc:
            fn = functools.partial(_raise, exc)  # every job gets the import error as its result
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        outcome = score_one(fn, Job(*job), configs, scorer, options)
        try:
            conn.send(outcome)
        except OSError:  # the parent is gone
            return


def _raise(error: Exception, *args: Any, **kwargs: Any) -> Mapping[str, Any]:
    raise error


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    job: Job | None = None


class _WorkerPool(AbstractContextManager["_WorkerPool"]):
    """Spawned workers, one job each at a time, so the parent always knows which session a dead
    worker was scoring (``concurrent.futures`` cannot tell: a crash breaks the whole pool)."""

    def __init__(
        self,
        size: int,
        score_fn: ScoreFn | None,
        configs: Mapping[int, dict[str, Any]] | None,
        scorer: str | None,
        options: Mapping[str, bool] | None = None,
    ) -> None:
        # A fork server that has imported the evaluators once: workers start without the ~3 s import.
        self._context = multiprocessing.get_context("forkserver")
        if score_fn is None:
            self._context.set_forkserver_preload(["cdp_integration.evaluate._preload"])
        self._args = (score_fn, dict(configs) if configs is not None else None, scorer, dict(options or {}))
        self._scorer = scorer
        self._workers: list[_Worker] = []
        try:
            for _ in range(size):
                self._workers.append(self._start())
        except BaseException:
            self.__exit__(RuntimeError)
            raise

    def _start(self) -> _Worker:
        parent_end, child_end = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main, args=(child_end, *self._args), name="eval-worker"
        )
        process.start()
        child_end.close()
        return _Worker(process, parent_end)

    def run(self, jobs: Iterator[Job]) -> Iterator[Outcome]:
        """Results in completion order; a worker that dies is replaced and its job recorded as a crash."""
        remaining = True
        while True:
            busy: dict[Connection, tuple[_Worker, Job]] = {}
            for worker in self._workers:
                if worker.job is None and remaining:
                    worker.job = next(jobs, None)
                    remaining = worker.job is not None
                    if worker.job is not None:
                        with contextlib.suppress(OSError):  # a dead worker's pipe reads EOF below
                            worker.conn.send(tuple(worker.job))
                if worker.job is not None:
                    busy[worker.conn] = (worker, worker.job)
            if not busy:
                return
            for conn in multiprocessing.connection.wait(list(busy)):
                worker, job = busy[conn]  # type: ignore[index]
                worker.job = None
                try:
                    outcome: Outcome = worker.conn.recv()
                except (EOFError, OSError):
                    outcome = self._replace_crashed(worker, job)
                yield outcome

    def _replace_crashed(self, worker: _Worker, job: Job) -> Outcome:
        worker.conn.close()
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        self._workers[self._workers.index(worker)] = self._start()
        record = error_record(
            job,
            self._scorer,
            error=f"the worker process {how} while scoring this session",
            error_type=WORKER_CRASH,
            duration_ms=0.0,
        )
        return Outcome(orjson.dumps(record) + b"\n", WORKER_CRASH)

    def __exit__(self, exc_type: object, *rest: object) -> None:
        """Stop idle workers politely; terminate busy ones (an error or Ctrl-C ended the run)."""
        for worker in self._workers:
            if exc_type is None and worker.job is None:
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
            else:
                worker.process.terminate()
        for worker in self._workers:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
