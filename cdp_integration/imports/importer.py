"""One entry point over the formats: ``import_recordings(format, path, output_dir)``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cdp_integration.errors import SessionFormatError
from cdp_integration.imports.common import FORMATS, ImportedEpisode, safe_name, write_episode
from cdp_integration.session.untrusted import clean_text

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
    site_urls: Mapping[str, str] | None = None,
    output_root: Path | None = None,
    keep_screenshots: bool = False,
) -> list[Path]:
    """Import every episode of ``path`` into ``output_dir``; the session files written, in order.

    Two episodes of the same name (two runs of one task), or of names that clean to one file name
    (``a b`` and ``a_b``; case-insensitively, for case-insensitive file systems), get ``-2``,
    ``-3``... rather than one overwriting the other. ``site_urls`` (``{"SHOPPING": url}``) are
    recorded in each session for the sites its recording does not name, so raw configs'
    ``__SHOPPING__`` placeholders resolve when it is scored. ``output_root``: a folder ``output_dir``
    is inside of by default (no symlink below it is followed)."""
    written: list[Path] = []
    names: set[str] = set()
    for episode in _episodes(fmt, path):
        base, number = episode.name, 1
        while safe_name(episode.name).lower() in names:  # two names that clean to one file keep both
            number += 1
            episode.name = f"{base}-{number}"
        names.add(safe_name(episode.name).lower())
        written.append(
            write_episode(
                episode,
                fmt,
                Path(output_dir),
                answers=answers,
                configs=configs,
                redact=redact,
                site_urls=site_urls,
                output_root=output_root,
                keep_screenshots=keep_screenshots,
            )
        )
    return written


def _episodes(fmt: str, path: Path) -> Iterator[ImportedEpisode]:
    """``import_recording``'s episodes; a field of an unexpected type (a number where the format has a
    list, ...) in any format is a one-line ``SessionFormatError``, not a traceback."""
    episodes = import_recording(fmt, path)
    while True:
        try:
            episode = next(episodes)
        except StopIteration:
            return
        except (TypeError, KeyError, IndexError, AttributeError, ValueError, OverflowError) as exc:
            if isinstance(exc, SessionFormatError):
                raise
            text = clean_text(str(exc)).splitlines()[0][:160] if str(exc) else ""
            raise SessionFormatError(
                f"{clean_text(str(path))}: not a {fmt} recording of the expected shape ({type(exc).__name__}: {text})"
            ) from None
        yield episode
