"""Why a score is what it is: the checks the official evaluators made while scoring, and why a 0 failed.

A check is one comparison an official evaluator made: what it expected, what it found, whether that
passed, and where the found value came from. Checks are taken from the evaluators as they run, never
recomputed beside them: for the duration of one scoring call, ``record_webarena_checks`` wraps
libwebarena's own comparison calls (``StringEvaluator.exact_match / must_include / fuzzy_match /
ua_match``, called by the string and program_html evaluators alike) and the url and program_html
evaluators' ``__call__`` (which say which evaluator and target a comparison belongs to), then puts
every original back. WebArena-Verified reports its evaluators' expected and actual values itself
(``verified_checks`` reads them from its result). Either way the checks combine to the score:
``combined_score(checks)`` is 1.0 exactly when every check passed.

A check (``Check.to_dict``, the ``test_result.checks`` items of ``output.jsonl``)::

    {"evaluator": "string_match" | "url_match" | "program_html" | "verified" | "browsergym",
     "target": int | None, "comparison": str, "expected": <json>, "found": <json>, "passed": bool,
     "source": {"kind": "answer" | "url" | "page" | "locator" | "har_event", "step": int | None,
                "url": str | None, "provenance": "recorded" | "reconstructed" | "imported:<fmt>"},
     "note": str | None}

``attribute`` gives a failed episode one class (``ATTRIBUTION_CLASSES``) and its reason from the
failed checks asked again at every step (``evaluate_session`` asks them; ``check_timeline`` lays the
answers out): each claim names its step, its evidence and the ``cdp-session eval-at`` command that
asks again. The rules are in its docstring and in ``docs/guides/why-a-score.md``.
"""

from __future__ import annotations

import contextlib
import functools
import html
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdp_integration.errors import CDPIntegrationError

if TYPE_CHECKING:
    from cdp_integration.session.store import Session

__all__ = [
    "ATTRIBUTION_CLASSES",
    "STATE_EVALUATORS",
    "Asked",
    "Check",
    "CheckRecorder",
    "answer_words",
    "attribute",
    "check_key",
    "check_timeline",
    "check_title",
    "combined_score",
    "error_attribution",
    "failed_first",
    "find_check",
    "form_satisfies",
    "format_checks",
    "format_timeline",
    "record_webarena_checks",
    "rerun_command",
    "verified_checks",
    "visible_match",
    "webarena_wrappers",
]

ATTRIBUTION_CLASSES = (
    "answer_wrong",
    "state_not_reached",
    "state_undone",
    "state_not_saved",
    "state_unknown",
    "evaluator_miss",
    "input_missing",
    "harness_fault",
)

PLACEHOLDER_ANSWER = "whatever"
"""What BrowserGym's ``validate`` compares when the last chat message is not the agent's."""

_FOUND_CHARS = 300
_COMPARISONS = ("exact_match", "must_include", "fuzzy_match", "ua_match")
_MISS_ERRORS = ("ReplayMissError", "ReconstructedAnswerError")


@dataclass(frozen=True)
class Check:
    """One comparison an official evaluator made while scoring (see the module docstring)."""

    evaluator: str
    target: int | None
    comparison: str
    expected: Any
    found: Any
    passed: bool
    source: dict[str, Any]
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "evaluator": self.evaluator,
            "target": self.target,
            "comparison": self.comparison,
            "expected": self.expected,
            "found": self.found,
            "passed": self.passed,
            "source": dict(self.source),
            "note": self.note,
        }


def combined_score(checks: Sequence[Mapping[str, Any]]) -> float:
    """The score the checks stand for: every official evaluator multiplies 0/1 results."""
    return 1.0 if all(check.get("passed") for check in checks) else 0.0


