"""``eval --backend ray``: the sessions of one ``score_directory`` run scored in Ray workers.

Jobs go out in batches (a Ray task costs milliseconds; a session a few) to ``workers`` tasks at a time,
each scoring its batch with ``session_line.score_one``, so a line is the same as a local run's. A session
path may be a storage URL: the worker reads it into a bounded temp copy, whichever node it runs on
(local paths only work where every node sees them). A worker that dies costs its batch a second try,
one session per task; a session whose own task dies again becomes a ``WorkerCrash`` line, as locally.
Outcomes come back in completion order, as the local pool's do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from cdp_integration.cluster import ray_session
from cdp_integration.evaluate.session_line import (
    WORKER_CRASH,
    Job,
    Outcome,
    default_score_fn,
    error_record,
    score_one,
)

__all__ = ["BATCH_SIZE", "ray_outcomes", "score_batch"]

BATCH_SIZE = 32
"""Sessions per Ray task at most: amortizes the task's overhead; a dead worker loses only this many."""
LOCAL_CLUSTER_CPUS = 2


def score_batch(
    jobs: Sequence[tuple[str, str]],
    score_fn: Any,
    configs: Mapping[int, dict[str, Any]] | None,
    scorer: str | None,
    options: Mapping[str, bool],
) -> list[Any]:
    """Score ``jobs`` (``(path or URL, relative path)``) in this worker; ``session_line.Outcome``s."""
    fn = score_fn or _scorer()
    return [tuple(score_one(fn, Job(*job), configs, scorer, options)) for job in jobs]


_SCORER: list[Any] = []


def _scorer() -> Any:
    """The default scorer, imported once per worker process."""
    if not _SCORER:
        _SCORER.append(default_score_fn())
    return _SCORER[0]


def _crash_outcome(job: tuple[str, str], scorer: str | None) -> Any:
    record = error_record(
        Job(*job),
        scorer,
        error="the Ray worker died while scoring this session",
        error_type=WORKER_CRASH,
        duration_ms=0.0,
    )
    return Outcome(orjson.dumps(record) + b"\n", WORKER_CRASH)


@contextlib.contextmanager
def ray_outcomes(
    jobs: Sequence[tuple[str, str]],
    score_fn: Any,
    configs: Mapping[int, dict[str, Any]] | None,
    scorer: str | None,
    options: Mapping[str, bool],
    *,
    address: str | None,
    workers: int,
) -> Iterator[Iterator[Any]]:
    """The outcomes of ``jobs`` as Ray workers finish them; connected while the context is open."""
    with ray_session(address, num_cpus=max(workers, LOCAL_CLUSTER_CPUS)) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(score_batch)
        shared = (ray.put(score_fn), ray.put(dict(configs) if configs is not None else None))
        size = max(1, min(BATCH_SIZE, len(jobs) // (workers * 4) or 1))
        batches = [list(jobs[start : start + size]) for start in range(0, len(jobs), size)]

        def run() -> Iterator[Any]:
            queue = [(batch, False) for batch in batches]
            running: dict[Any, tuple[list[tuple[str, str]], bool]] = {}
            while queue or running:
                while queue and len(running) < workers:
                    batch, retry = queue.pop(0)
                    running[remote.remote(batch, *shared, scorer, dict(options))] = (batch, retry)
                ready, _ = ray.wait(list(running), num_returns=1)
                batch, retry = running.pop(ready[0])
                try:
                    results = ray.get(ready[0])
                except (
                    ray.exceptions.WorkerCrashedError,
                    ray.exceptions.RayActorError,
                    ray.exceptions.NodeDiedError,
                ):
                    if retry:
                        yield from (_crash_outcome(job, scorer) for job in batch)
                    elif len(batch) == 1:
                        queue.insert(0, (batch, True))
                    else:  # one session per task now, to find the one that kills its worker
                        queue[:0] = [([job], False) for job in batch]
                    continue
                yield from (Outcome(*result) for result in results)

        yield run()
