"""The one way the package reads, parses and writes what comes from outside: budgets checked as data is read.

Sessions, HARs, traces, pickles, histories, run folders and the outputs written beside them are
untrusted. Every loader, importer and writer goes through this module (``tests/unit/test_layers.py``
refuses direct ``open``/``zipfile``/``gzip``/``pickle``/``json.load`` elsewhere), so one set of
bounds (``SessionLimits``, shared by the importers and the loader) holds everywhere:

- ``open_input`` / ``read_input``: a regular file only; every path component below the input's
  ``root`` opened with ``O_NOFOLLOW`` (a symlink in a shared folder is refused, never followed out
  of it); bytes bounded as read; gzip inflated as a stream, counted as it comes.
- ``parse_json``: JSON values counted before parsing, nesting refused beyond the limit (below the
  254 levels ``orjson.dumps`` can write back), one-line errors.
- ``unpickle``: a restricted unpickler whose stream is checked opcode by opcode *before* it runs:
  opcodes, memo indexes, sizes of bytes/strings and the objects a pickle makes; then its result is
  walked with shared references counted per use (a 600-byte pickle cannot become a GB of data).
- ``clean_text``: strings made valid UTF-8 (lone surrogates, from pickles or file names, replaced).
- ``open_output`` / ``make_output_dir``: outputs (``.partial``, ``output.jsonl``, reports, output
  directories) created without following a symlink planted where they go.
- ``Budget``: a byte or item budget spent as data is built, refusing with the limit's variable.

Errors are ``SessionFormatError`` with one line naming the file; the CLI maps them to exit 2.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import pickle
import pickletools
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, cast

import orjson

from cdp_integration.errors import SessionFormatError
from cdp_integration.session.limits import SessionLimits, check_depth, count_values, limit_hint

__all__ = [
    "JSON_DEPTH_CEILING",
    "Budget",
    "ZipLimits",
    "ZipReader",
    "ascii_int",
    "clean_text",
    "inflate_gzip",
    "is_within",
    "iter_file_lines",
    "iter_lines",
    "make_output_dir",
    "open_input",
    "open_output",
    "parse_json",
    "read_input",
    "read_json",
    "unpickle",
]

JSON_DEPTH_CEILING = 250
"""Nesting never accepted, whatever the limits say: ``orjson.dumps`` refuses beyond 254 levels, so
a deeper input could be read but never written back (a traceback, a ``.partial`` left behind)."""

_READ_CHUNK = 1 << 20


def _quote(path: str | os.PathLike[str]) -> str:
    return clean_text(str(path))[:300]


def clean_text(value: str) -> str:
    """``value`` as valid UTF-8: lone surrogates (a pickle's ``surrogatepass`` strings, a file name's
    undecodable bytes) become U+FFFD; anything else is unchanged (cheap when there is nothing to do)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


_ASCII_NUMBER = re.compile(r"[0-9]{1,18}")


def ascii_int(text: str) -> int | None:
    """``text`` as a number when it is one written in ASCII digits (a task id, a ``<task_id>.json``
    name), else None: ``str.isdigit`` also accepts ``"²"`` and ``"¹"``, which ``int`` refuses, and
    ``int`` refuses numbers of more than 4,300 digits."""
    return int(text) if _ASCII_NUMBER.fullmatch(text) else None


class Budget:
    """A budget of bytes (or items) spent as data is built: ``spend`` refuses once it is exceeded."""

    def __init__(self, limit: int, source: str, what: str, hint: str = "") -> None:
        self.limit = limit
        self.used = 0
        self.source = source
        self.what = what
        self.hint = hint

    def spend(self, amount: int, where: str = "") -> None:
        self.used += amount
        if self.used > self.limit:
            place = f"{where}: " if where else ""
            hint = f" ({self.hint})" if self.hint else ""
            raise SessionFormatError(
                f"{self.source}: {place}more than {self.limit} {self.what}{hint}; refused"
            )


# -- opening --------------------------------------------------------------------------------------


def _relative_parts(path: Path, root: Path) -> tuple[str, ...]:
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise SessionFormatError(f"{_quote(path)}: outside its folder {_quote(root)}; refused") from None
    if not parts or any(part in ("..", "") for part in parts):
        raise SessionFormatError(f"{_quote(path)}: not a file under {_quote(root)}; refused")
    return parts


def _symlink_refusal(path: Path) -> SessionFormatError:
    return SessionFormatError(
        f"{_quote(path)}: is a symbolic link; refused (files of a recording are read only inside it)"
    )


