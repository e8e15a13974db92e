"""The ``eval`` command, shared by ``cdp-session eval`` and ``evaluation/benchmarks/webarena/eval_infer.py``.

Thin: argument checks, then ``batch.score_directory`` and ``report.write_report``. Every
``CDPIntegrationError`` (missing directory, bad configs file, ...) is one line on stderr, exit code 2.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import click

from cdp_integration import storage
from cdp_integration.cli import site_url_option, site_urls_in_environment
from cdp_integration.deployment import known_site_urls, parse_site_urls
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
from cdp_integration.evaluate.report import REPORT_JSON, REPORT_MD, format_summary, plural, write_report
from cdp_integration.evaluate.report_html import viewer_links, write_run_html
from cdp_integration.evaluate.runs import Run, read_run, unscored_groups

__all__ = ["compare_command", "eval_command", "register_eval_command", "write_viewers"]

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
    help=f"Where output.jsonl, report.json, report.md and report.html go [default: SESSIONS_DIR/{DEFAULT_OUTPUT_SUBDIR}]; "
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
@site_url_option
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
    site_urls: tuple[str, ...],
    viewers: bool,
    allow_unscored: bool,
) -> None:
    """Score a directory of sessions offline; write output.jsonl and a report.

    Sessions already in the output's output.jsonl are skipped, so a stopped run picks up where it
    was. SESSIONS_DIR may also be an OpenHands run_infer output directory (sessions in a subdirectory),
    or a storage URL (s3://bucket/run: fsspec), read one bounded session at a time.
    A session's recorded site URLs are used first; --site-url (or WA_<SITE>, WEBARENA_BASE_URL) give
    those it lacks (imported recordings, raw configs with __SHOPPING__-style placeholders).
    Exit status: 0 when every session was scored, 1 when some could not be (unless --allow-unscored),
    2 for bad arguments.
    """
    staging: tempfile.TemporaryDirectory[str] | None = None
    try:
        urls = parse_site_urls(site_urls)
        remote_in = storage.local_path(sessions_location) is None
        sessions_dir = storage.local_path(sessions_location) or Path()
        if output_location is None:
            output_location = _default_output(
                sessions_location, sessions_dir, imports=import_format is not None
            )
        remote_out = storage.local_path(output_location) is None
        if remote_in and (import_format is not None or viewers):
            raise EvaluationError("--import and --viewers read local files; copy the sessions here first")
        if remote_out:  # written here, uploaded at the end; an earlier output.jsonl pulled to resume
            staging = tempfile.TemporaryDirectory(prefix="cdp-eval-")
            output_dir = _staged_output(output_location, Path(staging.name), resume=not no_resume)
        else:
            output_dir = storage.local_path(output_location) or Path(output_location)
        configs = load_configs(configs_path) if configs_path is not None else None
        if import_format is not None:
            sessions_dir = _import_first(
                import_format,
                sessions_dir,
                output_dir,
                output_location,
                answers_path=answers_path,
                configs=configs,
                site_urls={**known_site_urls(), **urls},
            )
        progress: ProgressFactory | None = None if no_progress or not sys.stderr.isatty() else _progress_bar
        with site_urls_in_environment(urls):
            summary = score_directory(
                sessions_location if remote_in and import_format is None else sessions_dir,
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
        run = read_run(output_dir)
        viewer_failures = write_viewers(sessions_dir, output_dir, run) if viewers else []
        html_path = write_run_html(output_dir, run, report, links=viewer_links(run))
        if remote_out:
            for name in (OUTPUT_NAME, REPORT_JSON, REPORT_MD, html_path.name):
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
    shown = output_location.rstrip("/") if remote_out else str(output_dir)
    click.echo(
        f"wrote {shown}/{OUTPUT_NAME}, {shown}/{REPORT_JSON}, {shown}/{REPORT_MD}, {shown}/{html_path.name}"
    )
    groups = unscored_groups(run.episodes)
    if not run.episodes or (groups and sum(len(g.instances) for g in groups) == len(run.episodes)):
        prefix = "cdp-session" if ctx.parent is not None else ctx.info_name
        found = (
            f"none of its {plural(len(run.episodes), 'session')} could be scored: {groups[0].line()}"
            if groups
            else "no session found in it"
        )
        click.echo(escape_controls(f"{prefix}: error: {sessions_location}: {found}"), err=True)
        ctx.exit(1)
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


def _default_output(sessions_location: str, sessions_dir: Path, *, imports: bool) -> str:
    """``SESSIONS_DIR/eval_output``; beside an imported recording given as one file."""
    base = sessions_location
    if storage.local_path(sessions_location) is not None and imports and not sessions_dir.is_dir():
        base = str(sessions_dir.parent)
    return storage.join(base, DEFAULT_OUTPUT_SUBDIR)


def _staged_output(output_location: str, staging: Path, *, resume: bool) -> Path:
    """A local folder for an output in storage: its earlier ``output.jsonl`` pulled in to resume."""
    earlier = storage.join(output_location, OUTPUT_NAME)
    if resume and storage.exists(earlier):
        storage.download(earlier, staging / OUTPUT_NAME)
    return staging


def _import_first(
    import_format: str,
    recording: Path,
    output_dir: Path,
    output_location: str,
    *,
    answers_path: Path | None,
    configs: Mapping[int, Mapping[str, Any]] | None,
    site_urls: dict[str, str],
) -> Path:
    """``eval --import``: the recording imported (redacted) into ``OUTPUT_DIR/imported``; that folder."""
    from cdp_integration.imports.common import load_answers
    from cdp_integration.imports.importer import import_recordings

    base_dir = recording if recording.is_dir() else recording.parent
    output_root = (
        base_dir if storage.local_path(output_location) == base_dir / DEFAULT_OUTPUT_SUBDIR else output_dir
    )
    imported = output_dir / "imported"
    import_recordings(
        import_format,
        recording,
        imported,
        answers=load_answers(answers_path) if answers_path is not None else None,
        configs=configs,
        redact=True,
        site_urls=site_urls,
        output_root=output_root,
    )
    return imported


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
            loaded.append(_some_episodes(read_run(output, name=name), path))
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
        loaded.append(_some_episodes(run, path))
    by = pair_by or ("session" if variants > 1 else "task")
    comparisons = [compare_runs(loaded[0], other, by=by) for other in loaded[1:]]
    for comparison in comparisons:
        if not comparison.paired:
            raise EvaluationError(
                f"{comparison.a.name} and {comparison.b.name} have no {comparison.unit} in common "
                f"({len(comparison.only_a)} only in {comparison.a.name}, {len(comparison.only_b)} only in "
                f"{comparison.b.name}): nothing to compare"
            )
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


def _some_episodes(run: Run, path: Path) -> Run:
    """``run``, which must hold at least one session's result: a file of no results is no run."""
    if not run.episodes:
        raise EvaluationError(f"{path}: holds no session's result: not a run of cdp-session eval")
    return run


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
