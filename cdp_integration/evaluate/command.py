"""The ``eval`` command, shared by ``cdp-session eval`` and ``evaluation/benchmarks/webarena/eval_infer.py``.

Thin: argument checks, then ``batch.score_directory`` and ``report.write_report``. Every
``CDPIntegrationError`` (missing directory, bad configs file, ...) is one line on stderr, exit code 2.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path

import click

from cdp_integration.cli import site_url_option, site_urls_in_environment
from cdp_integration.deployment import known_site_urls, parse_site_urls
from cdp_integration.errors import CDPIntegrationError, escape_controls, one_line_error
from cdp_integration.evaluate.batch import (
    DEFAULT_SCORER,
    SCORERS,
    Progress,
    ProgressFactory,
    load_configs,
    score_directory,
)
from cdp_integration.evaluate.report import REPORT_JSON, REPORT_MD, format_summary, write_report

__all__ = ["eval_command", "register_eval_command"]

DEFAULT_OUTPUT_SUBDIR = "eval_output"


def _progress_bar(total: int) -> AbstractContextManager[Progress]:
    return click.progressbar(length=total, label="scoring", file=sys.stderr, show_pos=True)


@click.command("eval")
@click.argument("sessions_dir", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Where output.jsonl, report.json and report.md go [default: SESSIONS_DIR/{DEFAULT_OUTPUT_SUBDIR}].",
)
@click.option(
    "--configs",
    "configs_path",
    type=click.Path(path_type=Path),
    default=None,
    help="WebArena task configs: a JSON list (test.raw.json, or the demo tasks.json) or a directory of "
    "<task_id>.json files. Default: the config each session carries.",
)
@click.option("--workers", type=int, default=1, show_default=True, help="Scoring processes.")
@click.option("--no-resume", is_flag=True, help="Score every session again, starting a new output.jsonl.")
@click.option(
    "--scorer",
    type=click.Choice(SCORERS),
    default=DEFAULT_SCORER,
    show_default=True,
    help="webarena: the official WebArena evaluators; verified: WebArena-Verified.",
)
@click.option(
    "--trust-configs",
    is_flag=True,
    help="The --configs file is yours: let its func: expressions run any Python. Without it only the "
    "official WebArena helper calls run. Never applies to configs carried by session files.",
)
@click.option(
    "--complete-only",
    is_flag=True,
    help="Skip sessions without an end record (cut short) instead of scoring their last readable step.",
)
@click.option(
    "--recorded-only",
    is_flag=True,
    help="Only answers the live evaluator recorded; a session needing a reconstructed one is an error line.",
)
@click.option(
    "--no-progress", is_flag=True, help="No progress bar (off anyway when stderr is not a terminal)."
)
@click.option(
    "--import",
    "import_format",
    type=click.Choice(("playwright-trace", "verified", "browser-use", "agentlab")),
    default=None,
    help="SESSIONS_DIR is another tool's recording in this format: import it into OUTPUT_DIR/imported "
    "first (as cdp-session import does), then score the sessions.",
)
@click.option(
    "--answers",
    "answers_path",
    type=click.Path(path_type=Path),
    default=None,
    help="With --import: a JSON object task id -> final answer, for formats that do not hold it.",
)
@site_url_option
@click.pass_context
def eval_command(
    ctx: click.Context,
    sessions_dir: Path,
    output_dir: Path | None,
    configs_path: Path | None,
    workers: int,
    no_resume: bool,
    scorer: str,
    trust_configs: bool,
    complete_only: bool,
    recorded_only: bool,
    no_progress: bool,
    import_format: str | None,
    answers_path: Path | None,
    site_urls: tuple[str, ...],
) -> None:
    """Score a directory of sessions offline; write output.jsonl and a report.

    Sessions already in the output's output.jsonl are skipped, so a stopped run picks up where it
    was. SESSIONS_DIR may also be an OpenHands run_infer output directory (sessions in a subdirectory).
    A session's recorded site URLs are used first; --site-url (or WA_<SITE>, WEBARENA_BASE_URL) give
    those it lacks (imported recordings, raw configs with __SHOPPING__-style placeholders).
    """
    try:
        urls = parse_site_urls(site_urls)
        configs = load_configs(configs_path) if configs_path is not None else None
        if import_format is not None:
            from cdp_integration.imports.common import load_answers
            from cdp_integration.imports.importer import import_recordings

            base = sessions_dir if sessions_dir.is_dir() else sessions_dir.parent
            output_dir = output_dir if output_dir is not None else base / DEFAULT_OUTPUT_SUBDIR
            answers = load_answers(answers_path) if answers_path is not None else None
            imported = output_dir / "imported"
            import_recordings(
                import_format,
                sessions_dir,
                imported,
                answers=answers,
                configs=configs,
                redact=True,
                site_urls={**known_site_urls(), **urls},
            )
            sessions_dir = imported
        output_dir = output_dir if output_dir is not None else sessions_dir / DEFAULT_OUTPUT_SUBDIR
        progress: ProgressFactory | None = None if no_progress or not sys.stderr.isatty() else _progress_bar
        with site_urls_in_environment(urls):
            summary = score_directory(
                sessions_dir,
                output_dir,
                configs=configs,
                workers=workers,
                resume=not no_resume,
                scorer=scorer,
                progress=progress,
                trust_configs=trust_configs,
                complete_only=complete_only,
                recorded_only=recorded_only,
            )
        incomplete = [path.relative_to(sessions_dir).as_posix() for path in summary.incomplete]
        report = write_report(output_dir, incomplete_sessions=incomplete)
    except (CDPIntegrationError, OSError, RecursionError, MemoryError, ValueError) as exc:
        if ctx.parent is not None:
            raise  # inside cdp-session: its group prints it the same way
        click.echo(f"{ctx.info_name}: error: {one_line_error(exc)}", err=True)
        ctx.exit(2)
    click.echo(
        f"scored {summary.scored} sessions ({summary.failed} could not be scored) in {summary.elapsed_s:.1f} s, "
        f"{summary.sessions_per_s:.1f} sessions/s with {summary.workers} worker(s); "
        f"{summary.skipped} already scored, skipped"
    )
    if summary.skipped_partial:
        click.echo(f"{summary.skipped_partial} sessions without an end record skipped (--complete-only)")
    if incomplete:
        click.echo(f"{len(incomplete)} incomplete sessions (*.partial) not scored, e.g. {incomplete[0]}")
    click.echo("")
    click.echo(escape_controls(format_summary(report)))  # ids and errors come from the sessions
    click.echo("")
    click.echo(f"wrote {summary.output_path}, {output_dir / REPORT_JSON}, {output_dir / REPORT_MD}")


def register_eval_command(group: click.Group) -> None:
    """Add ``eval`` to the ``cdp-session`` group."""
    group.add_command(eval_command)


@click.command("export-dataset")
@click.argument("run", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(path_type=Path),
    required=True,
    help="The dataset folder (new or empty).",
)
@click.option(
    "--redact/--no-redact",
    default=True,
    show_default=True,
    help="Replace secrets (passwords, cookie values, tokens) in the sessions, as `cdp-session redact` does.",
)
@click.option("--agent", default=None, help="The agent's name, written in every row and in the card.")
@click.option(
    "--scorer",
    type=click.Choice(SCORERS),
    default=DEFAULT_SCORER,
    show_default=True,
    help="Who scores the rows.",
)
@click.option(
    "--configs",
    "configs_path",
    type=click.Path(path_type=Path),
    default=None,
    help="WebArena task configs (as for eval), for sessions captured without theirs.",
)
@click.option("--workers", type=int, default=1, show_default=True, help="Scoring processes.")
@click.option(
    "--push-to-hub",
    "repo_id",
    default=None,
    metavar="REPO",
    help="Then upload the folder to this Hugging Face dataset repository.",
)
def export_dataset_command(
    run: Path,
    output_dir: Path,
    redact: bool,
    agent: str | None,
    scorer: str,
    configs_path: Path | None,
    workers: int,
    repo_id: str | None,
) -> None:
    """Write a run as a dataset folder that datasets.load_dataset reads, sessions redacted.

    One Parquet row per episode (task, trial, agent, scores, checks, provenance, answer, steps), the
    session files beside it, and a dataset card with the evaluator versions.
    `cdp-session import dataset DIR -o SESSIONS` takes the sessions back."""
    from cdp_integration.evaluate.dataset import export_dataset, push_to_hub

    configs = load_configs(configs_path) if configs_path is not None else None
    exported = export_dataset(
        run, output_dir, redact=redact, agent=agent, scorer=scorer, configs=configs, workers=workers
    )
    secrets = f", {exported.secrets_replaced} secrets replaced" if exported.redacted else ", not redacted"
    click.echo(
        f"wrote {exported.path}: {exported.episodes} {_plural(exported.episodes, 'episode')} of "
        f"{exported.tasks} {_plural(exported.tasks, 'task')}, {exported.scored} scored{secrets}"
    )
    if repo_id is not None:
        click.echo(f"pushed to {push_to_hub(exported.path, repo_id)}")


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"
