"""The ``eval`` command, shared by ``cdp-session eval`` and ``evaluation/benchmarks/webarena/eval_infer.py``.

Thin: argument checks, then ``batch.score_directory`` and ``report.write_report``. Every
``CDPIntegrationError`` (missing directory, bad configs file, ...) is one line on stderr, exit code 2.
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path

import click

from cdp_integration import storage
from cdp_integration.errors import CDPIntegrationError, EvaluationError, escape_controls, one_line_error
from cdp_integration.evaluate.batch import (
    BACKENDS,
    DEFAULT_SCORER,
    OUTPUT_NAME,
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
@click.argument("sessions_location", metavar="SESSIONS_DIR")
@click.option(
    "-o",
    "--output-dir",
    "output_location",
    default=None,
    help=f"Where output.jsonl, report.json and report.md go [default: SESSIONS_DIR/{DEFAULT_OUTPUT_SUBDIR}]; "
    "a directory or a storage URL.",
)
@click.option(
    "--configs",
    "configs_path",
    type=click.Path(path_type=Path),
    default=None,
    help="WebArena task configs: a JSON list (test.raw.json, or the demo tasks.json) or a directory of "
    "<task_id>.json files. Default: the config each session carries.",
)
@click.option("--workers", type=int, default=1, show_default=True, help="Scoring processes (Ray tasks).")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="local",
    show_default=True,
    help="local: processes on this machine; ray: Ray workers (sessions from storage, or paths every node sees).",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="ADDRESS",
    help="--backend ray: the cluster (HOST:PORT, ray://HOST:PORT, auto) [default: $RAY_ADDRESS, else a local one].",
)
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
@click.pass_context
def eval_command(
    ctx: click.Context,
    sessions_location: str,
    output_location: str | None,
    configs_path: Path | None,
    workers: int,
    backend: str,
    ray_address: str | None,
    no_resume: bool,
    scorer: str,
    trust_configs: bool,
    complete_only: bool,
    recorded_only: bool,
    no_progress: bool,
    import_format: str | None,
    answers_path: Path | None,
) -> None:
    """Score a directory of sessions offline; write output.jsonl and a report.

    Sessions already in the output's output.jsonl are skipped, so a stopped run picks up where it
    was. SESSIONS_DIR may also be an OpenHands run_infer output directory (sessions in a subdirectory),
    or a storage URL (s3://bucket/run: fsspec), read one bounded session at a time.
    """
    staging: tempfile.TemporaryDirectory[str] | None = None
    try:
        remote_in = storage.local_path(sessions_location) is None
        sessions_dir = storage.local_path(sessions_location) or Path()
        if output_location is None:
            base = sessions_location
            if not remote_in and import_format is not None and not sessions_dir.is_dir():
                base = str(sessions_dir.parent)  # an imported recording file: beside it
            output_location = storage.join(base, DEFAULT_OUTPUT_SUBDIR)
        remote_out = storage.local_path(output_location) is None
        if remote_out:  # written here, uploaded at the end; an earlier output.jsonl pulled to resume
            staging = tempfile.TemporaryDirectory(prefix="cdp-eval-")
            output_dir = Path(staging.name)
            if not no_resume and storage.exists(storage.join(output_location, OUTPUT_NAME)):
                storage.download(storage.join(output_location, OUTPUT_NAME), Path(staging.name) / OUTPUT_NAME)
        else:
            output_dir = storage.local_path(output_location) or Path(output_location)
        if remote_in and import_format is not None:
            raise EvaluationError("--import reads a local recording; copy it here first")
        configs = load_configs(configs_path) if configs_path is not None else None
        if import_format is not None:
            from cdp_integration.imports.common import load_answers
            from cdp_integration.imports.importer import import_recordings

            answers = load_answers(answers_path) if answers_path is not None else None
            imported = output_dir / "imported"
            import_recordings(
                import_format, sessions_dir, imported, answers=answers, configs=configs, redact=True
            )
            sessions_dir = imported
        progress: ProgressFactory | None = None if no_progress or not sys.stderr.isatty() else _progress_bar
        summary = score_directory(
            sessions_location if remote_in else sessions_dir,
            output_dir,
            configs=configs,
            workers=workers,
            resume=not no_resume,
            scorer=scorer,
            progress=progress,
            trust_configs=trust_configs,
            complete_only=complete_only,
            recorded_only=recorded_only,
            backend=backend,
            ray_address=ray_address,
        )
        incomplete = [
            (path if remote_in else path.relative_to(sessions_dir)).as_posix() for path in summary.incomplete
        ]
        report = write_report(output_dir, incomplete_sessions=incomplete)
        if remote_out:
            for name in (OUTPUT_NAME, REPORT_JSON, REPORT_MD):
                storage.upload(output_dir / name, storage.join(output_location, name))
    except (CDPIntegrationError, OSError, RecursionError, MemoryError, ValueError) as exc:
        if ctx.parent is not None:
            raise  # inside cdp-session: its group prints it the same way
        click.echo(f"{ctx.info_name}: error: {one_line_error(exc)}", err=True)
        ctx.exit(2)
    finally:
        if staging is not None:
            staging.cleanup()
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
    shown = output_location.rstrip("/") if remote_out else str(output_dir)
    click.echo(f"wrote {shown}/{OUTPUT_NAME}, {shown}/{REPORT_JSON}, {shown}/{REPORT_MD}")


def register_eval_command(group: click.Group) -> None:
    """Add ``eval`` to the ``cdp-session`` group."""
    group.add_command(eval_command)
