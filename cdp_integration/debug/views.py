"""Per-step views of a session as plain frozen records: the rows the CLI, the stepper and the viewer show.

Each view is computed here once; the three faces only format it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urldefrag

if TYPE_CHECKING:
    from cdp_integration.session.models import Evaluation, FormControlState, NetworkExchange, Step
    from cdp_integration.session.store import Session

__all__ = [
    "EvaluationSummary",
    "FormRow",
    "RequestRow",
    "StepSummary",
    "control_label",
    "end_evaluation",
    "evaluation_of",
    "form_row",
    "form_rows",
    "offline_checks",
    "step_requests",
    "step_summaries",
    "step_summary",
    "task_text",
]


def task_text(session: Session) -> str:
    """What the agent was asked: the goal, else the WebArena config's intent, else the description."""
    task = session.task
    config = task.get("config")
    intent = config.get("intent") if isinstance(config, dict) else None
    for value in (task.get("goal"), intent, task.get("description")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


@dataclass(frozen=True)
class RequestRow:
    """One request/response hop, as a table row."""

    step: int
    method: str
    url: str
    status: int | None
    """``None``: no response arrived (failed, or still pending when the step was captured)."""
    resource_type: str
    duration_ms: float
    """``-1`` when unknown."""
    mime_type: str = ""
    error: str | None = None
    origin: str = "agent"
    tab_id: str | None = None
    redirect_url: str | None = None

    @property
    def status_label(self) -> str:
        if self.status is not None:
            return str(self.status)
        return self.error or "-"

    @property
    def time_label(self) -> str:
        return f"{self.duration_ms:.0f} ms" if self.duration_ms >= 0 else "-"


def _request_row(exchange: NetworkExchange, step: int) -> RequestRow:
    response = exchange.response
    return RequestRow(
        step=step,
        method=exchange.request.method,
        url=exchange.request.url,
        status=response.status if response else None,
        resource_type=exchange.request.resource_type,
        duration_ms=exchange.duration_ms,
        mime_type=response.mime_type if response else "",
        error=exchange.error,
        origin=exchange.origin,
        tab_id=exchange.tab_id,
        redirect_url=(response.redirect_url or response.headers.get("location")) if response else None,
    )


def step_requests(session: Session, step: int) -> tuple[RequestRow, ...]:
    """The traffic captured with ``step`` (made since the previous step), in capture order."""
    index = session.step(step).index
    return tuple(_request_row(exchange, index) for exchange in session.network_at(step))


@dataclass(frozen=True)
class EvaluationSummary:
    """An evaluator's verdict on a step: the recorded evaluator run, or else the live reward."""

    score: float | None
    source: str
    """``validate`` / ``probe`` (a recorded run of the official evaluator) or ``reward`` (the env's)."""
    answer: str | None = None
    error: str | None = None
    calls: int = 0
    """Questions the evaluator asked of the page (recorded for offline replay)."""
    action_type: str | None = None
    """``STOP`` when the agent had sent its final message; else BrowserGym compared a placeholder."""

    @property
    def answer_label(self) -> str:
        """The answer in words (``answer_words``): a placeholder is never shown as if the agent said it."""
        from cdp_integration.evaluate.explain import answer_words

        return answer_words(self.answer, stopped=self.action_type == "STOP")

    @property
    def label(self) -> str:
        score = "-" if self.score is None else f"{self.score:g}"
        return f"{score} ({self.error})" if self.error else score


def _summarize_evaluation(evaluation: Evaluation) -> EvaluationSummary:
    return EvaluationSummary(
        score=evaluation.score,
        source=evaluation.kind,
        answer=evaluation.answer,
        error=evaluation.error,
        calls=len(evaluation.calls),
        action_type=evaluation.action_type,
    )


def evaluation_of(step: Step) -> EvaluationSummary | None:
    """The step's recorded evaluator run if any, else its live reward, else ``None``."""
    if step.evaluation is not None:
        return _summarize_evaluation(step.evaluation)
    if step.reward is not None:
        return EvaluationSummary(score=step.reward, source="reward")
    return None


def offline_checks(session: Session, index: int) -> str | None:
    """The official evaluator's checks at step ``index`` scored offline, as text; None when the step
    is not one an evaluator scored (no recorded run, not the last step) or the task has no config."""
    from cdp_integration.errors import CDPIntegrationError
    from cdp_integration.evaluate.explain import format_checks
    from cdp_integration.evaluate.scoring import evaluate_step

    step = session.steps[index]
    if step.evaluation is None and index != len(session.steps) - 1:
        return None
    config = session.task.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("eval"), dict):
        return None
    try:
        scored = evaluate_step(session, index)
    except CDPIntegrationError as exc:
        return f"checks: cannot score offline: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    except Exception as exc:  # the evaluator itself failed on this step
        return f"checks: the evaluator raised {type(exc).__name__}: {exc}"
    return f"offline score {scored.score:g} ({scored.provenance})\n" + format_checks(scored.checks)


