"""A pool of WebArena deployments: several copies of the six sites, used as one.

A pool file (TOML or JSON) lists deployments::

    [[deployment]]
    name = "a"                              # unique: letters, digits, - and _
    base_url = "http://10.0.0.5"            # sites on WebArena's standard ports (as WEBARENA_BASE_URL)
    reset_cmd = "ssh a ./reset.sh"          # optional; default: run_infer's --reset-cmd
    node_label = "wa-a"                     # optional: the Ray resource of the node that owns it
    workers = 1                             # optional: tasks side by side on this deployment

    [[deployment]]
    name = "b"
    sites = { SHOPPING = "http://b:7770", ... }   # or per site, as WA_<SITE> gives them

(JSON: ``{"deployment": [{...}, ...]}``.) ``sites`` overrides single sites of ``base_url`` like
``WA_<SITE>`` overrides ``WEBARENA_BASE_URL``. A malformed file or a bad URL is one
``EnvironmentSetupError`` line. ``check_pool`` probes every deployment at once; one that does not answer
is drained (left out, with the reason), not fatal, unless none is left.

A pool file is untrusted until loaded and code once used: it is read under a size, nesting and count
budget, every URL is checked before anything starts, and URLs are shown with their credentials hidden
(``errors.redact_credentials``); but its ``reset_cmd`` values are shell commands this machine runs.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cdp_integration.deployment import (
    BASE_URL_VARIABLE,
    PROBE_TIMEOUT_S,
    SITE_NAMES,
    STANDARD_PORTS,
    WebArenaTaskSpec,
    check_site_url,
    probe_sites,
    site_urls_from_environment,
)
from cdp_integration.errors import EnvironmentSetupError, escape_controls, redact_credentials

__all__ = [
    "MAX_DEPLOYMENTS",
    "MAX_POOL_BYTES",
    "MAX_POOL_DEPTH",
    "Deployment",
    "check_pool",
    "load_pool",
    "redacted",
    "site_servers",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_KEYS = {"name", "base_url", "sites", "reset_cmd", "node_label", "workers"}


@dataclass(frozen=True)
class Deployment:
    """One deployment of the pool: its name, site URLs (``{"SHOPPING": url, ...}``, all seven), its
    reset command (None: the run's), the Ray resource of its node, and how many tasks may run on it
    at once."""

    name: str
    urls: dict[str, str] = field(hash=False)
    reset_cmd: str | None = None
    node_label: str | None = None
    workers: int = 1

    def servers(self, sites: Iterable[str]) -> tuple[str, ...]:
        """The servers behind ``sites`` here: what two tasks must not change under each other."""
        return site_servers(sites, self.urls, prefix=f"{self.name}|")


def redacted(urls: Mapping[str, str]) -> dict[str, str]:
    """``urls`` as they may be shown or written (logs, ``metadata.json``): credentials hidden."""
    return {site: redact_credentials(url) for site, url in urls.items()}


def site_servers(sites: Iterable[str], urls: Mapping[str, str], *, prefix: str = "") -> tuple[str, ...]:
    """Scheme, host and port of each site's URL (the site's name where its URL is unknown), once each."""
    found: list[str] = []
    for site in sites:
        url = urls.get(str(site).upper())
        parts = urlsplit(url) if url else None
        key = prefix + (f"{parts.scheme}://{parts.netloc}" if parts and parts.netloc else str(site))
        if key not in found:
            found.append(key)
    return tuple(found)


def _check_url(where: str, name: str, url: object, *, base: bool = False) -> str:
    if not isinstance(url, str):
        raise EnvironmentSetupError(f"{where}: {name} must be a string URL, not {type(url).__name__}")
    try:
        return check_site_url(url, base=base)
    except EnvironmentSetupError as exc:
        raise EnvironmentSetupError(f"{where}: {name}: {exc}") from None


def _deployment(path: Path, number: int, entry: object) -> Deployment:
    where = f"{path}: deployment #{number + 1}"
    if not isinstance(entry, dict):
        raise EnvironmentSetupError(f"{where}: expected a table/object, not {type(entry).__name__}")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise EnvironmentSetupError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise EnvironmentSetupError(f"{where}: 'name' must be letters, digits, - and _ (got {name!r})")
    where = f"{path}: deployment {name!r}"
    environ: dict[str, str] = {}
    if "base_url" in entry:
        environ[BASE_URL_VARIABLE] = _check_url(where, "base_url", entry["base_url"], base=True)
    sites = entry.get("sites", {})
    if not isinstance(sites, dict):
        raise EnvironmentSetupError(f"{where}: 'sites' must be a table of SITE = URL")
    for key, url in sites.items():
        site = str(key).upper().removeprefix("WA_")
        if site not in STANDARD_PORTS:
            raise EnvironmentSetupError(f"{where}: unknown site {key!r} (sites: {', '.join(STANDARD_PORTS)})")
        environ[f"WA_{site}"] = _check_url(where, f"sites.{site}", url)
    try:
        urls = site_urls_from_environment(environ)
    except EnvironmentSetupError as exc:
        raise EnvironmentSetupError(f"{where}: {exc}") from None
    for key in ("reset_cmd", "node_label"):
        if entry.get(key) is not None and not (isinstance(entry[key], str) and entry[key].strip()):
            raise EnvironmentSetupError(f"{where}: '{key}' must be a non-empty string")
    workers = entry.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 64:
        raise EnvironmentSetupError(f"{where}: 'workers' must be an integer from 1 to 64 (got {workers!r})")
    return Deployment(name, urls, entry.get("reset_cmd"), entry.get("node_label"), workers)


MAX_POOL_BYTES = 1024 * 1024
"""A pool file lists deployments: a megabyte is thousands of them."""
MAX_POOL_DEPTH = 32
"""Nesting of arrays and tables in a pool file (it needs 3); checked before parsing."""
MAX_DEPLOYMENTS = 256
"""Deployments in one pool (each is probed by a thread of its own)."""


def _toml_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in TOML ``text``, strings and comments skipped: a scan,
    so a file nested thousands deep is refused without recursing into it."""
    depth = deepest = 0
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char == "#":
            end = text.find("\n", index)
            index = size if end < 0 else end
        elif char in "\"'":
            quote = text[index : index + 3] if text[index : index + 3] in ('"""', "'''") else char
            index += len(quote)
            while index < size and not text.startswith(quote, index):
                index += 2 if quote[0] == '"' and text[index] == "\\" else 1
            index += len(quote)
            continue
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
        index += 1
    return deepest


