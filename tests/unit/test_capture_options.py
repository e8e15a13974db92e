"""The logger's keyword options are ``CaptureOptions``, and the session header records them unchanged."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from cdp_integration.capture import CaptureOptions, CDPSessionLogger
from cdp_integration.capture.faults import as_fault
from cdp_integration.session.models import CaptureFault
from cdp_integration.session.redact import RedactionPolicy

NOT_OPTIONS = {"self", "session_dir", "instance_id", "task"}


def test_every_logger_keyword_is_an_option_with_the_same_default() -> None:
    parameters = inspect.signature(CDPSessionLogger.__init__).parameters
    keywords = {name: p.default for name, p in parameters.items() if name not in NOT_OPTIONS}
    fields = {field.name: field.default for field in dataclasses.fields(CaptureOptions)}
    assert set(keywords) == set(fields)
    for name, default in keywords.items():
        assert fields[name] == (tuple(default) if name == "page_resources" else default), name


def test_the_header_records_the_options_as_the_format_has_them(tmp_path: Path) -> None:
    logger = CDPSessionLogger(tmp_path, page_resources=["Stylesheet", "Font"], dom="active_tab")
    assert logger.options.header() == {
        "dom": "active_tab",
        "screenshot": False,
        "thumbnail": True,
        "accessibility_tree": False,
        "response_bodies": "documents",
        "max_html_bytes": 20_000_000,
        "reuse_observation_dom": True,
        "own_dom_snapshot": False,
        "page_resources": ["Stylesheet", "Font"],
        "frames": True,
        "cssom_styles": True,
        "form_state": True,
        "console": True,
        "compresslevel": 3,
        "record_evaluations": True,
        "cdp_timeout_ms": 30_000,
        "stall_budget_ms": 2_000,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        logger.options.dom = "all_tabs"  # type: ignore[misc]


@pytest.mark.parametrize("redact", [True, RedactionPolicy()])
def test_a_redacting_logger_says_so_in_the_header(tmp_path: Path, redact: bool | RedactionPolicy) -> None:
    header = CDPSessionLogger(tmp_path, redact=redact).options.header()
    assert header["redacted"] is True and list(header)[-1] == "redacted"


def test_as_fault_records_an_exception_under_its_stage_and_lets_the_rest_run() -> None:
    faults: list[CaptureFault] = []
    with as_fault(faults, "cookies", "tab-1"):
        raise ConnectionResetError("socket closed\n")
    with as_fault(faults, "html"):
        pass
    assert [(f.stage, f.error_type, f.message, f.tab_id) for f in faults] == [
        ("cookies", "ConnectionResetError", "socket closed", "tab-1")
    ]
    with pytest.raises(KeyboardInterrupt), as_fault(faults, "html"):
        raise KeyboardInterrupt
    assert len(faults) == 1
