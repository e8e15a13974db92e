"""Record what the official evaluator asks of the live browser, so the same run replays offline.

The WebArena evaluators read the end state through the page they are given: ``page.url``,
``page.context.new_page()``, ``goto``, ``content()``, ``evaluate(js)``, and through HTTP calls of their
own (Magento REST helpers, the LLM judge). ``EvaluationRecorder.wrap(evaluator)`` returns the
evaluator with a recording page in place of the live one. The recording page is a subclass of
WebArena's own ``PseudoPage``, which the evaluators' beartype checks accept, and forwards every call
to the live page; each call and its answer becomes an ``EvaluatorCall``, each HTTP exchange an
``HttpCall``, each page the evaluator opens is snapshotted (HTML) right after its navigation.
Recording never changes what the evaluator sees or returns; a failure to record is dropped.

Two ways it runs: wrapped around BrowserGym's per-step ``task.validate()`` (``kind="validate"``),
and as the logger's end-of-episode probe on the final state (``kind="probe"``); ``EpisodeEvaluations``
keeps both for the logger.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from pydantic import ValidationError

from cdp_integration.capture.deadline import bounded
from cdp_integration.capture.faults import as_fault
from cdp_integration.interception import HttpRequest, HttpResponse, intercept_http
from cdp_integration.session.models import CaptureFault, Evaluation, EvaluatorCall, HttpCall, TabState
from cdp_integration.webarena import use_site_urls, webarena_config_file

__all__ = ["EpisodeEvaluations", "EvaluationRecorder", "build_trajectory", "webarena_config_file"]


_SNAPSHOT_TIMEOUT_MS = 10_000
"""Deadline of each read of an evaluator page's title and HTML (a frozen page never answers)."""


def _jsonable(value: Any) -> Any:
    """A JSON value for whatever ``page.evaluate`` returned (dates and the like become strings)."""
    return orjson.loads(orjson.dumps(value, default=str))


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def build_trajectory(answer: str | None, *, stopped: bool) -> list[Any]:
    """The two-item trajectory BrowserGym's ``WebArenaTask.validate`` hands the evaluator."""
    from webarena.browser_env.actions import ActionTypes

    if stopped:
        return [{}, {"action_type": ActionTypes.STOP, "answer": answer or ""}]
    return [{}, {"action_type": ActionTypes.NONE, "answer": "whatever"}]


