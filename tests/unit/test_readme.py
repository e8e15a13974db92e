"""README.md stays a short front page: under 1,200 words, no dates, commit hashes or issue numbers."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
MAX_WORDS = 1200


def test_readme_is_short() -> None:
    words = len(README.read_text(encoding="utf-8").split())
    assert words < MAX_WORDS, f"README.md has {words} words (limit {MAX_WORDS}): move detail into docs/"


def test_readme_has_no_history() -> None:
    text = README.read_text(encoding="utf-8")
    found = {
        "date": re.findall(
            r"\b20\d\d-\d\d-\d\d\b|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\w* 20\d\d\b",
            text,
        ),
        "commit hash": re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", text),
        "issue number": re.findall(r"(?i)\bissues? #?\d+|#\d{1,4}\b", text),
    }
    assert not any(found.values()), f"README.md holds history (move it to docs/changelog.md): {found}"
