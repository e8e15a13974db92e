"""WebArena-Verified scoring without a browser: the answer adapter's rules, task and site-URL
resolution, and the package's real ``evaluate_task`` over sessions built in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from webarena_verified.types.task import WebArenaVerifiedTask

from cdp_integration.errors import EvaluationError
from cdp_integration.evaluate.verified import (
    DEMO_TASKS_FILE,
    adapt_answer,
    verified_score,
    verified_score_file,
    verified_task,
)
from cdp_integration.session import (
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    SessionEnd,
    SessionWriter,
    Step,
    new_header,
)
from cdp_integration.session.store import Session

SHOP = "http://shop.test:7770"
_NAVIGATION_HEADERS = {
    "accept": "text/html,application/xhtml+xml",
    "sec-fetch-dest": "document",
    "sec-fetch-mode": "navigate",
    "sec-fetch-user": "?1",
}


def make_task(
    task_type: str, status: str = "SUCCESS", items: dict[str, Any] | None = None
) -> WebArenaVerifiedTask:
    """A one-evaluator task of ``task_type`` expecting ``status`` (RETRIEVE items per ``items``)."""
    retrieve = task_type == "RETRIEVE" and status == "SUCCESS"
    schema = {"type": "array", "items": items or {"type": "string"}} if retrieve else {"type": "null"}
    return WebArenaVerifiedTask.model_validate(
        {
            "sites": ["shopping"],
            "task_id": 1,
            "intent_template_id": 1,
            "start_urls": ["__SHOPPING__"],
            "intent": "x",
            "intent_template": "x",
            "instantiation_dict": {},
            "eval": [
                {
                    "evaluator": "AgentResponseEvaluator",
                    "results_schema": schema,
                    "expected": {
                        "task_type": task_type,
                        "status": status,
                        "retrieved_data": ["x"] if retrieve else None,
                    },
                }
            ],
            "revision": 1,
        }
    )


def response(
    task_type: str, status: str, data: list[Any] | None = None, details: str | None = None
) -> dict[str, Any]:
    return {"task_type": task_type, "status": status, "retrieved_data": data, "error_details": details}


# -- the adapter: status and type ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_type", "answer", "expected"),
    [
        ("NAVIGATE", "Here is the page.", response("NAVIGATE", "SUCCESS")),
        ("MUTATE", "done", response("MUTATE", "SUCCESS")),
        ("NAVIGATE", None, response("NAVIGATE", "SUCCESS")),
        ("MUTATE", "   ", response("MUTATE", "SUCCESS")),
        ("RETRIEVE", None, response("RETRIEVE", "UNKNOWN_ERROR", details="no final answer")),
        ("RETRIEVE", "$24.00", response("RETRIEVE", "SUCCESS", ["$24.00"])),
        ("RETRIEVE", "N/A", response("RETRIEVE", "NOT_FOUND_ERROR")),
        ("RETRIEVE", "n / a.", response("RETRIEVE", "NOT_FOUND_ERROR")),
        (
            "MUTATE",
            "N/A: the shop has no such order",
            response("MUTATE", "NOT_FOUND_ERROR", details="the shop has no such order"),
        ),
        (
            "NAVIGATE",
            "PERMISSION_DENIED_ERROR - not an admin",
            response("NAVIGATE", "PERMISSION_DENIED_ERROR", details="not an admin"),
        ),
        ("RETRIEVE", "data_validation_error", response("RETRIEVE", "DATA_VALIDATION_ERROR")),
    ],
)
def test_free_text_status_and_type(task_type: str, answer: str | None, expected: dict[str, Any]) -> None:
    assert adapt_answer(answer, make_task(task_type)) == expected


def test_na_takes_the_unachievable_status_the_task_expects() -> None:
    # Free-text "N/A" cannot say which kind of unachievable; WebArena counted it right for all kinds.
    assert (
        adapt_answer("N/A", make_task("MUTATE", "ACTION_NOT_ALLOWED_ERROR"))["status"]
        == "ACTION_NOT_ALLOWED_ERROR"
    )
    assert (
        adapt_answer("NA", make_task("RETRIEVE", "PERMISSION_DENIED_ERROR"))["status"]
        == "PERMISSION_DENIED_ERROR"
    )
    # A status the agent names is taken as said, whatever the task expects.
    named = adapt_answer("NOT_FOUND_ERROR", make_task("MUTATE", "ACTION_NOT_ALLOWED_ERROR"))
    assert named["status"] == "NOT_FOUND_ERROR"
    # And a word that merely starts like N/A is an answer.
    assert adapt_answer("Nathan", make_task("RETRIEVE")) == response("RETRIEVE", "SUCCESS", ["Nathan"])


# -- the adapter: RETRIEVE items by the task's expected type ---------------------------------------


@pytest.mark.parametrize(
    ("items", "answer", "data"),
    [
        (
            {"type": "string"},
            "Catso, Dibbins, Anglebert Dinkherhump",
            ["Catso", "Dibbins", "Anglebert Dinkherhump"],
        ),
        ({"type": "string"}, "- Catso\n- **Dibbins**", ["Catso", "Dibbins"]),
        ({"type": "string"}, 'Reviewers:\n1. Catso\n2) "Dibbins".', ["Catso", "Dibbins"]),
        ({"type": "string"}, "Catso\nDibbins\n", ["Catso", "Dibbins"]),
        (
            {"type": "string"},
            "Bornbridge Tree (2 Pack, 4' Cypress), Yoga Mat",
            ["Bornbridge Tree (2 Pack, 4' Cypress)", "Yoga Mat"],
        ),
        ({"type": "string"}, "The mug set.", ["The mug set"]),
        ({"type": "number", "format": "currency"}, "$1,234.50, $20", ["$1,234.50", "$20"]),
        ({"type": "number"}, "3", ["3"]),
        ({"type": "boolean"}, "Yes", ["Yes"]),
        ({"type": "string", "format": "date"}, "March 2, 2022", ["March 2, 2022"]),
        (
            {"type": "string", "format": "date"},
            "March 2, 2022; April 3, 2022",
            ["March 2, 2022", "April 3, 2022"],
        ),
        ({"type": "string", "format": "location-name"}, "Pittsburgh, PA", ["Pittsburgh, PA"]),
        ({"type": "object", "properties": {"name": {"type": "string"}}}, "a, b", ["a, b"]),
        ({"type": "object"}, '{"order_count": 0, "amount": 0}', [{"order_count": 0, "amount": 0}]),
        ({"type": "number"}, "[1, 2.5]", [1, 2.5]),
        ({"type": "string"}, '```json\n["Catso", "Dibbins"]\n```', ["Catso", "Dibbins"]),
    ],
)
def test_retrieve_answers_split_by_expected_item_type(
    items: dict[str, Any], answer: str, data: list[Any]
) -> None:
    assert adapt_answer(answer, make_task("RETRIEVE", items=items)) == response("RETRIEVE", "SUCCESS", data)


# -- the adapter: structured answers ---------------------------------------------------------------


def test_structured_json_is_validated_and_kept_as_given() -> None:
    task = make_task("RETRIEVE")
    fenced = 'Final:\n```json\n{"task_type": "retrieve", "status": "success", "retrieved_data": [24]}\n```'
    assert adapt_answer(fenced, task) == response("RETRIEVE", "SUCCESS", [24])
    # The agent's own claims are scored as given, even when they contradict the task.
    plain = '{"performed_operation": "NAVIGATE", "status": "NOT_FOUND_ERROR", "error_details": "gone"}'
    assert adapt_answer(plain, task) == response("NAVIGATE", "NOT_FOUND_ERROR", details="gone")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            '{"task_type": "RETRIEVE", "status": "DONE"}',
            "final answer is not a valid WebArena-Verified response: status:",
        ),
        (
            '{"task_type": "RETRIEVE", "status": "SUCCESS",',
            "looks like a WebArena-Verified response but is not valid JSON",
        ),
        ('```json\n{"task_type": RETRIEVE}\n```', "is not valid JSON"),
        ('{"status": "SUCCESS", "retrieved_data": ["x"]}', "task_type: Field required"),
        ('{"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": [[1]]}', "retrieved_data.0"),
    ],
)
def test_invalid_structured_answer_is_a_one_line_evaluation_error(answer: str, message: str) -> None:
    with pytest.raises(EvaluationError) as caught:
        adapt_answer(answer, make_task("RETRIEVE"))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_json_that_is_not_a_response_is_free_text() -> None:
    task = make_task("NAVIGATE")
    assert adapt_answer("{not json at all", task) == response("NAVIGATE", "SUCCESS")


# -- sessions built in memory, scored by the real evaluate_task ----------------------------------


def exchange(
    method: str, url: str, *, status: int = 200, post: str | None = None, referer: str | None = None
) -> NetworkExchange:
    headers = dict(_NAVIGATION_HEADERS)
    if referer is not None:
        headers["referer"] = referer
    if post is not None:
        headers["content-type"] = "application/x-www-form-urlencoded"
    return NetworkExchange(
        request_id=f"{method}{url}",
        tab_id="T1",
        started=1.0,
        request=RequestInfo(
            method=method, url=url, headers=headers, post_data=post, resource_type="Document"
        ),
        response=ResponseInfo(status=status, mime_type="text/html"),
    )


def in_memory(
    network: list[NetworkExchange], *, answer: str | None, task: dict[str, Any], reward: float | None = None
) -> Session:
    """A one-step session whose step saw ``network`` and whose episode ended with ``answer``."""
    url = network[-1].request.url if network else f"{SHOP}/"
    step = Step(
        index=0,
        trigger="action",
        action="noop()",
        timestamp=1.0,
        url=url,
        title="",
        tabs=[],
        network=network,
        reward=reward,
    )
    end = SessionEnd(ended=2.0, instance_id="unit.verified", final_answer=answer)
    return Session(header=new_header(instance_id="unit.verified", task=task), steps=(step,), end=end)


KEYBOARD = [exchange("GET", f"{SHOP}/search?q=keyboard"), exchange("GET", f"{SHOP}/products/11")]


def test_site_placeholder_maps_to_the_sessions_site_url() -> None:
    # The header's URL has a trailing slash; the task says __SHOPPING__/products/11.
    session = in_memory(
        KEYBOARD, answer="here", task={"verified_task_id": 20002, "site_urls": {"shopping": SHOP + "/"}}
    )
    result = verified_score(session)
    assert (result.score, result.status, result.error) == (1.0, "success", None)
    (network,) = [
        r for r in result.details["evaluators_results"] if r["evaluator_name"] == "NetworkEventEvaluator"
    ]
    assert network["actual_normalized"][0]["url"]["base_url"] == "__SHOPPING__/products/11"

    # The same traffic under another site URL is not the expected page.
    elsewhere = in_memory(
        KEYBOARD, answer="here", task={"verified_task_id": 20002, "site_urls": {"SHOPPING": "http://other:1"}}
    )
    assert verified_score(elsewhere).score == 0.0


def test_live_evaluator_traffic_is_not_the_agents_last_navigation() -> None:
    # During BrowserGym's validate(), WebArena's evaluator opened a page of its own after the agent's.
    probe = exchange("GET", f"{SHOP}/orders").model_copy(update={"origin": "evaluator"})
    task = {"verified_task_id": 20002, "site_urls": {"SHOPPING": SHOP}}
    session = in_memory([*KEYBOARD, probe], answer=None, task=task)
    assert verified_score(session).score == 1.0
    assert verified_score(session, include_evaluator_traffic=True).score == 0.0


def test_site_url_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    session = in_memory(KEYBOARD, answer=None, task={"verified_task_id": 20002})
    monkeypatch.delenv("SHOPPING", raising=False)
    monkeypatch.setenv("WA_SHOPPING", SHOP)
    assert verified_score(session).score == 1.0
    monkeypatch.delenv("WA_SHOPPING")
    with pytest.raises(
        EvaluationError, match=r"no URL for site shopping: .*--site-url shopping=URL \(or WA_SHOPPING\)"
    ):
        verified_score(session)


def test_mutate_task_reads_the_posted_form() -> None:
    def review(title: str, *, then: str) -> list[NetworkExchange]:
        form = f"rating=5&nickname=Emma&title={title}&text=Keeps+coffee+hot."
        page = f"{SHOP}/products/5"
        return [
            exchange("POST", f"{page}/reviews", status=302, post=form, referer=page),
            exchange("GET", SHOP + then, referer=page),
        ]

    task = {"verified_task_id": 20003, "site_urls": {"SHOPPING": SHOP}}
    signed_in = verified_score(in_memory(review("Great+mug", then="/products/5"), answer="done", task=task))
    assert signed_in.score == 1.0
    wrong_title = verified_score(in_memory(review("Great+cup", then="/products/5"), answer="done", task=task))
    assert [r["score"] for r in wrong_title.details["evaluators_results"]] == [1.0, 0.0, 1.0]
    # The right form, but the shop sent the visitor to sign in instead of back to the product.
    signed_out = in_memory(review("Great+mug", then="/login?next=/products/5"), answer="done", task=task)
    assert [r["score"] for r in verified_score(signed_out).details["evaluators_results"]] == [1.0, 1.0, 0.0]


def test_retrieve_scores_without_any_traffic() -> None:
    task = {"verified_task_id": 20001, "site_urls": {"SHOPPING": SHOP}}
    right = verified_score(in_memory([], answer="$24.00", task=task))
    assert (right.score, right.agent_response["retrieved_data"]) == (1.0, ["$24.00"])
    assert verified_score(in_memory([], answer="N/A", task=task)).score == 0.0


# -- which task, from where ----------------------------------------------------------------------


def test_task_id_from_argument_then_header() -> None:
    header_task = {"verified_task_id": 20002, "task_id": 20001, "site_urls": {"SHOPPING": SHOP}}
    session = in_memory(KEYBOARD, answer="here", task=header_task)
    assert verified_score(session).task_id == 20002  # verified_task_id wins over WebArena's task_id
    assert verified_score(session, 20001).task_id == 20001
    webarena_only = in_memory(
        KEYBOARD, answer="$24", task={"task_id": 20001, "site_urls": {"SHOPPING": SHOP}}
    )
    assert verified_score(webarena_only).task_id == 20001

    with pytest.raises(EvaluationError, match="no WebArena-Verified task id"):
        verified_score(in_memory(KEYBOARD, answer=None, task={}))
    with pytest.raises(EvaluationError, match="is not a task id"):
        verified_score(in_memory(KEYBOARD, answer=None, task={"verified_task_id": "twenty"}))
    with pytest.raises(EvaluationError, match="task 99999 is not a WebArena-Verified task") as raised:
        verified_score(session, 99999)
    assert "--scorer webarena" in str(raised.value) and "--configs FILE" in str(raised.value)


def test_dataset_and_demo_tasks() -> None:
    assert verified_task(159).intent.startswith("Go to the product page")  # the package's dataset
    demo = json.loads(DEMO_TASKS_FILE.read_text())
    kinds = {task["eval"][0]["expected"]["task_type"] for task in demo}
    assert kinds == {"retrieve", "navigate", "mutate"}
    for task in demo:
        assert task["task_id"] > 811  # clear of the dataset's ids
        assert verified_task(task["task_id"]).task_id == task["task_id"]


def test_custom_tasks_file(tmp_path: Path) -> None:
    own = json.loads(DEMO_TASKS_FILE.read_text())[1]
    own["task_id"], own["eval"][1]["expected"]["url"] = 31, "__SHOPPING__/search?q=keyboard"
    tasks_file = tmp_path / "tasks.json"
    tasks_file.write_text(json.dumps([own]))
    session = in_memory(KEYBOARD[:1], answer=None, task={"site_urls": {"SHOPPING": SHOP}})
    # Task 31 of the dataset is another task; the file's own definition is the one scored.
    assert verified_score(session, 31, tasks_file=tasks_file).score == 1.0
    with pytest.raises(EvaluationError, match=r"task 20002 is not in .*tasks\.json"):
        verified_score(session, 20002, tasks_file=tasks_file)

    bad = tmp_path / "bad.json"
    for content, message in (
        ("[]", "non-empty JSON list"),
        ('[{"task_id": "1"}]', "integer task_id"),
        ('[{"task_id": 1}, {"task_id": 1}]', "duplicate task_id 1"),
        (json.dumps([{**own, "eval": []}]), "Failed to parse task with id 31"),
        ("{", "not a JSON file"),
    ):
        bad.write_text(content)
        with pytest.raises(EvaluationError) as caught:
            verified_score(session, 31, tasks_file=bad)
        assert message in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(EvaluationError, match="cannot read tasks file"):
        verified_score(session, 31, tasks_file=tmp_path / "missing.json")


# -- the batch scorer's result dict ------------------------------------------------------------------


def write_session(path: Path, session: Session) -> Path:
    writer = SessionWriter(path.with_name(path.name + ".partial"), session.header)
    for step in session.steps:
        writer.write_step(step)
    assert session.end is not None
    return writer.finish(session.end, path)


def test_verified_score_file_row(tmp_path: Path) -> None:
    task = {"verified_task_id": 20002, "site_urls": {"SHOPPING": SHOP}}
    path = write_session(
        tmp_path / "s.session.jsonl.gz", in_memory(KEYBOARD, answer="here", task=task, reward=0.0)
    )

    row = verified_score_file(path)

    assert row == {
        "instance_id": "unit.verified",
        "task_id": 20002,
        "intent_template_id": 20002,
        "sites": ["shopping"],
        "eval_types": ["webarena-verified"],
        "score": 1.0,
        "max_score": None,
        "live_reward": 0.0,
        "live_max": 0.0,
        "answer": "here",
        "history": [{"index": 0, "action": "noop()", "url": f"{SHOP}/products/11"}],
        "error": None,
        "error_type": None,
        "duration_ms": row["duration_ms"],
        "partial": False,
        "provenance": None,  # imported sessions say imported:<format>
        "checks": row["checks"],
        "attribution": None,
    }
    assert [(c["comparison"], c["passed"]) for c in row["checks"]] == [
        ("AgentResponseEvaluator", True),
        ("NetworkEventEvaluator", True),
    ]
    assert row["checks"][1]["source"] == {
        "kind": "har_event",
        "step": 0,
        "url": f"{SHOP}/products/11",
        "provenance": "recorded",
    }
    assert row["duration_ms"] > 0
    json.dumps(row)

    # configs: a definition in WebArena-Verified's format is scored as given; WebArena's are ignored.
    own = json.loads(DEMO_TASKS_FILE.read_text())[1]
    own["eval"][1]["expected"]["url"] = "__SHOPPING__/search?q=keyboard"
    assert verified_score_file(path, {20002: own})["score"] == 0.0
    webarena_config = {"task_id": 20002, "eval": {"eval_types": ["url_match"]}}
    assert verified_score_file(path, {20002: webarena_config})["score"] == 1.0

    unscoreable = write_session(tmp_path / "u.session.jsonl.gz", in_memory(KEYBOARD, answer=None, task={}))
    with pytest.raises(EvaluationError, match="no WebArena-Verified task id"):
        verified_score_file(unscoreable)