def end_evaluation(session: Session) -> EvaluationSummary | None:
    """The end-of-episode evaluator run on the final state, when one was recorded."""
    if session.end is None or session.end.probe is None:
        return None
    return _summarize_evaluation(session.end.probe)


@dataclass(frozen=True)
class StepSummary:
    """One row of the step table."""

    index: int
    trigger: str
    action: str | None
    url: str
    title: str
    document_status: str
    """The main document's status at this step, redirect hops joined by ``→`` (``-``: no navigation)."""
    requests: int
    capture_ms: float
    faults: tuple[str, ...]
    evaluation: EvaluationSummary | None
    tabs: int
    has_screenshot: bool

    @property
    def label(self) -> str:
        """The action, or the trigger when the step had no action (``reset``)."""
        return self.action or self.trigger


def _same_page(a: str, b: str) -> bool:
    return urldefrag(a).url == urldefrag(b).url


def _document_status(step: Step, exchanges: Iterable[NetworkExchange]) -> str:
    tab = step.active_tab
    documents = [
        e
        for e in exchanges
        if e.request.resource_type == "Document"
        and e.origin == "agent"
        and (tab is None or e.tab_id in (None, tab.tab_id))
    ]
    final = next((e for e in reversed(documents) if _same_page(e.request.url, step.url)), None)
    if final is None:
        return "-"
    chain = [e for e in documents if e.request_id == final.request_id] or [final]
    return "→".join(str(e.response.status) if e.response else (e.error or "no response") for e in chain)


def step_summary(session: Session, step: int) -> StepSummary:
    captured = session.step(step)
    exchanges = session.network_at(step)
    tab = captured.active_tab
    return StepSummary(
        index=captured.index,
        trigger=captured.trigger,
        action=captured.action,
        url=captured.url,
        title=captured.title,
        document_status=_document_status(captured, exchanges),
        requests=len(exchanges),
        capture_ms=captured.capture_ms,
        faults=tuple(f"{f.stage}: {f.error_type}: {f.message}" for f in captured.faults),
        evaluation=evaluation_of(captured),
        tabs=len(captured.tabs),
        has_screenshot=bool(tab and tab.screenshot_png),
    )


def step_summaries(session: Session) -> tuple[StepSummary, ...]:
    return tuple(step_summary(session, i) for i in range(len(session.steps)))


FormKind = Literal["typed", "checked", "unchecked", "selected"]


def control_label(control: FormControlState) -> str:
    """``input#title``, ``textarea[name=body]``, ``select`` — prefixed by where it is when not in the
    tab's own document (``frame <url> > ``, ``shadow root > ``)."""
    name: str = control.tag
    if control.id:
        name += f"#{control.id}"
    elif control.name:
        name += f"[name={control.name}]"
    elif control.type and control.type != "text":
        name += f"[type={control.type}]"
    if control.frame:
        return f"frame {control.frame} > {name}"
    return f"shadow root > {name}" if len(control.path) > 1 else name


def _shown_value(control: FormControlState) -> str:
    value = control.value or ""
    if control.type == "password":  # as the page showed it
        return repr("•" * len(value))
    return repr(value if len(value) <= 200 else value[:199] + "…")


def _form_kind(control: FormControlState) -> FormKind:
    if control.checked is not None:
        return "checked" if control.checked else "unchecked"
    return "selected" if control.selected is not None else "typed"


def _form_state(control: FormControlState) -> str:
    """What the control holds, as a person reads it: ``'abc'``, ``checked``, ``'Blue', 'Red'``."""
    kind = _form_kind(control)
    if kind in ("checked", "unchecked"):
        return kind
    if kind == "selected":
        return ", ".join(repr(text) for text in control.selected_text) or "nothing"
    return _shown_value(control)


@dataclass(frozen=True)
class FormRow:
    """A form control whose state the agent (or the page) changed from its default, at one step."""

    tab_id: str
    control: str
    kind: FormKind
    state: str
    """``'typed text'``, ``checked``, ``unchecked`` or the selected options' labels."""

    @property
    def text(self) -> str:
        """``typed 'abc' into input#title``, ``checked input#agree``, ``selected 'Blue' in select#color``."""
        if self.kind == "typed":
            return f"typed {self.state} into {self.control}"
        if self.kind == "selected":
            return f"selected {self.state} in {self.control}"
        return f"{self.kind} {self.control}"


def form_row(tab_id: str, control: FormControlState) -> FormRow:
    return FormRow(tab_id, control_label(control), _form_kind(control), _form_state(control))


def form_rows(step: Step) -> tuple[FormRow, ...]:
    """What the form controls of every tab hold, where it differs from the page's defaults."""
    return tuple(form_row(tab.tab_id, control) for tab in step.tabs for control in tab.form_state)
