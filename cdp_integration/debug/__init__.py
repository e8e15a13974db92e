"""Step-by-step debugging of a captured episode: one set of views, three faces.

``diff(session, a, b)`` and the per-step views (``step_summaries``, ``step_requests``,
``visible_text``) are computed here once; ``cdp-session steps/show/diff`` print them, the stepper
(``cdp-session debug``) prints them at a prompt, and ``cdp-session view`` renders them into one
self-contained HTML file. ``export_wabe`` writes an episode in WABE's layout for its LLM judge.

Names are imported on first use (PEP 562), so importing one module of the package loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdp_integration._lazy import lazy_exports
from cdp_integration.debug.diff import diff  # eager: the name is also its module's

if TYPE_CHECKING:
    from cdp_integration.debug.diff import CookieChange, StepDiff, StorageChange, TabChange
    from cdp_integration.debug.stepper import Stepper
    from cdp_integration.debug.viewer import render_viewer, write_viewer
    from cdp_integration.debug.views import (
        EvaluationSummary,
        RequestRow,
        StepSummary,
        step_requests,
        step_summaries,
    )
    from cdp_integration.debug.wabe import export_wabe
    from cdp_integration.replay.text import visible_text

__all__ = [
    "CookieChange",
    "EvaluationSummary",
    "RequestRow",
    "StepDiff",
    "StepSummary",
    "Stepper",
    "StorageChange",
    "TabChange",
    "diff",
    "export_wabe",
    "render_viewer",
    "step_requests",
    "step_summaries",
    "visible_text",
    "write_viewer",
]

if not TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "CookieChange": "cdp_integration.debug.diff",
            "StepDiff": "cdp_integration.debug.diff",
            "StorageChange": "cdp_integration.debug.diff",
            "TabChange": "cdp_integration.debug.diff",
            "Stepper": "cdp_integration.debug.stepper",
            "visible_text": "cdp_integration.replay.text",
            "render_viewer": "cdp_integration.debug.viewer",
            "write_viewer": "cdp_integration.debug.viewer",
            "EvaluationSummary": "cdp_integration.debug.views",
            "RequestRow": "cdp_integration.debug.views",
            "StepSummary": "cdp_integration.debug.views",
            "step_requests": "cdp_integration.debug.views",
            "step_summaries": "cdp_integration.debug.views",
            "export_wabe": "cdp_integration.debug.wabe",
        },
    )
