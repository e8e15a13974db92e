"""Golden session files: episodes recorded live once, versioned, scored offline by every test run.

``tests/fixtures/sessions/v<N>/`` holds demo episodes written in session format ``N``
(``scripts/make_fixtures.py``) and the live rewards BrowserGym reported for them. Every directory
stays when the format moves on, so these tests prove that files of each format ever released still
load and score as they did live — whatever the current ``FORMAT_VERSION`` is.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import load_session

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions"
GOLDEN = sorted(FIXTURES.glob("v*/*.session.jsonl.gz"))


def _expected(path: Path) -> dict[str, object]:
    expected: dict[str, dict[str, object]] = json.loads((path.parent / "expected.json").read_text())
    return expected[path.name]


def _written_version(path: Path) -> int:
    with gzip.open(path, "rb") as stream:
        header = orjson.loads(stream.readline())
    assert header["type"] == "header"
    return int(header["format_version"])


def test_every_format_directory_holds_golden_sessions() -> None:
    versions = sorted({path.parent.name for path in GOLDEN})
    assert "v1" in versions, "the first format's golden files must stay"
    for version in versions:
        names = {path.name for path in GOLDEN if path.parent.name == version}
        listed = set(json.loads((FIXTURES / version / "expected.json").read_text()))
        assert names == listed and len(names) >= 10, version


@pytest.mark.parametrize(
    "path", GOLDEN, ids=lambda path: f"{path.parent.name}/{path.name.split('.session')[0]}"
)
def test_golden_session_loads_and_scores_as_it_did_live(path: Path, no_sockets: list[object]) -> None:
    assert _written_version(path) == int(path.parent.name.removeprefix("v"))
    expected = _expected(path)
    session = load_session(path)
    assert session.complete and session.task["task_id"] == expected["task_id"]
    score = evaluate_session(session)
    assert (score.score, score.max_score) == (expected["live"], expected["live_max"])
    assert score.live_reward == expected["live"]
    assert all(step.source == "recorded" for step in score.steps)
    assert no_sockets == []
