"""A run as one shareable artifact: a Hugging Face dataset folder, and back.

``export_dataset(run, out)`` writes::

    out/README.md                  the dataset card: a YAML header naming the data file (so that
                                   ``datasets.load_dataset(out)`` loads it offline), the run's figures
                                   and the versions of the evaluators that scored it
    out/data/episodes.parquet      one row per episode (``COLUMNS``)
    out/sessions/<path>            the session files, redacted unless asked otherwise

The rows are the scores of the session files *as written into the folder* (redacted ones), so what is
shared is what was scored. ``import_dataset(out, dest)`` takes the sessions back: it reads only the
session files, each through the bounded session loader, and never the Parquet file or the card (they
are derived data, and an outside folder is untrusted input).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import stat
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.errors import EvaluationError, SessionFormatError
from cdp_integration.session.untrusted import open_output

__all__ = [
    "COLUMNS",
    "DATA_FILE",
    "ExportedDataset",
    "export_dataset",
    "import_dataset",
    "push_to_hub",
]

DATA_FILE = "data/episodes.parquet"
SESSIONS_DIR = "sessions"
CARD_FILE = "README.md"
_SUFFIX = ".session.jsonl.gz"

COLUMNS = (
    "instance_id",
    "task_id",
    "trial",
    "trials",
    "agent",
    "intent_template_id",
    "sites",
    "eval_types",
    "score",
    "max_score",
    "live_reward",
    "live_max",
    "provenance",
    "answer",
    "error",
    "error_type",
    "attribution_class",
    "attribution_reason",
    "checks",
    "n_steps",
    "history",
    "session_file",
    "redacted",
)
"""One row per episode. ``trial`` numbers the sessions of one task id (1..``trials``, in path order);
``checks`` is the JSON text of ``test_result.checks`` (its values have no fixed type); ``history`` is
the list of ``{index, action, url}`` of the episode's steps; ``session_file`` is the session's path
inside the folder."""

_VERSIONED = ("cdp-integration", "libwebarena", "webarena-verified", "browsergym-core", "playwright")


@dataclass(frozen=True)
class ExportedDataset:
    path: Path
    episodes: int
    tasks: int
    scored: int
    redacted: bool
    secrets_replaced: int


def export_dataset(
    run: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    redact: bool = True,
    agent: str | None = None,
    scorer: str | None = None,
    configs: Mapping[int, dict[str, Any]] | None = None,
    workers: int = 1,
) -> ExportedDataset:
    """Write the finished sessions under ``run`` as a dataset folder ``out`` (new, or an empty directory).

    Each session is read through the bounded loader and written again (redacted by default), then the
    written copies are scored (``scorer``: ``webarena`` or ``verified``) into the rows. Raises
    ``EvaluationError`` for an unusable ``run`` or ``out``; a session that cannot be read stops the
    export with its one-line error (a dataset is all of a run or nothing)."""
    from cdp_integration.evaluate.batch import discover_sessions, score_directory

    run_root = Path(run)
    if run_root.is_symlink() or not run_root.is_dir():
        raise EvaluationError(f"{run_root}: not a directory of sessions")
    sessions, _partials = discover_sessions(run_root)
    if not sessions:
        raise EvaluationError(f"{run_root}: no finished session files (*{_SUFFIX}) found")
    out_root = _fresh_directory(Path(out))
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=out_root))
    try:
        secrets = 0
        for path in sessions:
            if path.is_symlink():
                raise EvaluationError(f"{path}: a symbolic link; refused")
            target = staging / SESSIONS_DIR / path.relative_to(run_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            secrets += _copy_session(path, target, redact=redact)
        scores_dir = staging / "scores"
        score_directory(staging / SESSIONS_DIR, scores_dir, configs=configs, scorer=scorer, workers=workers)
        records = _read_output(scores_dir / "output.jsonl")
        rows = _rows(records, agent=agent, redacted=redact)
        (staging / "data").mkdir()
        _write_parquet(rows, staging / DATA_FILE)
        with open_output(staging / CARD_FILE, root=staging) as card:
            card.write(_card(rows, scorer=scorer or "webarena", redacted=redact).encode())
        shutil.rmtree(scores_dir)
        for name in (SESSIONS_DIR, "data", CARD_FILE):
            os.replace(staging / name, out_root / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    scored = sum(1 for row in rows if row["score"] is not None)
    return ExportedDataset(
        path=out_root,
        episodes=len(rows),
        tasks=len({row["task_id"] for row in rows}),
        scored=scored,
        redacted=redact,
        secrets_replaced=secrets,
    )


def import_dataset(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    redact: bool = False,
    keep_screenshots: bool = False,
) -> list[Path]:
    """Copy the session files of the dataset folder ``source`` into ``dest`` (kept at their relative
    paths); each is loaded with the session limits and written again, so only a valid session lands.
    ``redact``: each is redacted as it is written (a folder exported with ``--no-redact`` holds
    secrets); screenshots are then dropped unless ``keep_screenshots``.

    Symbolic links anywhere under ``source/sessions`` are refused, like any path leaving the folder."""
    from cdp_integration.session.store import load_session

    root = Path(source)
    if root.is_symlink() or not root.is_dir():
        raise SessionFormatError(f"{root}: not a dataset folder")
    sessions_root = root / SESSIONS_DIR
    if sessions_root.is_symlink() or not sessions_root.is_dir():
        raise SessionFormatError(
            f"{root}: no {SESSIONS_DIR}/ folder (not a dataset written by export-dataset)"
        )
    found = list(_walk_sessions(sessions_root))
    if not found:
        raise SessionFormatError(f"{sessions_root}: no session files (*{_SUFFIX})")
    dest_root = Path(dest)
    if dest_root.is_symlink():
        raise SessionFormatError(f"{dest_root}: a symbolic link; refused")
    written: list[Path] = []
    for rel in found:
        session = load_session(sessions_root / rel)
        if redact:
            from cdp_integration.session.redact import RedactionPolicy, redact_session

            session = redact_session(session, RedactionPolicy(keep_screenshots=keep_screenshots))
        target = dest_root / rel
        if any(part.is_symlink() for part in [target, *target.parents] if part != part.parent):
            raise SessionFormatError(f"{target}: a symbolic link on the way; refused")
        target.parent.mkdir(parents=True, exist_ok=True)
        _write(session, target)
        written.append(target)
    return written


def push_to_hub(folder: str | os.PathLike[str], repo_id: str, *, private: bool = True) -> str:
    """Upload a dataset folder with ``huggingface_hub``'s own client; the dataset repository's URL.

    Needs a Hugging Face token (``HF_TOKEN`` or ``huggingface-cli login``) and the hub reachable."""
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise EvaluationError(
            "--push-to-hub needs huggingface_hub (pip install 'cdp-integration[datasets]')"
        ) from None
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="dataset")
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EvaluationError(f"could not push to the hub repository {repo_id}: {first}") from None
    return f"https://huggingface.co/datasets/{repo_id}"


def _fresh_directory(out: Path) -> Path:
    if out.is_symlink():
        raise EvaluationError(f"{out}: a symbolic link; refused")
    if out.exists():
        if not out.is_dir():
            raise EvaluationError(f"{out}: exists and is not a directory")
        if any(out.iterdir()):
            raise EvaluationError(f"{out}: not empty; give a new or empty directory")
    else:
        out.mkdir(parents=True)
    return out


def _walk_sessions(root: Path) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root, followlinks=False):
        here = Path(directory)
        for name in sorted(subdirs):
            if (here / name).is_symlink():
                raise SessionFormatError(f"{here / name}: a symbolic link; refused")
        subdirs.sort()
        for name in sorted(files):
            path = here / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise SessionFormatError(f"{path}: a symbolic link; refused")
            if name.endswith(_SUFFIX) and stat.S_ISREG(mode):
                yield path.relative_to(root)


def _copy_session(source: Path, target: Path, *, redact: bool) -> int:
    """Write ``source`` again at ``target`` (redacted when asked); the number of secrets replaced."""
    from cdp_integration.session.redact import redact_file
    from cdp_integration.session.store import load_session

    if redact:
        return redact_file(source, target)
    _write(load_session(source), target)
    return 0


def _write(session: Any, target: Path) -> None:
    from cdp_integration.session.store import PARTIAL_SUFFIX, SessionWriter

    writer = SessionWriter(target.with_name(target.name + PARTIAL_SUFFIX), session.header)
    try:
        for step in session.steps:
            writer.write_step(step)
        if session.end is not None:
            writer.finish(session.end, target)
        else:
            writer.abort()
            os.replace(writer.partial_path, target)
    except BaseException:
        writer.abort()
        writer.partial_path.unlink(missing_ok=True)
        raise


def _read_output(path: Path) -> list[dict[str, Any]]:
    """The lines of the ``output.jsonl`` just written (``runs.read_run``'s bounded reader)."""
    from cdp_integration.evaluate.runs import read_output_lines

    return read_output_lines(path)


def _rows(records: list[dict[str, Any]], *, agent: str | None, redacted: bool) -> list[dict[str, Any]]:
    records = sorted(records, key=lambda record: str(record.get("metadata", {}).get("session_path", "")))
    by_task: dict[Any, list[int]] = defaultdict(list)
    for index, record in enumerate(records):
        by_task[record.get("instance", {}).get("task_id")].append(index)
    trial_of: dict[int, tuple[int, int]] = {}
    for indices in by_task.values():
        for number, index in enumerate(indices, start=1):
            trial_of[index] = (number, len(indices))
    rows = []
    for index, record in enumerate(records):
        instance = record.get("instance") or {}
        result = record.get("test_result") or {}
        attribution = result.get("attribution") or {}
        history = [
            {
                "index": _int(item.get("index")),
                "action": _str(item.get("action")),
                "url": _str(item.get("url")),
            }
            for item in record.get("history") or []
            if isinstance(item, dict)
        ]
        trial, trials = trial_of[index]
        rows.append(
            {
                "instance_id": _str(record.get("instance_id")),
                "task_id": _int(instance.get("task_id")),
                "trial": trial,
                "trials": trials,
                "agent": agent,
                "intent_template_id": _int(instance.get("intent_template_id")),
                "sites": [str(site) for site in instance.get("sites") or []],
                "eval_types": [str(kind) for kind in instance.get("eval_types") or []],
                "score": _float(result.get("score")),
                "max_score": _float(result.get("max_score")),
                "live_reward": _float(result.get("live_reward")),
                "live_max": _float(result.get("live_max")),
                "provenance": _str(result.get("provenance")),
                "answer": _str(result.get("answer")),
                "error": _str(result.get("error")),
                "error_type": _str(result.get("error_type")),
                "attribution_class": _str(attribution.get("class"))
                if isinstance(attribution, dict)
                else None,
                "attribution_reason": _str(attribution.get("reason"))
                if isinstance(attribution, dict)
                else None,
                "checks": orjson.dumps(result.get("checks") or []).decode(),
                "n_steps": len(history),
                "history": history,
                "session_file": f"{SESSIONS_DIR}/{record.get('metadata', {}).get('session_path')}",
                "redacted": redacted,
            }
        )
    return rows


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise EvaluationError(
            "export-dataset needs pyarrow (pip install 'cdp-integration[datasets]')"
        ) from None
    step = pa.struct([("index", pa.int64()), ("action", pa.string()), ("url", pa.string())])
    types: dict[str, Any] = {
        "task_id": pa.int64(),
        "trial": pa.int64(),
        "trials": pa.int64(),
        "intent_template_id": pa.int64(),
        "sites": pa.list_(pa.string()),
        "eval_types": pa.list_(pa.string()),
        "score": pa.float64(),
        "max_score": pa.float64(),
        "live_reward": pa.float64(),
        "live_max": pa.float64(),
        "n_steps": pa.int64(),
        "history": pa.list_(step),
        "redacted": pa.bool_(),
    }
    schema = pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS])
    table = pa.Table.from_pylist(rows, schema=schema)
    with open_output(path) as output:  # never through a symlink planted where the file goes
        pq.write_table(table, output)


