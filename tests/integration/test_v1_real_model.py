"""A real model is one flag away: ``run_infer.py --sdk v1 --llm-model/--llm-base-url/--llm-api-key``.

The model is ``chat_model.ChatModel``: a local endpoint speaking OpenAI's chat-completions API (bearer
key checked, native tool calls, replies streamed as server-sent events since ``--llm-stream`` makes
openhands-sdk ask for them). It sees only what the SDK sends (task text, tool list, tool results)
and picks elements from the ``browser_get_state`` JSON and the answer from ``browser_get_content``,
as a model would: nothing of our scripted shortcut (no selectors resolved over CDP) is used. Two
demo tasks: 10000 (string_match: the SKU read from the page) and 10030 (program_html after a form
with a drop-down: the added ``browser_select_option``).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.integration.chat_model import ChatModel, Step
from tests.integration.test_openhands import MARKER, wait_for_no_marked_processes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(  # make test runs run_infer --sdk v1 with the scripted model (test_openhands_v1.py)
        os.environ.get("CDP_TEST_OPENHANDS_FULL") != "1",
        reason="make test-openhands (CDP_TEST_OPENHANDS_FULL=1)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "evaluation" / "benchmarks" / "webarena"
V1_PYTHON = REPO / ".venv-v1" / "bin" / "python"
API_KEY = "sk-local-test"
PLANS = {
    "SKU of the Cast Iron Skillet": [
        Step("browser_get_state"),
        Step("browser_navigate", {"url": "/search?q=skillet"}),
        Step("browser_get_state"),
        Step("browser_click", element="a:Cast Iron Skillet"),
        Step("browser_get_state"),
        Step("browser_get_content", {"extract_links": False}),
        Step("finish", answer=r"DS-[A-Z]+-\d+"),
    ],
    "4-star review": [
        Step("browser_get_state"),
        Step("browser_select_option", {"option": "4"}, element="select@Rating"),
        Step("browser_get_state"),
        Step("browser_type", {"text": "MugLover"}, element="input@Nickname"),
        Step("browser_get_state"),
        Step("browser_type", {"text": "Pretty colours"}, element="input@Title"),
        Step("browser_get_state"),
        Step("browser_type", {"text": "Lovely pastel mugs."}, element="textarea@Review"),
        Step("browser_get_state"),
        Step("browser_click", element="button:Submit Review"),
        Step("finish", {"message": "Done."}),
    ],
}


def test_run_infer_v1_with_a_model_behind_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    output, home, tmp = tmp_path / "run", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    marker = uuid.uuid4().hex
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WEBARENA_", "LLM_"))}
    environ |= {"HOME": str(home), "TMPDIR": str(tmp), MARKER: marker}
    assert V1_PYTHON.exists(), "no V1 environment: run scripts/setup.sh"
    with ChatModel(PLANS, API_KEY) as model:
        run = subprocess.run(
            [
                str(V1_PYTHON),
                str(SCRIPTS / "run_infer.py"),
                "--sdk",
                "v1",
                "--output-dir",
                str(output),
                "--task-ids",
                "10000",
                "10030",
                "--llm-model",
                "openai/local-test-model",
                "--llm-base-url",
                model.base_url,
                "--llm-api-key",
                API_KEY,
                "--llm-stream",
            ],
            env=environ,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
        requests = list(model.requests)
        refused = model.refused
    assert run.returncode == 0, run.stderr[-3000:]
    assert wait_for_no_marked_processes(marker) == []
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []

    assert refused == 0 and requests
    assert all(request["stream"] is True for request in requests)
    assert {request["model"] for request in requests} == {"local-test-model"}
    tools = {tool["function"]["name"] for tool in requests[0]["tools"]}
    assert {
        "browser_get_state",
        "browser_click",
        "browser_select_option",
        "browser_press_key",
        "finish",
    } <= tools

    lines = {
        json.loads(text)["instance_id"]: json.loads(text)
        for text in (output / "output.jsonl").read_text().splitlines()
    }
    sku, review = lines["webarena_demo.10000"], lines["webarena_demo.10030"]
    for line in (sku, review):
        assert line["error"] is None and line["test_result"]["reward"] == 1.0, line["test_result"]
        assert line["metadata"]["llm_config"] == {
            "model": "openai/local-test-model",
            "base_url": model.base_url,
            "stream": True,
        }
        assert line["metrics"]["streamed_chunks"] > 0
        assert "sk-" not in json.dumps(line)  # the key is never written
    assert sku["test_result"]["answer"] == "DS-HK-003"  # read from browser_get_content's text
    select = [h for h in review["history"] if h["tool"] == "browser_select_option"]
    assert [h["arguments"]["option"] for h in select] == ["4"]
