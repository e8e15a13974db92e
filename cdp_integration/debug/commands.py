"""The debugger's ``cdp-session`` commands: thin click wrappers over ``cdp_integration.debug``.

``register_debug_commands(cli)`` adds them to the main group, whose error handling turns every
``CDPIntegrationError`` (a bad session file) into one line on stderr and exit code 2. STEP arguments
may be negative (``-1`` is the last step).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cdp_integration.errors import StepIndexError

if TYPE_CHECKING:
    from cdp_integration.debug.render import View
    from cdp_integration.session.store import Session

__all__ = ["register_debug_commands"]

_SESSION = click.argument("session_path", metavar="SESSION", type=click.Path(path_type=Path))
# "-1" would otherwise be read as an unknown option rather than a step number.
_NEGATIVE_NUMBERS: dict[str, Any] = {"ignore_unknown_options": True}


def _load_session(path: Path) -> Session:
    """The session file at ``path`` (the store loads pydantic models: imported when a command runs)."""
    from cdp_integration.session.store import load_session

    return load_session(path)


@contextlib.contextmanager
def _deadline(seconds: float, message: str) -> Iterator[None]:
    """End the process with ``message`` and exit code 2 if the block runs longer than ``seconds``.

    Playwright's ``evaluate`` has no timeout of its own and cannot be interrupted from another
    thread, so a watchdog exits the process (the Playwright driver and its Chromium exit with it).
    """
    timer = threading.Timer(seconds, _expire, args=(message,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _expire(message: str) -> None:
    sys.stderr.write(f"cdp-session: error: {message}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(2)


def _echo(text: str) -> None:
    """Human-readable output: text from the session (titles, URLs, page text) with its control
    characters escaped, so it cannot drive the terminal (OSC 52 writes the clipboard)."""
    from cdp_integration.errors import escape_controls

    click.echo(escape_controls(text))


def _echo_err(text: str) -> None:
    from cdp_integration.errors import escape_controls

    click.echo(escape_controls(text), err=True)


def _step(session: Session, value: int, name: str) -> int:
    try:
        return session.step_index(value)
    except StepIndexError as exc:
        raise click.BadParameter(str(exc), param_hint=name) from None


@click.command()
@_SESSION
def steps(session_path: Path) -> None:
    """One row per step of SESSION: action, URL, title, document status, requests, capture ms, evaluation, faults."""
    from cdp_integration.debug.render import format_steps

    _echo(format_steps(_load_session(session_path)))


@click.command(context_settings=_NEGATIVE_NUMBERS)
@_SESSION
@click.argument("step", type=int)
@click.option("--html", "view", flag_value="html", help="The active tab's captured HTML.")
@click.option("--text", "view", flag_value="text", help="The page's visible text.")
@click.option("--form", "view", flag_value="form", help="What was typed, checked and selected in forms.")
@click.option("--cookies", "view", flag_value="cookies", help="All cookies.")
@click.option("--storage", "view", flag_value="storage", help="localStorage and each tab's sessionStorage.")
@click.option("--network", "view", flag_value="network", help="Requests made since the previous step.")
@click.option("--tabs", "view", flag_value="tabs", help="Open tabs.")
@click.option(
    "--json", "view", flag_value="json", help="The step record as JSON (DOM snapshot, screenshot left out)."
)
def show(session_path: Path, step: int, view: View | None) -> None:
    """The state captured at STEP of SESSION (negative STEP counts from the end); a summary by default."""
    from cdp_integration.debug.render import format_step, step_json
    from cdp_integration.session.limits import SessionLimits
    from cdp_integration.session.output import BoundedOutput

    session = _load_session(session_path)
    index = _step(session, step, "STEP")
    if view == "json":  # streamed: a step's bodies are never one string; sized before a byte is printed
        limit = SessionLimits.from_env().max_output_bytes
        counted = BoundedOutput(None, limit, "the step as JSON")
        for piece in step_json(session, index):
            counted.count(len(piece))
        output = BoundedOutput(sys.stdout.buffer, limit, "the step as JSON")
        for piece in step_json(session, index):
            output.write(piece)
        output.write(b"\n")
        return
    _echo(format_step(session, index, view or "summary"))


@click.command("diff", context_settings=_NEGATIVE_NUMBERS)
@_SESSION
@click.argument("a", type=int)
@click.argument("b", type=int)
def diff_command(session_path: Path, a: int, b: int) -> None:
    """What changed from step A to step B: URL, title, tabs, cookies, storage, requests, forms, visible text."""
    from cdp_integration.debug.diff import diff
    from cdp_integration.debug.render import format_diff

    session = _load_session(session_path)
    _echo(format_diff(diff(session, _step(session, a, "A"), _step(session, b, "B"))))


@click.command()
@_SESSION
def debug(session_path: Path) -> None:
    """Step through SESSION at a prompt (n, p, g N, views, d, js, q; h for help)."""
    from cdp_integration.debug.stepper import Stepper

    session = _load_session(session_path)
    if not session.steps:
        raise click.ClickException(f"{session_path} has no captured steps")
    Stepper(session).run()


def _default_html_path(session_path: Path) -> Path:
    from cdp_integration.session.store import SESSION_SUFFIX

    name = session_path.name
    for suffix in (SESSION_SUFFIX + ".partial", SESSION_SUFFIX):
        if name.endswith(suffix):
            return session_path.with_name(name[: -len(suffix)] + ".html")
    return session_path.with_name(name + ".html")


@click.command()
@_SESSION
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="HTML file to write (default: SESSION's name + .html).",
)
def view(session_path: Path, output: Path | None) -> None:
    """Write a self-contained HTML viewer of SESSION: open it in any browser, offline."""
    from cdp_integration.debug.viewer import write_viewer

    session = _load_session(session_path)
    path = write_viewer(session, output or _default_html_path(session_path))
    click.echo(f"wrote {path} ({len(session.steps)} steps, {path.stat().st_size / 1024:,.0f} KiB)")


@click.command("export-wabe")
@_SESSION
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="The task directory to write."
)
def export_wabe_command(session_path: Path, output: Path) -> None:
    """Write SESSION in WABE's layout: DIR/result.json and DIR/trajectory/step_NNN.png."""
    from cdp_integration.debug.wabe import export_wabe

    exported = export_wabe(_load_session(session_path), output)
    click.echo(
        f"wrote {exported.result} ({exported.steps_taken} actions, {len(exported.screenshots)} screenshots)"
    )
    if not exported.screenshots:
        click.echo("warning: the session has no screenshots (capture with screenshot=True)", err=True)


