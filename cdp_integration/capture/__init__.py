"""Capture: ``CDPSessionLogger`` and what it reads over CDP (DOM, storage, network, evaluator probes).

Names are imported on first use (PEP 562): the logger needs Playwright.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdp_integration._lazy import lazy_exports

if TYPE_CHECKING:
    from cdp_integration.capture.logger import CDPSessionLogger, DomScope
    from cdp_integration.capture.network import BodyPolicy
    from cdp_integration.capture.options import CaptureOptions
    from cdp_integration.capture.probes import EvaluationRecorder

__all__ = ["BodyPolicy", "CDPSessionLogger", "CaptureOptions", "DomScope", "EvaluationRecorder"]

if not TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "BodyPolicy": "cdp_integration.capture.network",
            "CDPSessionLogger": "cdp_integration.capture.logger",
            "CaptureOptions": "cdp_integration.capture.options",
            "DomScope": "cdp_integration.capture.options",
            "EvaluationRecorder": "cdp_integration.capture.probes",
        },
    )
