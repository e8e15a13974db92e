"""The ``eval`` command, shared by ``cdp-session eval`` and ``evaluation/benchmarks/webarena/eval_infer.py``.

Thin: argument checks, then ``batch.score_directory`` and ``report.write_report``. Every
``CDPIntegrationError`` (missing directory, bad configs file, ...) is one line on stderr, exit code 2.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path

import click

from cdp_integration.errors import CDPIntegrationError, EvaluationError, escape_controls, one_line_error
from cdp_integration.evaluate.batch import (
    DEFAULT_SCORER,
    SCORERS,
    Progress,
    ProgressFactory,
    load_configs,
    score_directory,
)
from cdp_integration.evaluate.report import REPORT_JSON, REPORT_MD, format_summary, plural, write_report
from cdp_integration.evaluate.report_html import viewer_links, write_run_html
from cdp_integration.evaluate.runs import Run, read_run, unscored_groups

__all__ = ["compare_command", "eval_command", "register_eval_command", "write_viewers"]

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
@click.option(
    "--viewers",
    is_flag=True,
    help="Also write each session's HTML viewer into OUTPUT_DIR/viewers; report.html links every row to it.",
)
@click.option(
    "--allow-unscored",
    is_flag=True,
    help="Exit 0 even when some sessions could not be scored (by default that exits 1).",
)
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
    viewers: bool,
    allow_unscored: bool,
) -> None:
    """Score a directory of sessions offline; write output.jsonl and a report.

    Sessions already in the output's output.jsonl are skipped, so a stopped run picks up where it
    was. SESSIONS_DIR may also be an OpenHands run_infer output directory (sessions in a subdirectory).
    Exit status: 0 when every session was scored, 1 when some could not be (unless --allow-unscored),
    2 for bad arguments.
    """
    try:
        configs = load_configs(configs_path) if configs_path is not None else None
        if import_format is not None:
            from cdp_integration.imports.common import load_answers
            from cdp_integration.imports.importer import import_recordings

            base = sessions_dir if sessions_dir.is_dir() else sessions_dir.parent
            output_dir = output_dir if output_dir is not None else base / DEFAULT_OUTPUT_SUBDIR
            answers = load_answers(answers_path) if answers_path is not None else None
            imported = output_dir / "imported"
            import_recordings(
                import_format, sessions_dir, imported, answers=answers, configs=configs, redact=True
            )
            sessions_dir = imported
        output_dir = output_dir if output_dir is not None else sessions_dir / DEFAULT_OUTPUT_SUBDIR
        progress: ProgressFactory | None = None if no_progress or not sys.stderr.isatty() else _progress_bar
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
        run = read_run(output_dir)
        viewer_failures = write_viewers(sessions_dir, output_dir, run) if viewers else []
        html_path = write_run_html(output_dir, run, report, links=viewer_links(run))
    except (CDPIntegrationError, OSError, RecursionError, MemoryError, ValueError) as exc:
        if ctx.parent is not None:
            raise  # inside cdp-session: its group prints it the same way
        click.echo(f"{ctx.info_name}: error: {one_line_error(exc)}", err=True)
        ctx.exit(2)
    click.echo(
        f"scored {plural(summary.scored, 'session')} in {summary.elapsed_s:.1f} s, "
        f"{summary.sessions_per_s:.1f} sessions/s with {plural(summary.workers, 'worker')}; "
        f"{summary.skipped} already scored, skipped"
    )
    if summary.skipped_partial:
        click.echo(
            f"{plural(summary.skipped_partial, 'session')} without an end record skipped (--complete-only)"
        )
    if incomplete:
        click.echo(
            f"{plural(len(incomplete), 'incomplete session')} (*.partial) not scored, e.g. {incomplete[0]}"
        )
    click.echo("")
    click.echo(escape_controls(format_summary(report)))  # ids and errors come from the sessions
    click.echo("")
    for failure in viewer_failures:
        click.echo(escape_controls(f"no viewer for {failure}"), err=True)
    click.echo(
        f"wrote {summary.output_path}, {output_dir / REPORT_JSON}, {output_dir / REPORT_MD}, {html_path}"
    )
    groups = unscored_groups(run.episodes)
    if groups:
        unscored = sum(len(group.instances) for group in groups)
        click.echo(
            f"{plural(unscored, 'session')} of {len(run.episodes)} could not be scored"
            + (" (allowed by --allow-unscored):" if allow_unscored else ":"),
            err=True,
        )
        for group in groups:
            click.echo(escape_controls(f"  {group.line()}"), err=True)
        if not allow_unscored:
            ctx.exit(1)


def write_viewers(sessions_dir: Path, output_dir: Path, run: Run) -> list[str]:
    """Write the viewer of each session of ``run`` that has none yet into ``output_dir/viewers``;
    the sessions whose viewer could not be written, with why (a session too broken to load)."""
    from cdp_integration.debug.viewer import write_viewer
    from cdp_integration.evaluate.report_html import VIEWERS_DIR, viewer_relpath
    from cdp_integration.session.store import load_session

    root = sessions_dir.resolve()
    viewers = (output_dir / VIEWERS_DIR).resolve()
    failures = []
    for episode in run.episodes:
        if episode.session_path is None:
            continue
        source = (root / episode.session_path).resolve()
        target = (output_dir / viewer_relpath(episode.session_path)).resolve()
        if not source.is_relative_to(root) or not target.is_relative_to(viewers) or target.exists():
            continue
        try:
            write_viewer(load_session(source), target)
        except (CDPIntegrationError, OSError, RecursionError, MemoryError, ValueError) as exc:
            failures.append(f"{episode.session_path}: {one_line_error(exc)}")
    return failures


_FLIPS_PRINTED = 50
SESSION_CONFIGS = "session"
"""``--configs session``: the config each session carries (the default of ``eval``)."""


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(path_type=Path),
    default=Path("compare_output"),
    show_default=True,
    help="Where compare.md, compare.json and compare.html go (and the scored runs of session folders).",
)
@click.option(
    "--scorer",
    "scorers",
    multiple=True,
    type=click.Choice(SCORERS),
    help="Scorer for RUNs that are session folders. Given twice with one folder: score it with each and "
    "compare (an evaluator-version comparison).",
)
@click.option(
    "--configs",
    "configs_paths",
    multiple=True,
    help="Task configs for RUNs that are session folders (a file or directory, as for eval; "
    f"'{SESSION_CONFIGS}': the config each session carries). Given twice or more with one folder: "
    "score it with each config set and compare.",
)
@click.option(
    "--trust-configs", is_flag=True, help="As for eval: let the --configs files' func: expressions run."
)
@click.option(
    "--workers", type=int, default=1, show_default=True, help="Scoring processes for session folders."
)
@click.option(
    "--viewers", is_flag=True, help="Write the viewers of scored session folders; compare.html links to them."
)
@click.option(
    "--pair-by",
    type=click.Choice(("task", "session")),
    default=None,
    help="Pair tasks (their trials averaged) or each session with itself [default: session when one "
    "folder is scored several ways, else task].",
)
def compare_command(
    runs: tuple[Path, ...],
    output_dir: Path,
    scorers: tuple[str, ...],
    configs_paths: tuple[str, ...],
    trust_configs: bool,
    workers: int,
    viewers: bool,
    pair_by: str | None,
) -> None:
    """Compare runs task by task: scores side by side, flipped tasks first, paired CI, McNemar.

    A RUN is an eval output (its output.jsonl or the directory holding it) or a folder of sessions,
    scored first. The first RUN is the baseline. One session folder with two --scorer or two or more
    --configs values compares evaluator versions: every verdict that changes, and why.
    """
    from cdp_integration.evaluate.compare import compare_runs, headline, score_folder, write_comparison
    from cdp_integration.evaluate.runs import find_output

    if len(scorers) > 1 and len(configs_paths) > 1:
        raise click.UsageError("vary either --scorer or --configs, not both")
    variants = max(len(scorers), len(configs_paths))
    if variants > 1 and len(runs) != 1:
        raise click.UsageError(
            "several --scorer or --configs values compare one session folder: give one RUN"
        )
    if variants <= 1 and len(runs) < 2:
        raise click.UsageError(
            "give two or more RUNs, or one session folder with two --scorer or --configs values"
        )
    loaded: list[Run] = []
    names = _labels(runs, scorers, configs_paths) if variants > 1 else _labels(runs, (), ())
    for index, name in enumerate(names):
        path = runs[0] if variants > 1 else runs[index]
        output = find_output(path)
        if output is not None and variants <= 1:
            loaded.append(read_run(output, name=name))
            continue
        if not path.is_dir():
            raise EvaluationError(f"{path}: neither an eval output nor a folder of sessions")
        scorer = scorers[index] if len(scorers) > 1 else (scorers[0] if scorers else None)
        configs_text = (
            configs_paths[index] if len(configs_paths) > 1 else (configs_paths[0] if configs_paths else None)
        )
        configs = None if configs_text in (None, SESSION_CONFIGS) else load_configs(Path(configs_text))
        run_dir = output_dir / "runs" / name
        click.echo(f"scoring {path} as {name} into {run_dir}", err=True)
        run = score_folder(
            path,
            run_dir,
            name=name,
            scorer=scorer,
            configs=configs,
            trust_configs=trust_configs,
            workers=workers,
        )
        if viewers:
            for failure in write_viewers(path, run_dir, run):
                click.echo(escape_controls(f"no viewer for {failure}"), err=True)
        write_run_html(run_dir, run, write_report(run_dir), links=viewer_links(run))
        loaded.append(run)
    by = pair_by or ("session" if variants > 1 else "task")
    comparisons = [compare_runs(loaded[0], other, by=by) for other in loaded[1:]]
    links = [
        (viewer_links(c.a, relative_to=output_dir), viewer_links(c.b, relative_to=output_dir))
        for c in comparisons
    ]
    md, js, page_path = write_comparison(output_dir, comparisons, links)
    for comparison in comparisons:
        click.echo(escape_controls(headline(comparison)))
        for change in comparison.flipped[:_FLIPS_PRINTED]:
            why = "; ".join(change.why)
            click.echo(escape_controls(f"  {change.task}: {change.verdict_a} -> {change.verdict_b} ({why})"))
        if len(comparison.flipped) > _FLIPS_PRINTED:
            click.echo(f"  ... and {len(comparison.flipped) - _FLIPS_PRINTED} more in {md}")
    click.echo(f"wrote {md}, {js}, {page_path}")


def _labels(runs: tuple[Path, ...], scorers: tuple[str, ...], configs: tuple[str, ...]) -> list[str]:
    """A short distinct name per run (its folder name; the scorer or config set for variants)."""
    if len(scorers) > 1:
        names = list(scorers)
    elif len(configs) > 1:
        names = [Path(text).name.removesuffix(".json") or text for text in configs]
    else:
        names = []
        for path in runs:
            resolved = path.resolve()
            if resolved.name == "output.jsonl":
                resolved = resolved.parent
            if resolved.name == DEFAULT_OUTPUT_SUBDIR:
                resolved = resolved.parent
            names.append(resolved.name or "run")
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name).lstrip(".") or "run"
        seen[safe] = seen.get(safe, 0) + 1
        unique.append(safe if seen[safe] == 1 else f"{safe}-{seen[safe]}")
    return unique


def register_eval_command(group: click.Group) -> None:
    """Add ``eval`` to the ``cdp-session`` group."""
    group.add_command(eval_command)
