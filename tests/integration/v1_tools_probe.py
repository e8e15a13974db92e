"""Runs in the V1 environment (``.venv-v1``): the added V1 browser tools on a real page, as an agent calls them.

Started by ``test_v1_tools.py``. A small local site (a search box without a button, a drop-down whose
change is logged by the page's own script, a text field), our Chromium, and one
``WebArenaBrowserExecutor`` on its ``cdp_url`` (what a conversation gets). The actions are the
tools' own action models, run through the executor as the SDK runs them; element indices come from
the page's DOM backend node ids, which is what ``browser_get_state`` lists after it has indexed the
page. Prints one JSON object: per step, the observation (text, is_error) and what the page shows.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))

FORM = b"""<!doctype html><html><head><title>Find</title></head><body>
<form action="/search" method="get"><label>Search <input id="q" name="q"></label></form>
<label>Sort by <select id="sort" onchange="document.getElementById('log').textContent='sorted:'+this.value">
<option value="relevance">Relevance</option><option value="price">Price</option><option value="name">Product Name</option>
</select></label>
<label>Note <input id="note" name="note" onkeydown="document.getElementById('keys').textContent+=event.key+';'"></label>
<p id="log"></p><p id="keys"></p>
</body></html>"""


class Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/search":
            query = parse_qs(parts.query).get("q", [""])[0]
            body = f"<!doctype html><title>Results</title><h1 id='results'>Results for {query}</h1>".encode()
        else:
            body = FORM
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


def main() -> None:
    """Everything the browser and browser-use write (profile, ``~/.browser-use-mcp``, temporary files)
    goes below one private directory, removed at the end."""
    base = tempfile.gettempdir()  # Chromium's profile sockets below it must fit in 107 bytes
    root = Path(tempfile.mkdtemp(prefix="v1-tools-probe-", dir="/tmp" if len(base) > 24 else base))
    os.environ.update(
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        XDG_CONFIG_HOME=str(root / "home" / ".config"),
        XDG_CACHE_HOME=str(root / "home" / ".cache"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        ANONYMIZED_TELEMETRY="false",
        BROWSER_USE_CLOUD_SYNC="false",
        OPENHANDS_SUPPRESS_BANNER="1",
    )
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    tempfile.tempdir = None  # re-read TMPDIR
    try:
        print(json.dumps(probe()))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def probe() -> dict[str, Any]:
    import v1_tools
    from openhands.tools.browser_use.definition import (
        BrowserGetStateAction,
        BrowserNavigateAction,
        BrowserTypeAction,
    )
    from sdk_v1 import LivePage, _import_time_downloads_dir

    from cdp_integration.capture.cdp_attach import ChromiumProcess

    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    report: dict[str, Any] = {}
    with (
        _import_time_downloads_dir(),
        ChromiumProcess() as chromium,
        tempfile.TemporaryDirectory() as scratch,
    ):
        executor = v1_tools.WebArenaBrowserExecutor(
            cdp_url=chromium.endpoint, headless=True, full_output_save_dir=scratch
        )
        page = LivePage(chromium.endpoint, lambda: None)
        try:

            def run(name: str, action: Any) -> None:
                observation = executor(action)
                report[name] = {"text": observation.text, "is_error": observation.is_error}

            def show(expression: str) -> Any:
                return page.thread.call(lambda: page._page().evaluate(expression))

            run("navigate", BrowserNavigateAction(url=base + "/"))
            run("state", BrowserGetStateAction(include_screenshot=False))
            sort, search, note = (page.backend_node_id(s) for s in ("#sort", "#q", "#note"))
            run("select", v1_tools.BrowserSelectOptionAction(index=sort, option="Product Name"))
            report["select"]["page"] = show("[document.querySelector('#sort').value, log.textContent]")
            run("select_missing", v1_tools.BrowserSelectOptionAction(index=sort, option="Colour"))
            report["select_missing"]["page"] = show("document.querySelector('#sort').value")
            run("press_focus", v1_tools.BrowserPressKeyAction(keys="x", index=note))
            report["press_focus"]["page"] = show(
                "[document.activeElement.id, keys.textContent, document.querySelector('#note').value]"
            )
            run("press_missing", v1_tools.BrowserPressKeyAction(keys="Enter", index=987654))
            run("type", BrowserTypeAction(index=search, text="cast iron"))
            run("press_enter", v1_tools.BrowserPressKeyAction(keys="Enter", index=search))
            page.thread.call(lambda: page._page().wait_for_url("**/search?q=*", timeout=60_000))
            report["press_enter"]["page"] = show("[location.pathname + location.search, results.textContent]")
        finally:
            executor.close()
            page.close()
            server.shutdown()
            server.server_close()
    report["stall"] = stalled_sign_in()
    return report


def stalled_sign_in() -> str:
    """The V1 driver on a task whose sign-in never returns (a Playwright call without a timeout): it
    stops the browser after ``SET_UP_STALL_S`` and says so, instead of waiting forever."""
    import argparse

    import sdk_v1
    from task_runner import TaskRun

    sdk_v1.SET_UP_STALL_S = 5.0
    task = TaskRun(
        task_id=1,
        instance_id="webarena.1",
        env_id="browsergym/webarena.1",
        config={"task_id": 1, "sites": ["shopping"], "intent": "x", "start_url": "about:blank", "eval": {}},
        site_urls={"SHOPPING": "http://127.0.0.1:9"},
        plans={"success": (("answer", "x"),)},
        sign_in=lambda site, page: page.evaluate("new Promise(() => {})"),
    )
    args = argparse.Namespace(
        trajectory="success", llm_base_url=None, llm_model=None, llm_api_key=None, max_iterations=5
    )
    scratch = Path(tempfile.mkdtemp())
    try:
        with sdk_v1.ScriptedToolLLM() as llm:
            sdk_v1.run_v1_task(args, task, llm, scratch / "sessions", scratch / "workspace")
    except sdk_v1._SetUpStalled as exc:
        return str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return "not stalled"


if __name__ == "__main__":
    main()
