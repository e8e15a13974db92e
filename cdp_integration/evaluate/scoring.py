"""Score a captured episode offline with the official WebArena evaluator, as BrowserGym scores it live.

Live, BrowserGym's ``GenericWebArenaTask.validate(page, chat_messages)`` runs after every step: it
checks that every open tab is on a WebArena site, builds a two-item trajectory from the last chat
message, and calls the evaluator built by libwebarena's ``evaluator_router``. Offline we call that
same ``validate`` method, unmodified, with a ``MockPage`` of the captured step in place of the live
page and with the evaluator's recorded HTTP answers (REST helpers, LLM judge) replayed. Its fixed
3 s waits are skipped and its site globals point at the URLs the episode ran against
(``cdp_integration.webarena``).

Two numbers per episode: ``score`` (WebArena's own definition: the evaluation of the final state)
and ``max_score`` (BrowserGym/OpenHands: the best per-step reward).

Provenance: every score says where its answers came from. ``recorded``: the step has the live
evaluator's recording and every question was answered from it; ``reconstructed``: nothing was
recorded for the step (captured without the task's config), every answer came from the captured
state; ``mixed``: recorded, but some questions (an edited config) were answered from captured pages;
``imported:<format>``: the session was imported from another tool's recording (``cdp-session import``),
every answer comes from what that format holds.
``recorded_only=True`` turns any reconstructed answer into a ``ReconstructedAnswerError``.

Every score carries its checks: the official evaluators' own comparisons, recorded as they run
(``evaluate.explain``), and a 0 its failure class.
"""

from __future__ import annotations

import contextlib
import functools
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cdp_integration import environment
from cdp_integration.deployment import known_site_urls
from cdp_integration.errors import (
    CDPIntegrationError,
    EvaluationError,
    ReconstructedAnswerError,
    ReplayMissError,
)
from cdp_integration.evaluate.explain import (
    STATE_EVALUATORS,
    Asked,
    CheckRecorder,
    attribute,
    record_webarena_checks,
    webarena_wrappers,
)
from cdp_integration.imports.common import imported_gap, imported_provenance
from cdp_integration.replay.page import MockBrowserContext
from cdp_integration.replay.recorded import replay_http
from cdp_integration.session.models import Evaluation
from cdp_integration.session.store import Session, load_session
from cdp_integration.session.untrusted import ascii_int
from cdp_integration.webarena import (
    guard_evaluator_eval,
    offline_api_key,
    skip_evaluator_sleep,
    substitute_placeholders,
    use_site_urls,
    vet_config,
    webarena_config_file,
)

__all__ = [
    "PROVENANCES",
    "SessionScore",
    "StepScore",
    "evaluate_session",
    "evaluate_step",
    "score_session_file",
    "session_config",
]


PROVENANCES = ("recorded", "reconstructed", "mixed")


def combined_provenance(values: list[str]) -> str:
    """One provenance for several scored steps: the common one, else ``mixed``."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else "mixed"


@dataclass(frozen=True)
class StepScore:
    step: int
    score: float | None
    live_reward: float | None
    source: str
    """``recorded``: the live evaluator's recorded answers; ``captured``: no recording, the captured
    DOM answered."""
    error: str | None = None
    provenance: str = "recorded"
    """``recorded``, ``reconstructed`` or ``mixed`` (see the module docstring)."""
    answers: dict[str, int] = field(default_factory=dict)
    """Questions answered from the recording / reconstructed from captured pages."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    """The official evaluators' comparisons at this step (``evaluate.explain``); they combine to ``score``."""


@dataclass(frozen=True)
class SessionScore:
    instance_id: str | None
    task_id: int | None
    intent_template_id: int | None
    sites: list[str]
    eval_types: list[str]
    score: float | None
    max_score: float | None
    live_reward: float | None
    live_max: float | None
    answer: str | None
    history: list[dict[str, Any]]
    steps: list[StepScore] = field(default_factory=list)
    error: str | None = None
    error_type: str | None = None
    duration_ms: float = 0.0
    partial: bool = False
    """The session has no end record (the episode never finished saving, or the file was cut):
    ``score`` is that of its last readable step, which may not be the episode's final state."""
    note: str | None = None
    provenance: str | None = None
    """Where the answers behind ``score`` and ``max_score`` came from: ``recorded``,
    ``reconstructed`` or ``mixed``."""
    answers: dict[str, int] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    """The final state's checks (``evaluate.explain``): they combine to ``score``."""
    attribution: dict[str, Any] | None = None
    """Why ``score`` is 0: ``{"class", "reason", "check", "step", "evidence", "rerun", "timeline"}``
    (``evaluate.explain.attribute``); None otherwise."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LITE_ENV_PREFIX = "browsergym/webarenalite."


def is_verified_config(config: Any) -> bool:
    """Whether ``config`` is a task in WebArena-Verified's format (its ``eval`` lists evaluators)."""
    evals = config.get("eval") if isinstance(config, Mapping) else None
    return (
        isinstance(evals, list)
        and bool(evals)
        and all(isinstance(e, dict) and "evaluator" in e for e in evals)
    )


