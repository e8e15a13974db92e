"""Run the real ``cdp-session`` CLI on a crafted input the way a user would, and measure what it costs.

Shared by the hostile-input tests (``tests/unit/test_hostile_corpus.py``,
``tests/integration/test_hostile_sandbox.py``). Each run is a fresh Python process under an
address-space limit (``RLIMIT_AS``), in its own empty working directory with its own empty
``TMPDIR``; its peak RSS comes from the kernel (``wait4``'s rusage of that child, taken by a small
launcher process), its wall time
from the parent's clock. ``assert_refused`` states the acceptance of issue 20: exit 2, exactly one
line on stderr, no traceback, peak RSS < 1 GB, < 30 s, nothing written but the asked output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ADDRESS_SPACE_LIMIT",
    "MAX_RSS",
    "MAX_SECONDS",
    "CliRun",
    "assert_refused",
    "run_cli_limited",
    "wall_bound",
]

GB = 1024**3
ADDRESS_SPACE_LIMIT = 4 * GB
"""``RLIMIT_AS`` of the child: above what the CLI maps at start-up (Python + its imports, ~1.5 GB
of virtual space), below what the amplification cases would reach unbounded."""
MAX_RSS = 1 * GB
MAX_SECONDS = 30.0
"""Issue 20's bound per CLI run, on an idle machine (see ``wall_bound``)."""
REPO = Path(__file__).parents[1]
MAX_STRETCH = 4.0


def wall_bound(seconds: float = MAX_SECONDS) -> float:
    """``seconds`` (a wall-time bound measured on an idle machine) stretched by how much busier the
    machine is than one runnable process per CPU now (1-minute load average), at most ``MAX_STRETCH``
    times: at load 27 on 2 CPUs a run of three sandbox questions took 44 s instead of ~15. A run that
    hangs still fails, and the caller's timeout stops it."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * min(MAX_STRETCH, max(1.0, load))


_CHILD = (
    "import sys\nfrom cdp_integration.cli import main\nsys.argv = ['cdp-session', *sys.argv[1:]]\nmain()\n"
)
_LAUNCHER = """
import os, resource, sys
rss_file, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(rss_file, "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256 if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""
"""Runs the CLI as its child and reports its peak RSS. Why a launcher: Linux records the RSS of the
memory a process replaced at ``exec`` in its ``ru_maxrss``, so a CLI forked straight from the test
process would report the test process's own size (hundreds of MB after building a corpus)."""


@dataclass(frozen=True)
class CliRun:
    """What one limited CLI run did."""

    args: tuple[str, ...]
    returncode: int
    """Negative: killed by that signal (e.g. -9 at the time-out, -11 on a segfault)."""
    stdout: str
    stderr: str
    peak_rss: int
    """Bytes, the CLI process's high-water mark as the kernel reports it at exit (its Chromium, if
    it starts one, is not included); -1 if the run was killed before it was reported."""
    seconds: float
    written: tuple[str, ...]
    """Files the run created in its working and temporary directories (paths relative to those)."""
    timed_out: bool = False


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if not path.is_dir()}


def run_cli_limited(
    *args: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    address_space: int = ADDRESS_SPACE_LIMIT,
    timeout: float = 5 * MAX_SECONDS,
    cwd: Path | None = None,
    program: Path | None = None,
) -> CliRun:
    """``cdp-session ARGS`` in a fresh process under ``RLIMIT_AS = address_space``.

    ``program``: a Python script to run instead (``run_infer.py``), with the same limits.
    The child runs in ``cwd`` (default: a new empty directory) with ``TMPDIR`` set to a new empty
    directory; both are listed afterwards (``written``) and removed. A child still running after
    ``timeout`` seconds is killed with its process group (``timed_out``).
    """
    with tempfile.TemporaryDirectory(prefix="hostile-") as scratch:
        root = Path(scratch)
        work = cwd or root / "cwd"
        tmp = root / "tmp"
        work.mkdir(exist_ok=True)
        tmp.mkdir()
        before = _files(work)
        stdout_path, stderr_path = root / "stdout", root / "stderr"
        child_env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO), **(env or {})}
        child_env.pop("PYTHONWARNINGS", None)
        started = time.monotonic()
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            rss_file = root / "rss"
            command = (
                [sys.executable, "-c", _CHILD, *map(str, args)]
                if program is None
                else [sys.executable, str(program), *map(str, args)]
            )
            process = subprocess.Popen(
                [sys.executable, "-c", _LAUNCHER, str(rss_file), str(address_space), *command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=child_env,
                cwd=work,
                start_new_session=True,
            )
            timed_out = False
            try:
                returncode = process.wait(timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                returncode = process.wait()
        seconds = time.monotonic() - started
        peak = int(rss_file.read_text()) * 1024 if rss_file.exists() else -1
        written = (_files(work) - before) | {f"$TMPDIR/{name}" for name in _files(tmp)}
        return CliRun(
            args=tuple(map(str, args)),
            returncode=128 - returncode if returncode > 128 else returncode,
            stdout=stdout_path.read_text(errors="replace"),
            stderr=stderr_path.read_text(errors="replace"),
            peak_rss=peak,
            seconds=seconds,
            written=tuple(sorted(written)),
            timed_out=timed_out,
        )


def assert_refused(run: CliRun, *, contains: str = "", allowed: tuple[str, ...] = ()) -> None:
    """Issue 20's acceptance for one crafted input: a one-line error, exit 2, bounded cost.

    ``allowed``: files the run may have written (the output it was asked for, relative to its
    working directory); ``contains``: text the error line must include (e.g. the limit's variable).
    """
    where = f"cdp-session {' '.join(run.args)}"
    assert not run.timed_out, f"{where}: still running after {run.seconds:.0f} s"
    assert run.returncode == 2, f"{where}: exit {run.returncode}\n{run.stderr[-3000:]}"
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cdp-session: error: "), f"{where}:\n{run.stderr[-3000:]}"
    assert "\x1b" not in run.stderr and "\x07" not in run.stderr, f"{where}: {run.stderr!r}"
    assert contains in lines[0], f"{where}: {lines[0]}"
    assert run.peak_rss < MAX_RSS, f"{where}: peak RSS {run.peak_rss / 2**20:.0f} MiB"
    assert run.seconds < wall_bound(), f"{where}: {run.seconds:.1f} s"
    extra = [name for name in run.written if name not in allowed]
    assert not extra, f"{where}: wrote {extra}"
