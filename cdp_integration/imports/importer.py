"""One entry point over the formats: ``import_recordings(format, path, output_dir)``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cdp_integration.errors import SessionFormatError
from cdp_integration.imports.common import FORMATS, ImportedEpisode, write_episode

__all__ = ["import_recording", "import_recordings"]


def import_recording(fmt: str, path: Path) -> Iterator[ImportedEpisode]:
    """The episodes of the recording at ``path`` in format ``fmt`` (one of ``FORMATS``), one at a time."""
    path = Path(path)
    if not path.exists():
        raise SessionFormatError(f"{path}: no such file or directory")
    if fmt == "playwright-trace":
        from cdp_integration.imports.playwright_trace import import_traces

        return import_traces(path)
    if fmt == "verified":
        from cdp_integration.imports.verified import import_verified

        return import_verified(path)
    if fmt == "browser-use":
        from cdp_integration.imports.browser_use import import_browser_use

        return import_browser_use(path)
    if fmt == "agentlab":
        from cdp_integration.imports.agentlab import import_agentlab

        return import_agentlab(path)
    raise SessionFormatError(f"unknown import format {fmt!r} (one of {', '.join(FORMATS)})")


def import_recordings(
    fmt: str,
    path: Path,
    output_dir: Path,
    *,
    answers: Mapping[str, str | None] | None = None,
    configs: Mapping[int, Mapping[str, Any]] | None = None,
    redact: bool = False,
    keep_screenshots: bool = False,
) -> list[Path]:
    """Import every episode of ``path`` into ``output_dir``; the session files written, in order.

    Two episodes of the same name (two runs of one task) get ``-2``, ``-3``... rather than one
    overwriting the other."""
    written: list[Path] = []
    names: dict[str, int] = {}
    for episode in import_recording(fmt, path):
        seen = names.get(episode.name, 0)
        names[episode.name] = seen + 1
        if seen:
            episode.name = f"{episode.name}-{seen + 1}"
        written.append(
            write_episode(
                episode,
                fmt,
                Path(output_dir),
                answers=answers,
                configs=configs,
                redact=redact,
                keep_screenshots=keep_screenshots,
            )
        )
    return written
