"""Reading members of an untrusted zip archive (a Playwright ``trace.zip``) without extracting it.

Nothing is ever written to disk, so a zip-slip name could do no harm here; such names are refused
anyway, because an archive that holds them was not written by the tool it claims to come from.
Sizes are bounded twice: by the central directory's declared sizes before anything is inflated
(cheap refusal of a zip bomb), and by the bytes actually inflated (a lying directory cannot make a
member larger than its bound: ``read(limit + 1)`` never produces more).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath

from cdp_integration.errors import SessionFormatError
from cdp_integration.session.limits import open_regular_file

__all__ = ["ZipLimits", "ZipReader"]


@dataclass(frozen=True)
class ZipLimits:
    """Bounds for one archive; defaults fit a long WebArena episode's trace (tens of MB)."""

    max_archive_bytes: int = 1024**3
    max_members: int = 100_000
    max_member_bytes: int = 256 * 1024**2
    """One member once inflated (``trace.trace`` is the largest: every DOM snapshot)."""
    max_total_bytes: int = 512 * 1024**2
    """All members read, once inflated."""
    max_ratio: int = 200
    """Inflated / compressed size of one member beyond 1 MB; JSON traces compress ~10-20x."""


def _unsafe(name: str) -> bool:
    path = PurePosixPath(name)
    return (
        not name
        or "\\" in name
        or "\0" in name
        or path.is_absolute()
        or ".." in path.parts
        or (len(name) > 1 and name[1] == ":")
    )


class ZipReader:
    """The members of the zip at ``path``, read one at a time within ``limits``."""

    def __init__(self, path: str | os.PathLike[str], limits: ZipLimits | None = None) -> None:
        self.source = str(path)
        self.limits = limits or ZipLimits()
        self._read_total = 0
        fd = open_regular_file(path, self.source, "zip archive")
        try:
            if os.fstat(fd).st_size > self.limits.max_archive_bytes:
                raise SessionFormatError(f"{self.source}: larger than {self.limits.max_archive_bytes} bytes")
            file = os.fdopen(os.dup(fd), "rb")
        finally:
            os.close(fd)
        self._file = file
        try:
            self._zip = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
            file.close()
            raise SessionFormatError(f"{self.source}: not a zip archive ({exc})") from None
        infos = self._zip.infolist()
        if len(infos) > self.limits.max_members:
            self.close()
            raise SessionFormatError(f"{self.source}: more than {self.limits.max_members} members")
        declared = 0
        self._members: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if _unsafe(info.filename):
                self.close()
                raise SessionFormatError(
                    f"{self.source}: member name {info.filename[:120]!r} leaves the archive (zip-slip); refused"
                )
            self._check_size(info)
            declared += info.file_size
            self._members[info.filename] = info
        if declared > self.limits.max_total_bytes * 4:
            self.close()
            raise SessionFormatError(
                f"{self.source}: members declare {declared} bytes inflated (a zip bomb?); refused"
            )

    def _check_size(self, info: zipfile.ZipInfo) -> None:
        if info.file_size > self.limits.max_member_bytes:
            self.close()
            raise SessionFormatError(
                f"{self.source}: member {info.filename[:120]!r} inflates to {info.file_size} bytes, more than "
                f"{self.limits.max_member_bytes}; refused"
            )
        if info.file_size > 1024**2 and info.file_size > self.limits.max_ratio * max(info.compress_size, 1):
            self.close()
            raise SessionFormatError(
                f"{self.source}: member {info.filename[:120]!r} compresses {info.file_size // max(info.compress_size, 1)}:1 "
                "(a zip bomb?); refused"
            )

    def names(self) -> list[str]:
        return list(self._members)

    def has(self, name: str) -> bool:
        return name in self._members

    def read(self, name: str, limit: int | None = None) -> bytes:
        """The inflated bytes of member ``name``, refused beyond ``limit`` (default: the member bound)."""
        info = self._members.get(name)
        if info is None:
            raise SessionFormatError(f"{self.source}: has no member {name[:120]!r}")
        bound = min(limit or self.limits.max_member_bytes, self.limits.max_member_bytes)
        try:
            with self._zip.open(info) as member:
                data = member.read(bound + 1)
        except (zipfile.BadZipFile, ValueError, EOFError, OSError, NotImplementedError) as exc:
            raise SessionFormatError(f"{self.source}: member {name[:120]!r} cannot be read ({exc})") from None
        if len(data) > bound:
            raise SessionFormatError(
                f"{self.source}: member {name[:120]!r} inflates to more than {bound} bytes"
            )
        self._read_total += len(data)
        if self._read_total > self.limits.max_total_bytes:
            raise SessionFormatError(
                f"{self.source}: members inflate to more than {self.limits.max_total_bytes} bytes in all; refused"
            )
        return data

    def close(self) -> None:
        self._zip.close()
        self._file.close()

    def __enter__(self) -> ZipReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
