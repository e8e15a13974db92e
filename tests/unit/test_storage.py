"""Sessions and outputs at storage URLs, against a real S3-compatible endpoint: moto's server on loopback
(``tests/moto_s3.py``), reached by s3fs over HTTP.

Uploads are whole objects; reads are bounded local copies (the listed size and the bytes read both
checked), handed to the usual loaders; ``eval`` of ``s3://`` equals ``eval`` of the same files on disk,
output written back to S3 included; a resumed run's upload keeps earlier lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from cdp_integration import storage
from cdp_integration.errors import EnvironmentSetupError, SessionFormatError
from tests.hostile import CliRun, run_cli_limited
from tests.moto_s3 import MotoS3

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "sessions" / "v2"
CLI = Path(sys.executable).with_name("cdp-session")
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3]:
    with MotoS3() as server:
        saved = {key: os.environ.get(key) for key in server.environ()}
        os.environ.update(server.environ())
        try:
            yield server
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def test_paths_and_file_urls_are_local_other_urls_are_not(tmp_path: Path) -> None:
    assert storage.local_path("runs/a") == Path("runs/a")
    assert storage.local_path(f"file://{tmp_path}/x") == tmp_path / "x"
    assert storage.local_path("s3://bucket/x") is None
    assert storage.is_url("gs://b/x") and not storage.is_url("C:/x") and not storage.is_url("a/b")
    with pytest.raises(EnvironmentSetupError, match="file:///path"):
        storage.local_path("file://otherhost/x")
    with pytest.raises(EnvironmentSetupError, match=r"not a storage protocol"):
        storage.exists("nosuchscheme://b/x")


def test_upload_find_and_a_bounded_local_copy(s3: MotoS3, tmp_path: Path) -> None:
    source = tmp_path / "a.session.jsonl.gz"
    source.write_bytes(b"x" * 5000)
    storage.upload(source, s3.url("t1", "sessions", source.name))
    storage.upload(source, s3.url("t1", "sessions", "b.session.jsonl.gz.partial"))
    assert storage.find(s3.url("t1"), (".session.jsonl.gz",)) == ["sessions/a.session.jsonl.gz"]
    with storage.local_copy(s3.url("t1", "sessions", source.name)) as copy:
        assert copy.read_bytes() == source.read_bytes()
        held = copy
    assert not held.exists(), "the temp copy is removed afterwards"
    with (
        pytest.raises(SessionFormatError, match="over the 4096-byte limit"),
        storage.local_copy(s3.url("t1", "sessions", source.name), max_bytes=4096),
    ):
        pass
    with pytest.raises(SessionFormatError, match="no such object"):
        storage.download(s3.url("t1", "nothing"), tmp_path / "n")
    with pytest.raises(SessionFormatError, match="expected a positive integer"):
        os.environ["CDP_STORAGE_MAX_BYTES"] = "lots"
        try:
            storage.download(s3.url("t1", "sessions", source.name), tmp_path / "n")
        finally:
            del os.environ["CDP_STORAGE_MAX_BYTES"]


def test_a_listing_is_refused_while_it_is_read_once_it_passes_the_bound(
    s3: MotoS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every object and folder seen counts, matching or not: a store full of other objects is refused
    during the walk, before the rest of its listing is held."""
    source = tmp_path / "x.txt"
    source.write_bytes(b"x")
    local = tmp_path / "tree"
    for number in range(6):
        storage.upload(source, s3.url("t2", f"d{number % 2}", f"other{number}.txt"))
        (local / f"d{number % 2}").mkdir(parents=True, exist_ok=True)
        (local / f"d{number % 2}" / f"other{number}.txt").write_bytes(b"x")
    storage.upload(source, s3.url("t2", "d1", "deep", "one.session.jsonl.gz"))
    (local / "d1" / "deep").mkdir()
    (local / "d1" / "deep" / "one.session.jsonl.gz").write_bytes(b"x")
    for where in (s3.url("t2"), f"file://{local}"):
        assert storage.find(where, (".session.jsonl.gz",)) == ["d1/deep/one.session.jsonl.gz"]
        monkeypatch.setattr(storage, "MAX_LISTED", 5)
        with pytest.raises(SessionFormatError, match="more than 5 objects listed; refused"):
            storage.find(where, (".session.jsonl.gz",))
        monkeypatch.undo()


