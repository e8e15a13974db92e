"""``task_runner.run_tasks``: the one loop both SDKs' drivers run (resume, reset, lines, failures).

The driver here plays no browser: the loop around it is what is tested (each SDK's real driver is
run end to end by ``test_openhands.py``, ``test_openhands_v1.py`` and the WebArena tests).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdp_integration.errors import DemoTaskError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))

from task_runner import Episode, PlayEpisode, TaskRun, run_tasks  # noqa: E402


def _task(task_id: int, site: str, events: list[str], *, fail_reset: bool = False) -> TaskRun:
    def reset() -> float | None:
        events.append(f"reset {task_id}")
        if fail_reset:
            raise DemoTaskError(f"reset of {task_id} failed")
        return 1.5 if site == "reddit" else None

    return TaskRun(
        task_id=task_id,
        instance_id=f"webarena.{task_id}",
        env_id=f"browsergym/webarena.{task_id}",
        config={"task_id": task_id, "sites": [site], "intent": f"task {task_id}"},
        site_urls={},
        plans={},
        sign_in=lambda site, page: None,
        reset=reset,
        changes_sites=site == "reddit",
    )


def _run(output_dir: Path, tasks: list[TaskRun], events: list[str], workers: int = 1) -> Path:
    @contextlib.contextmanager
    def source() -> Iterator[list[TaskRun]]:
        yield tasks

    @contextlib.contextmanager
    def driver(home: Path) -> Iterator[PlayEpisode]:
        def play(task: TaskRun, number: int) -> Episode:
            events.append(f"play {task.task_id} in {threading.current_thread().name}")
            session = output_dir / "sessions" / f"{task.instance_id}.session.jsonl.gz"
            session.parent.mkdir(exist_ok=True)
            session.write_bytes(b"")
            return Episode(
                instruction=task.intent,
                plan=["p"],
                history=[],
                metrics={},
                error=None,
                rewards=[0.0, 1.0],
                session=session,
                result={"answer": "a"},
                timing={"phases": {"agent_s": 1}},
                reset_s=2.0 if task.task_id == 404 else None,
            )

        yield play

    return run_tasks(output_dir, source, driver, metadata={"dataset": "webarena"}, workers=workers)


def test_a_resumed_run_skips_what_output_jsonl_has_and_writes_one_line_per_task(tmp_path: Path) -> None:
    events: list[str] = []
    (tmp_path / "output.jsonl").write_text(json.dumps({"instance_id": "webarena.27"}) + "\n")
    tasks = [_task(27, "reddit", events), _task(377, "map", events), _task(404, "reddit", events)]
    output = _run(tmp_path, tasks, events)
    assert events == ["reset 377", "play 377 in MainThread", "reset 404", "play 404 in MainThread"]
    lines = [json.loads(text) for text in output.read_text().splitlines()]
    assert [line["instance_id"] for line in lines] == ["webarena.27", "webarena.377", "webarena.404"]
    line = lines[2]
    assert line["instruction"] == "task 404" and line["instance"]["plan"] == ["p"]
    assert line["test_result"] == {
        "reward": 1.0,
        "rewards": [0.0, 1.0],
        "answer": "a",
        "session": "sessions/webarena.404.session.jsonl.gz",
    }
    assert line["metadata"]["dataset"] == "webarena" and line["metadata"]["phases"] == {"agent_s": 1}
    assert line["metadata"]["reset_s"] == 3.5  # the loop's reset and the episode's own
    assert lines[1]["metadata"]["reset_s"] is None
    assert json.loads((tmp_path / "metadata.json").read_text()) == {"dataset": "webarena"}


def test_a_failed_reset_stops_the_run_after_the_lines_before_it(tmp_path: Path) -> None:
    events: list[str] = []
    tasks = [
        _task(27, "reddit", events),
        _task(377, "map", events, fail_reset=True),
        _task(404, "reddit", events),
    ]
    with pytest.raises(DemoTaskError, match="reset of 377 failed"):
        _run(tmp_path, tasks, events)
    assert [json.loads(t)["instance_id"] for t in (tmp_path / "output.jsonl").read_text().splitlines()] == [
        "webarena.27"
    ]
    assert "reset 404" not in events


def test_workers_play_every_task_once_each_with_a_driver_of_its_own(tmp_path: Path) -> None:
    events: list[str] = []
    tasks = [_task(n, site, events) for n, site in enumerate(["map", "gitlab", "reddit", "reddit", "map"])]
    output = _run(tmp_path, tasks, events, workers=2)
    played = sorted(int(e.split()[1]) for e in events if e.startswith("play"))
    assert played == [0, 1, 2, 3, 4]
    assert all("MainThread" not in e for e in events if e.startswith("play"))
    assert sorted(json.loads(t)["instance"]["task_id"] for t in output.read_text().splitlines()) == played


def test_site_names_on_one_server_are_scheduled_as_one() -> None:
    """The demo's sites are all the one shop (shopping_admin is a path of it): a task that changes
    it never runs beside another demo task. Distinct servers stay distinct; an unknown URL counts
    by the site's name."""
    from cdp_integration.demo.tasks import site_urls

    demo = _task(1, "shopping", [])
    demo.site_urls = site_urls("http://127.0.0.1:8000")
    admin = _task(2, "shopping_admin", [])
    admin.site_urls = demo.site_urls
    assert demo.servers == admin.servers == ("http://127.0.0.1:8000",)
    both = _task(3, "shopping", [])
    both.config["sites"] = ["shopping", "shopping_admin", "map"]
    both.site_urls = {"SHOPPING": "http://h:7770", "SHOPPING_ADMIN": "http://h:7780/admin"}
    assert both.servers == ("http://h:7770", "http://h:7780", "map")
