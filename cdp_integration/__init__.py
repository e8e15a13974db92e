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
from cdp_integration.har.export import session_to_har
from cdp_integration.session import FORMAT_VERSION, Session, load_session

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "CDPIntegrationError",
    "CDPSessionLogger",
    "CaptureError",
    "EnvironmentSetupError",
    "EvaluationError",
    "ReplayMissError",
    "Session",
    "SessionFormatError",
    "SessionVersionError",
    "load_session",
    "session_to_har",
]