def test_a_local_upload_replaces_the_file_whole(tmp_path: Path) -> None:
    source = tmp_path / "new"
    source.write_text("new")
    target = tmp_path / "out" / "file"
    storage.upload(source, f"file://{target}")
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file"]


def test_a_run_output_at_a_url_is_staged_pulled_and_published(s3: MotoS3) -> None:
    from pool_runner import RunOutput

    first = RunOutput(s3.url("run1"))
    (first.dir / "sessions").mkdir()
    (first.dir / "sessions" / "t.session.jsonl.gz").write_bytes(b"s")
    (first.dir / "sessions" / "u.session.jsonl.gz.partial").write_bytes(b"p")
    line = {"instance_id": "t", "test_result": {"session": "sessions/t.session.jsonl.gz"}}
    (first.dir / "output.jsonl").write_text(json.dumps(line) + "\n")
    first.publish_line(line)
    (first.dir / "metadata.json").write_text("{}")
    first.finish()
    assert not first.dir.exists()
    assert storage.find(s3.url("run1"), (".gz", ".partial", ".json", ".jsonl")) == [
        "metadata.json",
        "output.jsonl",
        "sessions/t.session.jsonl.gz",
        "sessions/u.session.jsonl.gz.partial",
    ]
    again = RunOutput(s3.url("run1"))  # a resumed run starts from what is there
    assert json.loads((again.dir / "output.jsonl").read_text())["instance_id"] == "t"
    again.finish()


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "eval", *args, "--no-progress"], capture_output=True, text=True, timeout=900, check=False
    )


def _scores(text: str) -> list[tuple[str, str, object, object]]:
    lines = [json.loads(line) for line in text.splitlines()]
    return sorted(
        (
            line["instance_id"],
            line["metadata"]["session_path"].rsplit("/", 1)[-1],
            line["test_result"]["score"],
            line["test_result"]["live_reward"],
        )
        for line in lines
    )


