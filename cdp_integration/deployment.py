"""A WebArena deployment: its site URLs, a reachability preflight, the real task configs, resets.

Site URLs are configured as OpenHands' own (legacy) WebArena ``run_infer`` does: one host in
``WEBARENA_BASE_URL`` with each site on WebArena's standard port (``STANDARD_PORTS``). BrowserGym's
``WA_<SITE>`` variables override a site each (and are enough on their own when all are set).

The tasks are libwebarena's ``test.raw.json`` (the 812 configs BrowserGym's
``browsergym/webarena.<id>`` envs load), used as shipped.

Resets: WebArena cannot reset a site fast, so the toolkit runs a user-supplied command before the
tasks that need a fresh deployment (``needs_reset``), with the task and the site URLs in its
environment (``reset_environment``). Every ``require_reset`` in ``test.raw.json`` is ``false``, so a
task also counts as state-changing when WebArena-Verified classes it as ``mutate``.

Errors are ``EnvironmentSetupError`` with one line naming the fix.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal
from urllib.parse import urlsplit

from cdp_integration.environment import PLACEHOLDER_URL
from cdp_integration.errors import EnvironmentSetupError, escape_controls, redact_credentials

__all__ = [
    "BASE_URL_VARIABLE",
    "PROBE_TIMEOUT_S",
    "RESET_POLICIES",
    "SITE_NAMES",
    "STANDARD_PORTS",
    "ResetPolicy",
    "WebArenaTaskSpec",
    "check_site_url",
    "known_site_urls",
    "load_webarena_tasks",
    "needs_reset",
    "parse_site_urls",
    "preflight",
    "probe_sites",
    "reset_environment",
    "run_reset",
    "site_urls_from_environment",
    "verified_task_types",
]

BASE_URL_VARIABLE = "WEBARENA_BASE_URL"

STANDARD_PORTS: dict[str, str] = {
    "SHOPPING": ":7770",
    "SHOPPING_ADMIN": ":7780/admin",
    "REDDIT": ":9999",
    "GITLAB": ":8023",
    "WIKIPEDIA": ":8888/wikipedia_en_all_maxi_2022-05/A/User:The_other_Kiwix_guy/Landing",
    "MAP": ":3000",
    "HOMEPAGE": ":4399",
}
"""Where each site of the WebArena docker images listens, appended to ``WEBARENA_BASE_URL``."""

SITE_NAMES = ("shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map")
"""The sites a task config may name (``sites``), as BrowserGym's ``WebArenaInstance.urls`` keys them."""

PROBE_TIMEOUT_S = 3.0
"""Per site, for connecting and again for the first response byte; sites are probed concurrently."""

ResetPolicy = Literal["require_reset", "mutate", "always"]
RESET_POLICIES: tuple[ResetPolicy, ...] = ("require_reset", "mutate", "always")


