"""``cdp-session info`` / ``har`` on a written session; bad files give one line and exit code 2."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.session import FORMAT_VERSION, SessionEnd, SessionWriter, new_header
from tests.unit.test_session_store import make_step


@pytest.fixture
def session_path(tmp_path: Path) -> Path:
    writer = SessionWriter(tmp_path / "s.partial", new_header(instance_id="demo.7"))
    for i in range(4):
        writer.write_step(make_step(i, url=f"http://127.0.0.1/page{i}"))
    return writer.finish(
        SessionEnd(ended=1.0, instance_id="demo.7", final_answer="forty-two"),
        tmp_path / "demo.7.session.jsonl.gz",
    )


def test_info_lists_every_step(session_path: Path) -> None:
    result = CliRunner().invoke(cli, ["info", str(session_path)])
    assert result.exit_code == 0, result.output
    assert "demo.7" in result.output and "finished" in result.output
    for i in range(4):
        assert f"http://127.0.0.1/page{i}" in result.output
    assert "forty-two" in result.output


def test_har_exports_a_step_range(session_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.har"
    result = CliRunner().invoke(cli, ["har", str(session_path), "-o", str(out), "--steps", "1:3"])
    assert result.exit_code == 0, result.output
    har = orjson.loads(out.read_bytes())
    assert har["log"]["version"] == "1.2"
    assert [(e["_step"], e["request"]["url"]) for e in har["log"]["entries"]] == [
        (1, "http://127.0.0.1/page1"),
        (2, "http://127.0.0.1/page2"),
    ]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a session",
        b"\x1f\x8b\x08\x00\x00\x00",
        gzip.compress(b'{"type": "header", "format_version": 99}\n', mtime=0),
    ],
    ids=["empty", "text", "truncated-gzip", "future-version"],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.session.jsonl.gz"
    bad.write_bytes(content)
    for args in (["info", str(bad)], ["har", str(bad), "-o", str(tmp_path / "x.har")]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cdp-session: error: ")
        assert "Traceback" not in result.stderr


def test_future_version_message_names_both_versions(tmp_path: Path) -> None:
    bad = tmp_path / "future.session.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"type": "header", "format_version": 99}\n'))
    result = CliRunner().invoke(cli, ["info", str(bad)])
    assert "format 99" in result.stderr and f"up to {FORMAT_VERSION}" in result.stderr


def test_truncated_real_session_still_lists_completed_steps(session_path: Path, tmp_path: Path) -> None:
    raw = session_path.read_bytes()
    cut = tmp_path / "cut.session.jsonl.gz"
    cut.write_bytes(raw[:-60])  # the end record and gzip trailer are lost
    result = CliRunner().invoke(cli, ["info", str(cut)])
    assert result.exit_code == 0, result.output
    assert "partial" in result.output
    assert all(f"page{i}" in result.output for i in range(4))


def test_traffic_finished_after_the_last_step_is_kept_in_the_har(tmp_path: Path) -> None:
    from cdp_integration.har.export import session_har_entries
    from cdp_integration.session import load_session

    late = make_step(9, url="http://127.0.0.1/late-post").network[0]
    writer = SessionWriter(tmp_path / "s.partial", new_header())
    writer.write_step(make_step(0))
    path = writer.finish(SessionEnd(ended=1.0, network=[late]), tmp_path / "s.session.jsonl.gz")
    session = load_session(path)
    assert session.end.network[0].response.body == "<html>9</html>"
    entries = session_har_entries(session)
    assert [(e["_step"], e["request"]["url"]) for e in entries][-1] == (0, "http://127.0.0.1/late-post")


def test_har_show_reads_back_an_exported_har(session_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.har"
    assert CliRunner().invoke(cli, ["har", str(session_path), "-o", str(out)]).exit_code == 0
    result = CliRunner().invoke(cli, ["har-show", str(out), "--step", "2"])
    assert result.exit_code == 0, result.output
    rows = result.output.splitlines()[1:]  # after the header
    assert len(rows) == 1 and rows[0].split()[:3] == ["2", "GET", "200"]
    assert rows[0].endswith("http://127.0.0.1/page2")


@pytest.mark.parametrize(
    "content",
    [b"{}", b'{"log": {"version": "9.9", "entries": []}}', gzip.compress(b" " * 4096, mtime=0)[:20]],
)
def test_har_show_refuses_a_bad_har_in_one_line(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.har"
    bad.write_bytes(content)
    result = CliRunner().invoke(cli, ["har-show", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith("cdp-session: error: ") and result.stderr.count("\n") == 1


def test_setup_writes_punkt_tab_and_the_browser_layout_under_the_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a pip user runs once; ``CDP_INTEGRATION_CACHE`` stands in for the user cache directory."""
    from cdp_integration.environment import WEBARENA_SITES

    for name in (
        "PLAYWRIGHT_BROWSERS_PATH",
        "NLTK_DATA",
        *WEBARENA_SITES,
        *(f"WA_{s}" for s in WEBARENA_SITES),
    ):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # setup sets them; the test restores them
        monkeypatch.delenv(name)
    monkeypatch.setenv("CDP_INTEGRATION_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["setup"])
    assert result.exit_code == 0, result.output
    english = tmp_path / "cache" / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    assert "Mr." not in (english / "abbrev_types.txt").read_text()  # punkt stores abbreviations bare
    assert "mr" in (english / "abbrev_types.txt").read_text().split()
    browsers = tmp_path / "cache" / "playwright-browsers"
    assert any(path.is_symlink() for path in browsers.rglob("chrome*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing in the working directory
    assert str(browsers) in result.output


_HELP = """
import sys
import click
from click.testing import CliRunner
from cdp_integration.cli import LAZY_COMMANDS, cli
if sys.argv[1] == "load":
    for name in LAZY_COMMANDS:
        cli.get_command(click.Context(cli), name)
print(CliRunner().invoke(cli, ["--help"], prog_name="cdp-session", terminal_width=100).output)
print(sorted(name for name in sys.modules if name.startswith(("cdp_integration.debug", "cdp_integration.evaluate"))))
"""


def test_help_lists_lazy_commands_as_their_own_help_says_without_importing_them() -> None:
    import subprocess
    import sys

    lazy, loaded = (
        subprocess.run([sys.executable, "-c", _HELP, mode], capture_output=True, text=True, check=True).stdout
        for mode in ("lazy", "load")
    )
    lazy_help, lazy_modules = lazy.rsplit("\n", 2)[:2]
    loaded_help, loaded_modules = loaded.rsplit("\n", 2)[:2]
    assert lazy_help == loaded_help
    assert "rescore" in lazy_help and "eval-at" in lazy_help
    assert lazy_modules == "[]" and "cdp_integration.debug.commands" in loaded_modules
