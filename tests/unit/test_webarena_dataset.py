"""``run_infer.py --dataset webarena``'s argument checks and trajectory files (no browser, no OpenHands)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from cdp_integration.errors import EnvironmentSetupError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))

import webarena_dataset  # noqa: E402

STANDIN_TASKS = REPO / "tests" / "standins" / "tasks.json"


def _args(**overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="webarena")
    parser.add_argument("--task-ids", type=int, nargs="*", default=[])
    parser.add_argument("--eval-n-limit", type=int, default=0)
    parser.add_argument("--trajectory", default="success")
    parser.add_argument("--llm-base-url", default=None)
    webarena_dataset.add_arguments(parser)
    args = parser.parse_args([])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def test_the_standins_curated_tasks_are_a_trajectories_file() -> None:
    plans = webarena_dataset.load_trajectories(STANDIN_TASKS)
    assert len(plans) >= 40
    assert all(set(plan) == {"success", "failure"} for plan in plans.values())
    assert plans[27]["success"][0] == ("goto", "__REDDIT__/f/Showerthoughts/new")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "cannot read the trajectories file"),
        ('{"27": []}', "expected a list"),
        ('[{"success": []}]', "no integer task_id"),
        ('[{"task_id": 1, "success": [["fly", "x"]]}]', "task 1 success: expected steps"),
    ],
)
def test_a_malformed_trajectories_file_is_one_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(EnvironmentSetupError, match=message):
        webarena_dataset.load_trajectories(path)


def test_prepare_refuses_before_any_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WEBARENA_BASE_URL", "http://127.0.0.1")
    monkeypatch.delenv("WEBARENA_TRAJECTORIES", raising=False)
    with pytest.raises(EnvironmentSetupError, match=r"needs a model .* or scripted plans"):
        webarena_dataset.WebArenaRun(_args(task_ids=[27])).prepare()
    plans = tmp_path / "plans.json"
    plans.write_text(json.dumps([{"task_id": 27, "success": [["answer", "0"]]}]))
    with pytest.raises(EnvironmentSetupError, match=r"no scripted failure trajectory for task\(s\) 27"):
        webarena_dataset.WebArenaRun(_args(task_ids=[27], trajectories=plans, trajectory="failure")).prepare()


def test_placeholders_in_steps_become_the_deployments_urls() -> None:
    run = webarena_dataset.WebArenaRun(_args())
    run.urls = {"SHOPPING": "http://h:7770", "SHOPPING_ADMIN": "http://h:7780/admin"}
    assert (
        run._expand("__SHOPPING_ADMIN__/sales __SHOPPING__/x") == "http://h:7780/admin/sales http://h:7770/x"
    )
