"""The documentation's example runner (tests/doc_examples.py) parses the convention and fails a broken page."""

from __future__ import annotations

from pathlib import Path

from tests.doc_examples import parse_blocks, run_page

PAGE = """# A page

Shown, not run:

```bash
false
```

<!-- not-run: needs a WebArena deployment -->
```console
$ false
```

```console
$ ls sessions | wc -l
15
$ test -d cdp_integration -a -z "${REPO:-}" \\
  && echo repo
repo
```

```console exit=2
$ cdp-session info sessions/missing.session.jsonl.gz
```

```python
import pathlib
assert len(list(pathlib.Path("sessions").glob("*.session.jsonl.gz"))) == 14
```
"""


def test_parse_blocks_reads_the_convention() -> None:
    blocks = parse_blocks(PAGE)
    assert [(block.language, block.not_run, block.expected_status) for block in blocks] == [
        ("console", "needs a WebArena deployment", 0),
        ("console", None, 0),
        ("console", None, 2),
        ("python", None, 0),
    ]
    assert blocks[1].commands() == [
        "ls sessions | wc -l",
        'test -d cdp_integration -a -z "${REPO:-}" \\\n  && echo repo',
    ]


def test_a_good_page_passes(tmp_path: Path) -> None:
    page = tmp_path / "good.md"
    page.write_text(PAGE)
    assert run_page(page) == []


def test_a_broken_example_fails(tmp_path: Path) -> None:
    page = tmp_path / "broken.md"
    page.write_text(
        "# Broken\n\n```console\n$ ls sessions\n$ cdp-session info sessions/10000.success.session.jsonl.gz --no-such-flag\n```\n"
    )
    [failure] = run_page(page)
    assert failure.line == 3
    assert "--no-such-flag" in failure.command
    assert failure.status == 2 and failure.expected == 0
    assert "No such option" in failure.output


def test_a_wrong_exit_status_fails(tmp_path: Path) -> None:
    page = tmp_path / "status.md"
    page.write_text("```console exit=2\n$ true\n```\n\n```python\nraise SystemExit(3)\n```\n")
    [failure] = run_page(page)
    assert (failure.status, failure.expected) == (0, 2)
    page.write_text("```python\nraise SystemExit(3)\n```\n")
    [failure] = run_page(page)
    assert (failure.status, failure.expected) == (3, 0)
