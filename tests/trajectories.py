"""Generated agent trajectories, and the oracle that checks each one's offline scoring against live.

A seeded :class:`Agent` plays random behaviour on a live site: tabs opened every way (a ``target=_blank``
link, ``window.open`` from a button, ``context.new_page()`` and ``goto``), switched to (``bring_to_front``
and an action there) and closed; back, forward, reload; hash and ``history.pushState`` route changes;
POST-redirect-GET submits; forms typed in and left unsaved; an iframe's form. The generic behaviours
(a same-origin link, a text input, a form, a new tab on a URL already seen, back/forward/reload) work on
any site, so the same generator runs over the bundled site (``tests/trajectory_site.py``), the demo shop
and the conformance apps. :class:`BrowserGymAgent` plays the same kind of episode through BrowserGym's
own actions (``new_tab``, ``tab_focus``, ``tab_close``, ``goto``, ``go_back``, ``go_forward``,
``click``, ``fill``).

The generator keeps its own ground truth of the agent's current tab: on a plain page, the tab it last
opened, navigated or acted in (the documented default); in BrowserGym, ``env.unwrapped.page``. After the
episode, :func:`play_episode` asks live, of that tab: url_match (its URL, and another open tab's URL),
WebArena ``program_html`` locators on ``last`` sampled from its DOM (all scored by the unmodified official
evaluator), and the differential checker's questions (``tests/conformance/differential.py``). The session
is saved with those questions as its task, so its end-of-episode probe records them.
:func:`judge_episode` then, with the site stopped, asks the same of the session in both capture modes
(the recorded probe, and reconstructed with the probe stripped): the offline current tab must be the
ground truth's (or the step says ``unknown`` and scoring is a loud ``ReplayMissError``); each answer is
equal, or a loud miss with its reason; anything else is a **silent difference**.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "Agent",
    "BrowserGymAgent",
    "Check",
    "LiveEnd",
    "Site",
    "format_report",
    "judge_episode",
    "play_browsergym_episode",
    "play_episode",
]

ACTION_TIMEOUT_MS = 5_000
_WORDS = ("alpha", "ocean", "quartz", "maple", "ember", "violet", "delta", "harbor", "cedar", "lumen")
_RISKY = re.compile(
    r"log ?out|sign ?out|logout|delete|remove|download|export|format=|do=(?:admin|profile|register|resend)|"
    r"\.(?:zip|pdf|csv|txt|gz|tar|xml|rss|atom|json|png|jpe?g|svg)(?:$|\?)|/raw/|/zip-|action=diff",
    re.IGNORECASE,
)
"""Links and forms the generic behaviours leave alone: they end the sign-in, download a file, or
destroy what other episodes of the run use."""


@dataclass(frozen=True)
class Site:
    """A running site the generator plays on."""

    name: str
    url: str
    context_options: dict[str, Any] = field(default_factory=dict)
    sign_in: Callable[[Any], None] | None = None
    """Signs a fresh page's context in (before the logger attaches); None: nothing to do."""
    start: str = ""
    """Where an episode starts, relative to ``url``."""
    bundled: bool = False
    """The bundled site: its own behaviours (``window.open`` button, push routes, iframe form) apply."""


# -- the plain-page agent ---------------------------------------------------------------------------

_CANDIDATES = r"""(pattern) => {
  const risky = new RegExp(pattern, 'i');
  const shown = (e) => {
    if (!e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) return false;
    const r = e.getBoundingClientRect();
    return r.width > 2 && r.height > 2;
  };
  const links = [...document.querySelectorAll('a[href]')].map((a, i) => {
    const href = a.getAttribute('href') || '';
    return {i, href: a.href, target: (a.getAttribute('target') || '').toLowerCase(), shown: shown(a),
            same: a.origin === location.origin && /^https?:$/.test(a.protocol),
            hash: href.startsWith('#') || (a.pathname === location.pathname && a.search === location.search && a.hash !== ''),
            risky: risky.test(a.href) || risky.test(a.textContent || '') || a.hasAttribute('download')};
  }).filter((l) => l.shown && l.same && !l.risky);
  const textual = ['', 'text', 'search', 'email', 'url', 'tel', 'number'];
  const inputs = [...document.querySelectorAll('input, textarea')].map((e, i) => ({
    i, type: (e.getAttribute('type') || '').toLowerCase(), shown: shown(e),
    ok: !e.disabled && !e.readOnly && (e.localName === 'textarea' || textual.includes((e.getAttribute('type') || '').toLowerCase())),
  })).filter((e) => e.shown && e.ok);
  const forms = [...document.querySelectorAll('form')].map((f, i) => ({
    i, method: (f.getAttribute('method') || 'get').toLowerCase(),
    submit: [...f.querySelectorAll('button:not([type]), button[type=submit], input[type=submit]')].some(shown),
    risky: risky.test(f.action || '') || risky.test(f.id || '') || f.querySelector('input[type=password], input[type=file]') !== null,
  })).filter((f) => f.submit && !f.risky);
  return {links, inputs, forms,
          push: [...document.querySelectorAll('button.push')].filter(shown).length,
          popup: document.querySelector('#popup') !== null,
          iframe: document.querySelector('iframe#frame') !== null};
}"""
"""What the current page offers the generic behaviours: visible same-origin links (with their index
among ``a[href]``), text inputs (index among ``input, textarea``), forms with a visible submit button."""


