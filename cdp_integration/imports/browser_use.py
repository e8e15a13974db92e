"""browser-use ``AgentHistoryList`` JSON (``history.save_to_file``) -> sessions, with its HAR when given.

Each history item holds the browser state browser-use observed at the start of that step (URL,
title, tabs), the actions it then took and their results; the final result is the last item's
``extracted_content`` (``history.final_result()``). The session gets one step per item, the tab
URLs and titles, no DOM (the history holds none), and the traffic of a HAR recorded with
``record_har_path`` (browser-use keeps HTTPS requests only, so a plain-HTTP site's HAR is empty).
Each item's ``state.screenshot_path`` becomes the step's screenshot when the file is inside the
history's folder (``_screenshot``).

The state after the last item's actions is not recorded. When those actions are only ``done``, the
last observed state is the final one; otherwise the final URL is unknown, and a ``url_match`` on it
is a ``ReplayMissError`` rather than a guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cdp_integration.errors import SessionFormatError
from cdp_integration.har.importer import load_har
from cdp_integration.imports.common import ImportedEpisode, check_step_budget, read_json_file, read_screenshot
from cdp_integration.imports.verified import _exchange
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import Step, TabState
from cdp_integration.session.untrusted import clean_text

__all__ = ["import_browser_use", "import_history"]

HISTORY_SUFFIX = ".json"


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _actions(item: dict[str, Any]) -> list[str]:
    """The names of the actions the item's model output asked for (``[{"click": {...}}]`` -> ``click``)."""
    actions = _obj(item.get("model_output")).get("action")
    if not isinstance(actions, list):
        return []
    return [name for action in actions if isinstance(action, dict) for name in action]


def _screenshot(folder: Path, stem: str, recorded: Any) -> str | None:
    """The step's screenshot (``state.screenshot_path``), read only from inside the history's folder.

    browser-use records an absolute path in its agent directory (``.../screenshots/step_N.png``),
    which is temporary. A path inside ``folder`` is read there; any other is looked up by its file
    name in the agent's screenshots directory copied beside the history, ``folder/<stem>/screenshots/``
    (``<stem>.json`` the history) or ``folder/screenshots/``; never where it points.
    """
    if not isinstance(recorded, str) or not recorded:
        return None
    where = Path(os.path.normpath(recorded))
    if not where.is_absolute():
        return read_screenshot(folder, str(where))
    base = Path(os.path.normpath(os.path.abspath(folder)))
    if where.is_relative_to(base):
        return read_screenshot(folder, str(where.relative_to(base)))
    if stem and stem not in (".", ".."):
        found = read_screenshot(folder, f"{stem}/screenshots/{where.name}")
        if found is not None:
            return found
    return read_screenshot(folder, f"screenshots/{where.name}")


def import_history(path: Path, har: Path | None = None, root: Path | None = None) -> ImportedEpisode:
    """One history file (and the HAR recorded in the same run); ``root``: the folder the user named
    (default: the history's own folder; the HAR beside it is never a symlink followed out of it)."""
    try:
        return _history(path, har, root)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        if isinstance(exc, SessionFormatError):
            raise
        raise SessionFormatError(
            f"{clean_text(str(path))}: not a browser-use history of the expected shape "
            f"({type(exc).__name__}: {clean_text(str(exc)).splitlines()[0][:160] if str(exc) else ''})"
        ) from None


def _history(path: Path, har: Path | None, root: Path | None) -> ImportedEpisode:
    limits = SessionLimits.from_env()
    document = read_json_file(path, "browser-use history", limits=limits, root=root)
    items = _obj(document).get("history")
    if not isinstance(items, list) or not items:
        raise SessionFormatError(f"{path}: not a browser-use AgentHistoryList (no history items)")
    check_step_budget(len(items), 0, limits, str(path))
    exchanges = (
        [
            _exchange(number, entry)
            for number, entry in enumerate(load_har(har, root=root or path.parent, limits=limits))
        ]
        if har
        else []
    )
    steps: list[Step] = []
    for index, raw in enumerate(items):
        item = _obj(raw)
        state = _obj(item.get("state"))
        url, title = _text(state.get("url")), _text(state.get("title"))
        listed = state.get("tabs")
        tabs_raw: list[Any] = listed if isinstance(listed, list) else []
        tabs = []
        for number, tab in enumerate(_obj(t) for t in tabs_raw):
            tab_url = _text(tab.get("url"))
            tab_id = _text(tab.get("target_id") or tab.get("tab_id") or tab.get("page_id")) or f"tab-{number}"
            tabs.append(
                TabState(tab_id=tab_id, url=tab_url, title=_text(tab.get("title")), active=False, html=None)
            )
        active = next((i for i, tab in enumerate(tabs) if tab.url == url), None)
        screenshot = _screenshot(
            path.parent, path.name.removesuffix(HISTORY_SUFFIX), state.get("screenshot_path")
        )
        if active is None:
            tabs.insert(
                0,
                TabState(
                    tab_id="active", url=url, title=title, active=True, html=None, screenshot_png=screenshot
                ),
            )
        else:
            tabs[active] = tabs[active].model_copy(update={"active": True, "screenshot_png": screenshot})
        previous = _actions(_obj(items[index - 1])) if index else []
        steps.append(
            Step(
                index=index,
                trigger="reset" if index == 0 else "action",
                action=", ".join(previous) or None,
                timestamp=float(_obj(item.get("metadata")).get("step_start_time") or index),
                url=url,
                title=title,
                tabs=tabs,
                network=exchanges if index == len(items) - 1 else [],
            )
        )
    last = _obj(items[-1])
    results = last.get("result") if isinstance(last.get("result"), list) else []
    final = _obj(results[-1]) if results else {}
    answer = final.get("extracted_content") if isinstance(final.get("extracted_content"), str) else None
    final_state_known = all(name == "done" for name in _actions(last))
    lacks = [
        "page state (no DOM: program_html is not answerable)",
        "cookies and storage",
        "plain-HTTP traffic (browser-use's HAR keeps HTTPS only)",
    ]
    if har is None:
        network_missing: str | None = "all traffic (no HAR was recorded beside the history)"
    elif any(urlsplit(step.url).scheme == "http" for step in steps):
        network_missing = (
            "plain-HTTP traffic (browser-use's HAR keeps HTTPS only; the run visited http:// pages)"
        )
    else:
        network_missing = None
    if not final_state_known:
        lacks.append("the state after the last step's actions (only its start state is recorded)")
    name = path.name.removesuffix(HISTORY_SUFFIX).removesuffix(".history")
    task = re.match(r"^(\d+)(?:\.|$)", name)  # <task_id>.json or <task_id>.<anything>.json
    return ImportedEpisode(
        name=name,
        task_id=int(task.group(1)) if task else None,
        source=str(path),
        steps=steps,
        final_answer=answer,
        final_url_known=final_state_known,
        network_missing=network_missing,
        lacks=lacks,
        tool="browser-use",
    )


def import_browser_use(path: Path) -> Iterator[ImportedEpisode]:
    """``path``: a history JSON (a ``.har`` of the same stem beside it is read too), or a directory of them."""
    files = sorted(p for p in path.iterdir() if p.name.endswith(HISTORY_SUFFIX)) if path.is_dir() else [path]
    if not files:
        raise SessionFormatError(f"{path}: no browser-use history (*.json) in this directory")
    for file in files:
        stem = file.name.removesuffix(HISTORY_SUFFIX).removesuffix(".history")
        har = file.with_name(stem + ".har")
        yield import_history(
            file, har if har.is_file() or har.is_symlink() else None, path if path.is_dir() else None
        )
