"""WebArena-Verified scores real demo sessions offline: one RETRIEVE, one NAVIGATE, one MUTATE task.

Each task's episode runs in BrowserGym against the demo shop with the logger on, once as a
successful trajectory and once as a failing variant; the session file alone (its HAR entries and
final answer) is then scored with the package's own ``evaluate_task`` and the demo tasks in
``cdp_integration/demo/verified_tasks.json``. The expectations below were checked by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cdp_integration.demo.agent import Episode, run_episode
from cdp_integration.demo.site import DemoSite
from cdp_integration.evaluate.verified import verified_score, verified_score_file
from cdp_integration.session.store import Session, load_session

pytestmark = pytest.mark.integration

_SIGN_IN = (("fill", "#username", "emma"), ("fill", "#password", "emma1234"), ("click", "#login-button"))
_REVIEW = (
    ("fill", "#review-title-input", "Great mug"),
    ("fill", "#review-text-input", "Keeps coffee hot."),
    ("click", "#submit-review"),
    ("answer", "Review posted."),
)


@dataclass(frozen=True)
class Case:
    task_id: int
    task_type: str
    episode: Episode
    answer: str
    """The episode's final answer (read off the page where the step names a selector)."""
    answer_score: float
    trace_scores: tuple[float, ...] = ()
    """Each ``NetworkEventEvaluator``'s score, in the task's order."""
    last_navigation: str | None = None
    """NAVIGATE: the last navigation the evaluator found, its site URL back to the placeholder."""

    @property
    def score(self) -> float:
        return min((self.answer_score, *self.trace_scores))


# Few steps on purpose (each costs a BrowserGym observation); a `goto` stands for typing a URL.
CASES = [
    Case(
        20001,
        "RETRIEVE",
        Episode(
            "verified.20001.success",
            "Search 'mug', open the mug set, answer with its price.",
            (("goto", "/search?q=mug"), ("click", "#results .product-link"), ("answer", "#product-price")),
        ),
        "$24.00",
        answer_score=1.0,
    ),
    Case(
        20001,
        "RETRIEVE",
        Episode(
            "verified.20001.wrong-product",
            "Search 'bottle' instead and answer with the water bottle's price.",
            (("goto", "/search?q=bottle"), ("click", "#results .product-link"), ("answer", "#product-price")),
        ),
        "$19.95",
        answer_score=0.0,
    ),
    Case(
        20002,
        "NAVIGATE",
        Episode(
            "verified.20002.success",
            "Search 'keyboard' and open the keyboard's product page.",
            (("goto", "/search?q=keyboard"), ("click", "#results .product-link"), ("answer", "Here it is.")),
        ),
        "Here it is.",
        answer_score=1.0,
        trace_scores=(1.0,),
        last_navigation="__SHOPPING__/products/11",
    ),
    Case(
        20002,
        "NAVIGATE",
        Episode(
            "verified.20002.stops-at-results",
            "Search 'keyboard' and stop on the results page.",
            (("goto", "/search?q=keyboard"), ("answer", "Here it is.")),
        ),
        "Here it is.",
        answer_score=1.0,
        trace_scores=(0.0,),
        last_navigation="__SHOPPING__/search",
    ),
    Case(
        20003,
        "MUTATE",
        Episode(
            "verified.20003.success",
            "Sign in on the page the product's login link leads to, then post the review.",
            (*_SIGN_IN, *_REVIEW),
            start_path="/login?next=/products/5",
        ),
        "Review posted.",
        answer_score=1.0,
        trace_scores=(1.0, 1.0),
    ),
    Case(
        20003,
        "MUTATE",
        Episode(
            "verified.20003.signed-out",
            "Post the same review without signing in: the shop answers the POST with its sign-in page.",
            _REVIEW,
            start_path="/products/5",
        ),
        "Review posted.",
        # The form sent is right (same POST, same fields, same 302); the redirect goes to sign-in.
        answer_score=1.0,
        trace_scores=(1.0, 0.0),
    ),
]


@pytest.fixture(scope="module")
def sessions(demo_site: DemoSite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Session]:
    """Every case's episode captured once, each from a freshly reset shop."""
    out = tmp_path_factory.mktemp("verified-sessions")
    captured = {}
    for case in CASES:
        task = {"verified_task_id": case.task_id, "site_urls": {"SHOPPING": demo_site.base_url}}
        path = run_episode(
            case.episode, demo_site.base_url, out, logger_options={"task": task}, reset=demo_site.reset
        )
        captured[case.episode.id] = load_session(path)
    demo_site.reset()
    return captured


@pytest.mark.parametrize("case", CASES, ids=[case.episode.id for case in CASES])
def test_verified_scores_demo_session_offline(case: Case, sessions: dict[str, Session]) -> None:
    session = sessions[case.episode.id]
    assert session.final_answer == case.answer

    result = verified_score(session)

    assert result.error is None, result.error
    assert result.task_id == case.task_id
    assert result.agent_response["task_type"] == case.task_type
    assert result.agent_response["status"] == "SUCCESS"
    if case.task_type == "RETRIEVE":
        assert result.agent_response["retrieved_data"] == [case.answer]
    assert (result.score, result.status) == (case.score, "success" if case.score == 1.0 else "failure")

    evaluators = result.details["evaluators_results"]
    assert [r["evaluator_name"] for r in evaluators] == ["AgentResponseEvaluator"] + [
        "NetworkEventEvaluator"
    ] * len(case.trace_scores)
    assert [r["score"] for r in evaluators] == [case.answer_score, *case.trace_scores]
    if case.last_navigation is not None:
        (event,) = evaluators[1]["actual_normalized"]
        assert event["url"]["base_url"] == case.last_navigation
    if case.task_type == "MUTATE":
        (post,) = evaluators[1]["actual_normalized"]
        assert (post["http_method"], post["response_status"]) == ("POST", 302)
        assert post["post_data"] == {"rating": "5", "title": "great mug", "text": "keeps coffee hot."}


def test_session_file_result_for_the_batch(sessions: dict[str, Session], demo_site: DemoSite) -> None:
    """``verified_score_file``: the scorer contract ``eval_infer`` writes one output line from."""
    case = CASES[2]
    session = sessions[case.episode.id]
    assert session.path is not None

    row = verified_score_file(session.path)

    assert {k: row[k] for k in ("instance_id", "task_id", "intent_template_id", "sites", "eval_types")} == {
        "instance_id": case.episode.id,
        "task_id": 20002,
        "intent_template_id": 20002,
        "sites": ["shopping"],
        "eval_types": ["webarena-verified"],
    }
    assert (row["score"], row["error"], row["error_type"]) == (1.0, None, None)
    assert row["answer"] == case.answer
    assert row["live_reward"] == 0.0  # browsergym/openended's own reward, not WebArena-Verified's
    assert [h["index"] for h in row["history"]] == [step.index for step in session.steps]
    assert row["history"][-1]["action"].startswith("send_msg_to_user(")
    assert row["history"][-1]["url"] == f"{demo_site.base_url}/products/11"
