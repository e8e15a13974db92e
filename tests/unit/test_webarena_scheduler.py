"""``--num-workers``: a task that changes a site never runs beside another task on that site."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evaluation" / "benchmarks" / "webarena"))

from scheduler import SiteScheduler

TASKS = [
    ("r1", ("reddit",), False),
    ("m1", ("reddit", "gitlab"), True),
    ("r2", ("reddit",), False),
    ("r3", ("gitlab",), False),
    ("m2", ("shopping",), True),
    ("r4", ("shopping",), False),
    ("r5", ("map", "wikipedia"), False),
    ("m3", ("gitlab",), True),
]


def _run(workers: int) -> tuple[list[str], list[tuple[str, str]]]:
    scheduler = SiteScheduler(TASKS, sites=lambda t: t[1], exclusive=lambda t: t[2])
    running: dict[str, tuple[str, ...]] = {}
    lock = threading.Lock()
    order: list[str] = []
    clashes: list[tuple[str, str]] = []

    def worker() -> None:
        while (task := scheduler.next()) is not None:
            name, sites, exclusive = task
            with lock:
                for other, (other_sites, other_exclusive) in running.items():
                    if set(sites) & set(other_sites) and (exclusive or other_exclusive):
                        clashes.append((name, other))
                running[name] = (sites, exclusive)
                order.append(name)
            time.sleep(0.01)
            with lock:
                del running[name]
            scheduler.done(task)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return order, clashes


def test_one_worker_runs_the_tasks_in_order() -> None:
    assert _run(1) == ([t[0] for t in TASKS], [])


def test_many_workers_run_every_task_once_and_never_a_changing_task_beside_another_on_its_site() -> None:
    for workers in (2, 3, 8):
        order, clashes = _run(workers)
        assert sorted(order) == sorted(t[0] for t in TASKS) and clashes == []


def test_read_only_tasks_share_a_site() -> None:
    scheduler = SiteScheduler(TASKS[:1] + TASKS[2:3], sites=lambda t: t[1], exclusive=lambda t: t[2])
    first, second = scheduler.next(), scheduler.next()  # both handed out while neither is done
    assert first is not None and second is not None and scheduler.next() is None


def test_a_waiting_changing_task_holds_back_later_readers_of_its_sites() -> None:
    scheduler = SiteScheduler(TASKS[:3], sites=lambda t: t[1], exclusive=lambda t: t[2])
    first = scheduler.next()
    assert first is not None and first[0] == "r1"
    got: list[str] = []
    thread = threading.Thread(target=lambda: got.append(scheduler.next()[0]))  # type: ignore[index]
    thread.start()
    thread.join(timeout=0.3)
    assert got == []  # r2 would fit beside r1, but m1 (before it) waits for reddit
    scheduler.done(first)
    thread.join(timeout=10)
    assert got == ["m1"]