def site_urls(session: Session) -> dict[str, str]:
    """The sites' URLs for scoring ``session``: those its header recorded (the episode ran there), and for
    any site it does not name, the environment's (``WA_<SITE>``, ``WEBARENA_BASE_URL``, ``--site-url``)."""
    urls = session.task.get("site_urls")
    recorded = {str(k).upper(): str(v) for k, v in urls.items()} if isinstance(urls, dict) else {}
    return {**known_site_urls(), **recorded}


def session_config(session: Session, config: Mapping[str, Any] | str | Path | None = None) -> dict[str, Any]:
    """The task's WebArena config: ``config`` (dict or JSON file) or the one the session recorded,
    with URL placeholders replaced by the sites the episode ran against."""
    given = (
        str(config)
        if isinstance(config, str | Path)
        else ("the config passed" if config is not None else None)
    )
    if isinstance(config, str | Path):
        from cdp_integration.session.limits import SessionLimits
        from cdp_integration.session.untrusted import read_json

        limits = SessionLimits.from_env()
        try:
            config = read_json(
                config, limits=limits, max_bytes=limits.max_input_bytes, what="WebArena config"
            )
        except ValueError as exc:
            raise EvaluationError(f"cannot read WebArena config {config}: {exc}") from None
    if given is not None and (not isinstance(config, Mapping) or not isinstance(config.get("eval"), Mapping)):
        raise EvaluationError(
            f'{given} is not a WebArena task config: it has no "eval" object (a task\'s config, as in '
            "config_files/<id>.json, not an answers or results file)"
        )
    if config is None:
        config = session.task.get("config")
    if not isinstance(config, Mapping) or not isinstance(config.get("eval"), Mapping):
        raise EvaluationError(
            f"{session.path or 'session'}: no WebArena task config (none recorded in the session; pass one)"
        )
    where = f"{session.path or 'session'}: the config"
    result: dict[str, Any] = substitute_placeholders(config, site_urls(session), where=where)
    return result


def _chat_messages(evaluation: Evaluation | None, final_answer: str | None) -> list[dict[str, str]]:
    """The chat BrowserGym's ``validate`` saw, rebuilt from what was recorded of it."""
    if evaluation is not None and evaluation.chat_role is not None:
        message = evaluation.answer if evaluation.action_type == "STOP" else ""
        return [{"role": evaluation.chat_role, "message": message or ""}]
    if evaluation is not None and evaluation.action_type == "STOP":
        return [{"role": "assistant", "message": evaluation.answer or ""}]
    if evaluation is None and final_answer is not None:
        return [{"role": "assistant", "message": final_answer}]
    return [{"role": "user", "message": ""}]


def _webarena_task(config_file: str, urls: Mapping[str, str], tab_urls: list[str]) -> Any:
    """A BrowserGym ``GenericWebArenaTask`` ready to ``validate``, without its live set-up."""
    from browsergym.webarena.task import GenericWebArenaTask
    from webarena.evaluation_harness.evaluators import evaluator_router

    task = GenericWebArenaTask.__new__(GenericWebArenaTask)
    if urls:
        sites = {name.lower(): url for name, url in urls.items() if name != "HOMEPAGE"}
        home = urls.get("HOMEPAGE", "")
    else:  # sites unknown: authorize what was open, so the tab safeguard cannot misfire
        sites = {f"tab{i}": url for i, url in enumerate(tab_urls)}
        home = ""
    task.webarena_instance = types.SimpleNamespace(urls=sites, home_url=home)
    task.config_file = config_file
    task.evaluator = evaluator_router(config_file)
    return task


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _check_sites_are_the_episodes(
    session: Session, urls: Mapping[str, str], tab_urls: Sequence[str], step: int
) -> None:
    """BrowserGym's tab safeguard scored 0: loud instead when that 0 says nothing about the episode.

    A session that records no site URLs is checked against the environment's (``WA_<SITE>``,
    ``--site-url``); when no tab is on any of them, they are another deployment's, not a tab the
    agent left the sites with.
    """
    if isinstance(session.task.get("site_urls"), dict) and session.task["site_urls"]:
        return
    sites = {_origin(url) for url in urls.values() if url}
    if sites and not any(_origin(url) in sites for url in tab_urls):
        raise ReplayMissError(
            f"step {step}: no tab is on the sites the environment names ({', '.join(sorted(sites))[:200]}) "
            "and the session records none of its own; give the sites it ran on with --site-url "
            "(or WA_<SITE>)"
        )


