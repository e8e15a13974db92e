"""The project's one exception tree.

    CDPIntegrationError
    ├── SessionFormatError (ValueError)      a file is not a readable session of this format
    │   └── SessionVersionError              written by a format version we cannot read
    ├── OutputLimitError (ValueError)        an output would exceed CDP_SESSION_MAX_OUTPUT_BYTES
    ├── CaptureError (RuntimeError)          one capture step failed (recorded, never raised into a step)
    ├── StepIndexError (IndexError)          a session has no step of that number
    ├── ReplayMissError (LookupError)        replay was asked something the session has no answer for
    │   ├── ReconstructedAnswerError         recorded-only scoring met an answer not recorded live
    │   └── SandboxTimeoutError              a question's JavaScript ran past its time limit offline
    ├── EvaluationError (RuntimeError)       a session could not be scored
    ├── DemoTaskError (ValueError)           a demo tasks file is malformed
    ├── ActionFailed (RuntimeError)          BrowserGym could not carry out a scripted demo action
    ├── UntrustedConfigError (ValueError)    a config would make the evaluator run code we did not vet
    └── EnvironmentSetupError (RuntimeError) Chromium / punkt_tab / site variables missing

Each subclass also inherits the matching builtin, so callers may catch either. The CLI turns every
``CDPIntegrationError`` (and OS, recursion, memory and value errors from bad input) into a one-line
message (``one_line_error``) and exit code 2.
"""

from __future__ import annotations

import re

__all__ = [
    "ActionFailed",
    "CDPIntegrationError",
    "CaptureError",
    "DemoTaskError",
    "EnvironmentSetupError",
    "EvaluationError",
    "OutputLimitError",
    "ReconstructedAnswerError",
    "ReplayMissError",
    "SandboxTimeoutError",
    "SessionFormatError",
    "SessionVersionError",
    "StepIndexError",
    "UntrustedConfigError",
    "escape_controls",
    "one_line_error",
    "redact_credentials",
]


class CDPIntegrationError(Exception):
    """Base of every error this package raises on purpose."""


class SessionFormatError(CDPIntegrationError, ValueError):
    """The file is truncated, corrupt, not a session, or fails the session schema."""


class SessionVersionError(SessionFormatError):
    """The session was written by a format version this release cannot read."""


class StepIndexError(CDPIntegrationError, IndexError):
    """A session has no step of that number (negative numbers count from the end)."""


class OutputLimitError(CDPIntegrationError, ValueError):
    """A file a command writes (or prints) would exceed the output budget; nothing is left of it."""


class CaptureError(CDPIntegrationError, RuntimeError):
    """A capture step failed; the logger records it in the snapshot instead of raising."""


class ReplayMissError(CDPIntegrationError, LookupError):
    """Replay has no recorded answer; the message lists the nearest recorded entries."""


class ReconstructedAnswerError(ReplayMissError):
    """Recorded-only scoring: the question was not asked live, so its answer would be reconstructed."""


class SandboxTimeoutError(ReplayMissError):
    """JavaScript the offline sandbox ran for an answer (a locator, a prep action, ``eval-at``) did not
    finish within ``SessionLimits.max_question_seconds``; its page was stopped, so there is no answer."""


class EvaluationError(CDPIntegrationError, RuntimeError):
    """A session could not be scored (missing config, evaluator crash, ...)."""


class EnvironmentSetupError(CDPIntegrationError, RuntimeError):
    """Something the toolkit needs on this machine is missing; the message names the fix."""


class DemoTaskError(CDPIntegrationError, ValueError):
    """A demo tasks file (``tasks.json`` format) is malformed; the message names the entry."""


class ActionFailed(CDPIntegrationError, RuntimeError):
    """BrowserGym could not carry out a scripted action of the demo agent.

    BrowserGym reports that in the observation (``last_action_error``), not by raising, and gives each
    action 0.5 s (its own fixed timeouts), which a loaded machine can exceed: the episode would go on from
    a state the script did not mean. That is a timing fault of the run, not a verdict on the episode.
    """


class UntrustedConfigError(CDPIntegrationError, ValueError):
    """A WebArena config (or a URL pasted into it) would make the evaluator ``eval`` something other
    than an official helper call; the message names the field."""


def one_line_error(exc: BaseException) -> str:
    """``exc`` as one line for stderr: no traceback, no embedded newlines, bounded length."""
    if isinstance(exc, RecursionError):
        text = "input nested too deeply to process"
    elif isinstance(exc, MemoryError):
        text = "out of memory (the input is too large; see the session limits in the README)"
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
        if not isinstance(exc, CDPIntegrationError):
            text = f"{type(exc).__name__}: {text}"
    text = " ".join(escape_controls(redact_credentials(text)).split())
    return text if len(text) <= 2000 else text[:1999] + "…"


_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)} | {
    code: f"\\u{code:04x}" for code in (*range(0x80, 0xA0), 0x2028, 0x2029, 0x202E, 0x2066, 0x2067, 0x2068)
}
_CONTROLS.pop(0x0A)
_CONTROLS.pop(0x09)


def escape_controls(text: str) -> str:
    """``text`` safe for a terminal: C0/C1 controls (ESC, OSC's BEL, CR, ...) and bidi overrides
    written as ``\\xNN`` escapes, so text from a session (a title, a URL) cannot move the cursor,
    set the window title or write the clipboard (OSC 52). Tabs and newlines are kept."""
    return text.translate(_CONTROLS)


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s?#]*@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&;](?:[\w.-]*(?:token|key|secret|passw(?:or)?d|pwd|signature|sig|auth|credential)[\w.-]*)=)[^&;#\s]*"
)


def redact_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden: the user-info part (``user:password@``)
    and the values of query parameters named like secrets (``token``, ``key``, ``signature``, ...)
    become ``***``, so a URL can be shown (an error, a log line, ``metadata.json``) without them."""
    if "://" not in text and "=" not in text:
        return text
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", text))
