"""The runner of the documentation's examples: every ``console`` and ``python`` block of a page runs.

The convention (README.md and docs/**/*.md):

- a fenced block with info string ``console`` is an example: each line starting with ``$ `` is a shell
  command (a line ending in ``\\`` continues on the next line); the other lines are shown output and are
  not checked;
- a fenced ``python`` block is a program, run with the repository's Python;
- a block whose fence line is preceded by ``<!-- not-run: REASON -->`` is not run (only for what truly
  needs a deployment, a model or a cluster, or a run that another page's example or a named test plays:
  the reason names it);
- every command must exit 0 (for a pipeline, its last command, as in a shell), unless the fence line
  says ``console exit=N``: then every command of that block must exit N.

The blocks of one page run in order, as a user runs them at the root of a clone after ``make demo`` with
the environment activated: in one fresh scratch directory that mirrors the repository's root (links to
its tracked top-level entries, ``.venv``, ``.venv-v1`` and ``.cache``), holding ``sessions/`` (copies of
the golden demo sessions), with the repository's ``.venv/bin`` first on ``PATH`` (what
``source .venv/bin/activate`` does). No other variable is set for them. Run it by hand with
``python -m tests.doc_examples PAGE...``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN_SESSIONS = REPO / "tests" / "fixtures" / "sessions" / "v2"
COMMAND_TIMEOUT_S = 600
"""One command's limit: generous, since `cdp-session demo` examples play real episodes on a loaded machine."""

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.+?)\s*-->\s*$")
_EXIT = re.compile(r"\bexit=(?P<status>\d+)\b")


@dataclass(frozen=True)
class Block:
    """One fenced example: its language, body, the page line of its fence, and how it is run."""

    language: str
    body: str
    line: int
    expected_status: int = 0
    not_run: str | None = None

    def commands(self) -> list[str]:
        """The ``$ `` lines of a console block, continuation lines joined."""
        commands: list[str] = []
        pending: list[str] | None = None
        for raw in self.body.splitlines():
            if pending is not None:
                pending.append(raw)
                if not raw.endswith("\\"):
                    commands.append("\n".join(pending))
                    pending = None
                continue
            if raw.startswith("$ "):
                text = raw[2:]
                if text.endswith("\\"):
                    pending = [text]
                else:
                    commands.append(text)
        if pending is not None:
            commands.append("\n".join(pending))
        return commands


@dataclass(frozen=True)
class Failure:
    """An example that did not do what the page says: where, what ran, and what it printed."""

    page: Path
    line: int
    command: str
    status: int | None
    expected: int
    output: str

    def __str__(self) -> str:
        got = "timed out" if self.status is None else f"exit {self.status}"
        return (
            f"{self.page}:{self.line}: {got}, expected exit {self.expected}\n"
            f"  $ {self.command}\n" + "".join(f"  | {line}\n" for line in self.output.splitlines()[-40:])
        )


def parse_blocks(text: str) -> list[Block]:
    """The ``console`` and ``python`` blocks of a Markdown page, in order (other fences are skipped)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, info = match["fence"], match["info"].strip()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if (
                closing
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[index][len(match["indent"]) :] if match["indent"] else lines[index])
            index += 1
        index += 1
        words = info.split()
        language = words[0].lower() if words else ""
        if language not in ("console", "python"):
            continue
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        reason = _NOT_RUN.match(previous)
        status = _EXIT.search(info)
        blocks.append(
            Block(
                language=language,
                body="\n".join(body),
                line=start + 1,
                expected_status=int(status["status"]) if status else 0,
                not_run=reason["reason"] if reason else None,
            )
        )
    return blocks


MIRRORED_SET_UP = (".venv", ".venv-v1", ".cache", ".tools")
"""What ``make demo`` / ``make test`` leave at the root of a clone, beside the tracked files."""


def prepare_scratch(directory: Path) -> None:
    """What every page's examples start from: the clone's root (links), ``sessions/`` with copies of the
    golden demo sessions."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    top = {name.split("/", 1)[0] for name in listed.decode().split("\0") if name}
    for name in sorted(top | set(MIRRORED_SET_UP)):
        source, link = REPO / name, directory / name
        if source.exists() and not link.exists() and name != "sessions":
            link.symlink_to(source)
    sessions = directory / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    for path in sorted(GOLDEN_SESSIONS.glob("*.session.jsonl.gz")):
        shutil.copyfile(path, sessions / path.name)


def environment(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("REPO", None)
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(scratch / ".home")
    env.pop("VIRTUAL_ENV", None)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "100"
    return env


def _run(argv: list[str], scratch: Path, env: dict[str, str], timeout_s: float) -> tuple[int | None, str]:
    try:
        done = subprocess.run(
            argv,
            cwd=scratch,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as expired:
        output = expired.output or ""
        return None, output if isinstance(output, str) else output.decode(errors="replace")
    return done.returncode, done.stdout


def run_page(page: Path, *, timeout_s: float = COMMAND_TIMEOUT_S, keep: Path | None = None) -> list[Failure]:
    """Run every example of ``page`` in order in one scratch directory; the first failure stops the page.

    Returns the failures (empty when every example did what the page says). ``keep`` names the scratch
    directory to use instead of a temporary one (it is then left in place).
    """
    blocks = parse_blocks(page.read_text(encoding="utf-8"))
    scratch = keep if keep is not None else Path(tempfile.mkdtemp(prefix="cdp-doc-"))
    try:
        prepare_scratch(scratch)
        (scratch / ".home").mkdir(exist_ok=True)
        env = environment(scratch)
        for number, block in enumerate(blocks):
            if block.not_run is not None:
                continue
            if block.language == "python":
                program = scratch / f".example-{number}.py"
                program.write_text(block.body + "\n", encoding="utf-8")
                status, output = _run(
                    [str(REPO / ".venv" / "bin" / "python"), program.name], scratch, env, timeout_s
                )
                if status != block.expected_status:
                    return [
                        Failure(
                            page,
                            block.line,
                            "python (the block's program)",
                            status,
                            block.expected_status,
                            output,
                        )
                    ]
                continue
            for command in block.commands():
                status, output = _run(["bash", "-c", command], scratch, env, timeout_s)
                if status != block.expected_status:
                    return [Failure(page, block.line, command, status, block.expected_status, output)]
        return []
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def documented_pages(root: Path = REPO) -> list[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def main(argv: list[str]) -> int:
    pages = [Path(arg) for arg in argv] or documented_pages()
    failed = False
    for page in pages:
        for failure in run_page(page):
            failed = True
            print(failure, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