def _versions() -> dict[str, str]:
    versions = {}
    for name in _VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def _card(rows: list[dict[str, Any]], *, scorer: str, redacted: bool) -> str:
    scored = [row for row in rows if row["score"] is not None]
    tasks = {row["task_id"] for row in rows}
    mean = sum(row["score"] for row in scored) / len(scored) if scored else None
    trials = sorted({row["trials"] for row in rows})
    agents = sorted({row["agent"] for row in rows if row["agent"]})
    lines = [
        "---",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        f"    path: {DATA_FILE}",
        "tags:",
        "- web-agents",
        "- webarena",
        "- cdp-integration",
        "---",
        "",
        "# Web-agent run",
        "",
        "Episodes of a web-agent run with their offline scores, written by `cdp-session export-dataset`.",
        "Each row is one episode; its session file (under `sessions/`) re-scores it offline with the",
        "official WebArena evaluators: `cdp-session import dataset DIR -o sessions && cdp-session eval sessions`.",
        "",
        "| | |",
        "|---|---|",
        f"| episodes | {len(rows)} |",
        f"| tasks | {len(tasks)} |",
        f"| trials per task | {', '.join(str(count) for count in trials)} |",
        f"| scored | {len(scored)} |",
        f"| mean score | {'n/a' if mean is None else f'{mean:.3f}'} |",
        f"| scorer | {scorer} |",
        f"| agent | {', '.join(agents) if agents else 'not given'} |",
        f"| sessions redacted | {'yes' if redacted else 'no'} |",
        "",
        "## Evaluator versions",
        "",
        "| package | version |",
        "|---|---|",
        *(f"| {name} | {version} |" for name, version in _versions().items()),
        "",
        "## Columns",
        "",
        ", ".join(f"`{name}`" for name in COLUMNS),
        "",
    ]
    return "\n".join(lines)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
