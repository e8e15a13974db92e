"""Capture web-agent episodes over CDP; replay and score them offline with the official evaluators."""

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.errors import (
    CaptureError,
    CDPIntegrationError,
    EnvironmentSetupError,
    EvaluationError,
    ReplayMissError,
    SessionFormatError,
    SessionVersionError,
)
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.har.export import session_to_har
from cdp_integration.replay import (
    MockBrowserContext,
    MockCDPSession,
    MockPage,
    WebArenaCDPIntegration,
)
from cdp_integration.session import FORMAT_VERSION, Session, load_session
from cdp_integration.session.redact import redact_session

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "CDPIntegrationError",
    "CDPSessionLogger",
    "CaptureError",
    "EnvironmentSetupError",
    "EvaluationError",
    "MockBrowserContext",
    "MockCDPSession",
    "MockPage",
    "ReplayMissError",
    "Session",
    "SessionFormatError",
    "SessionVersionError",
    "WebArenaCDPIntegration",
    "evaluate_session",
    "load_session",
    "redact_session",
    "session_to_har",
]
