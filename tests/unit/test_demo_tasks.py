"""The bundled WebArena-format demo tasks: file format, coverage of the official evaluators' features, URL
substitution, and the task class BrowserGym runs (no browser; the live check is scripts/check_demo_tasks.py)."""

from __future__ import annotations

import ast
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.demo import DemoSite
from cdp_integration.demo.tasks import (
    ADMIN_PATH,
    DEMO_ENV_PREFIX,
    DemoTask,
    DemoTaskError,
    DemoWebArenaTask,
    instantiate_config,
    load_demo_tasks,
    register_demo_tasks,
    run_demo_task,
    site_urls,
)
from cdp_integration.environment import WEBARENA_SITES
from cdp_integration.errors import CDPIntegrationError

TASKS = load_demo_tasks()
BASE = "http://127.0.0.1:5555"
SITE_GLOBALS = ("webarena.browser_env.env_config", "webarena.evaluation_harness.helper_functions")


def _webarena_configs() -> list[dict[str, Any]]:
    import webarena

    return json.loads(resources.files(webarena).joinpath("test.raw.json").read_text())


def answers(task: DemoTask) -> dict[str, Any]:
    return task.config["eval"]["reference_answers"] or {}


def targets(task: DemoTask) -> list[dict[str, Any]]:
    return task.config["eval"]["program_html"]


def eval_types(task: DemoTask) -> set[str]:
    return set(task.config["eval"]["eval_types"])


def clicks(task: DemoTask, selector: str) -> bool:
    return ("click", selector) in task.success


def goto_targets(task: DemoTask) -> bool:
    return any(t["url"].startswith("__SHOPPING") for t in targets(task))


FEATURES: dict[str, Callable[[DemoTask], bool]] = {
    "string_match exact_match": lambda t: "exact_match" in answers(t),
    "string_match must_include": lambda t: "must_include" in answers(t),
    "string_match must_include of one character (tokenized)": lambda t: any(
        len(a) == 1 for a in answers(t).get("must_include", [])
    ),
    "string_match fuzzy_match (judge)": lambda t: isinstance(answers(t).get("fuzzy_match"), list),
    "string_match fuzzy_match N/A (judge's ua_match on string_note)": lambda t: (
        answers(t).get("fuzzy_match") == "N/A" and bool(t.config["eval"]["string_note"])
    ),
    "url_match GOLD in PRED": lambda t: (
        "url_match" in eval_types(t) and t.config["eval"]["url_note"] == "GOLD in PRED"
    ),
    "url_match with |OR|": lambda t: " |OR| " in t.config["eval"]["reference_url"],
    "program_html url last": lambda t: any(x["url"] == "last" for x in targets(t)),
    "program_html goto URL": goto_targets,
    "program_html func:shopping_get_latest_order_url()": lambda t: any(
        x["url"] == "func:shopping_get_latest_order_url()" for x in targets(t)
    ),
    "program_html func: URL with __last_url__": lambda t: any(
        x["url"].startswith("func:") and "__last_url__" in x["url"] for x in targets(t)
    ),
    "program_html func: locator latest review author": lambda t: any(
        "func:shopping_get_sku_latest_review_author(" in x["locator"] for x in targets(t)
    ),
    "program_html func: locator latest review rating": lambda t: any(
        "func:shopping_get_sku_latest_review_rating(" in x["locator"] for x in targets(t)
    ),
    "program_html prep_actions": lambda t: any("prep_actions" in x for x in targets(t)),
    "program_html empty locator (page content)": lambda t: any(not x["locator"].strip() for x in targets(t)),
    "program_html required exact_match": lambda t: any(
        "exact_match" in x["required_contents"] for x in targets(t)
    ),
    "program_html required must_include": lambda t: any(
        "must_include" in x["required_contents"] for x in targets(t)
    ),
    "program_html required must_include with |OR|": lambda t: any(
        " |OR| " in c for x in targets(t) for c in x["required_contents"].get("must_include", [])
    ),
    "program_html multiple targets": lambda t: len(targets(t)) >= 2,
    "string_match + url_match": lambda t: eval_types(t) == {"string_match", "url_match"},
    "url_match + program_html": lambda t: eval_types(t) == {"url_match", "program_html"},
    "mutation: review posted, read back through the REST helpers": lambda t: (
        clicks(t, "#submit-review") and FEATURES["program_html func: locator latest review author"](t)
    ),
    "mutation: order placed, read on the latest order's page": lambda t: (
        clicks(t, "#checkout") and FEATURES["program_html func:shopping_get_latest_order_url()"](t)
    ),
    "mutation: admin edit, read on other pages": lambda t: clicks(t, "#save-product") and goto_targets(t),
    "mutation: forum post, read at the post of the last URL": lambda t: (
        clicks(t, "#submit-post") and FEATURES["program_html func: URL with __last_url__"](t)
    ),
}