def _walk_dirs(root: Path, parts: tuple[str, ...], whole: Path, *, create: bool) -> int:
    """A descriptor of the directory ``root/parts`` reached without following a symlink below ``root``."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise SessionFormatError(f"{_quote(root)}: cannot open ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise SessionFormatError(f"{_quote(root)!r}: not a usable path ({exc})") from None
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, fd):
                    raise _symlink_refusal(whole) from None
                raise SessionFormatError(f"{_quote(whole)}: cannot open ({exc.strerror or exc})") from None
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def open_input(
    path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None, what: str = "file"
) -> int:
    """A read-only descriptor of the regular file ``path``; never blocks, never follows a symlink below ``root``.

    ``root``: the folder the input was found in (a run folder, a study, the file a HAR sits beside):
    every component of ``path`` under it is opened with ``O_NOFOLLOW``. Without ``root`` the path
    is one the user named (followed, but still only a regular file: never a FIFO or ``/dev/zero``).
    """
    path = Path(path)
    source = _quote(path)
    try:
        if root is None:
            before = os.stat(path)
            if stat.S_ISDIR(before.st_mode):
                raise SessionFormatError(f"{source}: is a directory, not a {what}")
            if not stat.S_ISREG(before.st_mode):
                raise SessionFormatError(f"{source}: not a regular file (a FIFO, device or socket); refused")
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        else:
            parts = _relative_parts(path, Path(root))
            dir_fd = _walk_dirs(Path(root), parts[:-1], path, create=False)
            try:
                fd = os.open(
                    parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
                )
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _symlink_refusal(path) from None
                raise
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise SessionFormatError(f"{source}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # a path with a NUL byte
        raise SessionFormatError(f"{source!r}: not a usable path ({exc})") from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode):
        os.close(fd)
        if stat.S_ISDIR(after.st_mode):
            raise SessionFormatError(f"{source}: is a directory, not a {what}")
        raise SessionFormatError(f"{source}: not a regular file (a FIFO, device or socket); refused")
    return fd


def read_input(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    root: str | os.PathLike[str] | None = None,
    what: str = "file",
    inflate: bool = True,
) -> bytearray:
    """The bytes of ``path`` (gzip inflated when ``inflate`` and it starts with the gzip magic), at
    most ``max_bytes`` of them, counted as they are read and inflated: never more is held."""
    source = _quote(path)
    fd = open_input(path, root=root, what=what)
    try:
        if os.fstat(fd).st_size > max_bytes:
            raise SessionFormatError(f"{source}: larger than {max_bytes} bytes; refused")
        chunks = _read_chunks(fd, source)
        first = next(chunks, b"")
        if inflate and first[:2] == b"\x1f\x8b":
            return _inflate(_prepend(first, chunks), max_bytes, source)
        out = bytearray(first)
        for chunk in chunks:
            out += chunk
            if len(out) > max_bytes:
                raise SessionFormatError(f"{source}: larger than {max_bytes} bytes; refused")
        return out
    finally:
        os.close(fd)


def _read_chunks(fd: int, source: str) -> Iterator[bytes]:
    while True:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except OSError as exc:
            raise SessionFormatError(f"{source}: cannot read ({exc.strerror or exc})") from None
        if not chunk:
            return
        yield chunk


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def inflate_gzip(raw: bytes | bytearray, max_bytes: int, source: str) -> bytearray:
    """Gzip bytes already in memory, inflated to at most ``max_bytes`` (counted as they come)."""
    return _inflate(iter([raw]), max_bytes, source)


def _inflate(chunks: Iterator[bytes | bytearray], max_bytes: int, source: str) -> bytearray:
    """A whole gzip stream (members concatenated as ``zcat`` reads them), inflated piece by piece."""
    out = bytearray()
    inflater = zlib.decompressobj(47)
    ended = False
    for chunk in chunks:
        data = chunk
        while data:
            if ended:
                if data[:2] != b"\x1f\x8b":
                    raise SessionFormatError(f"{source}: data after the end of the compressed stream")
                inflater, ended = zlib.decompressobj(47), False
            try:
                piece = inflater.decompress(data, _READ_CHUNK)
            except zlib.error as exc:
                raise SessionFormatError(f"{source}: corrupt gzip data ({exc})") from None
            out += piece
            if len(out) > max_bytes:
                raise SessionFormatError(f"{source}: decompresses to more than {max_bytes} bytes")
            if inflater.eof:
                ended, data = True, inflater.unused_data
                continue
            data = inflater.unconsumed_tail
            if not piece and not data:
                break
    if not ended:
        raise SessionFormatError(f"{source}: gzip stream is truncated")
    return out  # not copied: a 256 MB input is held once


def iter_lines(data: bytes, *, max_line: int, source: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of ``data``, one at a time: a member of a million newlines is never split at once."""
    start = 0
    number = 0
    size = len(data)
    while start < size:
        end = data.find(b"\n", start)
        if end < 0:
            end = size
        number += 1
        if end - start > max_line:
            raise SessionFormatError(f"{source}: line {number} is longer than {max_line} bytes; refused")
        if end > start:
            yield number, data[start:end]
        start = end + 1


