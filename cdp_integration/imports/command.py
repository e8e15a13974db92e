"""``cdp-session import FORMAT PATH -o DIR``: recordings of other tools as sessions. Thin."""

from __future__ import annotations

from pathlib import Path

import click

from cdp_integration.cli import site_url_option
from cdp_integration.errors import escape_controls
from cdp_integration.imports.common import FORMATS

__all__ = ["import_command"]


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice((*FORMATS, "dataset")))
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
@site_url_option
@click.option(
    "--keep-screenshots",
    is_flag=True,
    help="Keep the recording's screenshots (trace screencast frames, AgentLab and browser-use screenshots) when redacting: pixels cannot be redacted.",
)
def import_command(
    fmt: str,
    path: Path,
    output_dir: Path,
    answers_path: Path | None,
    configs_path: Path | None,
    redact: bool,
    site_urls: tuple[str, ...],
    keep_screenshots: bool,
) -> None:
    """Turn other tools' recordings into sessions (Playwright traces, Verified runs, browser-use, AgentLab).

    FORMAT: playwright-trace (a trace.zip, or a directory of <task_id>.zip), verified (a
    WebArena-Verified run folder), browser-use (an AgentHistoryList JSON, a HAR beside it), agentlab
    (an experiment folder), dataset (a folder written by `cdp-session export-dataset`: its sessions
    are taken back, redacted again unless --no-redact). Each session's header says imported:FORMAT (so do its scores) and
    records the sites' URLs (--site-url, WA_<SITE>, WEBARENA_BASE_URL) where the recording has none.
    """
    if fmt == "dataset":
        from cdp_integration.evaluate.dataset import import_dataset

        taken = import_dataset(path, output_dir, redact=redact, keep_screenshots=keep_screenshots)
        for session in taken:  # file names come from the dataset: no terminal control reaches the terminal
            click.echo(escape_controls(str(session)))
        click.echo(escape_controls(f"took {len(taken)} session(s) from the dataset {path}"), err=True)
        return
    from cdp_integration.deployment import known_site_urls, parse_site_urls
    from cdp_integration.evaluate.batch import load_configs
    from cdp_integration.imports.common import load_answers
    from cdp_integration.imports.importer import import_recordings

    urls = {**known_site_urls(), **parse_site_urls(site_urls)}
    answers = load_answers(answers_path) if answers_path is not None else None
    configs = load_configs(configs_path) if configs_path is not None else None
    written = import_recordings(
        fmt,
        path,
        output_dir,
        answers=answers,
        configs=configs,
        redact=redact,
        site_urls=urls,
        keep_screenshots=keep_screenshots,
    )
    for session in written:
        click.echo(escape_controls(str(session)))
    click.echo(escape_controls(f"imported {len(written)} session(s) from {path} (imported:{fmt})"), err=True)
