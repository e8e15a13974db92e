"""``CaptureOptions``: what a ``CDPSessionLogger`` records, as the logger's keyword arguments name it.

The session header stores them (``header()``), so a reader knows what a file can answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cdp_integration.capture.network import BodyPolicy
from cdp_integration.session.redact import RedactionPolicy

__all__ = ["CaptureOptions", "DomScope"]

DomScope = Literal["all_tabs", "active_tab"]


@dataclass(frozen=True, kw_only=True)
class CaptureOptions:
    """The logger's options (see ``CDPSessionLogger`` for what each one does)."""

    dom: DomScope = "all_tabs"
    screenshot: bool = False
    thumbnail: bool = True
    accessibility_tree: bool = False
    response_bodies: BodyPolicy = "documents"
    max_html_bytes: int = 20_000_000
    reuse_observation_dom: bool = True
    own_dom_snapshot: bool = False
    page_resources: tuple[str, ...] = ("Stylesheet",)
    frames: bool = True
    cssom_styles: bool = True
    form_state: bool = True
    console: bool = True
    compresslevel: int = 3
    record_evaluations: bool = True
    redact: bool | RedactionPolicy = False
    cdp_timeout_ms: float = 30_000
    stall_budget_ms: float = 2_000

    def header(self) -> dict[str, Any]:
        """The header's ``options`` record (file format: these keys, ``redacted`` only when redacting)."""
        record: dict[str, Any] = {
            "dom": self.dom,
            "screenshot": self.screenshot,
            "thumbnail": self.thumbnail,
            "accessibility_tree": self.accessibility_tree,
            "response_bodies": self.response_bodies,
            "max_html_bytes": self.max_html_bytes,
            "reuse_observation_dom": self.reuse_observation_dom,
            "own_dom_snapshot": self.own_dom_snapshot,
            "page_resources": list(self.page_resources),
            "frames": self.frames,
            "cssom_styles": self.cssom_styles,
            "form_state": self.form_state,
            "console": self.console,
            "compresslevel": self.compresslevel,
            "record_evaluations": self.record_evaluations,
            "cdp_timeout_ms": self.cdp_timeout_ms,
            "stall_budget_ms": self.stall_budget_ms,
        }
        if self.redact:
            record["redacted"] = True
        return record
