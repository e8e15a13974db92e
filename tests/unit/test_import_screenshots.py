"""Screenshots of AgentLab folders and browser-use histories become the imported step's screenshot.

Only files inside the recording's folder are read: no absolute path, no ``..``, no symlink anywhere
below the folder, no FIFO, nothing larger than the bound, nothing that is not a PNG.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import pickle
import struct
import zlib
from pathlib import Path

import pytest

from cdp_integration.imports.agentlab import import_agentlab_experiment
from cdp_integration.imports.browser_use import import_history
from cdp_integration.imports.common import read_screenshot


def _png(shade: int) -> bytes:
    """A real 1x1 PNG of one grey ``shade``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(bytes([0, shade]))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_a_png_inside_the_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "a.png").write_bytes(_png(7))
    assert read_screenshot(tmp_path, "shots/a.png") == _b64(_png(7))


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../outside.png", "shots/../../outside.png", "."])
def test_names_that_leave_the_folder_are_not_read(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (tmp_path / "outside.png").write_bytes(_png(1))
    assert read_screenshot(folder, name) is None


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    (folder / "real").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.png").write_bytes(_png(2))
    (folder / "real" / "a.png").write_bytes(_png(3))
    (folder / "link.png").symlink_to(outside / "a.png")
    (folder / "linked_dir").symlink_to(outside)
    (folder / "inner_link.png").symlink_to(folder / "real" / "a.png")
    assert read_screenshot(folder, "link.png") is None
    assert read_screenshot(folder, "linked_dir/a.png") is None
    assert read_screenshot(folder, "inner_link.png") is None
    assert read_screenshot(folder, "real/a.png") == _b64(_png(3))


def test_fifos_large_files_and_non_pngs_are_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.png")
    (tmp_path / "big.png").write_bytes(_png(4) + b"\0" * 2048)
    (tmp_path / "text.png").write_text("not an image")
    (tmp_path / "dir.png").mkdir()
    assert read_screenshot(tmp_path, "fifo.png") is None  # returns at once: never blocks on the FIFO
    assert read_screenshot(tmp_path, "big.png", max_bytes=1024) is None
    assert read_screenshot(tmp_path, "big.png") is not None
    assert read_screenshot(tmp_path, "text.png") is None
    assert read_screenshot(tmp_path, "dir.png") is None
    assert read_screenshot(tmp_path, "missing.png") is None


def _agentlab_step(folder: Path, number: int, url: str, action: str | None) -> None:
    obs = {"url": url, "open_pages_urls": [url], "open_pages_titles": ["Shop"], "active_page_index": [0]}
    with gzip.open(folder / f"step_{number}.pkl.gz", "wb") as file:
        pickle.dump({"step": number, "obs": obs, "action": action, "reward": 0.0}, file)


def test_agentlab_screenshots_become_the_steps_screenshots(tmp_path: Path) -> None:
    experiment = tmp_path / "exp"
    experiment.mkdir()
    (experiment / "summary_info.json").write_text(json.dumps({"n_steps": 2, "cum_reward": 0.0}))
    _agentlab_step(experiment, 0, "http://shop.test/", "click('a1')")
    _agentlab_step(experiment, 1, "http://shop.test/cart", None)
    (experiment / "screenshot_step_0.png").write_bytes(_png(10))
    (tmp_path / "elsewhere.png").write_bytes(_png(11))
    (experiment / "screenshot_step_1.png").symlink_to(tmp_path / "elsewhere.png")
    episode = import_agentlab_experiment(experiment)
    shots = [[tab.screenshot_png for tab in step.tabs if tab.active] for step in episode.steps]
    assert shots == [[_b64(_png(10))], [None]]


def _history_item(
    url: str, screenshot_path: str | None, actions: list[dict[str, object]]
) -> dict[str, object]:
    """One item of browser-use 0.13's ``AgentHistoryList.save_to_file`` output."""
    return {
        "model_output": {"evaluation_previous_goal": "", "memory": "", "next_goal": "", "action": actions},
        "result": [
            {"is_done": False, "success": None, "extracted_content": None, "include_in_memory": False}
        ],
        "state": {
            "tabs": [{"url": url, "title": "Shop", "target_id": "T1", "parent_target_id": None}],
            "screenshot_path": screenshot_path,
            "interacted_element": [None],
            "url": url,
            "title": "Shop",
        },
        "metadata": {"step_start_time": 1.0, "step_end_time": 2.0, "step_number": 1},
        "state_message": None,
    }


def test_browser_use_screenshots_are_read_from_the_historys_folder_only(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent" / "screenshots"  # where browser-use wrote them: outside the folder
    agent_dir.mkdir(parents=True)
    (agent_dir / "step_1.png").write_bytes(_png(20))
    (agent_dir / "step_2.png").write_bytes(_png(21))
    folder = tmp_path / "run"
    (folder / "screenshots").mkdir(parents=True)
    (folder / "screenshots" / "step_1.png").write_bytes(_png(30))  # the copy beside the history
    (folder / "inside.png").write_bytes(_png(31))
    items = [
        _history_item("http://shop.test/", str(agent_dir / "step_1.png"), [{"navigate": {"url": "/"}}]),
        _history_item("http://shop.test/a", str(agent_dir / "step_2.png"), [{"click": {"index": 3}}]),
        _history_item("http://shop.test/b", str(folder / "inside.png"), [{"done": {"text": "ok"}}]),
        _history_item("http://shop.test/c", "../agent/screenshots/step_1.png", [{"done": {"text": "ok"}}]),
    ]
    history = folder / "10000.json"
    history.write_text(json.dumps({"history": items}))
    episode = import_history(history)
    shots = [next(tab.screenshot_png for tab in step.tabs if tab.active) for step in episode.steps]
    assert shots == [_b64(_png(30)), None, _b64(_png(31)), None]


@pytest.mark.parametrize("keep", [False, True])
def test_the_viewer_shows_imported_screenshots_kept_through_redaction(tmp_path: Path, keep: bool) -> None:
    """Redaction drops screenshots (pixels cannot be redacted) unless ``--keep-screenshots``."""
    from click.testing import CliRunner

    from cdp_integration.cli import cli

    experiment = tmp_path / "exp"
    experiment.mkdir()
    _agentlab_step(experiment, 0, "http://shop.test/", None)
    (experiment / "screenshot_step_0.png").write_bytes(_png(40))
    runner = CliRunner()
    flags = ["--keep-screenshots"] if keep else []
    imported = runner.invoke(
        cli, ["import", "agentlab", str(experiment), "-o", str(tmp_path / "out"), *flags]
    )
    assert imported.exit_code == 0, imported.output
    session = next((tmp_path / "out").glob("*.session.jsonl.gz"))
    viewed = runner.invoke(cli, ["view", str(session), "-o", str(tmp_path / "view.html")])
    assert viewed.exit_code == 0, viewed.output
    shown = f"data:image/png;base64,{_b64(_png(40))}" in (tmp_path / "view.html").read_text()
    assert shown == keep
