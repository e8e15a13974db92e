"""The session file format: models, reader/writer, JSON Schema."""

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
)
from cdp_integration.session.schema import session_json_schema
from cdp_integration.session.store import Session, SessionWriter, load_session, new_header

__all__ = [
    "FORMAT_VERSION",
    "CaptureFault",
    "Cookie",
    "Evaluation",
    "EvaluatorCall",
    "HttpCall",
    "NetworkExchange",
    "RequestInfo",
    "ResponseInfo",
    "Session",
    "SessionEnd",
    "SessionHeader",
    "SessionWriter",
    "Step",
    "TabState",
    "load_session",
    "new_header",
    "session_json_schema",
]
