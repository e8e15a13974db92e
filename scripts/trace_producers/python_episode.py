"""One demo episode recorded by the Python Playwright of this interpreter, as WebArena's ``run.py`` records.

Runs inside a producer's own environment (any Playwright from 1.32 on, Python 3.11+), with no import
of ``cdp_integration``: ``python python_episode.py JOB.json``. The context is created with the
signed-in ``storage_state``, tracing starts, the agent's page opens its start URL and plays the
scripted steps; then the live page is handed to the official evaluator (run by
``make_trace_corpus.py`` over a loopback socket, see ``serve_evaluator``), and tracing stops after it,
so the evaluator's own pages are in the trace, as in ``run.py``.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

from playwright.sync_api import Page, sync_playwright


def act(page: Page, step: list[str], base_url: str) -> None:
    """One scripted step with the Playwright call an agent harness makes for it."""
    verb, *args = step
    if verb == "goto":
        page.goto(base_url + args[0])
    elif verb == "click":
        page.click(args[0])
    elif verb == "fill":
        page.fill(args[0], args[1])
    elif verb == "select":
        page.select_option(args[0], args[1])
    elif verb == "press":
        page.press(args[0], args[1])
    elif verb == "go_back":
        page.go_back()
    elif verb == "noop":
        page.wait_for_timeout(0)
    else:
        raise SystemExit(f"python_episode: verb {verb!r} is not played by trace producers")


def serve_evaluator(port: int, agent_page: Page) -> None:
    """Carry out the evaluator's page calls on the live pages, one JSON line each way, until ``done``."""
    pages: dict[int, Page] = {0: agent_page}
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader, writer = sock.makefile("r", encoding="utf-8"), sock.makefile("w", encoding="utf-8")
        writer.write(json.dumps({"ready": True}) + "\n")
        writer.flush()
        for line in reader:
            request = json.loads(line)
            op = request["op"]
            if op == "done":
                return
            page = pages[request.get("page", 0)]
            reply: dict[str, Any]
            try:
                if op == "url":
                    reply = {"ok": page.url}
                elif op == "new_page":
                    pages[len(pages)] = page.context.new_page()
                    reply = {"ok": len(pages) - 1}
                elif op == "goto":
                    page.goto(request["url"])
                    reply = {"ok": None}
                elif op == "content":
                    reply = {"ok": page.content()}
                elif op == "evaluate":
                    reply = {"ok": page.evaluate(request["expression"])}
                elif op == "close":
                    page.close()
                    reply = {"ok": None}
                else:
                    reply = {"error": f"unknown op {op!r}"}
            except Exception as exc:  # the evaluator sees the live page's error, as in-process
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(reply) + "\n")
            writer.flush()


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=job["chromium"], args=job["chromium_args"], headless=True
        )
        try:
            context = browser.new_context(
                storage_state=job["storage_state"], viewport={"width": 1280, "height": 720}
            )
            context.tracing.start(screenshots=job["screenshots"], snapshots=True)
            page = context.new_page()
            page.goto(job["start_url"])
            for step in job["steps"]:
                act(page, step, job["base_url"])
            serve_evaluator(job["evaluator_port"], page)
            context.tracing.stop(path=job["trace_path"])
        finally:
            browser.close()


if __name__ == "__main__":
    main()