def test_bundled_file_has_enough_tasks_in_webarena_numbering() -> None:
    assert len(TASKS) >= 40
    ids = [t.task_id for t in TASKS]
    assert len(set(ids)) == len(ids) and min(ids) >= 10000
    per_template = Counter(t.intent_template_id for t in TASKS)
    assert 10 <= len(per_template) <= 14
    assert min(per_template.values()) >= 2  # several instances per template, as in WebArena


@pytest.mark.parametrize("feature", FEATURES)
def test_feature_is_covered(feature: str) -> None:
    assert [t.task_id for t in TASKS if FEATURES[feature](t)], f"no demo task covers {feature}"


def test_configs_follow_the_test_raw_json_schema() -> None:
    shipped = _webarena_configs()
    config_keys = {frozenset(c) for c in shipped}
    eval_keys: dict[tuple[str, ...], set[frozenset[str]]] = {}
    for c in shipped:
        eval_keys.setdefault(tuple(c["eval"]["eval_types"]), set()).add(frozenset(c["eval"]))
    for task in TASKS:
        config = task.config
        assert frozenset(config) in config_keys, task.task_id
        assert frozenset(config["eval"]) in eval_keys[tuple(config["eval"]["eval_types"])], task.task_id
        assert (config["storage_state"], config["geolocation"], config["require_login"]) == (None, None, True)
        values = config["instantiation_dict"]
        intent = re.sub(
            r"\{\{(\w+)\}\}", lambda m, values=values: str(values[m[1]]), config["intent_template"]
        )
        assert config["intent"] == intent, task.task_id
        assert set(config["sites"]) <= {"shopping", "shopping_admin"}
        placeholders = set(re.findall(r"__[A-Z_]+__", json.dumps(config)))
        assert placeholders <= {"__SHOPPING__", "__SHOPPING_ADMIN__"}, task.task_id
        assert task.success != task.failure
        assert task.note


def test_string_tasks_end_with_an_answer_and_others_need_none() -> None:
    for task in TASKS:
        for steps in (task.success, task.failure):
            said = [s for s in steps if s[0] == "answer"]
            if "string_match" in eval_types(task):
                assert steps[-1][0] == "answer", task.task_id
            else:
                assert not said, task.task_id


def test_placeholders_become_demo_urls() -> None:
    urls = site_urls(BASE + "/")
    assert set(urls) == set(WEBARENA_SITES)
    assert urls["SHOPPING"] == BASE and urls["SHOPPING_ADMIN"] == BASE + ADMIN_PATH
    assert {urls[s] for s in WEBARENA_SITES if s != "SHOPPING_ADMIN"} == {BASE}
    for task in TASKS:
        config = instantiate_config(task.config, BASE)
        text = json.dumps(config)
        assert "__SHOPPING" not in text
        assert config["start_url"].startswith(BASE)
        assert task.config["start_url"].startswith("__")  # the input is not modified
        if "__last_url__" in json.dumps(task.config):
            assert "__last_url__" in text  # the evaluator's own placeholder stays for it to fill
    by_id = {t.task_id: instantiate_config(t.config, BASE) for t in TASKS}
    assert by_id[10024]["eval"]["program_html"][1]["url"] == f"{BASE}/admin/products/3/edit"
    assert by_id[10024]["start_url"] == f"{BASE}/admin"
    assert (
        by_id[10017]["eval"]["reference_url"]
        == f"{BASE}/products?category=Office |OR| {BASE}/search?category=Office"
    )


