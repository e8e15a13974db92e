"""The browser-use example's scripted LLM: element indexes from browser-use's ``browser_state`` text and
replies that browser-use's own ``AgentOutput`` model accepts (no browser, no server)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "browser_use_demo.py"

# As browser-use 0.11 serializes a demo search-results page for the model.
STATE = """<browser_state>
Interactive elements:
[Start of page]
[36]<a id=nav-products />
\tProducts
[3]<form id=search-form />
\t|SHADOW(open)|[4]<input id=search-input name=q value=speaker placeholder=Search products />
\t|SHADOW(open)|*[5]<select id=search-category name=category options=All categories|Electronics />
[88]<button id=search-button type=submit />
\t\tSearch
1 result
[99]<a />
\tBluetooth Portable Speaker
$45.50
Electronics
[End of page]
</browser_state>"""


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("browser_use_demo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


demo = _example()


@pytest.mark.parametrize(
    ("target", "index"),
    [("Bluetooth Portable Speaker", 99), ("Products", 36), ("id=search-input", 4), ("id=search-category", 5)],
)
def test_element_index_finds_the_element(target: str, index: int) -> None:
    assert demo.element_index(STATE, target) == index


@pytest.mark.parametrize("target", ["Electronics", "Speaker", "id=add-to-cart"])
def test_element_index_refuses_what_is_not_an_element_label(target: str) -> None:
    """An option of a select, or a text line not right under an element, is no element's label."""
    with pytest.raises(demo.PlanError):
        demo.element_index(STATE, target)


def test_replies_are_agent_output_browser_use_accepts() -> None:
    from cdp_integration.integrations.browser_use import import_browser_use

    import_browser_use()  # removes the directories its import leaves in /tmp
    from browser_use.agent.views import AgentOutput
    from browser_use.tools.service import Tools

    model = AgentOutput.type_with_custom_actions(Tools().registry.create_action_model())
    llm = demo.ScriptedAgentLLM("http://127.0.0.1:9")
    llm.plan = [
        ["navigate", "/search?q=speaker"],
        ["click", "Bluetooth Portable Speaker"],
        ["done", "Added."],
    ]
    request = {"messages": [{"role": "user", "content": [{"type": "text", "text": STATE}]}]}
    replies = [model.model_validate_json(llm.reply(request)) for _ in range(4)]

    actions = [reply.action[0].model_dump(exclude_none=True) for reply in replies]
    assert actions[0] == {"navigate": {"url": "http://127.0.0.1:9/search?q=speaker", "new_tab": False}}
    assert actions[1] == {"click": {"index": 99}}
    assert actions[2]["done"]["text"] == "Added." and actions[2]["done"]["success"] is True
    assert actions[3]["done"]["success"] is False  # past the plan's end: a failing, explained stop
    assert "only 3 steps" in actions[3]["done"]["text"]


def test_plans_cover_every_kind_of_task() -> None:
    from cdp_integration.demo.tasks import load_demo_tasks

    plans = demo.load_plans()
    kinds = {t.task_id: t.config["eval"]["eval_types"] for t in load_demo_tasks() if t.task_id in plans}
    assert len(kinds) == len(plans)  # every plan is a demo task
    assert {tuple(kind) for kind in kinds.values()} == {
        ("program_html",),
        ("string_match",),
        ("url_match",),
        ("string_match", "url_match"),
    }
    assert all(set(plan) == {"success", "failure"} for plan in plans.values())
    json.dumps(plans)
