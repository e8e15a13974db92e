"""``cdp-session import FORMAT PATH -o DIR``: recordings of other tools as sessions. Thin."""

from __future__ import annotations

from pathlib import Path

import click

from cdp_integration.imports.common import FORMATS

__all__ = ["import_command"]


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(FORMATS))
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "-o", "--output-dir", type=click.Path(path_type=Path), required=True, help="Where the sessions go."
)
@click.option(
    "--answers",
    "answers_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A JSON object task id -> the agent's final answer, for formats that do not hold it (traces).",
)
@click.option(
    "--configs",
    "configs_path",
    type=click.Path(path_type=Path),
    default=None,
    help="WebArena task configs (as for eval): each imported session carries its task's config.",
)
@click.option(
    "--redact/--no-redact",
    default=True,
    show_default=True,
    help="Replace secrets (passwords in form posts, session cookies, tokens) as `cdp-session redact` does.",
)
@click.option(
    "--keep-screenshots",
    is_flag=True,
    help="Keep the recording's screenshots although redacting (pixels cannot be redacted: off by default).",
)
def import_command(
    fmt: str,
    path: Path,
    output_dir: Path,
    answers_path: Path | None,
    configs_path: Path | None,
    redact: bool,
    keep_screenshots: bool,
) -> None:
    """Turn other tools' recordings into sessions (Playwright traces, Verified runs, browser-use, AgentLab).

    FORMAT: playwright-trace (a trace.zip, or a directory of <task_id>.zip), verified (a
    WebArena-Verified run folder), browser-use (an AgentHistoryList JSON, a HAR beside it), agentlab
    (an experiment folder). Each session's header says imported:FORMAT, and so do its scores.
    """
    from cdp_integration.evaluate.batch import load_configs
    from cdp_integration.imports.common import load_answers
    from cdp_integration.imports.importer import import_recordings

    answers = load_answers(answers_path) if answers_path is not None else None
    configs = load_configs(configs_path) if configs_path is not None else None
    written = import_recordings(
        fmt,
        path,
        output_dir,
        answers=answers,
        configs=configs,
        redact=redact,
        keep_screenshots=keep_screenshots,
    )
    for session in written:
        click.echo(str(session))
    click.echo(f"imported {len(written)} session(s) from {path} (imported:{fmt})", err=True)