class Agent:
    """Random behaviour on a plain Playwright page, with its own record of the current tab.

    ``recency``: the open tabs, least recently used first; the current tab is the last one (the tab the
    agent last opened, navigated or acted in).
    """

    def __init__(self, context: Any, site: Site, rng: random.Random, first: Any) -> None:
        self.context = context
        self.site = site
        self.rng = rng
        self.recency: list[Any] = [first]
        self.seen: list[str] = [first.url]
        self.log: list[str] = []
        """What was done, one line per behaviour (with its arguments): the episode's reproduction."""
        self.behaviours: list[str] = []

    @property
    def current(self) -> Any:
        return self.recency[-1]

    def use(self, page: Any) -> None:
        """``page`` is now the tab the agent last used."""
        if page in self.recency:
            self.recency.remove(page)
        self.recency.append(page)

    def _candidates(self, page: Any) -> dict[str, Any]:
        try:
            found: dict[str, Any] = page.evaluate(_CANDIDATES, _RISKY.pattern)
            return found
        except Exception:  # a page mid-navigation: no candidates this time
            return {"links": [], "inputs": [], "forms": [], "push": 0, "popup": False, "iframe": False}

    def _settled(self, page: Any) -> None:
        from tests.conformance.sources import settle

        with contextlib.suppress(Exception):
            page.wait_for_load_state("load", timeout=15_000)
        settle(page)
        with contextlib.suppress(Exception):
            if page.url.startswith("http") and page.url not in self.seen:
                self.seen.append(page.url)

    def _adopt_new_pages(self) -> None:
        """Tabs the last action opened (a popup the agent did not ask for) are the newest, hence current;
        tabs a page closed by itself are gone."""
        for page in list(self.recency):
            if page.is_closed():
                self.recency.remove(page)
        for page in self.context.pages:
            if page not in self.recency and not page.is_closed():
                self._settled(page)
                self.recency.append(page)

    # -- behaviours: each returns what it did, or None when it does not apply here -----------------

    def _click_link(self, page: Any, *, hash_only: bool) -> str | None:
        links = [
            link
            for link in self._candidates(page)["links"]
            if link["target"] in ("", "_self") and link["hash"] == hash_only
        ]
        if not links:
            return None
        link = self.rng.choice(links)
        page.locator("a[href]").nth(link["i"]).click(timeout=ACTION_TIMEOUT_MS)
        return link["href"]

    def link(self) -> str | None:
        return self._click_link(self.current, hash_only=False)

    def hash_link(self) -> str | None:
        return self._click_link(self.current, hash_only=True)

    def push_route(self) -> str | None:
        page = self.current
        count = self._candidates(page)["push"]
        if count:
            index = self.rng.randrange(count)
            page.locator("button.push").nth(index).click(timeout=ACTION_TIMEOUT_MS)
            return f"button.push #{index}"
        if self.site.bundled:
            return None
        route = f"gen={self.rng.randrange(1000)}"
        page.evaluate("(q) => history.pushState(null, '', location.pathname + '?' + q)", route)
        return f"history.pushState ?{route}"

    def _open(self, opener: Callable[[], None]) -> Any:
        with self.context.expect_page(timeout=ACTION_TIMEOUT_MS * 2) as opened:
            opener()
        page = opened.value
        self._settled(page)
        self.use(page)
        return page

    def blank_link(self) -> str | None:
        page = self.current
        links = [link for link in self._candidates(page)["links"] if link["target"] == "_blank"]
        if not links:
            return None
        link = self.rng.choice(links)
        self._open(lambda: page.locator("a[href]").nth(link["i"]).click(timeout=ACTION_TIMEOUT_MS))
        return link["href"]

    def window_open(self) -> str | None:
        page = self.current
        if not self._candidates(page)["popup"]:
            return None
        opened = self._open(lambda: page.click("#popup", timeout=ACTION_TIMEOUT_MS))
        return str(opened.url)

    def new_page(self) -> str | None:
        url = self.rng.choice(self.seen)
        page = self.context.new_page()
        self.use(page)
        page.goto(url)
        return url

    def _act_in_place(self, page: Any) -> str:
        """A small action in ``page`` (after a switch): type, click a hash link, or a harmless key."""
        options = [self._type_in, lambda p: self._click_link(p, hash_only=True)]
        self.rng.shuffle(options)
        for option in options:
            done = option(page)
            if done is not None:
                return done
        page.keyboard.press("Shift")
        return "key Shift"

    def switch(self) -> str | None:
        others = self.recency[:-1]
        if not others:
            return None
        page = self.rng.choice(others)
        page.bring_to_front()
        self.use(page)
        return f"to tab {self.context.pages.index(page)} ({page.url}), then {self._act_in_place(page)}"

    def close(self) -> str | None:
        if len(self.recency) < 2:
            return None
        page = self.rng.choice(self.recency)
        where = f"tab {self.context.pages.index(page)} ({page.url})"
        was_current = page is self.current
        self.recency.remove(page)
        page.close()
        return where + (" (the current one)" if was_current else "")

    def back(self) -> str | None:
        response = self.current.go_back()
        return "back" if response is not None else "back (no history)"

    def forward(self) -> str | None:
        response = self.current.go_forward()
        return "forward" if response is not None else "forward (no history)"

    def reload(self) -> str | None:
        self.current.reload()
        return self.current.url  # type: ignore[no-any-return]

    def goto_seen(self) -> str | None:
        url = self.rng.choice(self.seen)
        self.current.goto(url)
        return url

    def _type_in(self, page: Any) -> str | None:
        inputs = self._candidates(page)["inputs"]
        if not inputs:
            return None
        chosen = self.rng.choice(inputs)
        text = str(self.rng.randrange(100)) if chosen["type"] == "number" else self._words()
        page.locator("input, textarea").nth(chosen["i"]).fill(text, timeout=ACTION_TIMEOUT_MS)
        return f"input #{chosen['i']} <- {text!r}"

    def type(self) -> str | None:
        return self._type_in(self.current)

    def submit(self) -> str | None:
        page = self.current
        forms = self._candidates(page)["forms"]
        if self.site.bundled and self.rng.random() < 0.6:
            forms = [form for form in forms if form["method"] == "post"] or forms
        if not forms:
            return None
        chosen = self.rng.choice(forms)
        form = page.locator("form").nth(chosen["i"])
        fields = form.locator(
            "input:not([type]):visible, input[type=text]:visible, input[type=search]:visible, textarea:visible"
        )
        typed = []
        for index in range(min(fields.count(), 4)):
            text = self._words()
            with contextlib.suppress(Exception):
                fields.nth(index).fill(text, timeout=ACTION_TIMEOUT_MS)
                typed.append(text)
        submit = form.locator("button:not([type]), button[type=submit], input[type=submit]").locator(
            "visible=true"
        )
        submit.first.click(timeout=ACTION_TIMEOUT_MS)
        return f"form #{chosen['i']} ({chosen['method']}) with {typed}"

    def iframe_form(self) -> str | None:
        page = self.current
        if not self._candidates(page)["iframe"]:
            return None
        frame = page.frame_locator("iframe#frame")
        text = self._words()
        frame.locator("input[name=msg]").fill(text, timeout=ACTION_TIMEOUT_MS)
        if self.rng.random() < 0.5:
            frame.locator("button[type=submit]").click(timeout=ACTION_TIMEOUT_MS)
            return f"sent {text!r}"
        return f"typed {text!r} (unsent)"

    def _words(self) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(1, 3)))

    # -- playing ---------------------------------------------------------------------------------

    def step(self, first: str | None = None) -> str:
        """One random behaviour that applies here (``first`` tried first); returns its name."""
        names = list(BEHAVIOURS)
        weights = [BEHAVIOURS[name] for name in names]
        tried: set[str] = set()
        while len(tried) < len(names):
            name = first if first is not None and not tried else self.rng.choices(names, weights)[0]
            if name in tried:
                continue
            tried.add(name)
            acted_on = self.current
            try:
                done = getattr(self, name)()
            except Exception as exc:  # a click on an element that went away: it did not happen
                done = None if _is_timeout(exc) else f"failed: {str(exc).splitlines()[0][:120]}"
            if done is None:
                continue
            if (
                name not in ("new_page", "blank_link", "window_open", "switch", "close")
                and not acted_on.is_closed()
            ):
                self.use(acted_on)
            self._adopt_new_pages()
            self._settled(self.current)
            self.behaviours.append(name)
            self.log.append(f"{name}: {done}")
            return name
        self.behaviours.append("nothing")
        self.log.append("nothing applied")
        return "nothing"