@click.command("eval-at", context_settings=_NEGATIVE_NUMBERS)
@_SESSION
@click.argument("step", type=int)
@click.option(
    "--js",
    "expression",
    default=None,
    help="A JavaScript expression or function, as page.evaluate takes. Without it: the official "
    "evaluator scores STEP and its checks are printed.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the value (a promise that never settles ends here: exit 2).",
)
def eval_at(session_path: Path, step: int, expression: str | None, timeout: float) -> None:
    """Run JavaScript against the page as it was at STEP, offline (sandboxed, nothing fetched), or
    without --js score STEP with the official evaluator and print its checks, failed first.

    Prints the value as JSON; a JavaScript exception is printed and exits 1.
    """
    import orjson
    from playwright.sync_api import Error as PlaywrightError

    from cdp_integration.replay.page import replay_step

    session = _load_session(session_path)
    if expression is None:
        from cdp_integration.evaluate.explain import format_checks
        from cdp_integration.evaluate.scoring import evaluate_step

        index = _step(session, step, "STEP")  # a bad STEP is a usage error, not the evaluator's
        scored = _scored(session_path, lambda: evaluate_step(session, index))
        click.echo(f"step {scored.step}  score {scored.score}  provenance {scored.provenance}")
        _echo(format_checks(scored.checks))
        return
    page = replay_step(session, _step(session, step, "STEP"))
    with _deadline(timeout, f"the JavaScript did not finish within {timeout:g} s (--timeout)"):
        try:
            value = page.evaluate(expression)
        except PlaywrightError as exc:
            line = exc.message.splitlines()[0] if exc.message else str(exc)
            _echo_err(f"JavaScript error: {line}")
            raise SystemExit(1) from None
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode())


@click.command()
@_SESSION
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="A WebArena task config (JSON); default: the one the session recorded.",
)
@click.option(
    "--trust-configs",
    is_flag=True,
    help="--config is yours: let its func: expressions run any Python (never the session's own config).",
)
@click.option(
    "--recorded-only",
    is_flag=True,
    help="Refuse answers the live evaluator did not record (an error names the question).",
)
def rescore(session_path: Path, config_path: Path | None, trust_configs: bool, recorded_only: bool) -> None:
    """Score the session offline with a (possibly edited) WebArena config: "what if the task said X".

    Questions the live evaluator asked are answered from its recording; new ones from the captured
    pages; a question neither can answer is an error naming it. Each score says its provenance:
    recorded, reconstructed (from captured pages) or mixed.
    """
    from cdp_integration.evaluate.explain import answer_words, format_checks
    from cdp_integration.evaluate.scoring import evaluate_session

    session = _load_session(session_path)
    result = _scored(
        session_path,
        lambda: evaluate_session(
            session, config_path, trust_configs=trust_configs, recorded_only=recorded_only
        ),
    )
    if result.note:
        click.echo(f"note: {result.note}", err=True)
    final = session.final_answer
    if final is None and result.answer != "whatever":
        final = result.answer
    answer = answer_words(final, stopped=final is not None)
    _echo(f"task {result.task_id}  eval types {'+'.join(result.eval_types)}  answer {answer}")
    for row in result.steps:
        live = "-" if row.live_reward is None else f"{row.live_reward:.1f}"
        answers = (
            f"{row.answers.get('recorded', 0)} recorded, {row.answers.get('reconstructed', 0)} reconstructed"
        )
        click.echo(f"  step {row.step:>3}  score {row.score}  live {live}  {row.provenance} ({answers})")
    click.echo(
        f"final-state score {result.score}  per-step max {result.max_score}  live {result.live_reward}  "
        f"provenance {result.provenance}"
    )
    _echo(format_checks(result.checks, result.attribution))


def _scored[T](session_path: Path, score: Callable[[], T]) -> T:
    """``score()``; an exception of the evaluator itself becomes an ``EvaluationError`` (exit 2)."""
    from cdp_integration.errors import CDPIntegrationError, EvaluationError

    try:
        return score()
    except CDPIntegrationError:
        raise
    except Exception as exc:  # the evaluator itself failed on this episode
        raise EvaluationError(f"{session_path}: the evaluator raised {type(exc).__name__}: {exc}") from exc


def register_debug_commands(group: click.Group) -> None:
    """Add ``steps``, ``show``, ``diff``, ``debug``, ``view``, ``export-wabe``, ``eval-at`` and
    ``rescore`` to ``group``."""
    for command in (steps, show, diff_command, debug, view, export_wabe_command, eval_at, rescore):
        group.add_command(command)
