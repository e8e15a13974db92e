"""``cdp-session debug``: walk an episode step by step in a terminal, over SSH too.

A plain line-oriented prompt (no curses): one command per line, output is the same text the
``show`` and ``diff`` commands print. New commands are one entry in ``Stepper.commands``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TextIO

from cdp_integration.debug.diff import diff
from cdp_integration.debug.render import View, cut, format_diff, format_step, format_steps
from cdp_integration.errors import CDPIntegrationError, escape_controls
from cdp_integration.session.store import Session

__all__ = ["Stepper", "evaluate_at"]

HELP = """\
  n, Enter      next step            p             previous step
  g N           go to step N (negative: from the end)     first, last
  s             summary of this step
  text, html, form, cookies, storage, net, tabs, json     a view of this step
  d [N]         diff with the previous step (or with step N)
  steps         the step table
  js EXPR       run JavaScript against the page as it was at this step (offline)
  h             this help            q             quit"""

JsEvaluator = Callable[[Session, int, str], Any]


def evaluate_at(session: Session, step: int, expression: str) -> Any:
    """``expression`` evaluated on the replayed page of ``step``, offline: a fresh sandbox document,
    released afterwards (under the sandbox's time limit, ``CDP_SESSION_MAX_QUESTION_SECONDS``)."""
    from cdp_integration.replay.page import replay_step  # loads Playwright: only when asked

    page = replay_step(session, step)
    try:
        return page.evaluate(expression)
    finally:
        page.context.close()


class Stepper:
    """The stepper's state (the current step) and its commands; ``run()`` is the prompt loop."""

    def __init__(
        self,
        session: Session,
        *,
        out: TextIO | None = None,
        read_line: Callable[[str], str] = input,
        evaluate_js: JsEvaluator = evaluate_at,
    ) -> None:
        self.session = session
        self.position = 0
        self._out = out or sys.stdout
        self._read_line = read_line
        self._evaluate_js = evaluate_js
        views: dict[str, View] = {
            "text": "text",
            "html": "html",
            "form": "form",
            "cookies": "cookies",
            "storage": "storage",
            "net": "network",
            "network": "network",
            "tabs": "tabs",
            "json": "json",
            "s": "summary",
            "summary": "summary",
        }
        self.commands: dict[str, Callable[[str], None]] = {
            "n": lambda _: self.goto(self.position + 1),
            "next": lambda _: self.goto(self.position + 1),
            "p": lambda _: self.goto(self.position - 1),
            "prev": lambda _: self.goto(self.position - 1),
            "g": self._goto_command,
            "goto": self._goto_command,
            "first": lambda _: self.goto(0),
            "last": lambda _: self.goto(len(self.session.steps) - 1),
            "d": self._diff_command,
            "diff": self._diff_command,
            "steps": lambda _: self.say(format_steps(self.session)),
            "js": self._js_command,
            "h": lambda _: self.say(HELP),
            "help": lambda _: self.say(HELP),
            "?": lambda _: self.say(HELP),
        }
        for name, view in views.items():
            self.commands[name] = partial(self._view_command, view)

    def say(self, text: str) -> None:
        self._out.write(escape_controls(text) + "\n")
        self._out.flush()

    @property
    def prompt(self) -> str:
        step = self.session.steps[self.position]
        return f"[{self.position}/{len(self.session.steps) - 1}] {cut(step.url, 60)} > "

    def goto(self, step: int) -> None:
        last = len(self.session.steps) - 1
        if not -len(self.session.steps) <= step <= last:
            self.say(f"no step {step}: steps are 0..{last}")
            return
        self.position = self.session.step_index(step)
        self.say(format_step(self.session, self.position, "summary"))

    def _view_command(self, view: View, _argument: str) -> None:
        self.say(format_step(self.session, self.position, view))

    def _goto_command(self, argument: str) -> None:
        try:
            self.goto(int(argument))
        except ValueError:
            self.say("usage: g N")

    def _diff_command(self, argument: str) -> None:
        if not argument and self.position == 0:
            self.say("step 0 has no previous step; use d N")
            return
        try:
            other = int(argument) if argument else self.position - 1
            self.say(format_diff(diff(self.session, other, self.position)))
        except ValueError:
            self.say("usage: d [N]")
        except IndexError as exc:
            self.say(str(exc))

    def _js_command(self, expression: str) -> None:
        if not expression:
            self.say("usage: js EXPR")
            return
        try:
            value = self._evaluate_js(self.session, self.position, expression)
        except CDPIntegrationError as exc:
            self.say(f"js: {exc}")
        except Exception as exc:  # a JavaScript error must not end the session
            self.say(f"js: {type(exc).__name__}: {exc}")
        else:
            self.say(repr(value))

    def execute(self, line: str) -> bool:
        """Run one command line; ``False`` when it asks to quit."""
        name, _, argument = line.strip().partition(" ")
        if name in ("q", "quit", "exit"):
            return False
        handler = self.commands.get(name or "n")
        if handler is None:
            self.say(f"unknown command {name!r}; h for help")
        else:
            handler(argument.strip())
        return True

    def run(self) -> None:
        """The prompt loop, until ``q`` or end of input."""
        if sys.stdin.isatty():
            import readline  # noqa: F401 - line editing and history for input()
        self.say(f"{len(self.session.steps)} steps; h for help, q to quit")
        self.goto(0)
        while True:
            try:
                line = self._read_line(self.prompt)
            except (EOFError, KeyboardInterrupt):
                self.say("")
                return
            if not self.execute(line):
                return
