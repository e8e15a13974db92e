"""Crafted sessions for the sandbox tests: one captured page, a WebArena config whose program_html
targets the sandbox must answer (reconstructed: no live evaluator was recorded)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cdp_integration.session import (
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    SessionEnd,
    SessionWriter,
    Step,
    TabState,
    new_header,
)


def target(locator: str, url: str = "last", **required: Any) -> dict[str, Any]:
    """One program_html target: ``locator`` on ``url`` must give ``required`` (default exact "ok")."""
    return {"url": url, "locator": locator, "required_contents": required or {"exact_match": "ok"}}


def config(task_id: int, targets: Sequence[dict[str, Any]], start_url: str) -> dict[str, Any]:
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "require_login": False,
        "storage_state": None,
        "start_url": start_url,
        "geolocation": None,
        "intent_template": "crafted sandbox task",
        "instantiation_dict": {},
        "intent": "crafted sandbox task",
        "require_reset": False,
        "eval": {
            "eval_types": ["program_html"],
            "reference_answers": None,
            "reference_url": "",
            "program_html": list(targets),
            "string_note": "",
            "reference_answer_raw_annotation": "",
        },
        "intent_template_id": task_id,
    }


def document_exchange(url: str, tab_id: str, started: float, method: str = "GET") -> NetworkExchange:
    return NetworkExchange(
        request_id=f"{method}-{url}-{started}",
        tab_id=tab_id,
        started=started,
        duration_ms=5.0,
        request=RequestInfo(
            method=method, url=url, headers={}, resource_type="Document" if method == "GET" else "XHR"
        ),
        response=ResponseInfo(status=200, mime_type="text/html"),
    )


def write_session(
    path: Path,
    *,
    task_id: int,
    tabs: Sequence[tuple[str, str]],
    targets: Sequence[dict[str, Any]],
    network: Sequence[NetworkExchange] = (),
    answer: str | None = None,
) -> Path:
    """A one-step session showing ``tabs`` ((url, html), the first active) with ``targets``."""
    writer = SessionWriter(
        path.with_name(path.name + ".partial"),
        new_header(
            instance_id=path.name.split(".")[0], task={"config": config(task_id, targets, tabs[0][0])}
        ),
    )
    now = time.time()
    writer.write_step(
        Step(
            index=0,
            trigger="action",
            action="noop()",
            timestamp=now,
            url=tabs[0][0],
            title="crafted",
            tabs=[
                TabState(tab_id=f"T{i}", url=url, title="crafted", active=i == 0, html=html)
                for i, (url, html) in enumerate(tabs)
            ],
            network=list(network),
        )
    )
    return writer.finish(SessionEnd(ended=now, final_answer=answer), path)