def iter_file_lines(file: BinaryIO, *, max_line: int, source: str) -> Iterator[bytes]:
    """The lines of an open file (each with its newline, the last maybe without), read in chunks:
    a line longer than ``max_line`` is refused before more of it is held."""
    pending = bytearray()
    while True:
        chunk = file.read(_READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        start = 0
        while True:
            end = pending.find(b"\n", start)
            if end < 0:
                break
            yield bytes(pending[start : end + 1])
            start = end + 1
        del pending[:start]
        if len(pending) > max_line:
            raise SessionFormatError(f"{source}: a line is longer than {max_line} bytes; refused")
    if pending:
        yield bytes(pending)


# -- JSON -----------------------------------------------------------------------------------------


def parse_json(
    data: bytes | bytearray | memoryview | str,
    source: str,
    limits: SessionLimits,
    *,
    values: Budget | None = None,
    max_depth: int | None = None,
) -> Any:
    """One JSON document from untrusted bytes: its values counted (against ``values``, else the
    limits' ``max_values``) before it is parsed, its nesting refused beyond ``limits.max_depth``
    (never beyond ``JSON_DEPTH_CEILING``: it could not be written back; ``max_depth`` overrides
    both for data that is only read, never written as JSON); lone surrogates are refused by the parser."""
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else bytes(data)
    counted = count_values(raw)
    if values is not None:
        values.spend(counted)
    elif counted > limits.max_values:
        raise SessionFormatError(
            f"{source}: more than {limits.max_values} JSON values ({limit_hint('max_values')})"
        )
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SessionFormatError(f"{source}: not valid JSON ({clean_text(str(exc))[:200]})") from None
    depth = max_depth if max_depth is not None else min(limits.max_depth, JSON_DEPTH_CEILING)
    if raw.count(b"[") + raw.count(b"{") > depth:
        check_depth(document, depth, source)
    return document


def read_json(
    path: str | os.PathLike[str],
    *,
    limits: SessionLimits,
    max_bytes: int,
    root: str | os.PathLike[str] | None = None,
    what: str = "JSON file",
) -> Any:
    """``read_input`` then ``parse_json``: a bounded JSON document from a file (plain or gzip)."""
    return parse_json(read_input(path, max_bytes=max_bytes, root=root, what=what), _quote(path), limits)


# -- pickles --------------------------------------------------------------------------------------

_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_MAKERS = frozenset(
    {
        "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "EMPTY_SET", "DICT", "LIST", "TUPLE", "TUPLE1",
        "TUPLE2", "TUPLE3", "FROZENSET", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST", "BUILD",
        "MARK",
    }
)  # fmt: skip
_REFUSED_OPS = frozenset({"PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4"})


def _prescan(data: bytes | bytearray, source: str, limits: SessionLimits) -> None:
    """Walk the opcodes without running them: refuse what would allocate past the limits.

    The C unpickler grows its memo to the largest index a ``PUT`` names and makes an object per
    ``{}``/``[]`` opcode before anything could count them; here they are counted first. Reading an
    opcode's argument reads the bytes it names from ``data``, so a length field larger than the
    stream ends the scan (a truncated pickle) without allocating it.
    """
    ops = 0
    made = 0
    memo_max = limits.max_pickle_memo
    try:
        for opcode, arg, _pos in pickletools.genops(io.BytesIO(data)):
            ops += 1
            if ops > limits.max_pickle_ops:
                raise SessionFormatError(
                    f"{source}: more than {limits.max_pickle_ops} pickle opcodes ({limit_hint('max_pickle_ops')})"
                )
            name = opcode.name
            if name in _REFUSED_OPS:
                raise SessionFormatError(f"{source}: refuses a pickle with persistent ids or extension codes")
            if name in _MEMO_PUTS or name in _MEMO_GETS:
                if isinstance(arg, int) and arg >= memo_max:
                    raise SessionFormatError(
                        f"{source}: a pickle memo index {arg} beyond {memo_max} ({limit_hint('max_pickle_memo')})"
                    )
            elif name in _MAKERS:
                made += 1
    except SessionFormatError:
        raise
    except (ValueError, EOFError, IndexError, KeyError, TypeError, OverflowError) as exc:
        raise SessionFormatError(
            f"{source}: not a readable pickle ({type(exc).__name__}: {clean_text(str(exc))[:120]})"
        ) from None
    if made * 64 > limits.max_expanded_bytes:
        raise SessionFormatError(
            f"{source}: the pickle makes more than {limits.max_expanded_bytes // 64} objects "
            f"({limit_hint('max_expanded_bytes')})"
        )


class _Unpickler(pickle.Unpickler):
    def __init__(
        self, file: BinaryIO, allowed: Mapping[tuple[str, str], Any], refusal: Callable[[str, str], str]
    ) -> None:
        super().__init__(file)
        self._allowed = allowed
        self._refusal = refusal

    def find_class(self, module: str, name: str) -> Any:
        found = self._allowed.get((module, name))
        if found is None:
            raise SessionFormatError(self._refusal(clean_text(module)[:80], clean_text(name)[:80]))
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise SessionFormatError("refuses a pickle with persistent ids")


def unpickle(
    data: bytes | bytearray,
    source: str,
    limits: SessionLimits,
    allowed: Mapping[tuple[str, str], Any],
    refusal: Callable[[str, str], str],
) -> Any:
    """Unpickle untrusted ``data``: opcodes pre-scanned (``_prescan``), every global looked up in
    ``allowed`` ((module, name) -> what the pickle gets instead; ``refusal(module, name)`` is the
    error for anything else). What ``allowed`` maps to must check its own arguments' sizes: the
    restricted constructors are called with the pickle's values."""
    _prescan(data, source, limits)
    try:
        return _Unpickler(io.BytesIO(data), allowed, refusal).load()
    except SessionFormatError as exc:
        raise SessionFormatError(f"{source}: {exc}") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        OverflowError,
        MemoryError,
        RecursionError,
    ) as exc:
        raise SessionFormatError(
            f"{source}: not a readable pickle ({type(exc).__name__}: {clean_text(str(exc))[:120]})"
        ) from None


