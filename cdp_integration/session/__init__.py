"""The session file format: models, reader/writer, JSON Schema, redaction.

Names are imported on first use (PEP 562), so importing one module of the package loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdp_integration._lazy import lazy_exports

if TYPE_CHECKING:
    from cdp_integration.session.models import (
        FORMAT_VERSION,
        CaptureFault,
        Cookie,
        Evaluation,
        EvaluatorCall,
        HttpCall,
        NetworkExchange,
        RequestInfo,
        ResponseInfo,
        SessionEnd,
        SessionHeader,
        Step,
        TabState,
        TrafficOrigin,
    )
    from cdp_integration.session.placeholder import PLACEHOLDER_PATTERN
    from cdp_integration.session.redact import RedactionPolicy, Redactor, redact_file, redact_session
    from cdp_integration.session.schema import session_json_schema
    from cdp_integration.session.store import (
        MAX_SESSION_BYTES,
        PARTIAL_SUFFIX,
        SESSION_SUFFIX,
        Session,
        SessionWriter,
        load_session,
        new_header,
    )

__all__ = [
    "FORMAT_VERSION",
    "MAX_SESSION_BYTES",
    "PARTIAL_SUFFIX",
    "PLACEHOLDER_PATTERN",
    "SESSION_SUFFIX",
    "CaptureFault",
    "Cookie",
    "Evaluation",
    "EvaluatorCall",
    "HttpCall",
    "NetworkExchange",
    "RedactionPolicy",
    "Redactor",
    "RequestInfo",
    "ResponseInfo",
    "Session",
    "SessionEnd",
    "SessionHeader",
    "SessionWriter",
    "Step",
    "TabState",
    "TrafficOrigin",
    "load_session",
    "new_header",
    "redact_file",
    "redact_session",
    "session_json_schema",
]

if not TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "CaptureFault": "cdp_integration.session.models",
            "Cookie": "cdp_integration.session.models",
            "Evaluation": "cdp_integration.session.models",
            "EvaluatorCall": "cdp_integration.session.models",
            "FORMAT_VERSION": "cdp_integration.session.models",
            "HttpCall": "cdp_integration.session.models",
            "NetworkExchange": "cdp_integration.session.models",
            "RequestInfo": "cdp_integration.session.models",
            "ResponseInfo": "cdp_integration.session.models",
            "SessionEnd": "cdp_integration.session.models",
            "SessionHeader": "cdp_integration.session.models",
            "Step": "cdp_integration.session.models",
            "TabState": "cdp_integration.session.models",
            "TrafficOrigin": "cdp_integration.session.models",
            "PLACEHOLDER_PATTERN": "cdp_integration.session.placeholder",
            "RedactionPolicy": "cdp_integration.session.redact",
            "Redactor": "cdp_integration.session.redact",
            "redact_file": "cdp_integration.session.redact",
            "redact_session": "cdp_integration.session.redact",
            "session_json_schema": "cdp_integration.session.schema",
            "MAX_SESSION_BYTES": "cdp_integration.session.store",
            "PARTIAL_SUFFIX": "cdp_integration.session.store",
            "SESSION_SUFFIX": "cdp_integration.session.store",
            "Session": "cdp_integration.session.store",
            "SessionWriter": "cdp_integration.session.store",
            "load_session": "cdp_integration.session.store",
            "new_header": "cdp_integration.session.store",
        },
    )