def check_site_url(url: str, *, base: bool = False) -> str:
    """``url`` stripped (no trailing ``/``) when it is an http(s) URL with a host and a numeric port;
    else ``EnvironmentSetupError`` in one line, the URL shown escaped and without credentials.

    ``base``: a ``WEBARENA_BASE_URL``-style URL that the sites' standard ports are appended to, so it
    must name the host alone (a port or a path there would make ``http://h:80:7770``). Only printable
    ASCII is taken (an international host in its ``xn--`` form): a host that Unicode normalisation
    would change cannot mean what it shows."""
    text = url.strip()
    shown = escape_controls(redact_credentials(text))[:200]
    if not text.isascii() or not text.isprintable() or any(char.isspace() for char in text):
        raise EnvironmentSetupError(
            f"{shown!r} is not a URL: printable ASCII without spaces only (an international host as xn--...)"
        )
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise EnvironmentSetupError(f"{shown!r} is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise EnvironmentSetupError(f"{shown!r} is not an http(s) URL (e.g. http://my-host)")
    if base and (port is not None or parts.path.strip("/") or parts.query or parts.fragment):
        raise EnvironmentSetupError(
            f"{shown!r}: a base URL names the host only (each site's standard port is appended to it); "
            "give sites on other ports or paths one by one (WA_<SITE>, or a pool file's sites)"
        )
    return text.rstrip("/")


def known_site_urls(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The site URLs the environment gives, ``{"SHOPPING": url, ...}``; sites it does not give are left out.

    ``WA_<SITE>`` wins over ``WEBARENA_BASE_URL`` plus the site's standard port; the placeholder
    ``environment.prepare()`` sets counts as unset. Raises ``EnvironmentSetupError`` only for a base URL
    that is not a URL.
    """
    env = os.environ if environ is None else environ
    base = env.get(BASE_URL_VARIABLE, "").strip().rstrip("/")
    if base:
        try:
            base = check_site_url(base, base=True)
        except EnvironmentSetupError as exc:
            raise EnvironmentSetupError(f"{BASE_URL_VARIABLE}: {exc}") from None
    urls: dict[str, str] = {}
    for site, suffix in STANDARD_PORTS.items():
        override = env.get(f"WA_{site}", "").strip()
        if override and override != PLACEHOLDER_URL:
            try:
                urls[site] = check_site_url(override)
            except EnvironmentSetupError as exc:
                raise EnvironmentSetupError(f"WA_{site}: {exc}") from None
        elif base:
            urls[site] = base + suffix
    return urls


def site_urls_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{"SHOPPING": url, ...}`` for all seven sites, from ``WEBARENA_BASE_URL`` and ``WA_*``.

    ``WA_<SITE>`` wins over the URL derived from the base. Raises ``EnvironmentSetupError`` naming
    the variables to set when a site has neither.
    """
    urls = known_site_urls(environ)
    missing = [f"WA_{site}" for site in STANDARD_PORTS if site not in urls]
    if missing:
        raise EnvironmentSetupError(
            f"no WebArena site URLs: set {BASE_URL_VARIABLE} (sites on the standard ports) or "
            f"every one of {', '.join(missing)}"
        )
    return urls


def parse_site_urls(items: Iterable[str]) -> dict[str, str]:
    """``SITE=URL`` items (``--site-url``) as ``{"SHOPPING": url, ...}``.

    Raises ``EnvironmentSetupError`` naming the item that is not ``SITE=URL`` with a known WebArena
    site and an http(s) URL.
    """
    urls: dict[str, str] = {}
    for item in items:
        site, sep, url = item.partition("=")
        site, url = site.strip().upper(), url.strip().rstrip("/")
        if not sep or not site or not url:
            raise EnvironmentSetupError(f"{item!r} is not SITE=URL (e.g. shopping=http://my-host:7770)")
        if site not in STANDARD_PORTS:
            known = ", ".join(name.lower() for name in STANDARD_PORTS)
            raise EnvironmentSetupError(f"{item!r}: unknown site {site.lower()!r} (one of {known})")
        try:
            urls[site] = check_site_url(url)
        except EnvironmentSetupError as exc:
            raise EnvironmentSetupError(f"--site-url {site.lower()}: {exc}") from None
    return urls


# -- the tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebArenaTaskSpec:
    """One of WebArena's 812 tasks: its config as ``test.raw.json`` has it (URL placeholders kept)."""

    task_id: int
    config: dict[str, Any]

    @property
    def env_id(self) -> str:
        return f"browsergym/webarena.{self.task_id}"

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(self.config.get("sites") or ())

    @property
    def uses_llm_judge(self) -> bool:
        """Whether the evaluator calls OpenAI (``fuzzy_match`` reference answers)."""
        answers = (self.config.get("eval") or {}).get("reference_answers") or {}
        return isinstance(answers, dict) and "fuzzy_match" in answers


@functools.lru_cache(maxsize=1)
def _raw_configs() -> tuple[dict[str, Any], ...]:
    text = resources.files("webarena").joinpath("test.raw.json").read_text()
    return tuple(json.loads(text))


def load_webarena_tasks(task_ids: Sequence[int] = (), limit: int = 0) -> list[WebArenaTaskSpec]:
    """The tasks ``task_ids`` (in that order; all 812 when empty), at most ``limit`` (0: no limit)."""
    by_id = {int(config["task_id"]): config for config in _raw_configs()}
    unknown = [task_id for task_id in task_ids if task_id not in by_id]
    if unknown:
        raise EnvironmentSetupError(
            f"unknown WebArena task id(s) {', '.join(map(str, unknown))}: ids are 0..{max(by_id)}"
        )
    ids = list(dict.fromkeys(task_ids)) if task_ids else sorted(by_id)
    tasks = [WebArenaTaskSpec(task_id, by_id[task_id]) for task_id in ids]
    return tasks[:limit] if limit else tasks


@functools.lru_cache(maxsize=1)
def verified_task_types() -> dict[int, str]:
    """Task id -> WebArena-Verified's task type (``retrieve``, ``navigate``, ``mutate``).

    Read from the package's dataset file as data; the package itself is not imported (slow).
    """
    text = resources.files("webarena_verified").joinpath("assets/dataset/webarena-verified.json").read_text()
    types = {}
    for task in json.loads(text):
        for evaluator in task.get("eval") or ():
            expected = evaluator.get("expected") if isinstance(evaluator, dict) else None
            if isinstance(expected, dict) and expected.get("task_type"):
                types[int(task["task_id"])] = str(expected["task_type"])
                break
    return types


def needs_reset(task: WebArenaTaskSpec, policy: ResetPolicy) -> bool:
    """Whether the reset command runs before ``task``.

    ``require_reset``: the config's flag only; ``mutate``: that, or WebArena-Verified's task type is
    ``mutate`` (the task changes the sites' state); ``always``: before every task.
    """
    if policy == "always":
        return True
    if task.config.get("require_reset"):
        return True
    return policy == "mutate" and verified_task_types().get(task.task_id) == "mutate"


# -- preflight ------------------------------------------------------------------------------------


def _probe(url: str, timeout_s: float) -> str | None:
    """None when ``url`` answers HTTP at all (any status, as BrowserGym's site check), else why not."""
    import requests

    try:
        response = requests.get(url, timeout=(timeout_s, timeout_s), allow_redirects=False, stream=True)
        response.close()
    except requests.exceptions.ConnectTimeout:
        return f"no connection within {timeout_s:g} s"
    except requests.exceptions.ReadTimeout:
        return f"no answer within {timeout_s:g} s"
    except requests.exceptions.ConnectionError as exc:
        text = str(exc)
        return "connection refused" if "refused" in text.lower() else _short(text)
    except requests.exceptions.RequestException as exc:
        return _short(str(exc))
    return None


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def probe_sites(urls: Mapping[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, str]:
    """``{site: why}`` for every site of ``urls`` ({site: url}) that gives no HTTP answer; all probed
    at once, so the whole check takes about one ``timeout_s`` (connect) plus one (first byte)."""
    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=len(urls), thread_name_prefix="site-probe") as pool:
        results = dict(zip(urls, pool.map(lambda url: _probe(url, timeout_s), urls.values()), strict=True))
    return {site: why for site, why in results.items() if why is not None}


def preflight(
    tasks: Iterable[WebArenaTaskSpec],
    urls: Mapping[str, str],
    *,
    timeout_s: float = PROBE_TIMEOUT_S,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Check, before anything starts, that every site the tasks use answers and that the LLM judge
    is configured when a task needs it. Raises one ``EnvironmentSetupError`` naming every problem.
    Empty ``urls``: the sites are checked elsewhere (a pool's deployments), only the judge here."""
    env = os.environ if environ is None else environ
    tasks = list(tasks)
    sites = sorted({site for task in tasks for site in task.sites}, key=SITE_NAMES.index) if urls else []
    site_urls = {site: urls[site.upper()] for site in sites}
    started = time.monotonic()
    unreachable = probe_sites(site_urls, timeout_s)
    if unreachable:
        listed = ", ".join(f"{site} ({site_urls[site]}: {why})" for site, why in unreachable.items())
        raise EnvironmentSetupError(
            f"{len(unreachable)} of {len(sites)} WebArena sites unreachable after "
            f"{time.monotonic() - started:.1f} s: {listed}; check {BASE_URL_VARIABLE} / WA_<SITE>"
        )
    judged = [task.task_id for task in tasks if task.uses_llm_judge]
    if judged and not env.get("OPENAI_API_KEY"):
        shown = ", ".join(map(str, judged[:5])) + (", ..." if len(judged) > 5 else "")
        raise EnvironmentSetupError(
            f"tasks {shown} are scored by WebArena's LLM judge (fuzzy_match): set OPENAI_API_KEY "
            "(and OPENAI_BASE_URL for another OpenAI-compatible endpoint)"
        )


# -- reset ----------------------------------------------------------------------------------------


def reset_environment(
    task: WebArenaTaskSpec, urls: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The reset command's environment: ours plus ``WEBARENA_TASK_ID``, ``WEBARENA_TASK_SITES``
    (comma-separated), ``WEBARENA_ENV_ID`` and every site as ``WA_<SITE>`` and ``<SITE>``."""
    env = dict(os.environ if environ is None else environ)
    for site, url in urls.items():
        env[site] = url
        env[f"WA_{site}"] = url
    env["WEBARENA_TASK_ID"] = str(task.task_id)
    env["WEBARENA_TASK_SITES"] = ",".join(task.sites)
    env["WEBARENA_ENV_ID"] = task.env_id
    return env


def run_reset(command: str, task: WebArenaTaskSpec, urls: Mapping[str, str]) -> float:
    """Run ``command`` through the shell with ``reset_environment``; its output goes to stderr.

    Returns the seconds it took; a non-zero exit raises ``EnvironmentSetupError`` (a task must not
    run on a deployment that failed to reset).
    """
    started = time.monotonic()
    try:
        stderr = sys.stderr.fileno()  # the command's output must not mix with ours on stdout
    except (AttributeError, OSError, ValueError):
        stderr = None
    try:
        completed = subprocess.run(
            command, shell=True, env=reset_environment(task, urls), stdout=stderr, check=False
        )
    except OSError as exc:
        raise EnvironmentSetupError(f"reset command {shlex.quote(command)} could not start: {exc}") from None
    if completed.returncode != 0:
        raise EnvironmentSetupError(
            f"reset command {shlex.quote(command)} exited with {completed.returncode} before task "
            f"{task.task_id}; fix the deployment and run again (finished tasks are kept)"
        )
    return time.monotonic() - started
