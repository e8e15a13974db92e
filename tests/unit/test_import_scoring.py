"""Scores of imported sessions that cannot be given keep their provenance, and WebArena-Verified
refuses an import that lacks what it scores (a loud ``ReplayMissError``, never a made-up input).

The history here is hand-written in browser-use's ``AgentHistoryList`` layout: the point is the
scoring's error path, not the reader (the import tests use real browser-use runs)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cdp_integration.cli import cli

SHOP = "http://shop.test"


def _history(path: Path) -> None:
    item = {
        "model_output": {"action": [{"done": {"text": "Added.", "success": True}}]},
        "result": [{"is_done": True, "extracted_content": "Added."}],
        "state": {"url": f"{SHOP}/cart", "title": "Cart", "tabs": []},
        "metadata": {"step_start_time": 1000.0},
    }
    path.write_text(json.dumps({"history": [item]}))


def _config(task_id: int) -> dict[str, object]:
    return {
        "task_id": task_id,
        "sites": ["shopping"],
        "intent": "Add the speaker to my cart.",
        "eval": {
            "eval_types": ["program_html"],
            "reference_answers": None,
            "reference_url": "",
            "program_html": [
                {"url": f"{SHOP}/cart", "locator": "", "required_contents": {"must_include": ["Speaker"]}}
            ],
        },
    }


def _lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines()]


def test_a_miss_on_an_imported_session_keeps_its_provenance(tmp_path: Path) -> None:
    (tmp_path / "histories").mkdir()
    _history(tmp_path / "histories" / "7.json")
    (tmp_path / "configs.json").write_text(json.dumps([_config(7)]))
    args = [
        "eval",
        str(tmp_path / "histories"),
        "--import",
        "browser-use",
        "--configs",
        str(tmp_path / "configs.json"),
    ]
    result = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "webarena")])
    assert result.exit_code == 1, result.output  # the session could not be scored
    (line,) = _lines(tmp_path / "webarena")
    outcome = line["test_result"]
    assert isinstance(outcome, dict)
    assert (outcome["error_type"], outcome["provenance"]) == ("ReplayMissError", "imported:browser-use")
    error = str(outcome["error"])  # the history holds the cart's URL, not its page: said so, not listed
    assert "the recording holds its URL, not its content" in error, error
    assert f"captured pages: {SHOP}/cart" not in error, error

    result = CliRunner().invoke(cli, [*args, "--scorer", "verified", "-o", str(tmp_path / "verified")])
    assert result.exit_code == 1, result.output
    (line,) = _lines(tmp_path / "verified")
    outcome = line["test_result"]
    assert isinstance(outcome, dict)
    assert (outcome["error_type"], outcome["provenance"]) == ("ReplayMissError", "imported:browser-use")
    assert "network log" in str(outcome["error"]) and "no HAR" in str(outcome["error"])
