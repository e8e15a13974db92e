"""The tools added to the V1 browser tool set (``v1_tools``) on a real page in our Chromium.

``browser_select_option`` chooses by visible text and fires the page's own ``change`` handler; an
option the drop-down lacks is an error observation listing the options (the agent reads it), the
value unchanged. ``browser_press_key`` with an index focuses that element first (the key reaches
it: WebArena's ``focus`` + ``press``), and Enter in a search box without a button submits it (the
search-box tasks among the 812 configs, see ``scripts/webarena_action_needs.py``); an unknown index
is an error observation. And the V1 driver's guard: a task whose sign-in never returns (a
Playwright call without a timeout) has its browser stopped after ``SET_UP_STALL_S`` (then run_infer
tries again with a new one) instead of hanging the run. Runs ``v1_tools_probe.py`` in the V1
environment (openhands-tools 1.58). In ``make test-webarena`` (~30 s): ``make test``'s V1 WebArena
subset drives ``browser_select_option`` through a real task instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.integration.test_openhands import MARKER, wait_for_no_marked_processes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        os.environ.get("CDP_TEST_WEBARENA_V1") != "all",
        reason="make test-webarena (CDP_TEST_WEBARENA_V1=all); make test's V1 subset plays a select step",
    ),
]

REPO = Path(__file__).resolve().parents[2]
V1_PYTHON = REPO / ".venv-v1" / "bin" / "python"


def test_select_option_and_press_key_on_a_live_page(tmp_path: Path) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    marker = uuid.uuid4().hex
    assert V1_PYTHON.exists(), "no V1 environment: run scripts/setup.sh"
    probe = subprocess.run(
        [str(V1_PYTHON), str(Path(__file__).with_name("v1_tools_probe.py"))],
        env=os.environ | {"HOME": str(home), "TMPDIR": str(tmp), MARKER: marker},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert wait_for_no_marked_processes(marker) == []
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    report = json.loads(probe.stdout.strip().splitlines()[-1])
    assert not report["navigate"]["is_error"] and not report["state"]["is_error"]
    assert '"tag": "select"' in report["state"]["text"]

    assert not report["select"]["is_error"]
    assert report["select"]["page"] == ["name", "sorted:name"]
    assert report["select_missing"]["is_error"] and "Product Name" in report["select_missing"]["text"]
    assert report["select_missing"]["page"] == "name"

    assert not report["press_focus"]["is_error"]
    assert report["press_focus"]["page"] == ["note", "x;", "x"]
    assert report["press_missing"]["is_error"] and "987654" in report["press_missing"]["text"]

    assert not report["type"]["is_error"] and not report["press_enter"]["is_error"]
    assert report["press_enter"]["page"] == ["/search?q=cast+iron", "Results for cast iron"]

    # the V1 driver: a sign-in that never returns stops its browser after SET_UP_STALL_S and says so
    assert report["stall"] == "sign-in/start page still running after 5 s"
