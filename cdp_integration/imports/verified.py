"""WebArena-Verified run folders -> sessions: ``DIR/<task_id>/agent_response.json`` + ``network.har``.

What the folder holds is what Verified scores: the agent's structured response and its network
log. The session gets one step per step of the log (our own exports carry ``_step``) or per agent
navigation, each with the tab's URL (the last document the agent loaded) and no DOM: the format
holds no page state. The response is kept as the final answer in Verified's JSON (``adapt_answer``
passes a structured response through unchanged), so Verified scores the imported session on the
same inputs. WebArena's free-text answer is not held (only its adapted form): a ``string_match``
under the WebArena scorer needs ``--answers``, else it is a ``ReplayMissError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from cdp_integration.errors import SessionFormatError
from cdp_integration.har.importer import HarEntry, load_har
from cdp_integration.imports.common import CookieJar, ImportedEpisode, check_step_budget, read_json_file
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import NetworkExchange, RequestInfo, ResponseInfo, Step, TabState
from cdp_integration.session.untrusted import Budget, ascii_int

__all__ = ["import_verified", "import_verified_task"]

AGENT_RESPONSE_FILE = "agent_response.json"
HAR_FILE = "network.har"
RUN_CONFIG_FILE = "run_config.json"
TAB_ID = "verified-tab"


def _started(entry: HarEntry) -> float:
    try:
        return datetime.fromisoformat((entry.started or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _exchange(number: int, entry: HarEntry) -> NetworkExchange:
    headers = dict(entry.request_headers)
    return NetworkExchange(
        request_id=f"verified-{number}",
        tab_id=entry.tab_id or TAB_ID,
        origin="evaluator" if entry.origin == "evaluator" else "agent",
        source="cdp",
        started=_started(entry),
        request=RequestInfo(
            method=entry.method,
            url=entry.url,
            headers=headers,
            headers_source="wire" if "accept" in headers else "devtools",
            post_data=entry.post_data,
            resource_type=entry.resource_type or "Other",
        ),
        response=None
        if entry.status <= 0
        else ResponseInfo(
            status=entry.status,
            headers=dict(entry.response_headers),
            mime_type=entry.mime_type.split(";")[0].strip(),
            redirect_url=entry.response_headers.get("location") or None,
            body=entry.body,
            body_base64=entry.body_base64,
        ),
    )


def _is_navigation(entry: HarEntry) -> bool:
    """A top-level document the agent loaded (ours: ``_resourceType``; others: Verified's header rule)."""
    if entry.origin == "evaluator" or entry.method != "GET" or not 200 <= entry.status < 300:
        return False
    if entry.resource_type is not None:
        return entry.is_navigation
    headers = entry.request_headers
    if "sec-fetch-dest" in headers:
        return headers.get("sec-fetch-dest") == "document" and headers.get("sec-fetch-mode") == "navigate"
    return headers.get("accept", "").startswith("text/html")


def import_verified_task(directory: Path, root: Path | None = None) -> ImportedEpisode:
    """One task directory of a Verified run folder; ``root``: the folder the user named (no symlink
    below it is followed: a linked ``agent_response.json`` or HAR would copy an outside file in)."""
    root = root if root is not None else directory
    limits = SessionLimits.from_env()
    response = read_json_file(directory / AGENT_RESPONSE_FILE, "agent response", root=root, limits=limits)
    if not isinstance(response, dict):
        raise SessionFormatError(f"{directory / AGENT_RESPONSE_FILE}: expected a JSON object")
    entries = load_har(directory / HAR_FILE, root=root, limits=limits)
    groups: dict[int, list[tuple[int, HarEntry]]] = {}
    if entries and all(entry.step is not None for entry in entries):
        for number, entry in enumerate(entries):
            groups.setdefault(int(entry.step or 0), []).append((number, entry))
    else:  # a step per agent navigation
        step = 0
        navigated = False  # the current step holds a navigation already (one flag, not a scan per entry)
        for number, entry in enumerate(entries):
            if _is_navigation(entry):
                if navigated:
                    step += 1
                navigated = True
            groups.setdefault(step, []).append((number, entry))
    check_step_budget(len(groups), 0, limits, str(directory))
    cookie_uses = Budget(
        limits.max_values // 4, str(directory), "cookies over all steps", "limit CDP_SESSION_MAX_VALUES"
    )
    jar = CookieJar()
    url = "about:blank"
    steps: list[Step] = []
    for index, key in enumerate(sorted(groups) or [0]):
        exchanges = []
        for number, entry in groups.get(key, []):
            exchange = _exchange(number, entry)
            exchanges.append(exchange)
            if "cookie" in entry.request_headers:
                jar.sent(entry.url, entry.request_headers["cookie"].split("\n")[0])
            for line in entry.response_headers.get("set-cookie", "").split("\n"):
                if line.strip():
                    jar.set(entry.url, line, exchange.started)
            if _is_navigation(entry):
                url = entry.url
        started = [e.started for e in exchanges if e.started] or [steps[-1].timestamp if steps else 0.0]
        cookies = jar.cookies()
        check_step_budget(index + 1, len(cookies), limits, str(directory))
        cookie_uses.spend(len(cookies))
        steps.append(
            Step(
                index=index,
                trigger="reset" if index == 0 else "action",
                action=None if index == 0 else f"step {key} of the network log",
                timestamp=max(started),
                url=url,
                title="",
                tabs=[TabState(tab_id=TAB_ID, url=url, title="", active=True, html=None)],
                cookies=cookies,
                network=exchanges,
            )
        )
    name = directory.name
    task: dict[str, Any] = {}
    urls = _site_urls(directory)
    if urls:
        task["site_urls"] = urls
    return ImportedEpisode(
        name=name,
        source=str(directory),
        steps=steps,
        task_id=ascii_int(name),
        final_answer=json.dumps(response, ensure_ascii=False),
        answer_text_known=False,
        lacks=[
            "page state (no DOM: program_html is not answerable)",
            "the agent's free-text answer (only Verified's structured response; pass --answers for string_match)",
            "page titles, tabs, localStorage",
        ],
        tool="webarena-verified run folder",
        task=task,
    )


def _site_urls(directory: Path) -> dict[str, str]:
    """``{"SHOPPING": url}`` from the task's ``run_config.json`` (else the run's ``config.json``):
    WebArena-Verified's ``environments.__SITE__.urls``."""
    for candidate in (directory / RUN_CONFIG_FILE, directory.parent / "config.json"):
        if not candidate.is_file():
            continue
        document = read_json_file(candidate, "run config", root=candidate.parent)
        environments = document.get("environments") if isinstance(document, dict) else None
        if not isinstance(environments, dict):
            continue
        urls = {}
        for placeholder, environment in environments.items():
            listed = environment.get("urls") if isinstance(environment, dict) else None
            if (
                isinstance(placeholder, str)
                and isinstance(listed, list)
                and listed
                and isinstance(listed[0], str)
            ):
                urls[placeholder.strip("_").upper()] = listed[0]
        if urls:
            return urls
    return {}


def import_verified(path: Path) -> Iterator[ImportedEpisode]:
    """``path``: a run folder (``<task_id>/`` directories) or one task directory."""
    if (path / AGENT_RESPONSE_FILE).exists():
        yield import_verified_task(path, path)
        return
    if not path.is_dir():
        raise SessionFormatError(f"{path}: not a WebArena-Verified run folder (a directory)")
    tasks = sorted(
        (
            p
            for p in path.iterdir()
            if p.is_dir() and (p / AGENT_RESPONSE_FILE).exists() and (p / HAR_FILE).exists()
        ),
        key=lambda p: (ascii_int(p.name) is None, ascii_int(p.name) or 0, p.name),
    )
    if not tasks:
        raise SessionFormatError(f"{path}: no <task_id>/{AGENT_RESPONSE_FILE} + {HAR_FILE} in this folder")
    for directory in tasks:
        yield import_verified_task(directory, path)
