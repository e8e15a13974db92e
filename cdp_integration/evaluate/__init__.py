"""Offline scoring of captured episodes: the official WebArena evaluators and WebArena-Verified over a
session, a directory of sessions scored in batch, and the report.

Names are imported on first use (PEP 562): the evaluators load BrowserGym and libwebarena.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdp_integration._lazy import lazy_exports

if TYPE_CHECKING:
    from cdp_integration.evaluate.batch import BatchSummary, load_configs, score_directory
    from cdp_integration.evaluate.report import Report, build_report, write_report
    from cdp_integration.evaluate.scoring import (
        SessionScore,
        StepScore,
        evaluate_session,
        evaluate_step,
        score_session_file,
        session_config,
    )
    from cdp_integration.evaluate.verified import VerifiedResult, verified_score, verified_score_file

__all__ = [
    "BatchSummary",
    "Report",
    "SessionScore",
    "StepScore",
    "VerifiedResult",
    "build_report",
    "evaluate_session",
    "evaluate_step",
    "load_configs",
    "score_directory",
    "score_session_file",
    "session_config",
    "verified_score",
    "verified_score_file",
    "write_report",
]

_BATCH = "cdp_integration.evaluate.batch"
_REPORT = "cdp_integration.evaluate.report"
_SCORING = "cdp_integration.evaluate.scoring"
_VERIFIED = "cdp_integration.evaluate.verified"
if not TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "BatchSummary": _BATCH,
            "load_configs": _BATCH,
            "score_directory": _BATCH,
            "Report": _REPORT,
            "build_report": _REPORT,
            "write_report": _REPORT,
            "SessionScore": _SCORING,
            "StepScore": _SCORING,
            "evaluate_session": _SCORING,
            "evaluate_step": _SCORING,
            "score_session_file": _SCORING,
            "session_config": _SCORING,
            "VerifiedResult": _VERIFIED,
            "verified_score": _VERIFIED,
            "verified_score_file": _VERIFIED,
        },
    )
