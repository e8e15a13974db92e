"""browser-use runs of real WebArena task ids on the stand-in sites, captured over CDP.

Run as ``python -m tests.integration.browser_use_standins OUT`` (a fresh process: WebArena reads the
site URLs once, at its first import). The stand-ins start, WebArena is pointed at them, and a real
``browser_use.Agent`` whose LLM is the example's scripted server (``examples/browser_use_demo.py``)
plays each case's plan in one headless Chromium; ``run_captured_agent`` attaches the logger to the
same browser, runs the official evaluator on the live final state and saves the session. Every
history is saved too (``OUT/histories``). ``OUT/live.json`` lists each run's live score and session.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

CASES: tuple[tuple[int, str, list[list[str]]], ...] = (
    (
        377,
        "success",
        [["input", "id=query", "restaurants near CMU ArtPark Lab"], ["click", "Go"], ["done", "Done"]],
    ),
    (377, "failure", [["input", "id=query", "restaurants near CMU"], ["click", "Go"], ["done", "Done"]]),
    (
        269,
        "success",
        [
            ["navigate", "__SHOPPING__/clothing-shoes-jewelry/women/shoes.html"],
            ["click", "$0.00 - $24.99"],
            ["done", "Done"],
        ],
    ),
    (
        269,
        "failure",
        [
            ["navigate", "__SHOPPING__/clothing-shoes-jewelry/women/shoes.html"],
            ["click", "$25.00 - $49.99"],
            ["done", "Done"],
        ],
    ),
)
"""(task id, trajectory, plan): a url_match on the map's search and one on the shop's price filter."""

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "browser_use_demo.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("browser_use_demo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def _run_all(out: Path, sites: Any, endpoint: str, scripted: Any, llm: Any) -> list[dict[str, Any]]:
    from cdp_integration.integrations.browser_use import run_captured_agent
    from cdp_integration.webarena import substitute_placeholders
    from tests.standins.tasks import expand_step, real_configs

    configs = real_configs()
    site_urls = {key.removeprefix("WA_"): value for key, value in sites.urls.items()}
    rows = []
    for task_id, trajectory, plan in CASES:
        sites.reset()
        config = substitute_placeholders(configs[task_id], site_urls)
        scripted.plan, scripted.requests = [list(expand_step(step, sites.urls)) for step in plan], 0
        run = await run_captured_agent(
            config["intent"],
            llm,
            out / "sessions",
            instance_id=f"browser-use.{task_id}.{trajectory}",
            config=config,
            start_url=config["start_url"],
            cdp_url=endpoint,
            max_steps=8,
            logger_options={"task": {"site_urls": site_urls, "trajectory": trajectory}},
            screenshots_dir=out / "histories" / f"{task_id}.{trajectory}" / "screenshots",
        )
        run.history.save_to_file(out / "histories" / f"{task_id}.{trajectory}.json")
        rows.append(
            {
                "task_id": task_id,
                "trajectory": trajectory,
                "live": run.live_score,
                "answer": run.final_answer,
                "session": str(run.session_path),
                "site_urls": site_urls,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(out: Path) -> None:
    from cdp_integration import environment
    from cdp_integration.capture.cdp_attach import ChromiumProcess
    from tests.standins import StandIns

    demo = _example()
    out.mkdir(parents=True, exist_ok=True)
    with StandIns() as sites:
        env = sites.environ()
        os.environ.update(env)
        environment.prepare(webarena_urls={k: v for k, v in env.items() if k in environment.WEBARENA_SITES})
        with (
            demo.private_browser_use_home(),
            ChromiumProcess() as chromium,
            demo.ScriptedAgentLLM("") as scripted,
        ):
            from browser_use.llm import ChatOpenAI

            llm = ChatOpenAI(model="scripted", base_url=scripted.base_url, api_key="scripted")
            rows = asyncio.run(_run_all(out, sites, chromium.endpoint, scripted, llm))
    (out / "live.json").write_text(json.dumps(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