def current_tab_questions(config: Mapping[str, Any]) -> list[str]:
    """What in ``config`` asks the agent's current tab: url_match, and program_html targets on the url
    ``last`` or whose url or locator reads the page (``__last_url__``, ``__page__``)."""
    evaluation = config.get("eval") or {}
    asked = ["url_match"] if "url_match" in (evaluation.get("eval_types") or []) else []
    for target in evaluation.get("program_html") or []:
        if not isinstance(target, Mapping):
            continue
        url, locator = str(target.get("url") or ""), str(target.get("locator") or "")
        if url == "last" or "__last_url__" in url or "__page__" in url or "__page__" in locator:
            asked.append(f"program_html on {url!r}")
    return asked


def _check_current_tab_known(context: MockBrowserContext, config: Mapping[str, Any]) -> None:
    """A step whose capture could not tell which of several tabs the agent was on cannot answer a
    question about the current tab: loud, never the first tab's answer."""
    step = context.step
    agent_tabs = len(step.tabs)
    if step.current_tab_source != "unknown" or agent_tabs < 2:
        return
    asked = current_tab_questions(config)
    if asked:
        raise ReplayMissError(
            f"step {step.index}: {agent_tabs} tabs were open and the capture could not tell which one the agent "
            f"was on (no harness said, and none was opened, navigated or acted in since the logger attached), "
            f"so {', '.join(asked)} cannot be answered; capture with attach_to_page(..., current_page=...) or "
            "mark_current_page()"
        )


def _page_urls(context: MockBrowserContext) -> list[str]:
    """Every URL the replayed page of ``context`` can report (``page.url``): tabs and recorded answers."""
    urls = [page.url for page in context.pages]
    if context.evaluation is not None:
        urls += [c.result for c in context.evaluation.calls if c.op == "url" and isinstance(c.result, str)]
        urls += [c.url for c in context.evaluation.calls]
    return urls


