"""Sessions recorded in BrowserGym 0.14's ``webarena_verified`` tasks score as BrowserGym rewards them.

BrowserGym's ``WebArenaVerifiedEvaluator`` returns the mean of Verified's evaluator scores (Verified's
own score is all or nothing), and ``cdp-session eval`` routes a session carrying a Verified task config
to Verified without ``--scorer verified``.
"""

from __future__ import annotations

from cdp_integration.evaluate.scoring import is_verified_config
from cdp_integration.evaluate.verified import VerifiedResult, browsergym_reward


def _result(score: float, *scores: float) -> VerifiedResult:
    details = {"evaluators_results": [{"evaluator_name": f"e{i}", "score": s} for i, s in enumerate(scores)]}
    return VerifiedResult(task_id=377, score=score, status="failure", details=details, agent_response={})


def test_the_reward_is_the_mean_of_the_evaluators() -> None:
    assert browsergym_reward(_result(0.0, 1.0, 0.0)) == 0.5
    assert browsergym_reward(_result(1.0, 1.0, 1.0)) == 1.0
    assert browsergym_reward(_result(0.0)) == 0.0  # no evaluator results: Verified's own score


def test_verified_configs_are_told_from_webarena_ones() -> None:
    assert is_verified_config({"eval": [{"evaluator": "AgentResponseEvaluator", "expected": {}}]})
    assert not is_verified_config({"eval": {"eval_types": ["string_match"]}})
    assert not is_verified_config({"eval": []})
    assert not is_verified_config(None)