# -- outputs --------------------------------------------------------------------------------------


def make_output_dir(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Path:
    """Create the directory ``path`` (and its parents) without following a symlink below ``root``.

    ``root``: the folder ``path`` is inside of by default (``SESSIONS/eval_output``); without it the
    user named ``path``: its parents are made as usual and ``path`` itself must not be a symlink
    unless the user named it so (then it is theirs)."""
    path = Path(path)
    if root is None:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise SessionFormatError(f"{_quote(path)}: exists and is not a directory") from None
        except OSError as exc:
            raise SessionFormatError(f"{_quote(path)}: cannot create ({exc.strerror or exc})") from None
        return path
    root = make_output_dir(root)
    if path == root:
        return path
    fd = _walk_dirs(root, _relative_parts(path, root), path, create=True)
    os.close(fd)
    return path


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``root`` or below it, lexically (as the user wrote both)."""
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
    except ValueError:
        return False
    return True


def open_output(
    path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    append: bool = False,
    read: bool = False,
) -> BinaryIO:
    """A binary file to write at ``path``, created (or truncated, or appended to) without following a
    symlink: neither ``path`` itself nor any directory between ``root`` (default: its parent) and it.

    A symlink planted where an output goes (``output.jsonl``, a ``.partial``, a report) would make
    us write through it, anywhere the user can; it is refused in one line instead."""
    path = Path(path)
    root_path = Path(root) if root is not None else path.parent
    parts = _relative_parts(path, root_path)
    dir_fd = _walk_dirs(root_path, parts[:-1], path, create=True)
    flags = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    flags |= os.O_RDWR if read else os.O_WRONLY
    flags |= os.O_APPEND if append else (0 if read else os.O_TRUNC)
    try:
        fd = os.open(parts[-1], flags, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SessionFormatError(
                f"{_quote(path)}: is a symbolic link; refused (an output is never written through one)"
            ) from None
        raise SessionFormatError(f"{_quote(path)}: cannot write ({exc.strerror or exc})") from None
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SessionFormatError(f"{_quote(path)}: not a regular file; refused as an output")
    os.set_blocking(fd, True)
    mode = ("r+b" if not append else "a+b") if read else ("ab" if append else "wb")
    return cast(BinaryIO, os.fdopen(fd, mode))


# -- zip archives (Playwright traces) ---------------------------------------------------------------


@dataclass(frozen=True)
class ZipLimits:
    """Bounds for one archive; defaults fit a long WebArena episode's trace (tens of MB)."""

    max_archive_bytes: int = 1024**3
    max_members: int = 100_000
    max_member_bytes: int = 256 * 1024**2
    """One member once inflated (``trace.trace`` is the largest: every DOM snapshot)."""
    max_total_bytes: int = 256 * 1024**2
    """All members read, once inflated (held with what is parsed from them: well under 1 GiB)."""
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

    def __init__(
        self,
        path: str | os.PathLike[str],
        limits: ZipLimits | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.source = _quote(path)
        self.limits = limits or ZipLimits()
        self._read_total = 0
        fd = open_input(path, root=root, what="zip archive")
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
        remaining = self.limits.max_total_bytes - self._read_total
        if min(info.file_size, bound + 1) > remaining:  # refused before it is read, not after
            raise SessionFormatError(
                f"{self.source}: members inflate to more than {self.limits.max_total_bytes} bytes in all; refused"
            )
        try:
            with self._zip.open(info) as member:
                data = member.read(min(bound, remaining) + 1)
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