class EvaluationRecorder:
    """Collects one evaluator run: its inputs, every page call and HTTP exchange, and its outcome."""

    def __init__(
        self, kind: str, *, chat_role: str | None = None, pseudo_page_module: str | None = None
    ) -> None:
        self.kind = kind
        self.chat_role = chat_role
        self.pseudo_page_module = pseudo_page_module or _WEBARENA_HELPERS
        """The module whose ``PseudoPage`` the recording page subclasses (the evaluator's type hints)."""
        self.calls: list[EvaluatorCall] = []
        self.http: list[HttpCall] = []
        self.pages: list[TabState] = []
        self.answer: str | None = None
        self.action_type: str | None = None
        self.score: float | None = None
        self.error: str | None = None
        self.duration_ms = 0.0
        self._page_count = 0

    # -- recording ---------------------------------------------------------------------------

    def call(self, page: int, op: str, url: str, **fields: Any) -> None:
        with contextlib.suppress(Exception):
            if "result" in fields:
                fields["result"] = _jsonable(fields["result"])
            self.calls.append(EvaluatorCall(page=page, op=op, url=url, **fields))  # type: ignore[arg-type]

    def snapshot(self, page: Any, index: int) -> None:
        with contextlib.suppress(Exception):
            self.pages.append(
                TabState(
                    tab_id=f"evaluator-{index}",
                    url=page.url,
                    title=bounded(page, "title", timeout_ms=_SNAPSHOT_TIMEOUT_MS),
                    active=False,
                    html=bounded(page, "content", timeout_ms=_SNAPSHOT_TIMEOUT_MS),
                )
            )

    def next_page_index(self) -> int:
        self._page_count += 1
        return self._page_count

    def _http(self, request: HttpRequest, forward: Callable[[], HttpResponse]) -> HttpResponse:
        outcome: dict[str, Any] = {}
        try:
            response = forward()
            outcome = {
                "status": response.status,
                "response_headers": response.headers,
                "response_body": response.body,
            }
            return response
        except Exception as exc:
            outcome = {"error": _error_text(exc)}
            raise
        finally:
            with contextlib.suppress(Exception):
                self.http.append(
                    HttpCall(
                        client=request.client,
                        method=request.method,
                        url=request.url,
                        request_body=request.body,
                        **outcome,
                    )
                )

    # -- running -----------------------------------------------------------------------------

    def wrap(self, evaluator: Callable[..., float]) -> Callable[..., float]:
        """``evaluator`` as BrowserGym calls it, with the page swapped for a recording one."""

        def recorded(trajectory: Any, config_file: Any, page: Any, client: Any = None) -> float:
            return self.run(evaluator, trajectory, config_file, page, client)

        return recorded

    def run(
        self, evaluator: Callable[..., float], trajectory: Any, config_file: Any, page: Any, client: Any
    ) -> float:
        with contextlib.suppress(Exception):
            last = trajectory[-1]
            self.answer = str(last.get("answer")) if last.get("answer") is not None else None
            action_type = last.get("action_type")
            self.action_type = getattr(action_type, "name", None) or str(action_type)
        started = time.perf_counter()
        try:
            with intercept_http(self._http):
                score = evaluator(
                    trajectory=trajectory,
                    config_file=config_file,
                    page=recording_page(page, self, 0),
                    client=client,
                )
        except BaseException as exc:
            self.error = _error_text(exc)
            raise
        else:
            self.score = float(score)
            return score
        finally:
            self.duration_ms = round((time.perf_counter() - started) * 1000, 3)

    def result(self) -> Evaluation:
        return Evaluation(
            kind=self.kind,  # type: ignore[arg-type]
            answer=self.answer,
            action_type=self.action_type,
            chat_role=self.chat_role,
            score=self.score,
            error=self.error,
            calls=self.calls,
            http=self.http,
            pages=self.pages,
            duration_ms=self.duration_ms,
        )


_WEBARENA_HELPERS = "webarena.evaluation_harness.helper_functions"


def pseudo_page_module_of(evaluator: Any) -> str:
    """Where the ``PseudoPage`` that ``evaluator``'s beartype hints accept lives: WebArena Lite's
    evaluators (``browsergym.webarenalite``) check for their own copy, libwebarena's for theirs."""
    module = getattr(type(evaluator), "__module__", "") or ""
    if module.startswith("browsergym.webarenalite."):
        return "browsergym.webarenalite.helper_functions"
    return _WEBARENA_HELPERS


def recording_page(page: Any, recorder: EvaluationRecorder, index: int) -> Any:
    """A ``PseudoPage`` over the live ``page`` that reports each call to ``recorder``."""
    return _recording_page_class(recorder.pseudo_page_module)(page, recorder, index)


