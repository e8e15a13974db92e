"""JSON Schema of one line of a session file (``docs/session.schema.json`` is generated from it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cdp_integration.session.models import FORMAT_VERSION, SessionEnd, SessionHeader, Step

__all__ = ["session_json_schema"]


class HeaderRecord(SessionHeader):
    type: Literal["header"]


class BlobRecord(BaseModel):
    """A large value (HTML, DOM snapshot, body, screenshot) stored once; steps refer to it by id
    as ``{"$blob": id}`` in place of the value."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["blob"]
    id: str
    kind: Literal["text", "dom"] | None = None
    """Absent: ``data`` is the value. ``text``: ``data`` lists the string blobs the value joins.
    ``dom``: ``data`` is an encoded DOM snapshot whose lists may be ``{"$chunks": [ids]}``."""
    data: Any


class StepRecord(Step):
    type: Literal["step"]


class EndRecord(SessionEnd):
    type: Literal["end"]


SessionRecord = Annotated[HeaderRecord | BlobRecord | StepRecord | EndRecord, Field(discriminator="type")]


def session_json_schema() -> dict[str, Any]:
    """The schema every JSON line of a (decompressed) session file satisfies."""
    schema = TypeAdapter(SessionRecord).json_schema(by_alias=True)
    schema["title"] = f"cdp-integration session record (format {FORMAT_VERSION})"
    schema["description"] = (
        "A session file is a gzip stream of JSON lines: one header record, then blob and step "
        "records in capture order, then (when finished) one end record. Inside step records, "
        'large values may be {"$blob": id} references to an earlier blob record.'
    )
    return schema
