"""The V1 scripted plan: every part of a curated step reaches the tool call with its sites filled in.

A ``fill`` typing ``__GITLAB__/byteblaze/dotfiles`` (task 685) must type the GitLab URL, as V0's
rehearsal does; a placeholder left in a typed text made the success trajectory score 0 live.
"""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))

from sdk_v1 import plan_calls  # noqa: E402  (this directory's own modules)
from task_runner import TaskRun  # noqa: E402

SITES = ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE")
URLS = {site: f"http://{site.lower()}.test:{8000 + n}" for n, site in enumerate(SITES)}
PLACEHOLDER = re.compile(r"__(?:SHOPPING_ADMIN|SHOPPING|REDDIT|GITLAB|WIKIPEDIA|MAP|HOMEPAGE)__")


def _task(config: dict[str, object], plans: dict[str, object]) -> TaskRun:
    return TaskRun(
        task_id=int(config["task_id"]),  # type: ignore[arg-type]
        instance_id=f"webarena.{config['task_id']}",
        env_id=f"browsergym/webarena.{config['task_id']}",
        config=config,
        site_urls=URLS,
        plans=plans,  # type: ignore[arg-type]
        sign_in=lambda site, page: None,
    )


def test_a_typed_url_has_its_site_filled_in() -> None:
    task = _task({"task_id": 685, "sites": ["reddit", "gitlab"], "intent": "x"}, {})
    steps = (
        ("goto", "/submit/aww"),
        ("fill", "#submission_url", "__GITLAB__/byteblaze/dotfiles"),
        ("click", ".submission__inner button"),
        ("answer", "see __REDDIT__/f/aww"),
    )
    calls = plan_calls(steps, task.expand, task.substitute)
    assert calls[0].arguments == {"url": URLS["REDDIT"] + "/submit/aww"}
    assert calls[2].arguments == {"text": URLS["GITLAB"] + "/byteblaze/dotfiles"}
    assert calls[2].selector == "#submission_url"
    assert calls[4].selector == ".submission__inner button"  # CSS's own "__" is not a placeholder
    assert calls[5].arguments == {"message": f"see {URLS['REDDIT']}/f/aww"}


def test_no_curated_trajectory_leaves_a_placeholder_in_a_tool_call() -> None:
    configs = {
        c["task_id"]: c for c in json.loads(resources.files("webarena").joinpath("test.raw.json").read_text())
    }
    curated = json.loads((REPO / "tests" / "standins" / "tasks.json").read_text())
    typed = 0
    for entry in curated:
        task = _task(configs[entry["task_id"]], {})
        for trajectory in ("success", "failure"):
            steps = tuple(tuple(step) for step in entry[trajectory])
            for call in plan_calls(steps, task.expand, task.substitute):
                text = json.dumps(call.arguments)
                assert not PLACEHOLDER.search(text), (entry["task_id"], trajectory, call)
                typed += call.tool == "browser_type"
    assert typed > 80  # the fills are among the calls checked