def failed_first(checks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The checks with the failed ones first, each group in the evaluator's order."""
    return [c for c in checks if not c.get("passed")] + [c for c in checks if c.get("passed")]


def _source(kind: str, step: int | None, url: str | None, provenance: str) -> dict[str, Any]:
    return {"kind": kind, "step": step, "url": url, "provenance": provenance}


def _excerpt(found: Any, expected: Any) -> tuple[Any, str | None]:
    """A found text short enough for a line of output: around the expected text when it is there."""
    if not isinstance(found, str) or len(found) <= _FOUND_CHARS:
        return found, None
    wanted = [e for e in (expected if isinstance(expected, list) else [expected]) if isinstance(e, str) and e]
    lower = found.lower()
    for text in wanted:
        at = lower.find(text.lower())
        if at >= 0:
            start = max(0, at - _FOUND_CHARS // 3)
            return "…" + found[
                start : start + _FOUND_CHARS
            ] + "…", f"found: {len(found)} characters, shown around the match"
    return found[:_FOUND_CHARS] + "…", f"found: {len(found)} characters, the first {_FOUND_CHARS} shown"


def _join(*notes: str | None) -> str | None:
    text = "; ".join(n for n in notes if n)
    return text or None


# -- recording libwebarena's comparisons -----------------------------------------------------------


@dataclass
class _Pending:
    """One required content of a program_html target: its ``|OR|`` alternatives, compared one by one."""

    target: int
    comparison: str
    expected: Any
    alternatives: int
    results: list[tuple[bool, Any]] = field(default_factory=list)
    source: dict[str, Any] | None = None


class CheckRecorder:
    """Collects the checks of one ``validate`` call; ``record_webarena_checks`` feeds it."""

    def __init__(
        self,
        *,
        step: int,
        provenance: str,
        journal: list[tuple[str, str, str]] | None = None,
        imported: str | None = None,
    ) -> None:
        self.step = step
        self.provenance = imported or provenance
        """Provenance of what the step itself holds (answer, URL): ``recorded`` or ``reconstructed``."""
        self.imported = imported
        self.journal = journal if journal is not None else []
        self.checks: list[Check] = []
        self._evaluator: str | None = None
        self._trajectory: Any = None
        self._plan: list[_Pending] = []
        self._locators: dict[int, str] = {}
        self._sources: dict[int, dict[str, Any]] = {}
        self._prep: dict[int, int] = {}
        self._journal_at = 0
        self._raised: BaseException | None = None
        """The exception a comparison raised (already a failed check; not counted twice)."""

    # What an evaluator's ``__call__`` says about the comparisons that follow.

    def begin(self, evaluator: str, trajectory: Any, config_file: Any) -> None:
        self._evaluator = evaluator
        self._trajectory = trajectory
        self._plan = []
        if evaluator == "program_html":
            self._journal_at = len(self.journal)
            self._sources = {}
            targets = _config(config_file).get("eval", {}).get("program_html") or []
            for index, target in enumerate(targets):
                self._locators[index] = str(target.get("locator") or "")
                required = target.get("required_contents") or {}
                if "exact_match" in required:
                    self._plan.append(_Pending(index, "exact_match", required["exact_match"], 1))
                elif isinstance(required.get("must_include"), list):
                    for content in required["must_include"]:
                        alternatives = str(content).split(" |OR| ")
                        expected = alternatives if len(alternatives) > 1 else content
                        self._plan.append(_Pending(index, "must_include", expected, len(alternatives)))

    def end(self) -> None:
        self._evaluator = None
        self._plan = []

    def failed(self, evaluator: str, exc: BaseException) -> None:
        """The evaluator raised: BrowserGym's ``validate`` turns an ``AssertionError`` into 0."""
        if exc is self._raised:
            return
        self.checks.append(
            Check(
                evaluator=evaluator,
                target=None,
                comparison="evaluator_error",
                expected=None,
                found=None,
                passed=False,
                source=_source("answer", self.step, None, self.provenance),
                note=f"the evaluator raised {type(exc).__name__}: {exc}"[:300],
            )
        )

    # The comparisons.

    def compared(
        self, comparison: str, args: Mapping[str, Any], result: Any, error: BaseException | None
    ) -> None:
        ref, pred = args.get("ref"), args.get("pred")
        passed = error is None and float(result) == 1.0
        if self._evaluator == "program_html" and self._plan:
            self._target_compared(comparison, pred, passed)
            return
        note = self._answer_note()
        if error is not None:
            self._raised = error
            note = _join(
                note,
                f"the comparison raised {type(error).__name__}; BrowserGym's validate scores an "
                "AssertionError 0 (its llm_fuzzy_match bugfix)",
            )
        if comparison == "ua_match":
            previous = self.checks[-1] if self.checks else None
            if previous is not None and previous.comparison == "exact_match" and previous.expected == "N/A":
                self.checks.pop()  # the evaluator replaces that result with the judge's
                note = _join(
                    note, "the answer is not exactly 'N/A'; the LLM judge decided whether it says why"
                )
            ref = {"string_note": ref}
        if comparison == "must_include" and args.get("tokenize") and len(str(ref).strip()) == 1:
            note = _join(note, "a one-character reference is matched as a whole word")
        self.checks.append(
            Check(
                evaluator=self._evaluator or "string_match",
                target=None,
                comparison=comparison,
                expected=ref,
                found=pred,
                passed=passed,
                source=_source("answer", self.step, None, self.provenance),
                note=note,
            )
        )

    def _answer_note(self) -> str | None:
        """Words for a placeholder or a missing answer, from the trajectory the evaluator was given."""
        try:
            action = self._trajectory[-1]
            answer, action_type = action["answer"], action["action_type"]
        except (TypeError, LookupError, IndexError):
            return None
        if answer == PLACEHOLDER_ANSWER and getattr(action_type, "name", str(action_type)) != "STOP":
            return (
                "no answer: the agent sent no final message, so BrowserGym's validate compared its "
                f"placeholder answer {PLACEHOLDER_ANSWER!r}"
            )
        if not str(answer).strip():
            return "the agent's final answer is empty"
        return None

    def _target_compared(self, comparison: str, pred: Any, passed: bool) -> None:
        pending = self._plan[0]
        if pending.source is None:
            if pending.target not in self._sources:
                self._sources[pending.target], self._prep[pending.target] = self._page_source(pending.target)
            pending.source = self._sources[pending.target]
        pending.results.append((passed, pred))
        if len(pending.results) < pending.alternatives:
            return
        self._plan.pop(0)
        found = pending.results[0][1]
        shown, excerpt_note = _excerpt(found, pending.expected)
        alternatives = "any of the alternatives" if pending.alternatives > 1 else None
        self.checks.append(
            Check(
                evaluator="program_html",
                target=pending.target,
                comparison=pending.comparison if comparison == pending.comparison else comparison,
                expected=pending.expected,
                found=shown,
                passed=any(ok for ok, _ in pending.results),
                source=pending.source,
                note=_join(
                    alternatives,
                    excerpt_note,
                    _source_note(pending.source, self._prep.get(pending.target, 0)),
                ),
            )
        )

    def _page_source(self, target: int) -> tuple[dict[str, Any], int]:
        """The page question that produced a target's found value (the last one asked before it), and
        how many prep actions ran on that page before it."""
        asked = self.journal[self._journal_at :]
        self._journal_at = len(self.journal)
        locator = self._locators.get(target, "")
        kind = "locator" if locator.strip() else "page"
        if not asked:
            return _source(kind, self.step, None, self.provenance), 0
        answered_kind, _question, url = asked[-1]
        evaluations = sum(1 for _, q, u in asked if q.startswith("evaluate") and u == url)
        prep = max(0, evaluations - 1) if kind == "locator" else 0
        return _source(kind, self.step, url, self.imported or answered_kind), prep

    def url_matched(self, config_file: Any, page: Any, result: Any, error: BaseException | None) -> None:
        evaluation = _config(config_file).get("eval", {})
        reference = str(evaluation.get("reference_url", ""))
        expected: Any = reference.split(" |OR| ") if " |OR| " in reference else reference
        rule = evaluation.get("url_note", "GOLD in PRED")
        found = str(page.url)
        self.checks.append(
            Check(
                evaluator="url_match",
                target=None,
                comparison="url_match",
                expected=expected,
                found=found,
                passed=error is None and float(result) == 1.0,
                source=_source("url", self.step, found, self.provenance),
                note=_join(
                    f"rule: {rule}", f"the evaluator raised {type(error).__name__}" if error else None
                ),
            )
        )

    def tab_safeguard(self, info: Mapping[str, Any], tab_urls: Sequence[str]) -> None:
        """BrowserGym's ``validate`` scored 0 before any evaluator ran: a tab was off the sites."""
        self.checks.append(
            Check(
                evaluator="browsergym",
                target=None,
                comparison="authorized_tabs",
                expected="every open tab on a WebArena site",
                found=list(tab_urls),
                passed=False,
                source=_source("url", self.step, None, self.provenance),
                note=str(info.get("error") or "a tab was not on a WebArena site"),
            )
        )


def _source_note(source: Mapping[str, Any], prep: int) -> str | None:
    if source.get("kind") == "locator" and prep:
        return f"the locator ran after {prep} prep action{'s' if prep != 1 else ''} on that page"
    return None


def _config(config_file: Any) -> dict[str, Any]:
    """The config file the evaluator itself reads (ours, written by ``webarena_config_file``)."""
    try:
        with open(config_file) as stream:
            value = json.load(stream)
    except (OSError, ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


_ACTIVE: CheckRecorder | None = None
_INSTALLED = False
_LOCK = threading.Lock()


def _named(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(signature.bind(*args, **kwargs).arguments)
    except TypeError:
        return dict(kwargs)


@functools.cache
def _signature(function: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(function)


def _comparison(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = _signature(original)

    def compare(*args: Any, **kwargs: Any) -> Any:
        recorder = _ACTIVE
        if recorder is None:
            return original(*args, **kwargs)
        named = _named(signature, args, kwargs)
        try:
            result = original(*args, **kwargs)
        except Exception as exc:
            recorder.compared(name, named, 0.0, exc)
            raise
        recorder.compared(name, named, result, None)
        return result

    return compare


def _evaluator_call(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, trajectory: Any, config_file: Any, page: Any = None, client: Any = None) -> Any:
        recorder = _ACTIVE
        if recorder is None:
            return original(self, trajectory, config_file, page, client)
        recorder.begin(name, trajectory, config_file)
        try:
            result = original(self, trajectory, config_file, page, client)
        except Exception as exc:
            if name == "url_match":
                recorder.url_matched(config_file, page, 0.0, exc)
            elif not isinstance(exc, CDPIntegrationError):  # a miss is the scoring's error, not a check
                recorder.failed(name, exc)
            raise
        finally:
            recorder.end()
        if name == "url_match":
            recorder.url_matched(config_file, page, result, None)
        return result

    return call


@contextlib.contextmanager
def webarena_wrappers() -> Iterator[None]:
    """Wrap libwebarena's comparison calls and evaluators for one scoring call, then restore them.

    The wrappers call the originals unchanged and note arguments and results only while a recorder
    is active (``record_webarena_checks``); installed files are never edited. A session's steps are
    scored under one installation (each change of a class costs the interpreter's caches).
    Scoring is one call at a time per process (batch workers are processes).
    """
    global _INSTALLED
    if _INSTALLED:
        yield
        return
    from webarena.evaluation_harness import evaluators

    string = evaluators.StringEvaluator
    saved: list[tuple[type, str, Any]] = []
    with _LOCK:
        for name in _COMPARISONS:
            saved.append((string, name, string.__dict__[name]))
            setattr(string, name, staticmethod(_comparison(name, getattr(string, name))))
        for cls, name in (
            (evaluators.StringEvaluator, "string_match"),
            (evaluators.URLEvaluator, "url_match"),
            (evaluators.HTMLContentEvaluator, "program_html"),
        ):
            saved.append((cls, "__call__", cls.__dict__["__call__"]))
            cls.__call__ = _evaluator_call(name, cls.__dict__["__call__"])  # type: ignore[method-assign]
        _INSTALLED = True
        try:
            yield
        finally:
            _INSTALLED = False
            for cls, name, original in reversed(saved):
                setattr(cls, name, original)


@contextlib.contextmanager
def record_webarena_checks(recorder: CheckRecorder) -> Iterator[CheckRecorder]:
    """Record the checks of one ``validate`` call into ``recorder`` (inside ``webarena_wrappers``,
    installed here when the caller has not)."""
    global _ACTIVE
    with webarena_wrappers():
        _ACTIVE = recorder
        try:
            yield recorder
        finally:
            _ACTIVE = None


# -- WebArena-Verified ---------------------------------------------------------------------------


def verified_checks(
    details: Mapping[str, Any], session: Session | None, provenance: str | None
) -> list[Check]:
    """One check per WebArena-Verified evaluator, from the package's own result (its expected and
    actual values, its failed assertions)."""
    checks = []
    for result in details.get("evaluators_results") or []:
        name = str(result.get("evaluator_name") or "")
        status = str(result.get("status") or "")
        assertions = [a for a in result.get("assertions") or [] if isinstance(a, Mapping)]
        failed = [a for a in assertions if str(a.get("status")) != "success"]
        comparison = ", ".join(sorted({str(a.get("assertion_name")) for a in failed})) or name
        found = result.get("actual_normalized", result.get("actual"))
        kind = "answer" if "AgentResponse" in name else "har_event"
        step, url = (None, None)
        if session is not None and session.steps:
            step = session.final_step.index
            if kind == "har_event":
                step, url = _step_of(session, result.get("actual"))
        messages = [m for a in failed for m in (a.get("assertion_msgs") or [])]
        note = _join(
            str(result.get("error_msg")) if result.get("error_msg") else None,
            "; ".join(str(m) for m in messages[:3]) or None,
            "the event must not exist" if result.get("should_not_exist") else None,
        )
        if kind == "answer" and session is not None and not (session.final_answer or "").strip():
            note = _join("no final answer: the adapted response says so", note)
        checks.append(
            Check(
                evaluator="verified",
                target=None,
                comparison=comparison,
                expected=result.get("expected"),
                found=found,
                passed=status == "success",
                source=_source(kind, step, url, provenance or "recorded"),
                note=note,
            )
        )
    if not checks and details.get("error_msg"):
        checks.append(
            Check(
                evaluator="verified",
                target=None,
                comparison="evaluator_error",
                expected=None,
                found=None,
                passed=False,
                source=_source("answer", None, None, provenance or "recorded"),
                note=str(details["error_msg"])[:300],
            )
        )
    return checks


def _step_of(session: Session, actual: Any) -> tuple[int | None, str | None]:
    """The last step whose page was at the URL a network evaluator found (a navigation)."""
    items = (
        [actual]
        if isinstance(actual, str | Mapping)
        else list(actual or [])
        if isinstance(actual, list)
        else []
    )
    urls = [
        item if isinstance(item, str) else item.get("url")
        for item in items
        if isinstance(item, str | Mapping)
    ]
    found = [url for url in urls if isinstance(url, str)]
    for url in reversed(found):
        for step in reversed(session.steps):
            if step.url.rstrip("/") == url.rstrip("/"):
                return step.index, step.url
    return None, (found[-1] if found else None)


# -- failure attribution ---------------------------------------------------------------------------

STATE_EVALUATORS = ("url_match", "program_html")
"""Evaluators that ask about the state of the sites (not the answer): their checks are re-asked at
every step of a failed session."""

Asked = Mapping[int, Sequence[Mapping[str, Any]] | str]
"""What each step answered when a session's failed checks were asked again: the step's checks, or
why the step could not answer (a replay miss)."""


def error_attribution(error_type: str | None, error: str | None) -> dict[str, Any] | None:
    """The class of a session that could not be scored: a loud miss, a missing input, or the harness."""
    if error_type is None:
        return None
    first = (error or error_type).splitlines()[0][:300]
    if error_type in _MISS_ERRORS:
        return {
            "class": "evaluator_miss",
            "reason": f"the evaluator asked what the session cannot answer: {first}",
        }
    if error_type == "EvaluationError" and (
        "URL is known" in first
        or "no URL for site" in first
        or "no WebArena task config" in first
        or "not a WebArena task config" in first
    ):
        return {"class": "input_missing", "reason": f"not scored, an input is missing: {first}"}
    return {"class": "harness_fault", "reason": f"scoring failed ({error_type}): {first}"}


def check_key(check: Mapping[str, Any]) -> str:
    """What identifies one check across steps: evaluator, target, comparison and expected value."""
    return json.dumps(
        [check.get("evaluator"), check.get("target"), check.get("comparison"), check.get("expected")],
        sort_keys=True,
        default=str,
    )


def find_check(checks: Sequence[Mapping[str, Any]], check: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The check of ``checks`` that is ``check`` asked at another step, if that step made it."""
    key = check_key(check)
    return next((c for c in checks if check_key(c) == key), None)


def check_timeline(checks: Sequence[Mapping[str, Any]], asked: Asked) -> list[dict[str, Any]]:
    """For each check, the steps it passed and failed at, and those that could not answer it.

    A step that made no such check (BrowserGym's tab safeguard scored it before any evaluator ran, or
    the check was not asked there) is ``unknown`` with the reason.
    """
    rows = []
    for check in checks:
        passed: list[int] = []
        failed: list[int] = []
        unknown: list[int] = []
        why: str | None = None
        for step in sorted(asked):
            answer = asked[step]
            if isinstance(answer, str):
                unknown.append(step)
                why = why or f"step {step}: {answer}"
                continue
            match = find_check(answer, check)
            if match is None:
                unknown.append(step)
                why = why or f"step {step}: the check was not made there"
            elif match.get("passed"):
                passed.append(step)
            else:
                failed.append(step)
        rows.append(
            {
                "check": check_title(check),
                "expected": check.get("expected"),
                "passed": passed,
                "failed": failed,
                "unknown": unknown,
                "unknown_why": why,
                "first_passed": passed[0] if passed else None,
                "last_passed": passed[-1] if passed else None,
            }
        )
    return rows


def _format_key(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", html.unescape(text).lower())


def _number(text: str) -> float | None:
    try:
        return float(re.sub(r"[,$€£\s]", "", text))
    except ValueError:
        return None


def _format_only(expected: str, found: str) -> bool:
    """The answer carries the expected value but in another form (case, spacing, punctuation, number)."""
    if not expected.strip() or not found.strip():
        return False
    if _format_key(expected) and _format_key(expected) == _format_key(found):
        return True
    a, b = _number(expected), _number(found)
    return a is not None and a == b


def _alternatives(expected: Any) -> list[str]:
    if isinstance(expected, list):
        return [str(e) for e in expected if isinstance(e, str | int | float)]
    return [str(expected)] if isinstance(expected, str | int | float) else []


def visible_match(text: str, expected: str) -> re.Match[str] | None:
    """``expected`` in the visible ``text`` as a whole (case-insensitive; not inside a longer word or
    number: the expected '3' is not in '$34.99')."""
    wanted = expected.strip()
    if not wanted:
        return None
    return re.search(r"(?<![0-9A-Za-z])" + re.escape(wanted) + r"(?![0-9A-Za-z])", text, re.IGNORECASE)


def _visible(session: Session, texts: Sequence[str]) -> dict[str, Any] | None:
    """The first step where one of ``texts`` was visible text in a tab (never markup, attributes or
    URLs): the step, the tab's URL and the line it was on."""
    from cdp_integration.replay.text import visible_text

    wanted = [t.strip().lower() for t in texts if t.strip()]
    for step in session.steps:
        for tab in step.tabs:
            raw = tab.html.lower() if tab.html else ""
            if not any(w in raw or w in html.unescape(raw) for w in wanted):
                continue  # not even in the markup: no need to read the page's text
            shown = visible_text(tab.html)
            for text in texts:
                match = visible_match(shown, text)
                if match is not None:
                    start = shown.rfind("\n", 0, match.start()) + 1
                    end = shown.find("\n", match.end())
                    line = shown[start : end if end >= 0 else len(shown)].strip()
                    line = (
                        line
                        if len(line) <= 160
                        else "…" + line[max(0, match.start() - start - 60) :][:158] + "…"
                    )
                    return {
                        "kind": "visible",
                        "step": step.index,
                        "url": tab.url,
                        "expected": text,
                        "text": line,
                    }
    return None


def form_satisfies(comparison: str, expected: Any, value: str) -> bool:
    """Whether the official comparison ``comparison`` would pass ``expected`` against ``value`` (any of
    its ``|OR|`` alternatives)."""
    from webarena.evaluation_harness.evaluators import StringEvaluator

    compare = {"exact_match": StringEvaluator.exact_match, "must_include": StringEvaluator.must_include}.get(
        comparison
    )
    if compare is None:
        return False
    return any(bool(compare(ref=text, pred=value)) for text in _alternatives(expected))


def _control_name(control: Any) -> str:
    name = control.tag
    if control.id:
        name += f"#{control.id}"
    elif control.name:
        name += f"[name={control.name}]"
    return name


def _typed(session: Session) -> Iterator[tuple[int, str, str, str, str]]:
    """What the agent put into form controls, latest first: ``(step, url, control, value, source)``,
    from the captured form state (controls the agent changed) and from its typing actions
    (``fill``, ``select_option``, ``type``: the value it typed, on the page it acted on)."""
    from cdp_integration.replay.actions import TYPING_ACTIONS, parse_action

    for position in range(len(session.steps) - 1, -1, -1):
        step = session.steps[position]
        for tab in step.tabs:
            for control in tab.form_state:
                for value in [control.value or "", *control.selected_text]:
                    if value:
                        yield step.index, tab.url, _control_name(control), value, "form_state"
        parsed = parse_action(step.action)
        if parsed is not None and parsed.name in TYPING_ACTIONS and len(parsed.args) >= 2:
            values = parsed.args[1] if isinstance(parsed.args[1], list | tuple) else [parsed.args[1]]
            url = session.steps[position - 1].url if position else step.url
            for value in values:
                if isinstance(value, str) and value:
                    yield step.index, url, f"the element bid {parsed.args[0]!s}", value, "action"


def _unsaved(session: Session, check: Mapping[str, Any]) -> dict[str, Any] | None:
    """The last step where the agent put into a form a value the failed program_html check would have
    passed on (typed, never saved: the check passed at no step)."""
    comparison = str(check.get("comparison") or "")
    for step, url, control, value, source in _typed(session):
        if form_satisfies(comparison, check.get("expected"), value):
            return {
                "kind": "form",
                "step": step,
                "url": url,
                "control": control,
                "value": value if len(value) <= 120 else value[:117] + "...",
                "source": source,
                "comparison": comparison,
            }
    return None


def _harness_fault(session: Session) -> tuple[int | None, str] | None:
    for step in session.steps:
        for fault in step.faults:
            return step.index, f"capture fault at step {step.index} ({fault.stage}): {fault.message}"[:300]
        for exchange in step.network:
            response = exchange.response
            if (
                exchange.origin == "agent"
                and exchange.request.resource_type == "Document"
                and response is not None
                and response.status >= 500
            ):
                return (
                    step.index,
                    f"the site answered {response.status} for the page {exchange.request.url} (step {step.index})",
                )
    if session.end is not None:
        for fault in session.end.faults:
            return None, f"capture fault at the end ({fault.stage}): {fault.message}"[:300]
    return None


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _steps(steps: Sequence[int]) -> str:
    """``0-4, 6``: a sorted list of step numbers, runs joined."""
    parts: list[str] = []
    run: list[int] = []
    for step in steps:
        if run and step == run[-1] + 1:
            run.append(step)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)))
        run = [step]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)))
    return ", ".join(parts)


def _start(session: Session) -> int | None:
    """The step before the agent's first action (BrowserGym's reset): the task's starting state."""
    first = session.steps[0] if session.steps else None
    return first.index if first is not None and first.trigger != "action" else None


def rerun_command(session: Session, step: int) -> str:
    """The command that asks the evaluator again at ``step``: what a claim says can be checked."""
    return f"cdp-session eval-at {session.path or 'SESSION'} {step}"


def attribute(
    session: Session,
    score: float | None,
    checks: Sequence[Mapping[str, Any]],
    asked: Asked | None = None,
) -> dict[str, Any] | None:
    """One class and its reason for a 0 score (None when the score is not 0), from the failed checks
    asked again at every step (``asked``: step -> that step's checks, or why it could not answer;
    the final step's are ``checks``). First rule that holds:

    1. ``harness_fault``: a capture fault (a crashed or hung tab included) or a 5xx document.
    2. ``state_not_reached``: a tab was outside the WebArena sites (BrowserGym's safeguard).
    3. ``state_undone``: a failed check passed at an earlier step (the last such step is named).
    4. ``state_not_saved``: a form control the agent changed held a value a failed program_html check
       would have passed on (the official comparison, run on the control's value).
    5. ``answer_wrong``: a failed answer check that the LLM judge refused, whose answer differs only in
       format, or whose expected value was visible text on a page the agent saw.
    6. ``state_unknown``: a failed state check that passed at no step, where some steps could not
       answer it (a replay miss): whether it ever held is not known.
    7. ``state_not_reached``: a failed check that passed at no step that was asked (every step), or an
       answer whose expected value was never visible.

    The result: ``class``, ``reason``, and where it applies ``check`` (its title), ``step``,
    ``evidence`` (what was found there), ``rerun`` (the command that asks again) and ``timeline``
    (``check_timeline`` of the failed checks).
    """
    if score is None or score != 0.0:
        return None
    final = session.final_step.index
    answers: dict[int, Sequence[Mapping[str, Any]] | str] = dict(asked or {})
    answers[final] = checks
    failed = [c for c in checks if not c.get("passed")]
    timeline = check_timeline(failed, answers)

    def claim(klass: str, reason: str, check: Mapping[str, Any] | None, step: int | None,
              evidence: Mapping[str, Any] | None) -> dict[str, Any]:  # fmt: skip
        return {
            "class": klass,
            "reason": reason,
            "check": check_title(check) if check is not None else None,
            "step": step,
            "evidence": dict(evidence) if evidence is not None else None,
            "rerun": rerun_command(session, step) if step is not None else None,
            "timeline": timeline,
        }

    fault = _harness_fault(session)
    if fault is not None:
        return claim("harness_fault", fault[1], None, fault[0], {"kind": "fault", "step": fault[0]})
    for check in failed:
        if check.get("evaluator") == "browsergym":
            return claim(
                "state_not_reached",
                f"a tab was outside the WebArena sites at the end ({_shown(check.get('found'))}); "
                "BrowserGym's validate scores that 0 before any evaluator runs",
                check,
                final,
                {"kind": "asked", "step": final, "passed": False, "found": check.get("found")},
            )
    for check, row in zip(failed, timeline, strict=True):
        earlier = [step for step in row["passed"] if step != final]
        if earlier:
            step = earlier[-1]
            there = answers[step]
            then = find_check(there, check) if not isinstance(there, str) else None
            found = then.get("found") if then is not None else None
            return claim(
                "state_undone",
                f"{row['check']} passed at step {step} (found {_shown(found)}) and failed at the end "
                f"(found {_shown(check.get('found'))})",
                check,
                step,
                {"kind": "asked", "step": step, "passed": True, "found": found},
            )
    for check in failed:
        if check.get("evaluator") != "program_html":
            continue
        form = _unsaved(session, check)
        if form is not None:
            return claim(
                "state_not_saved",
                f"{check_title(check)}: the expected {_shown(check.get('expected'))} was typed into "
                f"{form['control']} on {form['url']} (step {form['step']}: {_shown(form['value'])}) but "
                "never saved; the check failed at every step",
                check,
                form["step"],
                form,
            )
    unseen_answer: Mapping[str, Any] | None = None
    for check in failed:
        if (
            check.get("evaluator") not in ("string_match", "verified")
            or (check.get("source") or {}).get("kind") != "answer"
        ):
            continue
        expected = _alternatives(check.get("expected"))
        found = str(check.get("found") or "")
        at_end = {"kind": "asked", "step": final, "passed": False, "found": check.get("found")}
        if check.get("comparison") in ("fuzzy_match", "ua_match"):
            return claim(
                "answer_wrong",
                f"the LLM judge did not accept the answer {_shown(found)}",
                check,
                final,
                at_end,
            )
        if any(_format_only(e, found) for e in expected):
            return claim(
                "answer_wrong",
                f"the answer {_shown(found)} differs from {_shown(check.get('expected'))} only in format",
                check,
                final,
                at_end,
            )
        seen = _visible(session, expected)
        if seen is not None:
            given = (
                "no answer was given"
                if "no answer" in str(check.get("note") or "")
                else f"the answer was {_shown(found)}"
            )
            return claim(
                "answer_wrong",
                f"{given}; the expected {_shown(seen['expected'])} was visible at step {seen['step']} "
                f"({seen['url']}: {_shown(seen['text'])})",
                check,
                seen["step"],
                seen,
            )
        unseen_answer = unseen_answer or check
    for check, row in zip(failed, timeline, strict=True):
        if (check.get("source") or {}).get("kind") == "answer" and check.get("evaluator") != "browsergym":
            continue
        started = [step for step in row["unknown"] if step != _start(session)]
        if started:
            return claim(
                "state_unknown",
                f"{row['check']} failed at the end and at steps {_steps(row['failed']) or 'none'}; steps "
                f"{_steps(row['unknown'])} could not answer it ({row['unknown_why']}), so whether it ever "
                "held is not known",
                check,
                final,
                {"kind": "asked", "step": final, "passed": False, "found": check.get("found")},
            )
        if check.get("evaluator") == "verified":  # asked of the network trace of the whole episode
            return claim(
                "state_not_reached",
                f"{row['check']} failed on the network trace of the whole episode: expected "
                f"{_shown(check.get('expected'))}, found {_shown(check.get('found'))}",
                check,
                final,
                {"kind": "asked", "step": final, "passed": False, "found": check.get("found")},
            )
        what = {"url_match": "URL", "program_html": "content"}.get(str(check.get("evaluator")), "state")
        start = (
            f"; the start (step {row['unknown'][0]}, before any action) could not be asked"
            if row["unknown"]
            else ""
        )
        return claim(
            "state_not_reached",
            f"the expected {what} {_shown(check.get('expected'))} was never there: {row['check']} failed "
            f"at every step{' the agent acted on' if start else ''} ({_steps(row['failed'])}){start}; at the "
            "end it found "
            f"{_shown(check.get('found'))}",
            check,
            final,
            {"kind": "asked", "step": final, "passed": False, "found": check.get("found")},
        )
    if unseen_answer is not None:
        return claim(
            "state_not_reached",
            f"the expected answer {_shown(unseen_answer.get('expected'))} was never visible on any page the "
            f"agent saw ({check_title(unseen_answer)} failed)",
            unseen_answer,
            final,
            {"kind": "not_visible", "step": final, "expected": _alternatives(unseen_answer.get("expected"))},
        )
    return {"class": "state_not_reached", "reason": "the evaluator scored 0 with no failed check recorded"}


# -- text ------------------------------------------------------------------------------------------


def answer_words(answer: str | None, *, stopped: bool) -> str:
    """The agent's answer as ``steps``, ``show`` and ``rescore`` all say it: a placeholder or a
    missing answer in words, never the bare placeholder."""
    if not stopped or answer is None:
        return (
            f"none (no final message: BrowserGym's validate compares its placeholder {PLACEHOLDER_ANSWER!r})"
        )
    if not answer.strip():
        return "'' (an empty final message)"
    return repr(answer)


def _where(source: Mapping[str, Any]) -> str:
    kind = source.get("kind")
    step = source.get("step")
    at = f"step {step}" if step is not None else "the session"
    origin = source.get("provenance") or "?"
    if kind == "answer":
        return f"the answer at {at} ({origin})"
    if kind == "url":
        return f"{at}'s URL ({origin})"
    if kind == "har_event":
        return f"the network trace, {source.get('url') or 'no matching event'} ({at}, {origin})"
    what = "the locator on" if kind == "locator" else "the content of"
    return f"{what} {source.get('url') or 'the page'} at {at} ({origin})"


def check_title(check: Mapping[str, Any]) -> str:
    """``program_html[1] exact_match``: which evaluator, target and comparison."""
    target = f"[{check['target']}]" if check.get("target") is not None else ""
    comparison = check.get("comparison") or ""
    name = f"{check.get('evaluator')}{target}"
    return name if comparison == name else f"{name} {comparison}"


def format_checks(
    checks: Sequence[Mapping[str, Any]] | None, attribution: Mapping[str, Any] | None = None
) -> str:
    """The checks as text, failed first: verdict, comparison, expected, found, where it came from."""
    if checks is None:
        return "checks: none recorded (scored before checks were kept)"
    lines = [
        f"checks ({sum(1 for c in checks if not c.get('passed'))} failed of {len(checks)}, failed first):"
    ]
    for check in failed_first(checks):
        verdict = "pass" if check.get("passed") else "FAIL"
        lines.append(f"  {verdict}  {check_title(check)}")
        lines.append(f"        expected {_shown(check.get('expected'))}")
        lines.append(f"        found    {_shown(check.get('found'))}")
        lines.append(f"        from     {_where(check.get('source') or {})}")
        if check.get("note"):
            lines.append(f"        note     {check['note']}")
    if attribution:
        lines.extend(format_timeline(attribution.get("timeline") or []))
        lines.append(f"why 0: {attribution.get('class')}: {attribution.get('reason')}")
        if attribution.get("rerun"):
            lines.append(f"ask again: {attribution['rerun']}")
    return "\n".join(lines)


def format_timeline(timeline: Sequence[Mapping[str, Any]]) -> list[str]:
    """The failed checks asked at every step, as text: where each passed, failed or could not answer."""
    if not timeline:
        return []
    lines = ["failed checks asked at every step:"]
    for row in timeline:
        parts = [
            f"passed at {_steps(row.get('passed') or [])}" if row.get("passed") else "passed at no step",
            f"failed at {_steps(row.get('failed') or [])}" if row.get("failed") else None,
            f"unknown at {_steps(row.get('unknown') or [])}" if row.get("unknown") else None,
        ]
        lines.append(
            f"  {row.get('check')} {_shown(row.get('expected'))}: " + "; ".join(p for p in parts if p)
        )
    return lines
