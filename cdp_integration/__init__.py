"""Capture web-agent episodes over CDP; replay and score them offline with the official evaluators.

The names below are imported on first use (PEP 562), so ``import cdp_integration`` loads no
Playwright, BrowserGym or evaluator module. Layers, each importing only the ones before it::

    errors, _version, environment, interception, webarena   (bottom: no package imports but errors)
    session   the file format: models, store, schema, redaction
    har       session <-> HAR 1.2
    replay    MockPage / MockBrowserContext / MockCDPSession over a session
    capture   CDPSessionLogger
    evaluate  official evaluators and WebArena-Verified over a session; batch scoring, reports
    debug     stepper, diffs, HTML viewer
    cli       the ``cdp-session`` commands (``evaluate.command``, ``debug.commands`` belong here)

``demo`` (the bundled shop) sits outside: it uses the library; the library never imports it.
"""

import typing

from cdp_integration import _lazy

if typing.TYPE_CHECKING:
    from cdp_integration._version import __version__ as __version__
    from cdp_integration.capture.logger import CDPSessionLogger
    from cdp_integration.errors import (
        CaptureError,
        CDPIntegrationError,
        DemoTaskError,
        EnvironmentSetupError,
        EvaluationError,
        ReplayMissError,
        SessionFormatError,
        SessionVersionError,
        StepIndexError,
    )
    from cdp_integration.evaluate.scoring import evaluate_session
    from cdp_integration.har.export import session_to_har
    from cdp_integration.replay import WebArenaCDPIntegration
    from cdp_integration.replay.cdp import MockCDPSession
    from cdp_integration.replay.page import MockBrowserContext, MockPage, replay_step
    from cdp_integration.session.models import FORMAT_VERSION
    from cdp_integration.session.redact import redact_session
    from cdp_integration.session.store import Session, load_session

__all__ = [
    "FORMAT_VERSION",
    "CDPIntegrationError",
    "CDPSessionLogger",
    "CaptureError",
    "DemoTaskError",
    "EnvironmentSetupError",
    "EvaluationError",
    "MockBrowserContext",
    "MockCDPSession",
    "MockPage",
    "ReplayMissError",
    "Session",
    "SessionFormatError",
    "SessionVersionError",
    "StepIndexError",
    "WebArenaCDPIntegration",
    "evaluate_session",
    "load_session",
    "redact_session",
    "replay_step",
    "session_to_har",
]

_ERRORS = "cdp_integration.errors"
if not typing.TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = _lazy.lazy_exports(
        globals(),
        {
            "__version__": "cdp_integration._version",
            "CDPSessionLogger": "cdp_integration.capture.logger",
            "CDPIntegrationError": _ERRORS,
            "CaptureError": _ERRORS,
            "DemoTaskError": _ERRORS,
            "EnvironmentSetupError": _ERRORS,
            "EvaluationError": _ERRORS,
            "ReplayMissError": _ERRORS,
            "SessionFormatError": _ERRORS,
            "SessionVersionError": _ERRORS,
            "StepIndexError": _ERRORS,
            "evaluate_session": "cdp_integration.evaluate.scoring",
            "session_to_har": "cdp_integration.har.export",
            "WebArenaCDPIntegration": "cdp_integration.replay",
            "MockCDPSession": "cdp_integration.replay.cdp",
            "MockBrowserContext": "cdp_integration.replay.page",
            "MockPage": "cdp_integration.replay.page",
            "replay_step": "cdp_integration.replay.page",
            "FORMAT_VERSION": "cdp_integration.session.models",
            "redact_session": "cdp_integration.session.redact",
            "Session": "cdp_integration.session.store",
            "load_session": "cdp_integration.session.store",
        },
    )