def evaluate_step(
    session: Session,
    step: int,
    config: Mapping[str, Any] | None = None,
    *,
    trust_configs: bool = False,
    recorded_only: bool = False,
) -> StepScore:
    """Replay BrowserGym's ``validate`` at ``step`` offline; raise ``ReplayMissError`` on a gap
    (``ReconstructedAnswerError`` with ``recorded_only`` when an answer was not recorded live).

    ``trust_configs``: ``config`` (not one embedded in the session) was written by the caller, so its
    ``func:`` expressions may be any Python; otherwise only official helper calls run
    (``webarena.vet_config``), and a config that asks for more is an ``UntrustedConfigError``.
    """
    _prepare_once()
    if str(session.task.get("env_id") or "").startswith(_LITE_ENV_PREFIX):
        raise EvaluationError(
            f"{session.path or 'session'}: recorded in a WebArena Lite task, whose live evaluators are WebArena "
            "Lite's own modified copy; offline scoring with them is not supported (libwebarena's could differ)"
        )
    trusted = trust_configs and config is not None
    config = session_config(session, config)
    context = MockBrowserContext(session, step, recorded_only=recorded_only)
    evaluation = context.evaluation
    if recorded_only and evaluation is None:
        raise ReconstructedAnswerError(
            f"step {context.step.index}: the live evaluator's answers were not recorded at this step (captured "
            "without the task's config); recorded-only scoring refuses to reconstruct them"
        )
    page = context.active_page
    _check_current_tab_known(context, config)
    gap = imported_gap(session.header.options, list(config["eval"].get("eval_types") or []))
    if gap and session._is_last(step):
        raise ReplayMissError(f"step {context.step.index}: {gap}")
    vet_config(config, page_urls=_page_urls(context), trusted=trusted)
    chat = _chat_messages(evaluation, session.answer_at(step))
    urls = site_urls(session)
    imported = imported_provenance(session.header.options)
    recorder = CheckRecorder(
        step=context.step.index,
        provenance="recorded" if evaluation is not None else "reconstructed",
        journal=context.journal,
        imported=imported,
    )
    with (
        contextlib.closing(context),  # hands its sandbox pages back for the next session to reuse
        use_site_urls(urls),
        skip_evaluator_sleep(),
        offline_api_key(),
        guard_evaluator_eval(config, trusted=trusted),
        webarena_config_file(config) as config_file,
        replay_http(evaluation.http if evaluation else ()) as http,
        record_webarena_checks(recorder),
    ):
        tab_urls = [p.url for p in context.pages]
        task = _webarena_task(config_file, urls, tab_urls)
        try:
            score, _done, _message, info = task.validate(page, chat)
        except Exception:
            # A question the session could not answer made the evaluator raise (the LLM judge's client
            # raises on the refused call; BrowserGym does not catch it): the miss, not the exception.
            if not (context.misses or http.misses):
                raise
            raise ReplayMissError(
                f"step {context.step.index}: " + "; ".join([*context.misses, *http.misses][:3])
            ) from None
    if isinstance(info, dict) and "Unauthorized" in str(info.get("error")):
        _check_sites_are_the_episodes(session, urls, tab_urls, context.step.index)
        recorder.tab_safeguard(info, tab_urls)
    misses = context.misses + http.misses
    if misses:
        kind = ReconstructedAnswerError if recorded_only and context.misses else ReplayMissError
        raise kind(f"step {context.step.index}: " + "; ".join(misses[:3]))
    if evaluation is None:
        provenance = "reconstructed"
    else:
        provenance = "mixed" if context.answers["reconstructed"] else "recorded"
    provenance = imported or provenance
    return StepScore(
        step=context.step.index,
        score=float(score),
        live_reward=context.step.reward,
        source="recorded" if evaluation is not None else "captured",
        error=info.get("error") if isinstance(info, dict) else None,
        provenance=provenance,
        answers=dict(context.answers),
        checks=[check.to_dict() for check in recorder.checks],
    )


@functools.cache
def _prepare_once() -> None:
    """The environment the evaluator modules need, checked once per process (not once per step)."""
    environment.prepare()


def _history(session: Session) -> list[dict[str, Any]]:
    return [{"index": s.index, "action": s.action, "url": s.url} for s in session.steps]


def _live_score(session: Session, final_evaluation: Evaluation | None) -> float | None:
    """The live score of the final state: BrowserGym's last reward, else the end probe's score
    (agents driven without BrowserGym: attached pages, browser-use, OpenHands V1)."""
    if session.final_step.reward is not None:
        return session.final_step.reward
    if final_evaluation is not None and final_evaluation.kind == "probe":
        return final_evaluation.score
    return None


def evaluate_session(
    session: Session,
    config: Mapping[str, Any] | str | Path | None = None,
    *,
    per_step: bool = True,
    trust_configs: bool = False,
    recorded_only: bool = False,
) -> SessionScore:
    """Score ``session`` offline: the final state, and (``per_step``) every step BrowserGym validated.

    A session whose end record is missing (``partial``) is scored on its last readable step.
    ``trust_configs``: see ``evaluate_step``; it never applies to the config the session carries.
    ``recorded_only``: every answer must come from the live evaluator's recording, else
    ``ReconstructedAnswerError`` naming the question.
    """
    started = time.perf_counter()
    trusted = trust_configs and config is not None
    resolved = session_config(session, config)
    if not session.steps:
        raise EvaluationError(f"{session.path or 'session'}: has no captured steps to score")
    _prepare_once()  # the evaluator modules need it before the wrappers import them
    with webarena_wrappers():
        final = evaluate_step(session, -1, resolved, trust_configs=trusted, recorded_only=recorded_only)
        steps = [final]
        if per_step:
            steps = [
                evaluate_step(session, s.index, resolved, trust_configs=trusted, recorded_only=recorded_only)
                for s in session.steps[:-1]
                if s.evaluation is not None
            ]
            steps.append(final)
        asked = _ask_failed_checks(
            session, resolved, final, steps, trusted=trusted, recorded_only=recorded_only
        )
    recorded = [s.score for s in steps if s.score is not None and (s.source == "recorded" or s is final)]
    live = [r for r in (session.end.rewards if session.end else []) if r is not None] or [
        s.reward for s in session.steps if s.reward is not None
    ]
    final_evaluation = session.evaluation_at(-1)
    return SessionScore(
        instance_id=session.instance_id,
        task_id=resolved.get("task_id"),
        intent_template_id=resolved.get("intent_template_id"),
        sites=list(resolved.get("sites") or []),
        eval_types=list(resolved["eval"].get("eval_types") or []),
        score=final.score,
        max_score=max(recorded) if recorded else None,
        live_reward=_live_score(session, final_evaluation),
        live_max=max(live) if live else None,
        answer=final_evaluation.answer if final_evaluation else session.final_answer,
        history=_history(session),
        steps=steps,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        partial=not session.complete,
        note=None
        if session.complete
        else f"partial session (no end record): scored its last readable step {session.final_step.index}",
        provenance=combined_provenance([s.provenance for s in steps]),
        answers={kind: sum(s.answers.get(kind, 0) for s in steps) for kind in ("recorded", "reconstructed")},
        checks=final.checks,
        attribution=attribute(session, final.score, final.checks, asked),
    )


