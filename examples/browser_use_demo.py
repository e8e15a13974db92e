"""Run a real ``browser_use.Agent`` on demo WebArena tasks and capture each run as a session.

The agent's LLM is a scripted OpenAI-compatible server on 127.0.0.1 (``ScriptedAgentLLM``): it
answers browser-use's structured-output requests with ``AgentOutput`` JSON following the plans in
``browser_use_plans.json``, picking element indexes from the ``browser_state`` browser-use sends, so
the whole run works offline. Each run gets a fresh demo shop state, a live official evaluation on
its final state and a session file in OUTPUT_DIR; score them offline with
``cdp-session eval OUTPUT_DIR``. Pass ``--llm-base-url``/``--model`` to drive a real model instead.

Usage: python examples/browser_use_demo.py -o OUTPUT_DIR [--task-ids 10000,10015,10036]
       [--trajectory success|failure|both]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PLANS_FILE = Path(__file__).with_name("browser_use_plans.json")
_INDEXED = re.compile(r"^\s*(?:\|[^|]*\|)*\*?\[(\d+)\]<")


class PlanError(Exception):
    """A scripted step cannot be played on the page browser-use shows (its reply says so)."""


def load_plans(path: Path = PLANS_FILE) -> dict[int, dict[str, list[list[str]]]]:
    raw = json.loads(path.read_text())
    return {int(key): value for key, value in raw.items() if not key.startswith("_")}


def element_index(browser_state: str, target: str) -> int:
    """The index browser-use gave the element ``target`` names in its ``browser_state`` text.

    ``target`` with ``=`` (``id=add-to-cart``): on the element's own line; otherwise the exact text
    of the line right under it (a link's label).
    """
    current: int | None = None
    for line in browser_state.splitlines():
        match = _INDEXED.match(line)
        if match:
            current = int(match.group(1))
            if "=" in target and target in line:
                return current
            continue
        if "=" not in target and line.strip() == target and current is not None:
            return current
        current = None  # only the line right under an element is its label
    raise PlanError(f"no element {target!r} on the page")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class ScriptedAgentLLM:
    """An OpenAI-compatible ``/v1/chat/completions`` server playing one plan, one step per request.

    ``plan``: the steps of the current run (set before each run); a request after the last step, or
    a step whose element is not on the page, is answered with a failing ``done`` naming the problem.
    """

    def __init__(self, base_url: str) -> None:
        self.site_url = base_url.rstrip("/")
        self.plan: list[list[str]] = []
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None

    def action(self, step: list[str], browser_state: str) -> dict[str, Any]:
        verb, *args = step
        if verb == "navigate":
            url = args[0] if args[0].startswith(("http://", "https://")) else self.site_url + args[0]
            return {"navigate": {"url": url}}
        if verb == "click":
            return {"click": {"index": element_index(browser_state, args[0])}}
        if verb == "input":
            return {"input": {"index": element_index(browser_state, args[0]), "text": args[1]}}
        if verb == "done":
            return {"done": {"text": args[0], "success": True}}
        raise PlanError(f"unknown step {verb!r}")

    def reply(self, request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        browser_state = _text(messages[-1].get("content")) if messages else ""
        index = self.requests
        self.requests += 1
        try:
            if index >= len(self.plan):
                raise PlanError(f"the plan has only {len(self.plan)} steps")
            action = self.action(self.plan[index], browser_state)
        except PlanError as exc:
            action = {"done": {"text": f"scripted plan failed: {exc}", "success": False}}
        output = {
            "thinking": None,
            "evaluation_previous_goal": "",
            "memory": f"step {index + 1} of the scripted plan",
            "next_goal": next(iter(action)),
            "action": [action],
        }
        return json.dumps(output)

    def completion(self, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"scripted-{self.requests}",
            "object": "chat.completion",
            "created": 0,
            "model": str(request.get("model", "scripted")),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": self.reply(request)},
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def __enter__(self) -> ScriptedAgentLLM:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                data = json.dumps(llm.completion(json.loads(body or b"{}"))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"


@contextmanager
def private_browser_use_home() -> Iterator[Path]:
    """browser-use writes under ~/.config/browseruse and phones home: a temp HOME, telemetry off."""
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="browser-use-home-") as home:
        os.environ.update(
            HOME=home,
            XDG_CONFIG_HOME=f"{home}/.config",
            XDG_CACHE_HOME=f"{home}/.cache",
            BROWSER_USE_CONFIG_DIR=f"{home}/.config/browseruse",
            ANONYMIZED_TELEMETRY="false",
            BROWSER_USE_CLOUD_SYNC="false",
            BROWSER_USE_VERSION_CHECK="false",
        )
        try:
            yield Path(home)
        finally:
            os.environ.clear()
            os.environ.update(saved)


async def run_task(
    task_id: int,
    trajectory: str,
    output: Path,
    site: Any,
    llm_server: ScriptedAgentLLM | None,
    cdp_url: str | None,
    *,
    llm: Any,
    plans: dict[int, dict[str, list[list[str]]]],
) -> Any:
    """One captured agent run of demo task ``task_id`` (its ``trajectory`` plan when scripted)."""
    from cdp_integration.demo.tasks import instantiate_config, load_demo_tasks, site_urls
    from cdp_integration.integrations.browser_use import run_captured_agent

    task = next(t for t in load_demo_tasks() if t.task_id == task_id)
    config = instantiate_config(task.config, site.base_url)
    site.reset()
    if llm_server is not None:
        llm_server.plan = plans[task_id][trajectory]
        llm_server.requests = 0
    return await run_captured_agent(
        config["intent"],
        llm,
        output,
        instance_id=f"browser-use.{task_id}.{trajectory}",
        config=config,
        start_url=config["start_url"],
        cdp_url=cdp_url,
        max_steps=8,
        logger_options={"task": {"site_urls": site_urls(site.base_url), "trajectory": trajectory}},
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output-dir", type=Path, required=True)
    parser.add_argument("--task-ids", default="10000,10015,10036")
    parser.add_argument("--trajectory", choices=("success", "failure", "both"), default="both")
    parser.add_argument("--llm-base-url", help="an OpenAI-compatible endpoint (default: the scripted LLM)")
    parser.add_argument("--model", default="scripted")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    from browser_use.llm import ChatOpenAI

    from cdp_integration.capture.cdp_attach import ChromiumProcess
    from cdp_integration.demo import DemoSite
    from cdp_integration.demo.tasks import configure_demo_environment

    plans = load_plans()
    try:
        task_ids = [int(part) for part in args.task_ids.split(",")]
    except ValueError:
        print(f"--task-ids: not a comma-separated list of integers: {args.task_ids!r}", file=sys.stderr)
        return 2
    from cdp_integration.demo.tasks import load_demo_tasks

    known = {task.task_id for task in load_demo_tasks()}
    missing = [i for i in task_ids if i not in known or (i not in plans and not args.llm_base_url)]
    if missing:
        print(f"no demo task with a scripted plan (see {PLANS_FILE.name}): {missing}", file=sys.stderr)
        return 2
    trajectories = ("success", "failure") if args.trajectory == "both" else (args.trajectory,)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    with DemoSite() as site, ChromiumProcess() as chromium, ScriptedAgentLLM(site.base_url) as scripted:
        configure_demo_environment(site.base_url)
        base_url = args.llm_base_url or scripted.base_url
        llm = ChatOpenAI(
            model=args.model, base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "scripted")
        )
        for task_id in task_ids:
            for trajectory in trajectories:
                run = await run_task(
                    task_id,
                    trajectory,
                    args.output_dir,
                    site,
                    None if args.llm_base_url else scripted,
                    chromium.endpoint,
                    llm=llm,
                    plans=plans,
                )
                print(
                    f"{task_id} {trajectory}: live score {run.live_score} answer {run.final_answer!r} -> {run.session_path}"
                )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with private_browser_use_home():
        return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