def _is_timeout(exc: Exception) -> bool:
    return "Timeout" in type(exc).__name__ or "Timeout" in str(exc)[:200]


BEHAVIOURS: dict[str, float] = {
    "link": 3,
    "hash_link": 1.5,
    "push_route": 1,
    "blank_link": 1.5,
    "window_open": 1.5,
    "new_page": 1.5,
    "switch": 2,
    "close": 1,
    "back": 1.5,
    "forward": 0.7,
    "reload": 0.7,
    "goto_seen": 0.7,
    "type": 2,
    "submit": 1.5,
    "iframe_form": 1,
}
"""Each behaviour's weight in the random choice (one that does not apply on the page is skipped)."""


# -- BrowserGym -------------------------------------------------------------------------------------

_BIDS = r"""() => [...document.querySelectorAll('[bid]')].map((e) => ({
  bid: e.getAttribute('bid'), tag: e.localName, id: e.id, cls: e.getAttribute('class') || '',
  type: (e.getAttribute('type') || '').toLowerCase(), href: e.getAttribute('href'),
  target: e.getAttribute('target') || '', name: e.getAttribute('name') || '',
}))"""


class BrowserGymAgent:
    """Random behaviour through BrowserGym's high-level actions; the ground truth is ``env.unwrapped.page``."""

    ACTIONS: ClassVar[dict[str, float]] = {
        "bg_click_link": 3,
        "bg_click_hash": 1,
        "bg_click_push": 1,
        "bg_click_blank": 1.5,
        "bg_click_popup": 1.5,
        "bg_new_tab": 1.5,
        "bg_tab_focus": 2,
        "bg_tab_close": 1,
        "bg_go_back": 1.5,
        "bg_go_forward": 0.7,
        "bg_goto": 0.7,
        "bg_fill": 2,
        "bg_submit": 1.5,
        "bg_iframe_fill": 1,
    }

    def __init__(self, env: Any, rng: random.Random) -> None:
        self.env = env
        self.rng = rng
        self.seen: list[str] = [self.page.url]
        self.log: list[str] = []
        self.behaviours: list[str] = []
        self.errors: list[str] = []

    @property
    def page(self) -> Any:
        return self.env.unwrapped.page

    def _elements(self, frames: bool = False) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for frame in self.page.frames if frames else [self.page.main_frame]:
            with contextlib.suppress(Exception):
                found += [dict(e, frame=frame is not self.page.main_frame) for e in frame.evaluate(_BIDS)]
        return found

    def _do(self, action: str) -> None:
        obs, _, _, _, _ = self.env.step(action)
        error = obs.get("last_action_error") if isinstance(obs, dict) else None
        if error:
            self.errors.append(f"{action}: {str(error).splitlines()[0][:160]}")
        with contextlib.suppress(Exception):
            if self.page.url.startswith("http") and self.page.url not in self.seen:
                self.seen.append(self.page.url)

    def _pick(self, accept: Callable[[dict[str, Any]], bool], frames: bool = False) -> str | None:
        chosen = [e for e in self._elements(frames) if accept(e)]
        return str(self.rng.choice(chosen)["bid"]) if chosen else None

    def plan(self, name: str) -> list[str]:
        """BrowserGym action strings for behaviour ``name`` here (empty: it does not apply)."""
        pages = self.page.context.pages
        words = " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(1, 2)))
        link = lambda e: e["tag"] == "a" and e["href"] and not e["target"]  # noqa: E731
        bid: str | None
        if name == "bg_click_link":
            bid = self._pick(lambda e: link(e) and not e["href"].startswith("#"))
        elif name == "bg_click_hash":
            bid = self._pick(lambda e: link(e) and e["href"].startswith("#"))
        elif name == "bg_click_push":
            bid = self._pick(lambda e: "push" in e["cls"].split())
        elif name == "bg_click_blank":
            bid = self._pick(lambda e: e["tag"] == "a" and e["target"] == "_blank")
        elif name == "bg_click_popup":
            bid = self._pick(lambda e: e["id"] == "popup")
        elif name == "bg_new_tab":
            return ["new_tab()", f"goto({self.rng.choice(self.seen)!r})"]
        elif name == "bg_tab_focus":
            others = [i for i, p in enumerate(pages) if p is not self.page]
            return [f"tab_focus({self.rng.choice(others)})"] if others else []
        elif name == "bg_tab_close":
            return ["tab_close()"] if len(pages) > 1 else []
        elif name == "bg_go_back":
            return ["go_back()"]
        elif name == "bg_go_forward":
            return ["go_forward()"]
        elif name == "bg_goto":
            return [f"goto({self.rng.choice(self.seen)!r})"]
        elif name == "bg_fill":
            bid = self._pick(lambda e: e["tag"] in ("input", "textarea") and e["type"] in ("", "text"))
            return [f"fill({bid!r}, {words!r})"] if bid else []
        elif name == "bg_submit":
            fields = [e for e in self._elements() if e["name"] in ("title", "note")]
            submit = self._pick(lambda e: e["tag"] == "button" and e["type"] == "submit")
            if not submit:
                return []
            return [*(f"fill({e['bid']!r}, {words!r})" for e in fields), f"click({submit!r})"]
        elif name == "bg_iframe_fill":
            bid = self._pick(lambda e: e["frame"] and e["tag"] == "input", frames=True)
            return [f"fill({bid!r}, {words!r})"] if bid else []
        else:
            raise ValueError(name)
        return [f"click({bid!r})"] if bid else []

    def step(self, first: str | None = None) -> str:
        """One random behaviour that applies here (``first`` tried first); returns its name."""
        names = list(self.ACTIONS)
        weights = [self.ACTIONS[name] for name in names]
        for attempt in range(4 * len(names)):
            name = first if first is not None and attempt == 0 else self.rng.choices(names, weights)[0]
            actions = self.plan(name)
            if not actions:
                continue
            for action in actions:
                self._do(action)
            self.behaviours.append(name)
            self.log.append(f"{name}: {'; '.join(actions)}")
            return name
        self.behaviours.append("nothing")
        return "nothing"


