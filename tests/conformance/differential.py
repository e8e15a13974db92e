"""A differential fidelity checker: the same questions asked of the live page and of its captured session.

At each captured step of an episode, :class:`EpisodeProbe` surveys the live DOM of every tab and
builds questions from it (deterministic for a seed and a DOM): text of elements sampled across the
page, ``.value`` / ``.checked`` / ``selectedIndex`` of every form control, attributes,
``querySelectorAll(sel).length`` (pseudo-classes like ``:checked`` too), ``getComputedStyle`` and
``checkVisibility()``, ``location`` and ``document.title``, Playwright's own page and locator calls,
and fresh loads of every URL the episode has shown so far (a new tab in the same live context, as the
evaluator's ``program_html`` opens one). Each is answered **live** before the next agent action,
and later **offline** from the session alone, through the replay API the evaluators use
(``MockBrowserContext`` → ``MockPage.evaluate``, ``context.new_page().goto(url)``, locators). Each
outcome is *equal*, a *loud miss* (``ReplayMissError``: the session says it cannot answer, which is
allowed) or a **silent difference** (two different answers: the failure this tool exists to find).

Library-agnostic: it needs only a Playwright page of the live application and a loaded session, so
any app the conformance suite plays can be checked (``tests/conformance/sources.py`` lists them).
All questions read; none changes the page (the live episode must go on unchanged).
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from cdp_integration.errors import ReplayMissError

__all__ = [
    "AppTally",
    "EpisodeProbe",
    "Outcome",
    "Question",
    "format_report",
    "format_silent",
    "tally",
]

_SURVEY = r"""(limit) => {
  const memo = new Map();
  const sel = (el) => {
    if (memo.has(el)) return memo.get(el);
    let s;
    if (el.id && document.querySelectorAll('#' + CSS.escape(el.id)).length === 1) s = '#' + CSS.escape(el.id);
    else if (!el.parentElement) s = CSS.escape(el.localName);
    else {
      let i = 1;
      for (let p = el.previousElementSibling; p; p = p.previousElementSibling) if (p.localName === el.localName) i++;
      s = sel(el.parentElement) + ' > ' + CSS.escape(el.localName) + ':nth-of-type(' + i + ')';
    }
    memo.set(el, s);
    return s;
  };
  const all = [...document.querySelectorAll('body *')].filter((e) => !['script', 'style', 'noscript', 'template'].includes(e.localName));
  const stride = Math.max(1, Math.ceil(all.length / limit));
  const elements = all.filter((e, i) => i % stride === 0).map((e) => ({
    s: sel(e),
    tag: e.localName,
    attrs: [...e.attributes].map((a) => a.name).filter((n) => !n.startsWith('on')).slice(0, 12),
    text: (e.textContent || '').trim().length > 0,
  }));
  const controls = [...document.querySelectorAll('input, textarea, select')].slice(0, limit).map((e) => ({
    s: sel(e), tag: e.localName, type: (e.type || '').toLowerCase(),
  }));
  const classes = new Set();
  for (const e of all) for (const c of e.classList) if (classes.size < 300) classes.add(c);
  const tags = [...new Set(all.map((e) => e.localName))];
  return { elements, controls, classes: [...classes], tags, total: all.length };
}"""
"""Reads the live DOM once per tab and step: element selectors (a unique id, else an ``nth-of-type``
path from the root), the form controls, class names and tags present."""


def _js(value: object) -> str:
    return json.dumps(value)


def _on(selector: str, body: str) -> str:
    return (
        f"() => {{ const e = document.querySelector({_js(selector)}); return e === null ? null : {body}; }}"
    )


_TEXT_LIKE = {
    "",
    "text",
    "search",
    "email",
    "url",
    "tel",
    "number",
    "password",
    "hidden",
    "date",
    "time",
    "datetime-local",
    "month",
    "week",
    "color",
    "range",
}
_STYLE_PROPERTIES = (
    "display",
    "visibility",
    "color",
    "font-weight",
    "text-decoration-line",
    "background-color",
    "opacity",
)
_PSEUDO = (
    ":checked",
    "option:checked",
    ":disabled",
    ":placeholder-shown",
    ":invalid",
    "[open]",
    ":target",
    ":default",
    ":indeterminate",
)
_PAGE_EXPRESSIONS = (
    ("location", "() => location.href"),
    ("location", "() => location.hash"),
    ("title", "() => document.title"),
    ("text", "() => document.body ? document.body.textContent : null"),
    ("text", "() => document.body ? document.body.innerText : null"),
    ("count", "() => document.forms.length"),
    ("count", "() => document.links.length"),
)
_FRESH_EXPRESSIONS = (
    ("location", "() => location.href"),
    ("title", "() => document.title"),
    ("text", "() => document.body ? document.body.textContent : null"),
    ("text", "() => document.body ? document.body.innerText : null"),
)


@dataclass(frozen=True)
class Question:
    """One question about a step: ``op`` on the tab ``tab_id`` (or on a fresh load of ``url``)."""

    step: int
    kind: str
    """What it probes: text, form, attribute, count, style, visible, location, title, api, content."""
    op: str
    """``evaluate`` (``arg`` is the expression), ``title``, ``url``, ``content``, or
    ``locator.<method>`` (``arg`` is the selector, ``extra`` the attribute name for get_attribute)."""
    arg: str | None
    tab_id: str | None = None
    """The live tab's CDP target id (the session's ``TabState.tab_id``); None for a fresh load."""
    url: str | None = None
    """A fresh load: a new tab in the same context, ``goto(url)``, then the question."""
    extra: str | None = None

    def describe(self) -> str:
        where = f"fresh load of {self.url}" if self.url else f"tab {self.tab_id and self.tab_id[:8]}"
        call = self.op + (
            f"({self.arg!r}" + (f", {self.extra!r}" if self.extra else "") + ")" if self.arg else "()"
        )
        return f"step {self.step} [{self.kind}] {where}: {call}"


@dataclass(frozen=True)
class Outcome:
    question: Question
    verdict: str
    """``equal``, ``miss`` (a loud ``ReplayMissError``), ``silent`` (a different answer); not judged:
    ``unstable`` (live itself gave two answers: two loads of the page, or the same page asked twice) and
    ``moved`` (the live tab had changed since its capture, e.g. an animation still running)."""
    live: Any
    offline: Any = None
    miss: str | None = None


def _error(exc: BaseException) -> dict[str, str]:
    """An error as an answer: its type and first line (the stack and Playwright's call log dropped)."""
    message = (getattr(exc, "message", None) or str(exc)).strip().splitlines()
    return {"error": message[0] if message else type(exc).__name__}


def _ask(page: Any, question: Question) -> Any:
    """The question's answer on ``page`` (live ``Page`` or ``MockPage``): the same call on both."""
    op = question.op
    if op == "evaluate":
        return page.evaluate(question.arg)
    if op == "title":
        return page.title()
    if op == "url":
        return page.url
    if op == "content":
        return page.content()
    if op.startswith("locator."):
        locator = page.locator(question.arg)
        method = op.split(".", 1)[1]
        if method == "count":
            return locator.count()
        if method == "get_attribute":
            return locator.get_attribute(question.extra, timeout=2000)
        if method == "is_visible":
            return locator.is_visible()
        return getattr(locator, method)(timeout=2000)
    raise ValueError(f"unknown question op {op!r}")


class EpisodeProbe:
    """Asks questions of one live episode step by step, then of its session.

    ``ask_live(page, step)`` right after each step's capture (before the next agent action);
    ``answer_offline(session)`` once the session is saved. ``phases``: context managers to enter
    around live fresh loads (a logger's ``evaluation_phase``, so the checker's own tabs are tagged
    as evaluator traffic, exactly like the evaluator's).
    """

    def __init__(
        self,
        app: str,
        label: str,
        *,
        seed: int = 0,
        per_step: int = 40,
        fresh_per_url: int = 6,
        max_controls: int = 60,
    ) -> None:
        self.app = app
        self.label = label
        self.seed = seed
        self.per_step = per_step
        self.fresh_per_url = fresh_per_url
        self.max_controls = max_controls
        self.asked: list[tuple[Question, Any]] = []
        self.urls_seen: list[str] = []
        self.fresh_delay_ms = 0.0
        self.seconds = 0.0
        """Time spent asking, live and offline (what the checker adds to an episode)."""

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(":".join(map(str, (self.seed, self.app, self.label, *parts))))

    # -- live -------------------------------------------------------------------------------------

    def ask_live(
        self,
        page: Any,
        step: int,
        *,
        captured: Any = None,
        phases: Iterable[Callable[[], AbstractContextManager[Any]]] = (),
        fresh: bool = True,
        fresh_wait: str = "load",
        fresh_delay_ms: float = 0,
    ) -> None:
        """Survey every tab of ``page``'s context and answer the questions on the live pages now.

        ``captured``: the ``Step`` just captured (``logger.last_step``); a tab whose live document no
        longer serializes to the captured HTML moved on after its capture (an animation still running),
        and its questions are not judged (verdict ``moved``). ``phases``: context-manager factories
        entered around the fresh loads (``logger.evaluation_phase``). ``fresh``: also load every URL seen
        so far in a new tab (twice, a clock second apart: what differs between two loads, a timestamp,
        no replay can match) and ask questions there, ``fresh_delay_ms`` after the load (the evaluator's
        wait, for pages that fill themselves in after their load).
        """
        started = time.perf_counter()
        self.fresh_delay_ms = fresh_delay_ms
        try:
            self._ask_live(page, step, captured, phases, fresh, fresh_wait)
        finally:
            self.seconds += time.perf_counter() - started

    def _ask_live(
        self,
        page: Any,
        step: int,
        captured: Any,
        phases: Iterable[Callable[[], AbstractContextManager[Any]]],
        fresh: bool,
        fresh_wait: str,
    ) -> None:
        context = page.context
        tabs = [tab for tab in context.pages if not tab.is_closed()]
        for tab in tabs:
            if tab.url not in self.urls_seen and tab.url.startswith(("http://", "https://")):
                self.urls_seen.append(tab.url)
        captured_html = {t.tab_id: t.html for t in captured.tabs} if captured is not None else {}
        pending: list[tuple[Question, Any]] = []  # (question, first answer)
        for number, tab in enumerate(tabs):
            tab_id = _target_id(context, tab)
            html = captured_html.get(tab_id)
            watched = html is not None and "shadowrootmode" not in html
            moved = watched and tab.content() != html
            questions = self._questions(tab, step, tab_id, self._rng(step, number), self.per_step)
            answers = _answers(tab, questions)
            # Also after the answers: an animation that ends while they are asked (a progress bar fading
            # out) moved the tab on after its capture as much as one that had ended before.
            moved = moved or (watched and tab.content() != html)
            pending += [(q, _Moved(a) if moved else a) for q, a in zip(questions, answers, strict=True)]
        loads: list[tuple[list[Question], list[Any], float]] = []
        spans: list[tuple[int, int]] = []  # where each URL's second-load answers are in ``self.asked``
        first_loads: list[Any] = []  # the first loads' tabs, open until the second loads are done
        with contextlib.ExitStack() as stack:
            for phase in phases:
                stack.enter_context(phase())
            stack.callback(lambda: [tab.close() for tab in first_loads])  # still in the phases
            for url in self.urls_seen if fresh else []:
                questions, answers = self._fresh(context, url, step, fresh_wait, None, keep=first_loads)
                # The server rendered it before now: the second load must start in a later clock
                # second than this, not than the first load's start (under load a load takes > 1 s).
                loads.append((questions, answers, time.time()))
            # The second pass over the tabs: a page whose answers change by themselves (a clock).
            by_tab: dict[str, list[int]] = {}
            for index, (question, _) in enumerate(pending):
                by_tab.setdefault(question.tab_id or "", []).append(index)
            for tab in tabs:
                indexes = by_tab.get(_target_id(context, tab), [])
                again = _answers(tab, [pending[i][0] for i in indexes])
                for i, answer in zip(indexes, again, strict=True):
                    question, first = pending[i]
                    stable = (
                        first if isinstance(first, _Moved) or first == answer else _Unstable(first, answer)
                    )
                    self.asked.append((question, stable))
            for url, (questions, first_answers, loaded) in zip(
                self.urls_seen if fresh else [], loads, strict=True
            ):
                while int(time.time()) == int(loaded):  # wait for the next clock second
                    time.sleep(0.05)
                _, again = self._fresh(context, url, step, fresh_wait, questions)
                spans.append((len(self.asked), len(self.asked) + len(questions)))
                self.asked += [
                    (q, a if a == b else _Unstable(a, b))
                    for q, a, b in zip(questions, first_answers, again, strict=True)
                ]
            # The first loads asked again, now that the second loads are done: a page whose scripts were
            # still filling it in at the evaluator's moment (e.g. on a loaded machine) answers otherwise
            # by now, and what a fresh load shows then depends on timing (verdict ``unstable``).
            for (start, end), tab in zip(spans, first_loads, strict=True):
                later = _answers(tab, [question for question, _ in self.asked[start:end]])
                for index, answer in zip(range(start, end), later, strict=True):
                    question, judged = self.asked[index]
                    if not isinstance(judged, _Unstable) and judged != answer:
                        self.asked[index] = (question, _Unstable(judged, answer))

    def _fresh(
        self,
        context: Any,
        url: str,
        step: int,
        wait: str,
        questions: list[Question] | None,
        *,
        keep: list[Any] | None = None,
    ) -> tuple[list[Question], list[Any]]:
        """A new tab in the live context, ``goto(url)``, the questions (made from it the first time).

        ``keep``: the tab is left open and appended to it (to be asked again later)."""
        tab = context.new_page()
        try:
            tab.goto(url, wait_until=wait)
            if self.fresh_delay_ms:
                tab.wait_for_timeout(self.fresh_delay_ms)
            if questions is None:
                questions = self._questions(
                    tab, step, None, self._rng(step, url), self.fresh_per_url, url=url
                )
            return questions, _answers(tab, questions)
        finally:
            if keep is None:
                tab.close()
            else:
                keep.append(tab)

    def _questions(
        self,
        page: Any,
        step: int,
        tab_id: str | None,
        rng: random.Random,
        budget: int,
        *,
        url: str | None = None,
    ) -> list[Question]:
        survey = page.evaluate(_SURVEY, 2000)
        made: list[Question] = []

        def add(kind: str, op: str, arg: str | None, extra: str | None = None) -> None:
            made.append(Question(step, kind, op, arg, tab_id=tab_id, url=url, extra=extra))

        for kind, expression in _FRESH_EXPRESSIONS if url else _PAGE_EXPRESSIONS:
            add(kind, "evaluate", expression)
        add("title", "title", None)
        add("location", "url", None)
        add("content", "content", None)
        for control in survey["controls"][: self.max_controls]:
            s, tag, kind = control["s"], control["tag"], control["type"]
            if tag == "select":
                add("form", "evaluate", _on(s, "e.selectedIndex"))
                add("form", "evaluate", _on(s, "e.value"))
                add("form", "evaluate", _on(s, "[...e.selectedOptions].map((o) => o.textContent)"))
            elif kind in ("checkbox", "radio"):
                add("form", "evaluate", _on(s, "e.checked"))
            elif tag == "textarea" or kind in _TEXT_LIKE:
                add("form", "evaluate", _on(s, "e.value"))
        elements = survey["elements"]
        classes, tags = survey["classes"], survey["tags"]
        if url is not None:
            budget = max(0, budget - len(made))
        makers = [
            "text",
            "text",
            "inner_text",
            "attribute",
            "count",
            "style",
            "visible",
            "locator",
        ]
        for _ in range(budget):
            maker = rng.choice(makers)
            element = rng.choice(elements) if elements else None
            if maker == "count" or element is None:
                pool = [f".{c}" for c in classes] + list(tags) + list(_PSEUDO)
                target = rng.choice(pool) if pool else "*"
                if rng.random() < 0.3 and classes and tags:
                    target = f"{rng.choice(tags)}.{rng.choice(classes)}"
                add("count", "evaluate", f"() => document.querySelectorAll({_js(target)}).length")
                continue
            s = element["s"]
            if maker == "text":
                add("text", "evaluate", _on(s, "e.textContent"))
            elif maker == "inner_text":
                add("text", "evaluate", _on(s, "e.innerText"))
            elif maker == "attribute" and element["attrs"]:
                name = rng.choice(element["attrs"])
                add("attribute", "evaluate", _on(s, f"e.getAttribute({_js(name)})"))
            elif maker == "attribute":
                add("attribute", "evaluate", _on(s, "e.attributes.length"))
            elif maker == "style":
                prop = rng.choice(_STYLE_PROPERTIES)
                add("style", "evaluate", _on(s, f"getComputedStyle(e).getPropertyValue({_js(prop)})"))
            elif maker == "visible":
                add("visible", "evaluate", _on(s, "e.checkVisibility()"))
            else:
                method = rng.choice(("count", "text_content", "inner_text", "get_attribute", "is_visible"))
                if method == "get_attribute" and element["attrs"]:
                    add("api", "locator.get_attribute", s, rng.choice(element["attrs"]))
                elif method != "get_attribute":
                    add("api", f"locator.{method}", s)
        return made

    # -- offline ----------------------------------------------------------------------------------

    def answer_offline(self, session: Any) -> list[Outcome]:
        """Ask every question of the captured session (no recorded answers: ``evaluation=None``)."""
        from cdp_integration.replay.page import MockBrowserContext

        started = time.perf_counter()
        try:
            return self._answer_offline(session, MockBrowserContext)
        finally:
            self.seconds += time.perf_counter() - started

    def _answer_offline(self, session: Any, context_type: Any) -> list[Outcome]:
        outcomes: list[Outcome] = []
        by_step: dict[int, list[tuple[Question, Any]]] = {}
        for question, live in self.asked:
            by_step.setdefault(question.step, []).append((question, live))
        for step, asked in sorted(by_step.items()):
            context = context_type(session, step, evaluation=None)
            try:
                tabs = [tab.tab_id for tab in context.step.tabs]
                fresh: dict[str, Any] = {}
                for question, live in asked:
                    if question.url is not None:
                        page = fresh.get(question.url)
                        if page is None:
                            page = fresh[question.url] = context.new_page()
                            page.goto(question.url)
                    elif question.tab_id in tabs:
                        page = context.pages[tabs.index(question.tab_id)]
                    else:
                        outcomes.append(Outcome(question, "miss", live, miss="the session has no such tab"))
                        continue
                    outcomes.append(_judge(page, question, live))
            finally:
                context.close()
        return outcomes


def _target_id(context: Any, page: Any) -> str:
    cdp = context.new_cdp_session(page)
    try:
        return str(cdp.send("Target.getTargetInfo")["targetInfo"]["targetId"])
    finally:
        with contextlib.suppress(Exception):
            cdp.detach()


def _answer(page: Any, question: Question) -> Any:
    try:
        return _normal(_ask(page, question))
    except Exception as exc:  # the live answer may be an error; offline must then fail the same way
        return _error(exc)


def _answers(page: Any, questions: Sequence[Question]) -> list[Any]:
    """Live answers; the ``evaluate`` ones in one round trip (each expression inlined in its own
    ``try``), a failed one asked again on its own so its error comes through Playwright like offline."""
    expressions = [q.arg for q in questions if q.op == "evaluate"]
    batch = (
        "() => ["
        + ",".join(
            f"(() => {{ try {{ return {{ v: ({expression})() }}; }} catch (e) {{ return {{ failed: true }}; }} }})()"
            for expression in expressions
        )
        + "]"
    )
    results = iter(page.evaluate(batch) if expressions else [])
    answers = []
    for question in questions:
        if question.op != "evaluate":
            answers.append(_answer(page, question))
            continue
        result = next(results)
        answers.append(_answer(page, question) if result.get("failed") else _normal(result.get("v")))
    return answers


def _normal(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class _Moved:
    """An answer from a tab whose live document had changed since its capture (not judged)."""

    answer: Any


@dataclass(frozen=True)
class _Unstable:
    """A question the live application answered differently twice in a row (a clock, a nonce)."""

    first: Any
    second: Any


_RELATIVE_TIME = re.compile(
    r"\b(?:\d+|an?|one)\s+(?:second|minute|hour|day|week|month|year)s?\s+ago\b|\bjust now\b", re.IGNORECASE
)
"""Relative-time text ("17 minutes ago", Trac's "Last modified"): it changes with the clock alone."""


def _only_relative_time(live: Any, offline: Any) -> bool:
    """Whether ``live`` and ``offline`` differ only inside relative-time phrases: the page said how long
    ago something happened at the capture, and again a minute boundary later at the live question (the
    calibration's two loads a second apart rarely straddle that boundary). Both must be strings with
    such a phrase; everything else in them must be identical."""
    if not isinstance(live, str) or not isinstance(offline, str) or not _RELATIVE_TIME.search(live):
        return False
    return _RELATIVE_TIME.sub("<ago>", live) == _RELATIVE_TIME.sub("<ago>", offline)


def _judge(page: Any, question: Question, live: Any) -> Outcome:
    if isinstance(live, _Unstable):
        return Outcome(question, "unstable", [live.first, live.second])
    if isinstance(live, _Moved):
        return Outcome(question, "moved", live.answer)
    try:
        offline = _normal(_ask(page, question))
    except ReplayMissError as exc:
        return Outcome(question, "miss", live, miss=str(exc))
    except Exception as exc:
        offline = _error(exc)
    if offline != live and _only_relative_time(live, offline):
        return Outcome(question, "unstable", [live, offline], miss="differs only in relative-time text")
    return Outcome(question, "equal" if offline == live else "silent", live, offline)


# -- reporting ---------------------------------------------------------------------------------------


@dataclass
class AppTally:
    questions: int = 0
    equal: int = 0
    misses: int = 0
    silent: int = 0
    unstable: int = 0
    moved: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    """Silent differences by question kind."""


def tally(outcomes_by_app: dict[str, Sequence[Outcome]]) -> dict[str, AppTally]:
    result: dict[str, AppTally] = {}
    for app, outcomes in outcomes_by_app.items():
        t = result[app] = AppTally()
        for outcome in outcomes:
            t.questions += 1
            if outcome.verdict == "equal":
                t.equal += 1
            elif outcome.verdict == "miss":
                t.misses += 1
            elif outcome.verdict == "unstable":
                t.unstable += 1
            elif outcome.verdict == "moved":
                t.moved += 1
            else:
                t.silent += 1
                t.by_kind[outcome.question.kind] += 1
    return result


def format_report(outcomes_by_app: dict[str, Sequence[Outcome]]) -> str:
    """The per-app table: questions, equal, loud misses, silent differences (by kind)."""
    rows = [
        f"{'app':<12} {'questions':>9} {'equal':>7} {'loud misses':>11} {'unstable':>8} {'moved':>5} {'silent':>6}"
        "  silent by kind"
    ]
    total = AppTally()
    for app, t in tally(outcomes_by_app).items():
        kinds = ", ".join(f"{k} {n}" for k, n in t.by_kind.most_common())
        rows.append(
            f"{app:<12} {t.questions:>9} {t.equal:>7} {t.misses:>11} {t.unstable:>8} {t.moved:>5} {t.silent:>6}  {kinds}"
        )
        total.questions += t.questions
        total.equal += t.equal
        total.misses += t.misses
        total.silent += t.silent
        total.unstable += t.unstable
        total.moved += t.moved
    rows.append(
        f"{'total':<12} {total.questions:>9} {total.equal:>7} {total.misses:>11} {total.unstable:>8} {total.moved:>5} {total.silent:>6}"
    )
    return "\n".join(rows)


def _show(value: Any, other: Any, width: int = 160) -> str:
    """``value`` shortened around where it first differs from ``other``."""
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= width:
        return text
    other_text = json.dumps(other, ensure_ascii=False)
    at = next(
        (i for i, (a, b) in enumerate(zip(text, other_text, strict=False)) if a != b),
        min(len(text), len(other_text)),
    )
    start = max(0, at - width // 3)
    return f"({len(text)} chars) …{text[start : start + width]}…"


def format_silent(label: str, outcome: Outcome) -> str:
    """One silent difference: where, the question, both answers."""
    return (
        f"{label} {outcome.question.describe()}\n"
        f"    live:    {_show(outcome.live, outcome.offline)}\n"
        f"    offline: {_show(outcome.offline, outcome.live)}"
    )