def test_configs_are_valid_for_the_official_evaluator(demo_environment: None, tmp_path: Path) -> None:
    from webarena.evaluation_harness import evaluators

    names = {
        "string_match": "StringEvaluator",
        "url_match": "URLEvaluator",
        "program_html": "HTMLContentEvaluator",
    }
    for task in TASKS:
        path = tmp_path / f"{task.task_id}.json"
        path.write_text(json.dumps(instantiate_config(task.config, BASE)))
        combined = evaluators.evaluator_router(path)
        assert [type(e).__name__ for e in combined.evaluators] == [
            names[t] for t in task.config["eval"]["eval_types"]
        ]
        for target in targets(task):
            locator, url = target["locator"], target["url"]
            assert not locator.strip() or locator.startswith(("document.", "[...document.", "func:")), locator
            assert url == "last" or url.startswith(("__SHOPPING", "func:")), url
            (kind,) = target["required_contents"]
            value = target["required_contents"][kind]
            assert (kind, type(value)) in {("exact_match", str), ("must_include", list)}
            for expression in (e.split("func:", 1)[1] for e in (url, locator) if e.startswith("func:")):
                tree = ast.parse(
                    expression.replace("__last_url__", BASE).replace("__page__", "page"), mode="eval"
                )
                called = {
                    n.func.id
                    for n in ast.walk(tree)
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                }
                assert called and all(hasattr(evaluators, name) for name in called), expression


@pytest.fixture
def demo_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever pointing webarena at the demo changes (variables, module globals, the judge client),
    put back after the test."""
    for site in WEBARENA_SITES:
        monkeypatch.setenv(site, "http://127.0.0.1:9")
        monkeypatch.setenv(f"WA_{site}", "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "demo-judge")
    import webarena.evaluation_harness.helper_functions  # noqa: F401 - imports env_config too
    import webarena.llms.providers.openai_utils as openai_utils

    for module_name in SITE_GLOBALS:
        module = __import__(module_name, fromlist=["_"])
        for site in WEBARENA_SITES:
            if hasattr(module, site):
                monkeypatch.setattr(module, site, getattr(module, site))
    monkeypatch.setattr(openai_utils, "_client", None)
    monkeypatch.setattr(openai_utils, "_aclient", None)
    yield


def test_task_class_uses_demo_urls_and_judge(demo_environment: None) -> None:
    import openai
    import webarena.evaluation_harness.helper_functions as helpers
    import webarena.llms.providers.openai_utils as openai_utils

    openai_utils._client = openai.OpenAI(api_key="x", base_url="http://elsewhere.invalid/v1")
    task = DemoWebArenaTask(
        seed=0, config=next(t for t in TASKS if t.task_id == 10024).config, base_url=BASE + "/"
    )
    assert task.slow_mo == 0
    assert task.task_configs[0]["start_url"] == f"{BASE}/admin"
    assert task.webarena_instance.urls["shopping"] == BASE
    assert task.webarena_instance.urls["shopping_admin"] == BASE + ADMIN_PATH
    assert set(task.webarena_instance.urls.values()) | {task.webarena_instance.home_url} == {
        BASE,
        BASE + ADMIN_PATH,
    }
    assert task.webarena_instance.credentials["shopping"]["username"] == "emma.lopez@gmail.com"
    assert helpers.SHOPPING == BASE and helpers.SHOPPING_ADMIN == BASE + ADMIN_PATH
    assert os.environ["WA_SHOPPING"] == BASE and os.environ["OPENAI_BASE_URL"] == BASE + "/v1"
    assert openai_utils._client is None  # made for another base URL: dropped, so the next call uses the judge


def test_task_class_reads_the_site_from_the_environment(
    demo_environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In OpenHands' browser process only the inherited variables say where the demo site is."""
    monkeypatch.setenv("WA_SHOPPING", "http://127.0.0.1:6001")
    task = DemoWebArenaTask(seed=0, config=TASKS[0].config)
    assert task.task_configs[0]["start_url"] == "http://127.0.0.1:6001"
    monkeypatch.setenv("WA_SHOPPING", "")
    with pytest.raises(DemoTaskError, match="no demo site URL"):
        DemoWebArenaTask(seed=0, config=TASKS[0].config)