# -- live end of an episode, and the oracle ---------------------------------------------------------


@dataclass
class LiveEnd:
    """What was asked live at the end of one episode, to be asked of its session offline."""

    app: str
    label: str
    seed: str
    behaviours: list[str]
    log: list[str]
    session_path: Path
    truth_tab: str
    """The ground-truth current tab's CDP target id (the session's ``TabState.tab_id``)."""
    truth_url: str
    url_config: dict[str, Any]
    url_live: float
    other_config: dict[str, Any] | None
    other_live: float | None
    html_config: dict[str, Any]
    html_live: float
    questions: list[tuple[Any, Any]]
    """Differential questions (``differential.Question``) on the ground-truth tab, with live answers."""
    errors: list[str] = field(default_factory=list)
    moved: bool = False
    """The live tab no longer serialized to its captured HTML when asked (it moved on by itself after the
    capture, e.g. an animation): its answers are not judged, as in the differential checker."""
    site_url: str = ""
    trace_path: Path | None = None
    """The episode as a Playwright trace (``context.tracing``, stopped after the last action), when
    recorded: ``judge_trace`` imports it and asks it the same questions."""


@dataclass(frozen=True)
class Check:
    app: str
    label: str
    behaviours: tuple[str, ...]
    mode: str
    """``recorded`` (the session as saved), ``reconstructed`` (its end probe stripped) or ``trace`` (the
    episode's Playwright trace, imported)."""
    what: str
    """``current_tab``, ``url_match``, ``url_match_other``, ``program_html`` or a question kind."""
    verdict: str
    """``equal``, ``miss`` (loud, with ``detail`` its reason), ``silent``; not judged: ``unstable``,
    ``moved`` (as in the differential checker)."""
    detail: str = ""


