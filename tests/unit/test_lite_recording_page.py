"""The recording page subclasses the ``PseudoPage`` the evaluator's beartype hints accept.

WebArena Lite's evaluators (BrowserGym 0.14's ``browsergym.webarenalite``) check ``page`` against their
own copy of ``PseudoPage``; a recording page built on libwebarena's failed their check and broke the
episode's ``validate``.
"""

from __future__ import annotations

from cdp_integration.capture.probes import pseudo_page_module_of


def _evaluator_of(module: str) -> object:
    return type("EvaluatorComb", (), {"__module__": module})()


def test_lite_evaluators_get_lites_pseudo_page() -> None:
    lite = _evaluator_of("browsergym.webarenalite.evaluators")
    assert pseudo_page_module_of(lite) == "browsergym.webarenalite.helper_functions"


def test_other_evaluators_get_libwebarenas_pseudo_page() -> None:
    for module in ("webarena.evaluation_harness.evaluators", "browsergym.webarena_verified.evaluators", "x"):
        assert pseudo_page_module_of(_evaluator_of(module)) == "webarena.evaluation_harness.helper_functions"
