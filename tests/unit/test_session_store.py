"""The session file: round trip, dedup, crash safety, and clear errors for bad files."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import orjson
import pytest

from cdp_integration.errors import SessionFormatError, SessionVersionError
from cdp_integration.session import (
    FORMAT_VERSION,
    NetworkExchange,
    RequestInfo,
    ResponseInfo,
    SessionEnd,
    SessionWriter,
    Step,
    TabState,
    load_session,
    new_header,
    session_json_schema,
)
from cdp_integration.session.models import FormControlState, MarkedAttributes

BIG_HTML = "<html><body>" + "<p>unchanged paragraph</p>" * 2000 + "</body></html>"


def make_step(index: int, html: str = BIG_HTML, url: str = "http://127.0.0.1/x") -> Step:
    body = f"<html>{index}</html>"
    exchange = NetworkExchange(
        request_id=str(index),
        tab_id="T1",
        started=1.0 + index,
        request=RequestInfo(method="GET", url=url, headers={"accept": "text/html"}),
        response=ResponseInfo(status=200, headers={"content-type": "text/html"}, body=body),
    )
    tab = TabState(
        tab_id="T1",
        url=url,
        title=f"t{index}",
        active=True,
        html=html,
        dom_snapshot={"documents": [], "strings": ["a", "b"]},
    )
    return Step(
        index=index,
        trigger="action",
        action=f"click('{index}')",
        timestamp=1.0,
        url=url,
        title=f"t{index}",
        tabs=[tab],
        network=[exchange],
    )


def write_session(path: Path, steps: int, *, finish: bool = True) -> Path:
    writer = SessionWriter(path.with_name(path.name + ".partial"), new_header(instance_id="demo.1"))
    for i in range(steps):
        writer.write_step(make_step(i))
    if finish:
        return writer.finish(SessionEnd(ended=2.0, instance_id="demo.1", final_answer="42"), path)
    writer.abort()
    return writer.partial_path


def test_round_trip_preserves_every_step(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.session.jsonl.gz", 3)
    session = load_session(path)
    assert session.complete
    assert [s.index for s in session.steps] == [0, 1, 2]
    assert session.steps[2] == make_step(2)
    assert session.final_answer == "42"
    assert session.instance_id == "demo.1"
    assert not path.with_name(path.name + ".partial").exists()


def test_unchanged_html_is_stored_once(tmp_path: Path) -> None:
    one = write_session(tmp_path / "one.session.jsonl.gz", 1)
    ten = write_session(tmp_path / "ten.session.jsonl.gz", 10)
    copies = gzip.decompress(ten.read_bytes()).count(b"unchanged paragraph")
    assert 0 < copies == gzip.decompress(one.read_bytes()).count(b"unchanged paragraph") <= 2000
    assert load_session(ten).blob_count == load_session(one).blob_count + 9  # one body per extra step
    assert ten.stat().st_size < one.stat().st_size * 3


def test_file_is_plain_gzip_jsonl(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.session.jsonl.gz", 2)
    records = [orjson.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    assert records[0]["type"] == "header"
    assert records[-1]["type"] == "end"
    assert records[0]["format_version"] == FORMAT_VERSION


def test_every_truncation_point_reads_completed_steps_or_fails_cleanly(tmp_path: Path) -> None:
    partial = write_session(tmp_path / "s.session.jsonl.gz", 4, finish=False)
    data = partial.read_bytes()
    seen_steps = set()
    for cut in range(1, len(data), max(1, len(data) // 400)):
        cut_path = tmp_path / "cut.gz"
        cut_path.write_bytes(data[:cut])
        try:
            session = load_session(cut_path)
        except SessionFormatError:
            continue
        assert not session.complete
        assert [s.index for s in session.steps] == list(range(len(session.steps)))
        seen_steps.add(len(session.steps))
    assert load_session(partial).steps[-1] == make_step(3)
    assert {0, 1, 2, 3} <= seen_steps


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"hello\n", "not JSON"),
        (b'{"type": "step"}\n', "not a session file"),
        (b"\x1f\x8b\x08\x00garbage-garbage", "corrupt"),
        (orjson.dumps({"type": "header", "format_version": 1}) + b"\n", "invalid record"),
    ],
)
def test_bad_files_raise_session_format_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.session.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(SessionFormatError, match=message):
        load_session(path)


def test_future_format_version_is_named(tmp_path: Path) -> None:
    header = new_header().model_dump(mode="json") | {"format_version": FORMAT_VERSION + 1, "type": "header"}
    path = tmp_path / "future.session.jsonl.gz"
    path.write_bytes(gzip.compress(orjson.dumps(header) + b"\n"))
    with pytest.raises(SessionVersionError, match=f"format {FORMAT_VERSION + 1}"):
        load_session(path)


def test_decompression_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cdp_integration.session import store

    monkeypatch.setattr(store, "MAX_SESSION_BYTES", 1000)
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(b" " * 100_000))
    with pytest.raises(SessionFormatError, match="more than 1000 bytes"):
        load_session(path)


def test_missing_blob_reference_is_a_format_error(tmp_path: Path) -> None:
    header = new_header().model_dump(mode="json") | {"type": "header"}
    step = make_step(0).model_dump(mode="json") | {"type": "step"}
    step["tabs"][0]["html"] = {"$blob": "nope"}
    path = tmp_path / "s.gz"
    zipper = zlib.compressobj(6, zlib.DEFLATED, 31)
    path.write_bytes(
        zipper.compress(orjson.dumps(header) + b"\n" + orjson.dumps(step) + b"\n") + zipper.flush()
    )
    with pytest.raises(SessionFormatError, match="missing blob"):
        load_session(path)


def test_committed_schema_matches_the_models() -> None:
    committed = Path(__file__).parents[2] / "docs" / "session.schema.json"
    assert orjson.loads(committed.read_bytes()) == session_json_schema(), (
        "regenerate with: .venv/bin/cdp-session schema -o docs/session.schema.json"
    )


def test_form_state_round_trips_and_older_tabs_have_none(tmp_path: Path) -> None:
    typed = [
        FormControlState(path=[3], tag="input", type="text", name="title", id="title", value="Typed"),
        FormControlState(path=[7, 2], tag="input", type="checkbox", id="agree", checked=True),
        FormControlState(
            path=[9, 4],
            tag="select",
            name="size",
            frame="http://127.0.0.1/f",
            selected=[0, 2],
            selected_text=["S", "L"],
        ),
    ]
    step = make_step(0)
    step = step.model_copy(update={"tabs": [step.tabs[0].model_copy(update={"form_state": typed})]})
    writer = SessionWriter(tmp_path / "f.partial", new_header(instance_id="forms"))
    writer.write_step(step)
    path = writer.finish(SessionEnd(ended=2.0), tmp_path / "f.session.jsonl.gz")
    loaded = load_session(path)
    assert loaded.header.format_version == FORMAT_VERSION == 3
    assert loaded.steps[0] == step and loaded.steps[0].tabs[0].form_state == typed
    assert TabState(tab_id="T", url="about:blank", title="", active=True).form_state == []


def test_marked_attributes_round_trip_and_older_tabs_have_none(tmp_path: Path) -> None:
    """The attributes BrowserGym's marking wrote: an optional field, so format-3 files without it load."""
    marks = [
        MarkedAttributes(bid="a12", tag="input", type="text", name="q", id="q", value='typed "text"'),
        MarkedAttributes(bid="13", tag="input", type="checkbox", frame="http://127.0.0.1/f", checked=True),
        MarkedAttributes(bid="14", tag="li", value="0"),
    ]
    step = make_step(0)
    step = step.model_copy(update={"tabs": [step.tabs[0].model_copy(update={"marked_attributes": marks})]})
    writer = SessionWriter(tmp_path / "m.partial", new_header(instance_id="marks"))
    writer.write_step(step)
    path = writer.finish(SessionEnd(ended=2.0), tmp_path / "m.session.jsonl.gz")
    assert load_session(path).steps[0].tabs[0].marked_attributes == marks
    assert TabState(tab_id="T", url="about:blank", title="", active=True).marked_attributes == []
