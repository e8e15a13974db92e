"""Step-by-step debugging of a captured episode: one set of views, three faces.

``diff(session, a, b)`` and the per-step views (``step_summaries``, ``step_requests``,
``visible_text``) are computed here once; ``cdp-session steps/show/diff`` print them, the stepper
(``cdp-session debug``) prints them at a prompt, and ``cdp-session view`` renders them into one
self-contained HTML file. ``export_wabe`` writes an episode in WABE's layout for its LLM judge.
"""

from cdp_integration.debug.diff import CookieChange, StepDiff, StorageChange, TabChange, diff
from cdp_integration.debug.stepper import Stepper
from cdp_integration.debug.text import visible_text
from cdp_integration.debug.viewer import render_viewer, write_viewer
from cdp_integration.debug.views import (
    EvaluationSummary,
    RequestRow,
    StepSummary,
    resolve_step,
    step_requests,
    step_summaries,
)
from cdp_integration.debug.wabe import export_wabe

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
    "resolve_step",
    "step_requests",
    "step_summaries",
    "visible_text",
    "write_viewer",
]
