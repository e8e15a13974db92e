"""Hostile recordings given to ``cdp-session import``: one line on stderr, exit 2, < 1 GB, < 30 s.

Each case runs the real CLI in a fresh process under an address-space limit (``tests/hostile.py``'s
runner), its peak RSS taken from the kernel (``wait4``).
The traces are built here with Python's ``zipfile`` in Playwright's layout, since the point is
input Playwright never writes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

from tests.hostile import run_cli_limited, wall_bound

GB = 1024**3
MAX_RSS = 1 * GB


def run_import(tmp_path: Path, *args: str) -> tuple[int, str, int, float]:
    """``cdp-session import ARGS -o OUT`` limited: (exit code, stderr, peak RSS bytes, seconds)."""
    run = run_cli_limited("import", *args, "-o", str(tmp_path / "out"), cwd=tmp_path)
    peak = run.peak_rss if run.peak_rss >= 0 else MAX_RSS  # not reported: killed, counts as too much
    return run.returncode, run.stderr, peak, run.seconds


def assert_refused(result: tuple[int, str, int, float], *needles: str) -> None:
    code, stderr, peak, seconds = result
    lines = stderr.strip().splitlines()
    assert code == 2, stderr[-2000:]
    assert len(lines) == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    assert peak < MAX_RSS, f"peak RSS {peak / 1024**2:.0f} MB"
    assert seconds < wall_bound(), f"{seconds:.1f} s"
    for needle in needles:
        assert needle in lines[0], lines[0]


def _trace_zip(path: Path, events: list[dict[str, object]], extra: dict[str, bytes] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("trace.trace", "\n".join(json.dumps(e) for e in events) + "\n")
        archive.writestr("trace.network", "")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


def _snapshot(html: object, call: str = "c1") -> dict[str, object]:
    return {
        "type": "frame-snapshot",
        "snapshot": {
            "callId": call,
            "phase": "after",
            "pageId": "page@1",
            "frameId": "frame@1",
            "frameUrl": "http://shop.test/",
            "isMainFrame": True,
            "html": html,
            "timestamp": 1.0,
            "wallTime": 1.0,
            "resourceOverrides": [],
        },
    }


_HEAD = [
    {
        "type": "context-options",
        "version": 10,
        "wallTime": 1000,
        "monotonicTime": 0,
        "playwrightVersion": "1.65.1",
    },
    {"type": "event", "class": "BrowserContext", "method": "page", "params": {"pageId": "page@1"}},
    {
        "type": "before",
        "callId": "c1",
        "class": "Frame",
        "method": "goto",
        "params": {"url": "http://shop.test/"},
    },
]


def test_a_snapshot_reference_to_its_own_snapshot_is_refused(tmp_path: Path) -> None:
    trace = _trace_zip(tmp_path / "1.zip", [*_HEAD, _snapshot(["HTML", {}, ["BODY", {}, [[0, 0]]]])])
    assert_refused(run_import(tmp_path, "playwright-trace", str(trace)), "own snapshot", "refused")


def test_a_forward_snapshot_reference_is_refused(tmp_path: Path) -> None:
    events = [*_HEAD, _snapshot(["HTML", {}, ["BODY", {}, "a"]]), _snapshot(["HTML", {}, [[-1, 0]]])]
    assert_refused(
        run_import(tmp_path, "playwright-trace", str(_trace_zip(tmp_path / "1.zip", events))), "later"
    )


def test_a_reference_before_the_first_snapshot_is_refused(tmp_path: Path) -> None:
    events = [*_HEAD, _snapshot(["HTML", {}, [[3, 0]]])]
    assert_refused(
        run_import(tmp_path, "playwright-trace", str(_trace_zip(tmp_path / "1.zip", events))), "first"
    )


def test_exponentially_shared_subtrees_are_refused(tmp_path: Path) -> None:
    """Each snapshot's body holds its previous snapshot's body twice: 2**60 nodes when expanded."""
    events = [*_HEAD, _snapshot(["HTML", {}, ["BODY", {}, "x"]])]
    for _ in range(60):  # node 1 of the previous snapshot (its BODY, or HTML) holds two references back
        events.append(_snapshot(["HTML", {}, ["BODY", {}, [[1, 1]], [[1, 1]]]]))
    assert_refused(
        run_import(tmp_path, "playwright-trace", str(_trace_zip(tmp_path / "1.zip", events))),
        "expands to more than",
    )


def test_zip_slip_member_names_are_refused(tmp_path: Path) -> None:
    trace = _trace_zip(tmp_path / "1.zip", [*_HEAD, _snapshot(["HTML"])], {"../../escaped.txt": b"x"})
    assert_refused(run_import(tmp_path, "playwright-trace", str(trace)), "zip-slip")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()


def test_a_zip_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "1.zip"
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open("trace.trace", "w", force_zip64=True) as member,
    ):
        chunk = b" " * (16 * 1024**2)
        for _ in range(32):  # 512 MiB of spaces, < 1 MB compressed
            member.write(chunk)
    assert path.stat().st_size < 8 * 1024**2
    assert_refused(run_import(tmp_path, "playwright-trace", str(path)), "refused")


def test_a_member_lying_about_its_size_is_read_no_further(tmp_path: Path) -> None:
    """The central directory says 100 bytes; the stream inflates to 64 MB: reading stops at the bound."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("trace.trace", b"[" * (64 * 1024**2))
    data = bytearray(buffer.getvalue())
    size = (64 * 1024**2).to_bytes(4, "little")
    small = (100).to_bytes(4, "little")
    data = data.replace(size, small)  # local header and central directory
    (tmp_path / "1.zip").write_bytes(bytes(data))
    assert_refused(run_import(tmp_path, "playwright-trace", str(tmp_path / "1.zip")))


def test_not_a_zip_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "1.zip").write_bytes(b"PK\x03\x04 not really")
    assert_refused(run_import(tmp_path, "playwright-trace", str(tmp_path / "1.zip")), "not a zip")


