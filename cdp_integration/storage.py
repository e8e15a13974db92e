"""Sessions and outputs in object storage: fsspec URLs (``s3://``, ``gs://``, ``file://``) next to paths.

A location is a local path or a URL with a scheme (``s3://bucket/run``). URLs go through fsspec (s3fs
for ``s3://``; the endpoint and credentials come from the usual places: ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``..., or fsspec's ``FSSPEC_S3_*`` variables); ``file://`` is a plain path.

Writers keep working on local files (capture's crash-safe ``*.partial``, ``output.jsonl`` appends) and
``upload`` the finished file as one object, so a reader never sees half of it. Readers never parse a
remote object in place: ``local_copy`` downloads it into a private temp file, refusing it past
``max_bytes`` (checked before and while reading), and the existing loaders read that file with their
own limits.

What a URL may name is an allow-list (``PROTOCOLS``): ``s3://`` (and ``s3a://``), ``gs://`` (``gcs://``)
and ``file://``; fsspec's other protocols (``data://``, ``reference://``, ``dir://``, ``http(s)://``,
``zip::`` chains...) are refused in one line, since they read from anywhere or parse the object in
place. Requests to a store follow no redirect (an answer that points elsewhere is an error, never a
request to another host), wait ``CDP_STORAGE_CONNECT_TIMEOUT`` / ``CDP_STORAGE_READ_TIMEOUT`` seconds
at most, and are retried ``CDP_STORAGE_RETRIES`` times. Every error of the store's driver is one
``EnvironmentSetupError`` line with the URL's credentials hidden.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cdp_integration.errors import EnvironmentSetupError, SessionFormatError, redact_credentials
from cdp_integration.session.untrusted import open_output

__all__ = [
    "CONNECT_TIMEOUT_S",
    "MAX_DOWNLOAD_BYTES",
    "MAX_LISTED",
    "PROTOCOLS",
    "READ_TIMEOUT_S",
    "RETRIES",
    "download",
    "exists",
    "find",
    "is_url",
    "join",
    "local_copy",
    "local_path",
    "staging_dir",
    "upload",
    "upload_partials_at_exit",
]

MAX_DOWNLOAD_BYTES = 1024**3
"""The largest object ``local_copy`` reads (a session file is refused past 1 GB decompressed anyway);
``CDP_STORAGE_MAX_BYTES`` overrides it."""
MAX_LISTED = 1_000_000
"""At most this many objects and folders under one location are listed (``find``), matching or not."""
PROTOCOLS = ("s3", "s3a", "gs", "gcs", "file")
"""The URL schemes a location may have; anything else fsspec knows is refused (see the module's doc)."""
CONNECT_TIMEOUT_S = 10.0
"""Seconds to connect to a store; ``CDP_STORAGE_CONNECT_TIMEOUT`` overrides it."""
READ_TIMEOUT_S = 60.0
"""Seconds to wait for each read of an answer; ``CDP_STORAGE_READ_TIMEOUT`` overrides it."""
RETRIES = 2
"""Attempts after the first when a request fails or times out; ``CDP_STORAGE_RETRIES`` overrides it."""
_CHUNK = 1024**2
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def is_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` is a URL with a scheme (``s3://...``), not a path."""
    return isinstance(location, str) and _SCHEME.match(location) is not None


def local_path(location: str | os.PathLike[str]) -> Path | None:
    """The local path ``location`` names (a path, or a ``file://`` URL); None for a remote URL."""
    if not is_url(location):
        return Path(location)
    text = str(location)
    _check_protocol(text)
    if text.lower().startswith("file://"):
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise EnvironmentSetupError(f"{text}: a file:// URL names this machine's files (file:///path)")
        return Path(unquote(parts.path))
    return None


def _check_protocol(url: str) -> None:
    """Refuse a URL whose scheme is not in ``PROTOCOLS``, and fsspec's chains (``a::b``)."""
    match = _SCHEME.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in PROTOCOLS:
        raise EnvironmentSetupError(
            f"{_shown(url)}: {scheme or 'this'}:// is not a storage protocol this tool reads or writes "
            f"(allowed: {', '.join(p + '://' for p in PROTOCOLS)})"
        )
    if "::" in url:
        raise EnvironmentSetupError(f"{_shown(url)}: chained URLs (a::b) are refused; name one store")


def _shown(url: str) -> str:
    """``url`` as it may be printed: credentials hidden, bounded."""
    text = redact_credentials(url)
    return text if len(text) <= 300 else text[:297] + "..."


def _setting(name: str, default: float, *, integer: bool = False, minimum: float = 1) -> Any:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = None
    if value is None or not minimum <= value <= 10**9 or value != value:  # NaN
        kind = "an integer" if integer else "a number of seconds"
        raise EnvironmentSetupError(f"{name}={text[:40]!r}: expected {kind} from {minimum:g}")
    return value


def _max_bytes() -> int:
    text = os.environ.get("CDP_STORAGE_MAX_BYTES", "").strip()
    if not text:
        return MAX_DOWNLOAD_BYTES
    if not (text.isascii() and text.isdigit()) or len(text) > 18 or int(text) < 1:
        raise SessionFormatError(f"CDP_STORAGE_MAX_BYTES={text[:40]!r}: expected a positive integer")
    return int(text)


def _options(scheme: str) -> dict[str, Any]:
    """The driver's keywords for bounded requests: timeouts, retries, no redirects."""
    connect = _setting("CDP_STORAGE_CONNECT_TIMEOUT", CONNECT_TIMEOUT_S, minimum=0.001)
    read = _setting("CDP_STORAGE_READ_TIMEOUT", READ_TIMEOUT_S, minimum=0.001)
    if scheme in ("s3", "s3a"):
        import fsspec.config

        configured = dict(fsspec.config.conf.get("s3", {}).get("config_kwargs") or {})
        return {
            "config_kwargs": configured
            | {
                "connect_timeout": connect,
                "read_timeout": read,
                "retries": {"total_max_attempts": 1},  # botocore's own: s3fs's attempts only
                "http_session_cls": _same_host_session(),
            },
        }
    if scheme in ("gs", "gcs"):
        return {"requests_timeout": connect + read}
    return {}


def _same_host_session() -> type:
    """aiobotocore's HTTP session with redirects never followed: a store's 3xx is an error, not a
    request to the host it names (which could be anyone's, and would get the signed request)."""
    import aiohttp
    from aiobotocore.httpsession import AIOHTTPSession

    class _NoRedirects:
        def __init__(self, session: Any) -> None:
            self._session = session

        async def request(self, *args: Any, **kwargs: Any) -> Any:
            response = await self._session.request(*args, **kwargs, allow_redirects=False)
            if 300 <= response.status < 400:  # botocore would chase it (regions), or loop
                target = response.headers.get("Location", "")[:200]
                response.release()
                raise aiohttp.ClientError(
                    f"redirect not followed: the store answered {response.status} to {target or '?'}"
                )
            return response

    class SameHostSession(AIOHTTPSession):  # type: ignore[misc]
        async def _get_session(self, proxy_url: Any) -> Any:
            return _NoRedirects(await super()._get_session(proxy_url))

    return SameHostSession


def _filesystem(url: str) -> tuple[Any, str]:
    """fsspec's filesystem for ``url`` and the path within it; one-line errors."""
    _check_protocol(url)
    try:
        import fsspec
    except ImportError:
        raise EnvironmentSetupError(
            f"{_shown(url)}: storage URLs need fsspec (install the 'ray' extra: cdp-integration[ray])"
        ) from None
    scheme = url.split("://", 1)[0].lower()
    try:
        fs, path = fsspec.core.url_to_fs(url, **_options(scheme))
        if scheme in ("s3", "s3a"):
            fs.retries = _setting("CDP_STORAGE_RETRIES", RETRIES, integer=True, minimum=0) + 1
    except ImportError as exc:
        raise EnvironmentSetupError(
            f"{_shown(url)}: no fsspec driver for this URL ({_short(exc, url)})"
        ) from None
    except EnvironmentSetupError:
        raise
    except Exception as exc:  # the driver's own errors, whatever their class: one line
        raise EnvironmentSetupError(
            f"{_shown(url)}: not a storage URL fsspec knows ({_short(exc, url)})"
        ) from None
    return fs, str(path)


def join(location: str, *parts: str) -> str:
    """``location`` with ``parts`` appended by ``/`` (a URL) or as path parts."""
    if not is_url(location):
        return str(Path(location).joinpath(*parts))
    return "/".join([location.rstrip("/"), *(part.strip("/") for part in parts)])


def exists(location: str) -> bool:
    path = local_path(location)
    if path is not None:
        return path.exists()
    fs, key = _filesystem(location)
    try:
        return bool(fs.exists(key))
    except Exception as exc:  # the driver's errors, whatever their class
        raise EnvironmentSetupError(
            f"{_shown(location)}: storage not reachable ({_short(exc, location)})"
        ) from None


def upload(local: Path, location: str) -> None:
    """Put the finished file ``local`` at ``location`` as one object (a local target: a temp file in its
    directory renamed over it), so readers see the old object or the whole new one, never a part."""
    path = local_path(location)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.uploading")
        try:
            shutil.copyfile(local, temporary)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        return
    fs, key = _filesystem(location)
    try:
        fs.put_file(str(local), key)  # an object PUT (or a completed multipart upload) is all or nothing
    except Exception as exc:  # the driver's errors, whatever their class
        raise EnvironmentSetupError(
            f"cannot upload {local.name} to {_shown(location)}: {_short(exc, location)}"
        ) from None


def download(location: str, target: Path, *, max_bytes: int | None = None) -> Path:
    """Copy the object at ``location`` into ``target``, refusing it past ``max_bytes`` (default
    ``MAX_DOWNLOAD_BYTES``): its listed size first, then every chunk read, since a listing can lie."""
    limit = _max_bytes() if max_bytes is None else max_bytes
    fs, key = _filesystem(location)
    try:
        info = fs.info(key)
    except FileNotFoundError:
        raise SessionFormatError(f"{_shown(location)}: no such object") from None
    except Exception as exc:  # the driver's errors, whatever their class
        raise EnvironmentSetupError(
            f"{_shown(location)}: storage not reachable ({_short(exc, location)})"
        ) from None
    if not isinstance(info, dict):
        raise SessionFormatError(f"{_shown(location)}: the store's listing is not an object")
    if info.get("type") == "directory":
        raise SessionFormatError(f"{_shown(location)}: is a directory, not a file")
    size = info.get("size")
    if isinstance(size, int) and size > limit:
        raise SessionFormatError(
            f"{_shown(location)}: {size} bytes, over the {limit}-byte limit (CDP_STORAGE_MAX_BYTES)"
        )
    read = 0
    try:
        # the listed size given to the reader, which would otherwise ask for it again (a second request)
        sized = {"size": size} if isinstance(size, int) else {}
        with fs.open(key, "rb", block_size=_CHUNK, **sized) as source, open_output(target) as out:
            while chunk := source.read(_CHUNK):
                read += len(chunk)
                if read > limit:
                    raise SessionFormatError(
                        f"{_shown(location)}: more than {limit} bytes (limit CDP_STORAGE_MAX_BYTES); refused"
                    )
                out.write(chunk)
    except SessionFormatError:
        target.unlink(missing_ok=True)
        raise
    except Exception as exc:  # the driver's errors, whatever their class
        target.unlink(missing_ok=True)
        raise EnvironmentSetupError(f"cannot read {_shown(location)}: {_short(exc, location)}") from None
    return target


@contextlib.contextmanager
def local_copy(location: str | os.PathLike[str], *, max_bytes: int | None = None) -> Iterator[Path]:
    """A local file with the content at ``location``: the path itself when local, else a bounded
    download (``download``) into a private temp directory removed afterwards."""
    path = local_path(location)
    if path is not None:
        yield path
        return
    text = str(location)
    name = text.rstrip("/").rsplit("/", 1)[-1] or "object"
    directory = Path(tempfile.mkdtemp(prefix="cdp-storage-"))
    try:
        yield download(text, directory / name, max_bytes=max_bytes)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def find(location: str, suffixes: tuple[str, ...]) -> list[str]:
    """Object names under ``location`` (relative, ``/``-separated, sorted) ending in one of ``suffixes``.

    Listed one folder (prefix) at a time, and refused once more than ``MAX_LISTED`` objects and folders
    have been seen, matching or not: a bucket holding millions of objects is refused while listing,
    not after the whole listing has been held."""
    fs, key = _filesystem(location)
    root = key.rstrip("/")
    names: list[str] = []
    seen = 0
    try:
        for folder, folders, files in fs.walk(root, maxdepth=None, on_error="raise"):
            seen += len(folders) + len(files)
            if seen > MAX_LISTED:
                raise SessionFormatError(
                    f"{_shown(location)}: more than {MAX_LISTED} objects listed; refused"
                )
            prefix = str(folder)[len(root) :].strip("/")
            for name in files:
                relative = f"{prefix}/{name}" if prefix else str(name)
                if relative.endswith(suffixes) and ".." not in relative.split("/"):
                    names.append(relative)
    except FileNotFoundError:
        return []
    except SessionFormatError:
        raise
    except Exception as exc:  # the driver's errors, whatever their class
        raise EnvironmentSetupError(
            f"{_shown(location)}: storage not reachable ({_short(exc, location)})"
        ) from None
    return sorted(names)


def _short(exc: BaseException, location: str = "", limit: int = 160) -> str:
    """``exc`` in one bounded line, credentials hidden: those of any URL in it, and the user-info of
    ``location`` wherever the driver quotes it bare (an invalid bucket name ``key:secret@bucket``)."""
    text = redact_credentials(str(exc))
    userinfo = urlsplit(location).netloc.rpartition("@")[0] if "@" in location else ""
    if userinfo:
        text = text.replace(userinfo, "***")
    text = " ".join(text.split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


_STAGED: dict[str, Path] = {}
"""Storage URL -> the local directory capture writes its files in before they are uploaded."""


def staging_dir(location: str) -> Path:
    """The local directory where files bound for the remote ``location`` are written first (one per
    URL and process). At exit, files still named ``*.partial`` there (sessions cut short) are
    uploaded under that name; finished ones are uploaded by their writer (``upload``)."""
    if location not in _STAGED:
        import atexit
        import hashlib

        _filesystem(location)  # fsspec first: its own exit handlers (its event loop) then run after ours
        digest = hashlib.sha256(location.encode()).hexdigest()[:12]
        directory = Path(tempfile.mkdtemp(prefix=f"cdp-staged-{digest}-"))
        _STAGED[location] = directory
        atexit.unregister(upload_partials_at_exit)
        atexit.register(upload_partials_at_exit)
    return _STAGED[location]


def upload_partials_at_exit() -> None:
    """Every staged ``*.partial`` file to its URL (under its own name), then the staging directories go."""
    for location, directory in list(_STAGED.items()):
        for path in sorted(directory.glob("*.partial")):
            with contextlib.suppress(Exception):  # at exit: nothing left to tell
                upload(path, join(location, path.name))
        shutil.rmtree(directory, ignore_errors=True)
    _STAGED.clear()
