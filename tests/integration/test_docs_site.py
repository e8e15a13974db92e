"""The documentation site builds with ``mkdocs build --strict``: a broken link, a missing page in the nav or a
reference to code that no longer exists fails the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": str(REPO / ".venv" / "bin"), "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reference = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "cdp-session eval" in reference and "--site-url" in reference  # the lazy commands too
    assert "attach_to_cdp" in (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
