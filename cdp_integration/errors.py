"""The project's one exception tree.

    CDPIntegrationError
    ├── SessionFormatError (ValueError)      a file is not a readable session of this format
    │   └── SessionVersionError              written by a format version we cannot read
    ├── CaptureError (RuntimeError)          one capture step failed (recorded, never raised into a step)
    ├── ReplayMissError (LookupError)        replay was asked something the session has no answer for
    │   └── ReconstructedAnswerError         recorded-only scoring met an answer not recorded live
    ├── EvaluationError (RuntimeError)       a session could not be scored
    ├── DemoTaskError (ValueError)           a demo tasks file is malformed
    └── EnvironmentSetupError (RuntimeError) Chromium / punkt_tab / site variables missing

Each subclass also inherits the matching builtin, so callers may catch either. The CLI turns every
``CDPIntegrationError`` into a one-line message and exit code 2.
"""

from __future__ import annotations

__all__ = [
    "CDPIntegrationError",
    "CaptureError",
    "DemoTaskError",
    "EnvironmentSetupError",
    "EvaluationError",
    "ReconstructedAnswerError",
    "ReplayMissError",
    "SessionFormatError",
    "SessionVersionError",
]


class CDPIntegrationError(Exception):
    """Base of every error this package raises on purpose."""


class SessionFormatError(CDPIntegrationError, ValueError):
    """The file is truncated, corrupt, not a session, or fails the session schema."""


class SessionVersionError(SessionFormatError):
    """The session was written by a format version this release cannot read."""


class CaptureError(CDPIntegrationError, RuntimeError):
    """A capture step failed; the logger records it in the snapshot instead of raising."""


class ReplayMissError(CDPIntegrationError, LookupError):
    """Replay has no recorded answer; the message lists the nearest recorded entries."""


class ReconstructedAnswerError(ReplayMissError):
    """Recorded-only scoring: the question was not asked live, so its answer would be reconstructed."""


class EvaluationError(CDPIntegrationError, RuntimeError):
    """A session could not be scored (missing config, evaluator crash, ...)."""


class EnvironmentSetupError(CDPIntegrationError, RuntimeError):
    """Something the toolkit needs on this machine is missing; the message names the fix."""


class DemoTaskError(CDPIntegrationError, ValueError):
    """A demo tasks file (``tasks.json`` format) is malformed; the message names the entry."""