def _config(task_id: int, intent: str, evaluation: dict[str, Any]) -> dict[str, Any]:
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "require_login": False,
        "storage_state": None,
        "start_url": "",
        "geolocation": None,
        "intent_template": intent,
        "instantiation_dict": {},
        "intent": intent,
        "require_reset": False,
        "eval": {
            "eval_types": [],
            "reference_answers": None,
            "reference_url": "",
            "url_note": "GOLD in PRED",
            "program_html": [],
            "string_note": "",
            **evaluation,
        },
        "intent_template_id": 0,
    }


def _url_config(url: str) -> dict[str, Any]:
    return _config(99501, "Go to the page", {"eval_types": ["url_match"], "reference_url": url})


def live_score(page: Any, config: dict[str, Any], site_url: str) -> float:
    """The official evaluator, unmodified, on the live page."""
    from webarena.evaluation_harness.evaluators import evaluator_router

    from cdp_integration.capture.probes import build_trajectory
    from cdp_integration.webarena import skip_evaluator_sleep, use_site_urls, webarena_config_file

    with (
        use_site_urls({"SHOPPING": site_url}),
        webarena_config_file(config) as config_file,
        skip_evaluator_sleep(),
    ):
        evaluator = evaluator_router(config_file)
        trajectory = build_trajectory(None, stopped=False)
        return float(evaluator(trajectory=trajectory, config_file=config_file, page=page, client=None))


def _locators(survey: dict[str, Any], rng: random.Random, count: int) -> list[str]:
    """WebArena-style ``program_html`` locators (``document.…``) on elements sampled from the live page."""
    made = ["document.title", "document.location.href"]
    for control in rng.sample(survey["controls"], min(2, len(survey["controls"]))):
        made.append(f"document.querySelector({json.dumps(control['s'])}).value")
    elements = survey["elements"]
    while elements and len(made) < count:
        element = rng.choice(elements)
        selector = json.dumps(element["s"])
        shape = rng.choice(("outerText", "textContent", "innerText", "attribute", "count"))
        if shape == "attribute" and element["attrs"]:
            made.append(
                f"document.querySelector({selector}).getAttribute({json.dumps(rng.choice(element['attrs']))})"
            )
        elif shape == "count":
            made.append(f"document.querySelectorAll({json.dumps(element['tag'])}).length")
        elif shape != "attribute":
            made.append(f"document.querySelector({selector}).{shape}")
    return made


def _locator_answer(page: Any, locator: str) -> str:
    """What the official ``program_html`` evaluator reads for ``locator`` on the page."""
    try:
        return html.unescape(str(page.evaluate(f"() => {locator}")) or "")
    except Exception:
        return ""


_MARKING_ATTRIBUTES = ("value", "checked")
_MARKING = re.compile(r' (?:value|checked)="[^"]*"')


def _reads_marking(question: Any) -> bool:
    """Whether a differential question can see the attributes BrowserGym's observation writes."""
    if question.op == "content":
        return True
    text = f"{question.arg} {question.extra}"
    return "attributes.length" in text or any(
        f'"{name}"' in text or f"'{name}'" in text or f"[{name}" in text or text.endswith(f" {name}")
        for name in _MARKING_ATTRIBUTES
    )


def _without_marking(text: str) -> str:
    return _MARKING.sub("", text)


def _target_id(page: Any) -> str:
    from tests.conformance.differential import _target_id as target_id

    return target_id(page.context, page)


def ask_live_end(
    page: Any,
    captured: Any,
    *,
    rng: random.Random,
    site_url: str,
    questions_per_episode: int,
    marked: bool = False,
) -> tuple[dict[str, Any], list[tuple[Any, Any]], dict[str, Any], float]:
    """At the end of an episode, on the ground-truth tab ``page``: the differential questions with their
    live answers (``moved``/``unstable`` marked as the differential checker does) and a ``program_html``
    config whose locators were sampled from the page (exact answers as read live), with its live score.
    ``captured``: the last captured ``Step``. ``marked``: a BrowserGym page, whose observation wrote each
    control's live ``value``/``checked`` into its attributes (the capture keeps the page's own, by design):
    questions that read those attributes are not asked. Returns (html config, questions, survey, live score)."""
    from tests.conformance import differential

    tab_id = _target_id(page)
    probe = differential.EpisodeProbe("trajectories", "end", per_step=questions_per_episode)
    questions = probe._questions(page, 0, tab_id, rng, questions_per_episode)
    if marked:
        questions = [q for q in questions if not _reads_marking(q)]
    captured_html: str = next((t.html for t in captured.tabs if t.tab_id == tab_id), "") if captured else ""
    watched = bool(captured_html) and "shadowrootmode" not in captured_html

    def changed() -> bool:
        """The live tab no longer serializes to its captured HTML (it moved on after the capture)."""
        live = page.content()
        return _without_marking(live) != _without_marking(captured_html) if marked else live != captured_html

    moved = watched and changed()
    first = differential._answers(page, questions)
    again = differential._answers(page, questions)
    moved = moved or (watched and changed())
    asked: list[tuple[Any, Any]] = []
    for question, a, b in zip(questions, first, again, strict=True):
        if moved:
            asked.append((question, differential._Moved(a)))
        elif a != b:
            asked.append((question, differential._Unstable(a, b)))
        else:
            asked.append((question, a))
    survey = page.evaluate(differential._SURVEY, 2000)
    if marked:
        for element in survey["elements"]:
            element["attrs"] = [a for a in element["attrs"] if a not in _MARKING_ATTRIBUTES]
    locators = _locators(survey, rng, 8)
    targets = [
        {
            "url": "last",
            "locator": locator,
            "required_contents": {"exact_match": _locator_answer(page, locator)},
        }
        for locator in locators
    ]
    html_config = _config(
        99502, "Leave the page as it is", {"eval_types": ["program_html"], "program_html": targets}
    )
    return html_config, asked, survey, live_score(page, html_config, site_url)