def test_eval_from_s3_equals_eval_on_disk_and_writes_back_to_s3(s3: MotoS3, tmp_path: Path) -> None:
    for path in sorted(GOLDEN.glob("*.session.jsonl.gz")):
        storage.upload(path, s3.url("golden", "sessions", path.name))
    local = _eval(str(GOLDEN), "-o", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    remote = _eval(s3.url("golden"))
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout.strip().endswith(
        f"wrote {s3.url('golden', 'eval_output', 'output.jsonl')}, {s3.url('golden', 'eval_output', 'report.json')}, "
        f"{s3.url('golden', 'eval_output', 'report.md')}, {s3.url('golden', 'eval_output', 'report.html')}"
    )
    expected = _scores((tmp_path / "local" / "output.jsonl").read_text())
    assert len(expected) == len(list(GOLDEN.glob("*.session.jsonl.gz")))
    with storage.local_copy(s3.url("golden", "eval_output", "output.jsonl")) as copy:
        assert _scores(copy.read_text()) == expected
    again = _eval(s3.url("golden"))  # resumed: everything already scored, the lines kept
    assert again.returncode == 0 and again.stdout.startswith("scored 0 sessions")
    with storage.local_copy(s3.url("golden", "eval_output", "output.jsonl")) as copy:
        assert _scores(copy.read_text()) == expected


def test_eval_of_an_unreachable_endpoint_or_an_empty_prefix_is_one_line(s3: MotoS3) -> None:
    empty = _eval(s3.url("nothing-here"), "-o", "s3://runs/x")
    assert empty.returncode == 2
    (line,) = empty.stderr.strip().splitlines()
    assert "no session files" in line


def test_capture_to_a_storage_url_uploads_the_finished_session(s3: MotoS3) -> None:
    """``WEBARENA_CDP_SESSION_DIR=s3://...``: capture writes its crash-safe local file and uploads the
    session whole once saved."""
    program = f"""
import os
os.environ["WEBARENA_CDP_SESSION_DIR"] = {s3.url("capture")!r}
from cdp_integration.capture.logger import CDPSessionLogger
saved = CDPSessionLogger(instance_id="done")
saved.save_session()
print(saved.saved_path)
"""
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr
    assert storage.find(s3.url("capture"), (".gz", ".partial")) == ["done.session.jsonl.gz"]
    from cdp_integration.session.store import load_session

    with storage.local_copy(s3.url("capture", "done.session.jsonl.gz")) as copy:
        assert load_session(copy).end is not None
    staged = Path(run.stdout.split()[0]).parent
    assert not staged.exists(), "the staging directory is removed at exit"


# -- hostile stores ---------------------------------------------------------------------------------


class _Redirecting(BaseHTTPRequestHandler):
    """Answers every request with a 302 to ``target`` (another host: 127.0.0.2)."""

    target = ""

    def _redirect(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_PUT = _redirect

    def log_message(self, *args: object) -> None:
        pass


class _Elsewhere(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def _answer(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_HEAD = _answer

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _serving(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _store_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "the-secret-key-never-printed",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CDP_STORAGE_CONNECT_TIMEOUT": "0.5",
        "CDP_STORAGE_READ_TIMEOUT": "0.5",
        "CDP_STORAGE_RETRIES": "1",
    }


def _one_line(run: CliRun) -> str:
    assert not run.timed_out, f"still running after {run.seconds:.0f} s"
    assert run.returncode == 2, run.stderr[-3000:]
    (line,) = run.stderr.splitlines()
    assert line.startswith("cdp-session: error: ") and "Traceback" not in run.stderr
    assert "the-secret-key-never-printed" not in run.stderr + run.stdout
    return line


def test_a_redirect_from_the_store_is_never_followed_to_another_host(tmp_path: Path) -> None:
    elsewhere = ThreadingHTTPServer(("127.0.0.2", 0), _Elsewhere)
    _Elsewhere.hits = []
    with _serving(elsewhere):
        _Redirecting.target = f"http://127.0.0.2:{elsewhere.server_port}"
        with _serving(ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)) as store:
            env = _store_env(f"http://127.0.0.1:{store.server_port}")
            for args in (
                ["eval", "s3://runs/sessions", "-o", str(tmp_path / "out")],
                ["eval", str(GOLDEN), "-o", "s3://runs/out"],
            ):
                line = _one_line(run_cli_limited(*args, "--no-progress", env=env, timeout=60))
                assert "redirect not followed" in line, line
    assert _Elsewhere.hits == [], "a request reached the host the store redirected to"


def test_a_store_that_accepts_and_never_answers_times_out_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # connections are accepted by the kernel; nothing is ever read or answered
        env = _store_env(f"http://127.0.0.1:{silent.getsockname()[1]}")
        run = run_cli_limited("eval", "s3://runs/sessions", "-o", str(tmp_path / "o"), env=env, timeout=60)
        assert "timeout" in _one_line(run).lower()
        assert run.seconds < 30, f"{run.seconds:.1f} s: the read timeout (0.5 s, two attempts) was not kept"


@pytest.mark.parametrize(
    "url",
    [
        "data://c2VjcmV0",
        "reference://x",
        "dir://x",
        "generic://x",
        "zip://a.session.jsonl.gz::s3://runs/a.zip",
        "s3://runs/x::tar://y",
        "http://127.0.0.1:1/sessions",
        "memory://x",
    ],
)
def test_protocols_outside_the_allow_list_are_one_line(url: str, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentSetupError, match=r"not a storage protocol|chained URLs"):
        storage.local_path(url)
    with pytest.raises(EnvironmentSetupError, match=r"not a storage protocol|chained URLs"):
        storage.find(url, (".gz",))


def test_credentials_in_a_storage_url_are_never_printed(tmp_path: Path) -> None:
    env = _store_env("http://127.0.0.1:1")
    run = run_cli_limited(
        "eval",
        "s3://AKID:the-secret-key-never-printed@runs/s",
        "-o",
        str(tmp_path / "o"),
        env=env,
        timeout=60,
    )
    assert "***" in _one_line(run)
    with pytest.raises(EnvironmentSetupError) as caught:
        storage.local_path("gopher://user:the-secret-key-never-printed@h/x")
    assert "the-secret-key-never-printed" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CDP_STORAGE_READ_TIMEOUT", "soon"),
        ("CDP_STORAGE_CONNECT_TIMEOUT", "nan"),
        ("CDP_STORAGE_RETRIES", "-1"),
    ],
)
def test_a_bad_timeout_setting_is_one_line(name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(EnvironmentSetupError, match=name):
        storage.exists("s3://runs/x")