class _Payload:
    """Pickles to ``os.system(...)``: what a hostile ``step_N.pkl.gz`` does under the standard loader."""

    def __init__(self, marker: Path) -> None:
        self.command = f"touch {marker}"

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (self.command,)


@pytest.mark.parametrize("where", ["step", "summary"])
def test_code_in_a_pickle_never_runs(tmp_path: Path, where: str) -> None:
    marker = tmp_path / "ran"
    experiment = tmp_path / "exp"
    experiment.mkdir()
    (experiment / "summary_info.json").write_text(json.dumps({"n_steps": 1, "cum_reward": 0.0}))
    payload = {"step": 0, "obs": {"url": "http://shop.test/", "evil": _Payload(marker)}}
    with gzip.open(experiment / "step_0.pkl.gz", "wb") as file:
        pickle.dump(payload if where == "step" else _Payload(marker), file)
    assert_refused(run_import(tmp_path, "agentlab", str(experiment)), "posix.system", "refuse")
    assert not marker.exists()
    # the same file under the standard loader does run it: the test can tell
    with gzip.open(experiment / "step_0.pkl.gz", "rb") as file:
        pickle.load(file)
    assert marker.exists()


def test_a_post_body_resource_over_the_body_bound_is_refused(tmp_path: Path) -> None:
    """Playwright keeps a request's body in ``resources/`` (``postData._file``): one larger than the
    body bound (17 MiB of random bytes, so no zip-bomb ratio refuses it first) is refused at the bound."""
    from cdp_integration.imports.playwright_trace import MAX_BODY_BYTES

    entry = {
        "_monotonicTime": 2.0,
        "pageref": "page@1",
        "_resourceType": "document",
        "request": {
            "method": "POST",
            "url": "http://shop.test/login",
            "headers": [{"name": "Accept", "value": "text/html"}],
            "postData": {"mimeType": "text/plain", "text": "", "_file": "resources/big.dat"},
        },
        "response": {"status": 302, "headers": [], "content": {"mimeType": "text/html"}},
    }
    path = tmp_path / "1.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(
            "trace.trace", "\n".join(json.dumps(e) for e in [*_HEAD, _snapshot(["HTML"])]) + "\n"
        )
        archive.writestr("trace.network", json.dumps({"type": "resource-snapshot", "snapshot": entry}) + "\n")
        archive.writestr("resources/big.dat", os.urandom(MAX_BODY_BYTES + 1024**2))
    assert_refused(
        run_import(tmp_path, "playwright-trace", str(path)),
        "resources/big.dat",
        f"more than {MAX_BODY_BYTES}",
    )
