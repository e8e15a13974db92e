"""``cdp-session steps/show/diff/view/export-wabe`` on a written synthetic session; bad input exits 2."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from cdp_integration.cli import cli
from cdp_integration.session import SessionEnd
from tests.unit.test_debug_diff import ORIGIN, write_session


@pytest.fixture
def session_path(tmp_path: Path) -> Path:
    return write_session(tmp_path / "demo.unit.session.jsonl.gz")


def run(*args: str | Path) -> Result:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result


def test_steps_lists_every_step_with_status_requests_and_evaluation(session_path: Path) -> None:
    lines = run("steps", session_path).stdout.splitlines()
    assert lines[0].split() == [
        "step",
        "action",
        "url",
        "title",
        "doc",
        "reqs",
        "capture",
        "ms",
        "eval",
        "faults",
    ]
    rows = {line.split()[0]: line for line in lines[1:6]}
    assert rows["0"].split()[1] == "reset"
    assert "click('7')" in rows["2"] and f"{ORIGIN}/account" in rows["2"] and "302→200" in rows["2"]
    assert rows["2"].split()[-4:] == ["5", "22.0", "1", "-"]  # requests, capture ms, evaluation, faults
    assert rows["1"].split()[-3:] == ["21.0", "0", "-"]  # no recorded evaluation: the live reward
    assert rows["4"].split()[-3:] == ["24.0", "1", "-"]
    assert lines[-1] == "answer: 'Emma'"


def test_show_summary_and_each_view(session_path: Path) -> None:
    summary = run("show", session_path, "2").stdout
    assert "action    click('7')" in summary and f"url       {ORIGIN}/account" in summary
    assert "document  302→200" in summary
    assert run("show", session_path, "2", "--text").stdout == "My Account\nWelcome, Emma\nlogo Help\n"
    html = run("show", session_path, "2", "--html").stdout
    assert html.startswith("<html><head><link") and "<div hidden>secret</div>" in html
    cookies = run("show", session_path, "2", "--cookies").stdout
    assert "session" in cookies and "shop.test" in cookies and "httpOnly" in cookies and "abc" in cookies
    storage = run("show", session_path, "3", "--storage").stdout
    assert f"localStorage {ORIGIN}  (empty)" in storage and "visit = v1" in storage and "(tab T2)" in storage
    network = run("show", session_path, "2", "--network").stdout.splitlines()
    assert network[1].split() == ["POST", "302", "Document", "12", "ms", f"{ORIGIN}/login"]
    assert network[5].split() == [
        "GET",
        "failed",
        "Script",
        "12",
        "ms",
        f"{ORIGIN}/ads.js",
        "(net::ERR_ABORTED)",
    ]
    tabs = run("show", session_path, "3", "--tabs").stdout
    assert "*  1   T2" in tabs and f"{ORIGIN}/help" in tabs
    record = orjson.loads(run("show", session_path, "2", "--json").stdout)
    assert record["action"] == "click('7')" and record["tabs"][0]["screenshot_png"].endswith(
        "bytes, left out>"
    )


def test_negative_step_counts_from_the_end(session_path: Path) -> None:
    assert run("show", session_path, "-1").stdout == run("show", session_path, "4").stdout
    assert run("diff", session_path, "-2", "-1").stdout == run("diff", session_path, "3", "4").stdout


def test_diff_prints_every_kind_of_change(session_path: Path) -> None:
    out = run("diff", session_path, "1", "3").stdout
    assert out.startswith("step 1 → step 3\n")
    assert f"url     {ORIGIN}/login\n     →  {ORIGIN}/help" in out
    assert "title   'Login' → 'Help'" in out
    assert f"tab     + opened T2 {ORIGIN}/help" in out
    assert "  + seen_help (shop.test/) added: 1" in out and "  + session (shop.test/) added: xyz" in out
    assert f"  + sessionStorage {ORIGIN} tab T2 visit added: v1" in out
    assert "requests (6)" in out and f"2     POST    302       Document    12 ms      {ORIGIN}/login" in out
    assert "--- step 1\n+++ step 3" in out and "-Customer Login" in out and "+Help" in out
    assert run("diff", session_path, "2", "2").stdout == "step 2 → step 2: no change\n"


def test_debug_reads_commands_from_stdin(session_path: Path) -> None:
    result = CliRunner().invoke(cli, ["debug", str(session_path)], input="g 2\nd\nq\n")
    assert result.exit_code == 0, result.output
    assert "5 steps; h for help, q to quit" in result.stdout
    assert f"[2/4] {ORIGIN}/account > " in result.stdout and "document  302→200" in result.stdout
    assert "step 1 → step 2" in result.stdout and "+ session (shop.test/) added: abc" in result.stdout


def test_view_writes_one_html_file(session_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "episode.html"
    assert run("view", session_path, "-o", out).stdout.startswith(f"wrote {out} (5 steps")
    page = out.read_text()
    assert '"instance_id":"demo.unit"' in page and "Content-Security-Policy" in page
    assert "http://" not in page.split('id="episode-data"')[0]  # the page itself loads nothing
    default = session_path.with_name("demo.unit.html")
    run("view", session_path)
    assert default.exists()


def test_export_wabe_writes_result_and_trajectory(session_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "wabe" / "demo.unit"
    assert run("export-wabe", session_path, "-o", out).stdout == (
        f"wrote {out / 'result.json'} (4 actions, 4 screenshots)\n"
    )
    result = orjson.loads((out / "result.json").read_bytes())
    assert result["task_id"] == "demo.unit" and result["final_result_response"] == "Emma"
    # step 3's active tab (the help tab) has no screenshot
    assert sorted(p.name for p in (out / "trajectory").iterdir()) == [f"step_00{i}.png" for i in (0, 1, 2, 4)]


@pytest.mark.parametrize(
    "content",
    [b"", b"not a session", gzip.compress(b'{"type": "header", "format_version": 99}\n', mtime=0)],
    ids=["empty", "text", "future-version"],
)
def test_bad_session_is_one_line_and_exit_2(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.session.jsonl.gz"
    bad.write_bytes(content)
    commands = [
        ["steps"],
        ["show", "0"],
        ["show", "0", "--text"],
        ["diff", "0", "1"],
        ["debug"],
        ["view", "-o", str(tmp_path / "x.html")],
        ["export-wabe", "-o", str(tmp_path / "x")],
    ]
    for command in commands:
        args = [command[0], str(bad), *command[1:]]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, args
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cdp-session: error: "), args


def test_step_out_of_range_is_a_usage_error(session_path: Path) -> None:
    result = CliRunner().invoke(cli, ["show", str(session_path), "7"])
    assert result.exit_code == 2
    assert "step 7 is out of range: the session has steps 0..4" in result.stderr


def test_show_and_diff_say_what_was_typed(tmp_path: Path) -> None:
    from cdp_integration.session import SessionWriter, new_header
    from tests.unit.test_debug_diff import form_session

    writer = SessionWriter(tmp_path / "f.partial", new_header(instance_id="forms"))
    for step in form_session().steps:
        writer.write_step(step)
    path = writer.finish(SessionEnd(ended=1.0), tmp_path / "forms.session.jsonl.gz")
    summary = run("show", path, "2").stdout
    assert "form      typed 'Great mugs' into input#title\nform      checked input[name=agree]\n" in summary
    assert (
        run("show", path, "1", "--form").stdout
        == "typed 'Great mug' into input#title\nchecked input[name=agree]\n"
    )
    assert run("show", path, "0", "--form").stdout == "(no form control differs from its default)\n"
    record = orjson.loads(run("show", path, "1", "--json").stdout)
    assert record["tabs"][0]["form_state"][0]["value"] == "Great mug"
    assert run("diff", path, "0", "1").stdout == (
        "step 0 → step 1\nform\n  typed 'Great mug' into input#title\n  checked input[name=agree]\n"
    )