def load_pool(path: Path) -> list[Deployment]:
    """The deployments of the pool file ``path`` (``.toml``, or JSON for any other name)."""
    from cdp_integration.errors import SessionFormatError
    from cdp_integration.session.limits import SessionLimits
    from cdp_integration.session.untrusted import parse_json, read_input

    try:
        data = read_input(path, max_bytes=MAX_POOL_BYTES, what="pool file", inflate=False)
        text = bytes(data).decode()
    except (SessionFormatError, UnicodeDecodeError) as exc:
        raise EnvironmentSetupError(f"cannot read the pool file: {exc}") from None
    if path.suffix.lower() == ".toml" and _toml_depth(text) > MAX_POOL_DEPTH:
        raise EnvironmentSetupError(f"{path}: nested more than {MAX_POOL_DEPTH} deep; a pool file needs 3")
    try:
        raw: Any = (
            tomllib.loads(text)
            if path.suffix.lower() == ".toml"
            else parse_json(text, str(path), SessionLimits.from_env())
        )
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise EnvironmentSetupError(f"{path}: not valid {kind} ({' '.join(str(exc).split())})") from None
    entries = raw.get("deployment") if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        raise EnvironmentSetupError(f"{path}: expected a non-empty list of [[deployment]] entries")
    if len(entries) > MAX_DEPLOYMENTS:
        raise EnvironmentSetupError(f"{path}: {len(entries)} deployments, more than {MAX_DEPLOYMENTS}")
    pool = [_deployment(path, number, entry) for number, entry in enumerate(entries)]
    names = [deployment.name for deployment in pool]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise EnvironmentSetupError(f"{path}: deployment name(s) used twice: {', '.join(duplicated)}")
    return pool


def check_pool(
    pool: list[Deployment], tasks: Iterable[WebArenaTaskSpec], *, timeout_s: float = PROBE_TIMEOUT_S
) -> tuple[list[Deployment], dict[str, str]]:
    """(the deployments whose sites for ``tasks`` all answer, ``{name: why}`` of those drained), all
    probed at once. Raises ``EnvironmentSetupError`` when none is left."""
    wanted = sorted({site for task in tasks for site in task.sites}, key=SITE_NAMES.index)

    def probe(deployment: Deployment) -> str | None:
        unreachable = probe_sites({site: deployment.urls[site.upper()] for site in wanted}, timeout_s)
        if not unreachable:
            return None
        return redact_credentials(
            ", ".join(f"{site} ({deployment.urls[site.upper()]}: {why})" for site, why in unreachable.items())
        )

    with ThreadPoolExecutor(max_workers=len(pool), thread_name_prefix="pool-probe") as executor:
        results = list(executor.map(probe, pool))
    drained = {deployment.name: why for deployment, why in zip(pool, results, strict=True) if why}
    healthy = [deployment for deployment, why in zip(pool, results, strict=True) if not why]
    for name, why in drained.items():
        print(escape_controls(f"deployment {name}: drained, unreachable: {why}"), file=sys.stderr)
    if not healthy:
        raise EnvironmentSetupError(
            f"no deployment of the pool answers: {'; '.join(f'{n}: {w}' for n, w in drained.items())}"
        )
    return healthy, drained