def _finish(
    logger: Any,
    truth: Any,
    *,
    app: str,
    label: str,
    seed: str,
    site_url: str,
    behaviours: list[str],
    log: list[str],
    rng: random.Random,
    questions_per_episode: int,
    errors: Sequence[str] = (),
    marked: bool = False,
) -> LiveEnd:
    """Ask the live questions of the ground-truth tab ``truth``, give the session a task made of them (so
    its end probe records them), and save it."""
    from tests.conformance import differential

    truth_url = truth.url
    url_config = _url_config(truth_url)
    url_live = live_score(truth, url_config, site_url)
    others = [
        p.url for p in truth.context.pages if p is not truth and not p.is_closed() and p.url != truth_url
    ]
    rng.shuffle(others)
    other_config: dict[str, Any] | None = None
    other_live: float | None = None
    for url in others:  # another tab's URL that url_match tells apart from this one's, if there is one
        other_config, other_live = _url_config(url), live_score(truth, _url_config(url), site_url)
        if other_live == 0.0:
            break
    html_config, questions, _, html_live = ask_live_end(
        truth,
        logger.last_step,
        rng=rng,
        site_url=site_url,
        questions_per_episode=questions_per_episode,
        marked=marked,
    )
    probe_config = _config(
        99500,
        "Everything asked of the current tab",
        {
            "eval_types": ["url_match", "program_html"],
            "reference_url": truth_url,
            "program_html": html_config["eval"]["program_html"],
        },
    )
    logger.task["config"] = probe_config
    truth_tab = _target_id(truth)
    path = logger.save_session(label)
    return LiveEnd(
        app=app,
        label=label,
        seed=seed,
        behaviours=behaviours,
        log=log,
        session_path=Path(path),
        truth_tab=truth_tab,
        truth_url=truth_url,
        url_config=url_config,
        url_live=url_live,
        other_config=other_config,
        other_live=other_live,
        html_config=html_config,
        html_live=html_live,
        questions=questions,
        errors=list(errors),
        moved=any(isinstance(answer, differential._Moved) for _, answer in questions),
        site_url=site_url,
    )


def play_episode(
    browser: Any,
    site: Site,
    out: Path,
    *,
    seed: str,
    actions: int | None = None,
    questions_per_episode: int = 40,
    first: str | None = None,
    trace: bool = False,
) -> LiveEnd:
    """One generated episode on a plain Playwright page of a fresh context of ``browser`` (``first``: a
    behaviour to try first, e.g. to make sure a sample opens a tab; ``trace``: also record it as a
    Playwright trace, ``<out>/traces/<label>.zip``)."""
    label = f"{site.name}.{re.sub(r'[^A-Za-z0-9]+', '-', seed)}"
    context = browser.new_context(**site.context_options)
    try:
        return _play_agent(
            context,
            context.new_page(),
            site,
            out,
            label=label,
            app=site.name,
            seed=seed,
            attach=lambda logger, page: logger.attach_to_page(page),
            actions=actions,
            questions_per_episode=questions_per_episode,
            first=first,
            trace=out / "traces" / f"{label}.zip" if trace else None,
        )
    finally:
        context.close()


def _play_agent(
    context: Any,
    page: Any,
    site: Site,
    out: Path,
    *,
    label: str,
    app: str,
    seed: str,
    attach: Callable[[Any, Any], None],
    actions: int | None,
    questions_per_episode: int,
    first: str | None,
    trace: Path | None = None,
) -> LiveEnd:
    """The plain-page agent's episode from ``page`` of ``context``: signed in, started, a logger attached
    by ``attach(logger, page)``, a capture after each generated action, then the live questions.
    ``trace``: the episode is also traced by Playwright from the start page to the last action."""
    from cdp_integration import CDPSessionLogger

    rng = random.Random(seed)
    if site.sign_in is not None:
        site.sign_in(page)
    page.goto(site.url + site.start)
    agent = Agent(context, site, rng, page)
    agent._settled(page)
    logger = CDPSessionLogger(out, instance_id=label, task={"site_urls": {"shopping": site.url}})
    attach(logger, page)
    if trace is not None:
        context.tracing.start(snapshots=True, screenshots=False)
    try:
        logger.capture_state_snapshot("start")
        for number in range(actions if actions is not None else rng.randint(4, 9)):
            name = agent.step(first if number == 0 else None)
            logger.capture_state_snapshot(name, action=agent.log[-1][:500])
        if trace is not None:  # before the live questions: the trace is the agent's, not the oracle's
            trace.parent.mkdir(parents=True, exist_ok=True)
            context.tracing.stop(path=str(trace))
        end = _finish(
            logger,
            agent.current,
            app=app,
            label=label,
            seed=seed,
            site_url=site.url,
            behaviours=agent.behaviours,
            log=agent.log,
            rng=rng,
            questions_per_episode=questions_per_episode,
        )
        return dataclasses.replace(end, trace_path=trace)
    finally:
        logger.detach()


