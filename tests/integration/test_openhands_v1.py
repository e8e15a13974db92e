"""OpenHands V1: ``run_infer.py --sdk v1`` (openhands-sdk ``Agent``, openhands-tools' browser tool over
browser-use, all unmodified) on our Chromium, captured over CDP, then ``eval_infer.py`` offline.

The run is in the V1 environment, ``.venv-v1`` (current openhands-sdk / openhands-tools, built by
``scripts/setup.sh`` from ``evaluation/benchmarks/webarena/v1env``); this test and ``eval_infer.py``
run in the V0 one. Three demo tasks, one per evaluator kind: string_match (10000), url_match
(10014), program_html whose evaluator opens another URL than the agent's last page (10036:
``/cart``). (The added tools are played on real task ids: ``test_webarena_v1.py``.) The scripted LLM plays each
task's success trajectory, then its failure trajectory, as native tool calls; the live score is the
official evaluator's one run on the final state (the session's probe), and offline scoring of the
saved session must give the same number. Every process the run starts carries a marker variable and
none may outlive it; its private ``HOME``/``TMPDIR`` stay empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from cdp_integration import environment
from cdp_integration.har.export import session_to_har
from cdp_integration.session.store import load_session
from tests.integration.test_openhands import MARKER, wait_for_no_marked_processes

environment.prepare()

from webarena_verified.types.tracing import NetworkTrace  # noqa: E402

from cdp_integration.demo.job import DemoEpisode  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:grpcio:FutureWarning")]

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "evaluation" / "benchmarks" / "webarena"
TASKS = {10000: "string_match", 10014: "url_match", 10036: "program_html"}
V1_PYTHON = REPO / ".venv-v1" / "bin" / "python"
"""The V1 environment's interpreter (``scripts/setup.sh``)."""
V1_RELEASE = "1.58."
"""The openhands-sdk / openhands-tools release line the V1 environment locks."""
SKU = "DS-HK-003"
"""Task 10000's reference answer (the skillet's SKU)."""


@dataclass
class V1Run:
    trajectory: str
    expected: float
    output: Path
    environ: dict[str, str]
    lines: dict[str, dict[str, Any]]


TRAJECTORIES = [("success", 1.0)] + (
    [("failure", 0.0)] if os.environ.get("CDP_TEST_OPENHANDS_FULL") == "1" else []
)
"""``make test`` plays the succeeding trajectory; ``make test-openhands`` the failing one too."""