def _ask_failed_checks(
    session: Session,
    config: Mapping[str, Any],
    final: StepScore,
    scored: Sequence[StepScore],
    *,
    trusted: bool,
    recorded_only: bool,
) -> Asked:
    """The failed state checks of a 0 (url_match, program_html) asked again at every step: the steps
    already scored give their checks; every other step is scored as ``cdp-session eval-at`` scores it
    (so a user can ask again). A step that cannot answer gives why (a replay miss), never a guess."""
    asked: dict[int, list[dict[str, Any]] | str] = {s.step: s.checks for s in scored}
    failed = [c for c in final.checks if not c["passed"] and c["evaluator"] in STATE_EVALUATORS]
    if final.score != 0.0 or not failed:
        return asked
    for step in session.steps:
        if step.index in asked:
            continue
        try:
            result = evaluate_step(
                session, step.index, config, trust_configs=trusted, recorded_only=recorded_only
            )
        except ReplayMissError as exc:
            asked[step.index] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        except Exception as exc:  # the final state was scored; one earlier step failing leaves it unknown
            asked[step.index] = (
                f"the evaluator raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            )
            continue
        asked[step.index] = result.checks
    return asked


def score_session_file(
    path: str | Path,
    configs: Mapping[int, Mapping[str, Any]] | None = None,
    *,
    scorer: str = "webarena",
    trust_configs: bool = False,
    complete_only: bool = False,
    recorded_only: bool = False,
) -> dict[str, Any]:
    """Load and score one session file; a JSON-able dict (``SessionScore`` fields).

    ``configs``: WebArena configs by task id, used when the session did not record its own;
    ``trust_configs``: those configs were written by the caller (see ``evaluate_step``).
    ``complete_only``: a session without its end record is not scored; the dict then holds
    ``skipped`` (the reason), ``partial`` and ``instance_id`` only.
    Unscoreable sessions raise ``CDPIntegrationError`` subclasses; the batch runner records them.
    """
    if scorer not in ("webarena", "verified"):
        raise EvaluationError(f"unknown scorer {scorer!r} (webarena or verified)")
    session = load_session(path) if scorer == "webarena" or complete_only else None
    if complete_only and session is not None and not session.complete:
        return {
            "instance_id": session.instance_id,
            "partial": True,
            "skipped": "partial session (no end record)",
        }
    if scorer == "verified":
        from cdp_integration.evaluate.verified import verified_score_file

        return verified_score_file(Path(path), {k: dict(v) for k, v in (configs or {}).items()})
    session = session or load_session(path)
    if is_verified_config(session.task.get("config")):
        # recorded in a ``webarena_verified`` task (BrowserGym 0.14): its live evaluator is Verified
        from cdp_integration.evaluate.verified import verified_score_file

        return verified_score_file(Path(path), {k: dict(v) for k, v in (configs or {}).items()})
    config: Mapping[str, Any] | None = None
    task_id = session.task.get("task_id")
    number = task_id if isinstance(task_id, int) and not isinstance(task_id, bool) else None
    if isinstance(task_id, str):
        number = ascii_int(task_id)
    if configs and number is not None:
        config = configs.get(number)
    try:
        return evaluate_session(
            session, config, trust_configs=trust_configs, recorded_only=recorded_only
        ).to_dict()
    except CDPIntegrationError:
        raise
    except Exception as exc:  # the evaluator itself failed on this episode
        raise EvaluationError(f"{path}: the evaluator raised {type(exc).__name__}: {exc}") from exc