def play_cdp_attach_episode(
    playwright: Any,
    site: Site,
    out: Path,
    *,
    seed: str,
    actions: int | None = None,
    questions_per_episode: int = 40,
    first: str | None = None,
) -> LiveEnd:
    """One generated episode in a Chromium of its own that the agent drives over its own Playwright
    connection (``connect_over_cdp``) and the logger follows by its DevTools endpoint only
    (``attach_to_cdp``): no page object is shared, so the current tab is what the browser shows."""
    from cdp_integration.capture.cdp_attach import ChromiumProcess

    label = f"cdp_attach.{re.sub(r'[^A-Za-z0-9]+', '-', seed)}"
    with ChromiumProcess() as chromium:
        browser = playwright.chromium.connect_over_cdp(chromium.endpoint)
        try:
            context = browser.contexts[0] if browser.contexts else browser.new_context()
            return _play_agent(
                context,
                context.pages[0] if context.pages else context.new_page(),
                site,
                out,
                label=label,
                app="cdp_attach",
                seed=seed,
                attach=lambda logger, _page: logger.attach_to_cdp(chromium.endpoint),
                actions=actions,
                questions_per_episode=questions_per_episode,
                first=first,
            )
        finally:
            browser.close()


def play_browsergym_episode(
    base_url: str,
    out: Path,
    *,
    seed: str,
    actions: int | None = None,
    questions_per_episode: int = 40,
    first: str | None = None,
) -> LiveEnd:
    """One generated episode through a BrowserGym ``openended`` env on ``base_url`` (its own browser)."""
    import browsergym.core  # noqa: F401 - registers browsergym/openended
    import gymnasium as gym

    from cdp_integration import CDPSessionLogger
    from cdp_integration.demo.agent import patient_action_mapping

    rng = random.Random(seed)
    label = f"browsergym.{re.sub(r'[^A-Za-z0-9]+', '-', seed)}"
    env = gym.make(
        "browsergym/openended",
        task_kwargs={"start_url": base_url + "/"},
        headless=True,
        slow_mo=0,
        wait_for_user_message=False,
        action_mapping=patient_action_mapping(),
    )
    try:
        logger = CDPSessionLogger(out, instance_id=label, task={"site_urls": {"shopping": base_url}})
        logger.attach_to_browsergym_env(env)
        env.reset()
        agent = BrowserGymAgent(env, rng)
        for number in range(actions if actions is not None else rng.randint(4, 8)):
            agent.step(first if number == 0 else None)
        try:
            return _finish(
                logger,
                agent.page,
                app="browsergym",
                label=label,
                seed=seed,
                site_url=base_url,
                behaviours=agent.behaviours,
                log=agent.log,
                rng=rng,
                questions_per_episode=questions_per_episode,
                errors=agent.errors,
                marked=True,
            )
        finally:
            logger.detach()
    finally:
        try:
            env.close()
        except (
            Exception
        ) as exc:  # BrowserGym's own teardown (its chat's context already gone): the episode stands
            print(f"{label}: BrowserGym's env.close() failed: {type(exc).__name__}: {str(exc)[:200]}")


def _reconstructed(session: Any) -> Any:
    """The session without its recorded end probe: offline scoring reconstructs every answer."""
    if session.end is None or session.end.probe is None:
        return session
    return dataclasses.replace(session, end=session.end.model_copy(update={"probe": None}))


def miss_reason(message: str) -> str:
    """A loud miss's reason, with what varies between episodes (URLs, numbers, quoted text) taken out."""
    line = message.strip().splitlines()[0] if message.strip() else "(no message)"
    line = re.sub(r"https?://\S+", "<url>", line)
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "<q>", line)
    line = re.sub(r"\d+", "<n>", line)
    return line[:140]


def _explain(session: Any, mode: str, config: dict[str, Any]) -> str:
    """What differs in a config scored differently offline: url_match's URL, or each program_html
    locator whose offline answer is not the exact one read live."""
    from cdp_integration.replay.page import MockBrowserContext

    context = MockBrowserContext(session, -1, evaluation="auto" if mode == "recorded" else None)
    try:
        page = context.active_page
        if config["eval"]["eval_types"] == ["url_match"]:
            return f"url_match {config['eval']['reference_url']!r}, offline page.url {page.url!r}"
        differing = []
        for target in config["eval"]["program_html"]:
            try:
                offline = _locator_answer(page, target["locator"])
            except Exception as exc:  # a miss, shown here, not judged
                offline = f"<{type(exc).__name__}>"
            live = target["required_contents"]["exact_match"]
            if offline.strip().lower() != live.strip().lower():
                differing.append(f"{target['locator']}: live {live[:200]!r}, offline {offline[:200]!r}")
        return "; ".join(differing) or "every locator answers as live"
    finally:
        context.close()


def judge_episode(end: LiveEnd) -> list[Check]:
    """Ask ``end``'s questions of its saved session in both capture modes (no network needed)."""
    from cdp_integration.session.store import load_session

    saved = load_session(end.session_path)
    checks: list[Check] = []
    for mode, session in (("recorded", saved), ("reconstructed", _reconstructed(saved))):
        checks += _judge_session(end, mode, session)
    return checks


def judge_trace(end: LiveEnd, out: Path) -> list[Check]:
    """Import ``end``'s Playwright trace (``cdp-session import playwright-trace``, into ``out``) and ask
    the imported session the episode's questions (mode ``trace``). A trace has no CDP target ids: its
    current tab is the one the ground truth's URL names (several such tabs: not judged)."""
    from cdp_integration.imports.common import write_episode
    from cdp_integration.imports.playwright_trace import import_trace
    from cdp_integration.session.store import load_session

    assert end.trace_path is not None
    episode = import_trace(end.trace_path)
    path = write_episode(episode, "playwright-trace", out, site_urls={"shopping": end.site_url})
    return _judge_session(end, "trace", load_session(path), by_url=True)