@pytest.fixture(scope="module", params=TRAJECTORIES, ids=[name for name, _ in TRAJECTORIES])
def v1_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> V1Run:
    """``run_infer.py --sdk v1`` on the three tasks, one trajectory; checks the machine is left as found."""
    trajectory, expected = request.param
    tmp_path = tmp_path_factory.mktemp(f"v1-{trajectory}")
    output, home, tmp = tmp_path / "run", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    marker = uuid.uuid4().hex
    server_url = Path("/tmp/oh-server-url")
    server_url_before = server_url.read_bytes() if server_url.exists() else None
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WEBARENA_CDP_")} | {
        "HOME": str(home),
        "TMPDIR": str(tmp),
        MARKER: marker,
    }
    assert V1_PYTHON.exists(), "no V1 environment: run scripts/setup.sh"
    started = time.perf_counter()
    run = subprocess.run(
        [
            str(V1_PYTHON),
            str(SCRIPTS / "run_infer.py"),
            "--sdk",
            "v1",
            "--output-dir",
            str(output),
            "--trajectory",
            trajectory,
            "--task-ids",
            *map(str, TASKS),
        ],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(f"\nrun_infer --sdk v1 ({trajectory}, {len(TASKS)} tasks): {time.perf_counter() - started:.1f} s")
    assert run.returncode == 0, run.stderr[-3000:]
    assert wait_for_no_marked_processes(marker) == []
    assert (server_url.read_bytes() if server_url.exists() else None) == server_url_before
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    lines = [json.loads(text) for text in (output / "output.jsonl").read_text().splitlines()]
    return V1Run(trajectory, expected, output, environ, {line["instance_id"]: line for line in lines})


def test_run_infer_sdk_v1_then_eval_infer(v1_run: V1Run) -> None:
    """Each task's agent, captured steps and answer; then offline score == the live probe's score."""
    output, lines, expected, trajectory = v1_run.output, v1_run.lines, v1_run.expected, v1_run.trajectory
    lines = {
        json.loads(text)["instance_id"]: json.loads(text)
        for text in (output / "output.jsonl").read_text().splitlines()
    }
    assert sorted(lines) == sorted(f"webarena_demo.{task_id}" for task_id in TASKS)
    live: dict[str, float | None] = {}
    for instance_id, line in lines.items():
        assert line["error"] is None and line["metadata"]["sdk"] == "v1"
        versions = line["metadata"]["sdk_versions"]
        assert versions["openhands-sdk"].startswith(V1_RELEASE), versions
        assert versions["openhands-tools"].startswith(V1_RELEASE), versions
        tools = [entry["tool"] for entry in line["history"]]
        assert tools == line["instance"]["plan"] and tools[-1] == "finish"
        session = load_session(output / line["test_result"]["session"])
        assert session.complete and session.end is not None and session.end.probe is not None
        browser_calls = [tool for tool in tools if tool.startswith("browser_")]
        assert [step.trigger for step in session.steps] == ["reset"] + ["action"] * len(browser_calls)
        assert [step.action.split("(")[0] for step in session.steps[1:] if step.action] == browser_calls
        for number, step in enumerate(session.steps[1:]):  # the model's thought and call, with its result
            reasoning = step.reasoning
            assert reasoning is not None and reasoning.source == "openhands-v1", (instance_id, step.index)
            assert reasoning.tool_calls[-1].name == browser_calls[number]
            assert reasoning.tool_calls[-1].result, (instance_id, step.index)
            assert f": {browser_calls[number]}." in (reasoning.thought or ""), reasoning.thought
        live[instance_id] = session.end.probe.score
        assert live[instance_id] == line["test_result"]["reward"] == expected, instance_id
        assert session.end.final_answer == line["test_result"]["answer"]
    if trajectory == "success":
        assert lines["webarena_demo.10000"]["test_result"]["answer"] == SKU
    cart = load_session(output / lines["webarena_demo.10036"]["test_result"]["session"]).end
    assert cart is not None and cart.probe is not None
    assert [page.url.rsplit("/", 1)[-1] for page in cart.probe.pages] == ["cart"]  # the goto target

    started = time.perf_counter()
    scored = subprocess.run(
        [sys.executable, str(SCRIPTS / "eval_infer.py"), str(output), "--no-progress"],
        env=v1_run.environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"eval_infer ({trajectory}): {time.perf_counter() - started:.1f} s")
    assert scored.returncode == 0, scored.stderr[-3000:]
    results = [json.loads(t) for t in (output / "eval_output" / "output.jsonl").read_text().splitlines()]
    offline = {result["instance_id"]: result["test_result"]["score"] for result in results}
    assert offline == live


def _navigations(session_path: Path, har_path: Path) -> list[tuple[str, str, int]]:
    """WebArena-Verified's navigation events of the session's HAR, as (method, path?query, status)."""
    har_path.write_text(json.dumps(session_to_har(load_session(session_path))))
    keys = []
    for event in NetworkTrace.from_har(har_path).events:
        if event.is_navigation_event:
            url = urlsplit(event.url)
            keys.append(
                (event.http_method, url.path + (f"?{url.query}" if url.query else ""), event.request_status)
            )
    return keys


def test_navigation_events_match_the_browsergym_capture(
    v1_run: V1Run, demo_corpus: list[DemoEpisode], tmp_path: Path
) -> None:
    """The same trajectory played in BrowserGym (V0's browser) with the logger (the shared demo
    corpus): same navigation events."""
    for task_id in TASKS:
        (episode,) = [e for e in demo_corpus if (e.task_id, e.trajectory) == (task_id, v1_run.trajectory)]
        browsergym = _navigations(episode.session, tmp_path / f"{task_id}-bg.har")
        line = v1_run.lines[f"webarena_demo.{task_id}"]
        v1 = _navigations(v1_run.output / line["test_result"]["session"], tmp_path / f"{task_id}-v1.har")
        assert v1 == browsergym and v1, task_id