def test_register_is_idempotent_and_ids_say_webarena() -> None:
    import gymnasium as gym

    first = register_demo_tasks()
    assert first == register_demo_tasks() == [t.env_id for t in TASKS]
    assert all(i.startswith(DEMO_ENV_PREFIX) and "webarena" in i for i in first)
    assert all(i in gym.registry for i in first)
    assert TASKS[0].env_id == f"browsergym/webarena_demo.{TASKS[0].task_id}"


def test_run_rejects_an_unknown_trajectory_before_starting_anything() -> None:
    with pytest.raises(ValueError, match="trajectory"):
        run_demo_task(TASKS[0], "partial", BASE)  # type: ignore[arg-type]


def _write(tmp_path: Path, entries: object) -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries))
    return path


def _entry(**changes: Any) -> dict[str, Any]:
    raw = json.loads(resources.files("cdp_integration.demo").joinpath("tasks.json").read_text())[0]
    raw["config"] = {**raw["config"], **changes.pop("config", {})}
    return {**raw, **changes}


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("[{", "is not JSON"),
        ({"config": {}}, "expected a list"),
        ([_entry(), _entry()], "appears twice"),
        ([{"success": []}], "expected an object with a 'config'"),
        ([_entry(success=[["hover", "#x"]])], "unknown verb 'hover'"),
        ([_entry(failure=[])], "non-empty list of steps"),
        ([_entry(config={"sites": ["gitlab"]})], "only the sites"),
        ([_entry(config={"task_id": "10000"})], "must be integers"),
        ([_entry(config={"eval": {"eval_types": ["program_html"]}})], "eval must be an object"),
    ],
)
def test_malformed_task_files_raise_one_clear_error(tmp_path: Path, entries: object, message: str) -> None:
    with pytest.raises(DemoTaskError, match=message) as raised:
        load_demo_tasks(_write(tmp_path, entries))
    assert isinstance(raised.value, CDPIntegrationError) and isinstance(raised.value, ValueError)


def test_missing_config_key_is_named(tmp_path: Path) -> None:
    entry = _entry()
    del entry["config"]["intent"]
    with pytest.raises(DemoTaskError, match="task 10000: config lacks intent"):
        load_demo_tasks(_write(tmp_path, [entry]))
    with pytest.raises(DemoTaskError, match="cannot read"):
        load_demo_tasks(tmp_path / "absent.json")


def test_a_user_file_in_the_same_format_loads(tmp_path: Path) -> None:
    entry = _entry(config={"task_id": 20000}, note="mine")
    (task,) = load_demo_tasks(_write(tmp_path, [entry]))
    assert (task.task_id, task.note, task.env_id) == (20000, "mine", "browsergym/webarena_demo.20000")
    assert task.success == tuple(tuple(s) for s in entry["success"])


# --- the scripted answers against the official string evaluator and the demo judge (no browser) ---------


@pytest.fixture
def judged(demo_environment: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An in-process demo site as the LLM judge of the official ``StringEvaluator``."""
    import webarena.evaluation_harness.helper_functions as helpers

    with DemoSite() as site:
        monkeypatch.setenv("OPENAI_BASE_URL", site.base_url + "/v1")
        monkeypatch.setattr(helpers, "SHOPPING", site.base_url)
        yield site.base_url


def _literal_answer(steps: tuple[tuple[str, ...], ...]) -> str | None:
    verb, *args = steps[-1]
    return args[0] if verb == "answer" and not args[0].startswith(("#", ".")) else None


def test_literal_answers_score_as_intended_with_the_official_string_evaluator(
    judged: str, tmp_path: Path
) -> None:
    from webarena.browser_env.actions import ActionTypes
    from webarena.evaluation_harness.evaluators import StringEvaluator

    checked = 0
    for task in TASKS:
        if eval_types(task) != {"string_match"}:
            continue
        path = tmp_path / f"{task.task_id}.json"
        path.write_text(json.dumps(instantiate_config(task.config, judged)))
        for steps, expected in ((task.success, 1.0), (task.failure, 0.0)):
            answer = _literal_answer(steps)
            if answer is None:
                continue
            trajectory = [{}, {"action_type": ActionTypes.STOP, "answer": answer}]
            assert StringEvaluator()(trajectory, path) == expected, (task.task_id, answer)
            checked += 1
    assert checked >= 15