def _judge_session(end: LiveEnd, mode: str, session: Any, *, by_url: bool = False) -> list[Check]:
    """The episode's questions asked of one session; ``by_url``: its tabs are not CDP targets, the
    current one must show the ground truth's URL."""
    from cdp_integration.errors import ReplayMissError
    from cdp_integration.evaluate.scoring import evaluate_session
    from cdp_integration.replay.page import MockBrowserContext
    from tests.conformance import differential

    checks: list[Check] = []
    behaviours = tuple(dict.fromkeys(end.behaviours))

    def add(mode: str, what: str, verdict: str, detail: str = "") -> None:
        checks.append(Check(end.app, end.label, behaviours, mode, what, verdict, detail))

    final = session.final_step
    unknown = final.current_tab_source == "unknown" and len(final.tabs) > 1
    active = final.active_tab
    same = (
        active is not None and active.url == end.truth_url
        if by_url
        else active is not None and active.tab_id == end.truth_tab
    )
    if unknown:
        add(mode, "current_tab", "miss", "the capture could not tell the current tab")
    elif same:
        add(mode, "current_tab", "equal")
    else:
        add(
            mode,
            "current_tab",
            "silent",
            f"offline current tab {active.tab_id[:8] if active else None} ({active.url if active else None}, "
            f"{final.current_tab_source}); the agent's is {end.truth_tab[:8]} ({end.truth_url})",
        )
    scored = [
        ("url_match", end.url_config, end.url_live),
        ("program_html", end.html_config, end.html_live),
    ]
    if end.other_config is not None and end.other_live is not None:
        scored.append(("url_match_other", end.other_config, end.other_live))
    for what, config, live in scored:
        try:
            score = evaluate_session(session, config, per_step=False).score
        except ReplayMissError as exc:
            add(mode, what, "miss", str(exc))
            continue
        if unknown:
            add(mode, what, "silent", f"scored {score} (live {live}) though the current tab is unknown")
        elif score == live:
            add(mode, what, "equal")
        else:
            verdict = "moved" if end.moved else "silent"
            add(mode, what, verdict, f"live {live}, offline {score}: {_explain(session, mode, config)}")
    context = MockBrowserContext(session, -1, evaluation="auto" if mode == "recorded" else None)
    try:
        page = context.active_page
        for question, live_answer in end.questions:
            if unknown:
                add(mode, question.kind, "miss", "the capture could not tell the current tab")
                continue
            outcome = differential._judge(page, question, live_answer)
            detail = outcome.miss or ""
            if outcome.verdict == "silent":
                detail = differential.format_silent(end.label, outcome)
            add(mode, question.kind, outcome.verdict, detail)
    finally:
        context.close()
    return checks


# -- reporting -------------------------------------------------------------------------------------


def format_report(ends: Sequence[LiveEnd], checks: Sequence[Check]) -> str:
    """Counts per app and per behaviour (episodes, questions, equal, loud misses, not judged, silent),
    the loud misses' reasons grouped, and every silent difference with its episode's reproduction."""
    lines: list[str] = []
    header = (
        f"{'':<22} {'episodes':>8} {'questions':>9} {'equal':>7} {'loud':>6} {'unjudged':>8} {'silent':>6}"
    )

    def table(title: str, key: Callable[[Check], Sequence[str]], episodes: Counter[str]) -> None:
        rows: dict[str, Counter[str]] = {}
        for check in checks:
            for name in key(check):
                rows.setdefault(name, Counter())[check.verdict] += 1
        lines.append(f"{title:<22}" + header[22:])
        for name in sorted(rows, key=lambda n: (-episodes[n], n)):
            c = rows[name]
            lines.append(
                f"{name:<22} {episodes[name]:>8} {sum(c.values()):>9} {c['equal']:>7} {c['miss']:>6} "
                f"{c['unstable'] + c['moved']:>8} {c['silent']:>6}"
            )

    table("per app", lambda c: [c.app], Counter(end.app for end in ends))
    lines.append("")
    table(
        "per behaviour",
        lambda c: list(c.behaviours),
        Counter(name for end in ends for name in dict.fromkeys(end.behaviours)),
    )
    reasons = Counter(f"{c.what}: {miss_reason(c.detail)}" for c in checks if c.verdict == "miss")
    lines.append("")
    lines.append(f"loud misses by reason ({sum(reasons.values())}):")
    lines += [f"  {count:>6}  {reason}" for reason, count in reasons.most_common()]
    moved = [
        c
        for c in checks
        if c.verdict == "moved" and c.what in ("url_match", "url_match_other", "program_html")
    ]
    if moved:
        lines.append("")
        lines.append(f"{len(moved)} official score(s) not judged (the live tab moved on after its capture):")
        lines += [f"  {c.app} {c.label} [{c.mode}] {c.what}: {c.detail[:600]}" for c in moved]
    silent = [c for c in checks if c.verdict == "silent"]
    lines.append("")
    lines.append(f"{len(silent)} silent difference(s)")
    by_label = {end.label: end for end in ends}
    for check in silent:
        end = by_label.get(check.label)
        lines.append(f"SILENT {check.app} {check.label} [{check.mode}] {check.what}: {check.detail}")
        if end is not None:
            lines.append(f"    seed {end.seed!r}; behaviours:")
            lines += [f"      {entry}" for entry in end.log]
    return "\n".join(lines)