@functools.cache
def _recording_page_class(helpers: str = _WEBARENA_HELPERS) -> type:
    import importlib

    PseudoPage = importlib.import_module(helpers).PseudoPage

    class RecordingPage(PseudoPage):  # type: ignore[misc,valid-type]
        """Forwards to the live page (``PseudoPage.__getattr__``); records the evaluator's calls."""

        def __init__(self, page: Any, recorder: EvaluationRecorder, index: int) -> None:
            # PseudoPage's own __init__ would pin ``url`` to a fixed string; ours stays live.
            self.original_page = page
            self._recorder = recorder
            self._index = index
            self._history: list[str] = []

        def _record(self, op: str, url: str, **fields: Any) -> None:
            self._recorder.call(self._index, op, url, **fields)

        @property
        def url(self) -> str:
            value: str = self.original_page.url
            self._record("url", value, result=value)
            return value

        @property
        def context(self) -> Any:
            return recording_context(self.original_page.context, self._recorder)

        def title(self) -> str:
            before = self.original_page.url
            value: str = self.original_page.title()
            self._record("title", before, history=list(self._history), result=value)
            return value

        def goto(self, url: str, **kwargs: Any) -> Any:
            before = self.original_page.url
            try:
                response = self.original_page.goto(url, **kwargs)
            except Exception as exc:
                self._record("goto", before, arg=url, error=_error_text(exc))
                raise
            self._history = []
            self._record("goto", before, arg=url, result=self.original_page.url)
            self._recorder.snapshot(self.original_page, self._index)
            return response

        def content(self) -> str:
            before = self.original_page.url
            value: str = self.original_page.content()
            self._record("content", before, history=list(self._history), result=value)
            return value

        def evaluate(self, expression: str, arg: Any = None) -> Any:
            before, history = self.original_page.url, list(self._history)
            self._history.append(expression)
            try:
                value = self.original_page.evaluate(expression, arg)
            except Exception as exc:
                self._record("evaluate", before, history=history, arg=expression, error=_error_text(exc))
                raise
            self._record("evaluate", before, history=history, arg=expression, result=value)
            return value

        def close(self, **kwargs: Any) -> None:
            before = self.original_page.url
            self.original_page.close(**kwargs)
            self._record("close", before)

    return RecordingPage


def recording_context(context: Any, recorder: EvaluationRecorder) -> Any:
    """The live browser context, except that ``new_page()`` returns a recording page."""

    class RecordingContext:
        def __getattr__(self, name: str) -> Any:
            return getattr(context, name)

        def new_page(self) -> Any:
            index = recorder.next_page_index()
            page = context.new_page()
            recorder.call(index, "new_page", page.url)
            return recording_page(page, recorder, index)

    return RecordingContext()


class EpisodeEvaluations:
    """The evaluator runs of one episode: the last ``validate()`` (until the next step takes it) and the probe."""

    def __init__(self) -> None:
        self.pending: Evaluation | None = None
        """The latest per-step ``validate()`` run, stored in the step captured after it."""
        self.probe: Evaluation | None = None
        """The end-of-episode probe, stored in the session's end record."""

    def take_pending(self) -> Evaluation | None:
        evaluation, self.pending = self.pending, None
        return evaluation

    @contextlib.contextmanager
    def recording_validate(self, task: Any, *, chat_role: str | None) -> Iterator[None]:
        """Within this block, ``task.evaluator`` records its run; the record becomes ``pending``."""
        evaluator = task.evaluator
        recorder = EvaluationRecorder(
            "validate", chat_role=chat_role, pseudo_page_module=pseudo_page_module_of(evaluator)
        )
        task.evaluator = recorder.wrap(evaluator)
        try:
            yield
        finally:
            task.evaluator = evaluator
            with contextlib.suppress(ValidationError):  # a run that cannot be recorded is left out
                self.pending = recorder.result()

    def run_probe(
        self,
        config: dict[str, Any],
        page: Any,
        *,
        answer: str | None,
        site_urls: dict[str, str] | None,
        faults: list[CaptureFault],
    ) -> Evaluation:
        """Run the official evaluator on ``page`` as the end probe; a failure to run it is a ``probe`` fault."""
        recorder = EvaluationRecorder("probe", chat_role="assistant" if answer is not None else None)
        with as_fault(faults, "probe"):
            from webarena.evaluation_harness.evaluators import evaluator_router

            with contextlib.ExitStack() as stack:
                if site_urls:
                    stack.enter_context(use_site_urls(site_urls))
                config_file = stack.enter_context(webarena_config_file(config))
                evaluator = evaluator_router(config_file)
                trajectory = build_trajectory(answer, stopped=answer is not None)
                with contextlib.suppress(Exception):  # the evaluator's own error is in the record
                    recorder.run(evaluator, trajectory, config_file, page, None)
        self.probe = recorder.result()
        return self.probe
